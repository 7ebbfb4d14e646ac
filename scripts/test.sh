#!/usr/bin/env bash
# Fresh-machine test run: a virtual environment with torch 2.13.0 (the CPU build where
# the package index serves it; the suite needs no GPU) and the dev extras, a local PostgreSQL for the distributed-study test, then ruff, the docs
# build (mkdocs, warnings as errors) and the whole suite.
# Triton kernels run on the CPU under TRITON_INTERPRET=1 (tests/conftest.py sets it);
# tests marked `gpu` skip without CUDA.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv
# The pinned torch first, so the open `torch>=` requirement below installs nothing more.
.venv/bin/python -m pip install -q --disable-pip-version-check "torch==2.13.0"
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[dev]"

if pg_url=$(bash .ci/start-postgres.sh); then
    export RLTRITON_TUNE_TEST_PG_URL="$pg_url"
elif [ "${CI:-}" = "true" ]; then
    echo "could not start PostgreSQL for the distributed-study test" >&2
    exit 1
else
    echo "PostgreSQL not available: the distributed-study test will be skipped" >&2
fi

.venv/bin/python -m ruff check rltriton_tune tests benchmarks
.venv/bin/python -m mkdocs build --strict -q -d "$(mktemp -d)"
.venv/bin/python -m pytest -q "$@"
