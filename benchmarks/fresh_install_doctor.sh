#!/usr/bin/env bash
# Issue 6: a fresh install of the wheel built here dispatches from the shipped profile.
# Here:   pip wheel --no-deps . -w dist     (carry dist and .whl to the device)
# Device: bash benchmarks/fresh_install_doctor.sh   (runs doctor outside the checkout)
set -uo pipefail
cd "$(dirname "$0")/.."
rm -rf /tmp/fresh && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/fresh \
    dist/rltriton_tune-*.whl .whl/*.whl || exit 1
cd /tmp && env -u RLTRITON_TUNE_DB PYTHONPATH=/tmp/fresh python3 -m rltriton_tune.cli doctor
