#!/usr/bin/env bash
# Session 23, device call 5 (nvidia-h200): the `gpu` test suite on the H200 with this
# session's rules (and session 22's pow2 refactor of kernels/launch.py, not yet run there).
set -uo pipefail
source benchmarks/device_env.sh || exit 1
timeout 440 python3 -m pytest -q -m gpu -p no:cacheprovider --durations=15 tests \
    > "$OUT/gpu_tests_h200_session23.log" 2>&1
echo "gpu suite rc $?"; tail -5 "$OUT/gpu_tests_h200_session23.log"
