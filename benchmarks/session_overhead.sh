#!/usr/bin/env bash
# One device call: the gpu test suite (h200_check.sh), host overhead of the dispatch hot
# path, and a timed default-preset tune of GAE (per-key cost of the tuner).
# Usage on the device machine: OUT=... bash benchmarks/session_overhead.sh
set -uo pipefail
cd "$(dirname "$0")/.."
GPU_TEST_TIMEOUT=${GPU_TEST_TIMEOUT:-270} bash benchmarks/h200_check.sh
source benchmarks/device_env.sh || exit 1
python3 benchmarks/dispatch_overhead.py --output "$OUT/dispatch_overhead_h200.json" 2>&1 | tail -30
start=$(date +%s)
RLTRITON_TUNE_DB="$OUT/db" timeout "${TUNE_TIMEOUT:-200}" python3 -m rltriton_tune.cli tune \
    --preset default --algorithms gae > "$OUT/tune_gae.txt" 2> "$OUT/tune_gae.err"
echo "tune --preset default --algorithms gae: rc $? in $(( $(date +%s) - start )) s" | tee "$OUT/tune_gae_time.txt"
cat "$OUT/tune_gae.txt"; tail -c 1500 "$OUT/tune_gae.err"
