#!/usr/bin/env bash
# Issue 3 on nvidia-h200: the lookback strategy on a real GPU. First its `gpu` kernel tests
# (correctness at realistic sizes, CUDA graphs; a stuck look-back gives NaN, not a hang,
# and `timeout` bounds the rest), then benchmarks/lookback_probe.py (its whole space
# against the dispatched choice on long-T keys). Results: $OUT/lookback.tgz.
# Usage on the device machine (repo root, wheels in .whl/):
#   OUT=... PROBE_SECONDS=300 [TEST_SECONDS=0] bash benchmarks/lookback_gpu.sh
set -uo pipefail
cd "$(dirname "$0")/.."
source "$(dirname "$0")/device_env.sh" || exit 1
OUT=${OUT:-/tmp/out}; W=/tmp/lookback; mkdir -p "$OUT" "$W"
if [ "${TEST_SECONDS:-240}" != 0 ]; then  # 0: the tests run elsewhere (the gputests job)
    timeout "${TEST_SECONDS:-240}" python3 -m pytest -q -m gpu -k lookback -p no:cacheprovider \
        tests/kernels tests/dispatch > "$W/gpu_tests.log" 2>&1
    echo "gpu tests (lookback): rc $?" | tee "$W/summary.txt"
    tail -n 3 "$W/gpu_tests.log" | tee -a "$W/summary.txt"
fi
python3 benchmarks/lookback_probe.py --output "$W" --max-seconds "${PROBE_SECONDS:-300}" \
    ${LOOKBACK_SHAPES:+--shapes "$LOOKBACK_SHAPES"} \
    ${LOOKBACK_ALGORITHMS:+--algorithms "$LOOKBACK_ALGORITHMS"} \
    > "$W/probe.log" 2>&1
echo "lookback_probe: rc $?" | tee -a "$W/summary.txt"
cat "$W/lookback.md" 2>/dev/null
tar czf "$OUT/lookback.tgz" -C "$W" .
