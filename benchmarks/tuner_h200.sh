#!/usr/bin/env bash
# One GPU session for the tuner (issue 5): GPU tests, the default-preset tune of all
# seven estimators (timed; must finish in < 15 min), bench, and the search-quality
# study. Writes everything under ${OUT:-out}/tuner. Usage: bash benchmarks/tuner_h200.sh [quick]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-out}/tuner"
mkdir -p "$OUT"
export RLTRITON_TUNE_DB="$OUT/db"
PY="${PYTHON:-python3}"

$PY -m pytest -q -m gpu tests/tune 2>&1 | tail -5 | tee "$OUT/gpu_tests.txt"

if [ "${1:-}" = "quick" ]; then
    $PY benchmarks/search_quality.py --quick --output "$OUT/search_quality" 2>&1 | tail -8
    exit 0
fi

start=$(date +%s)
$PY -m rltriton_tune.cli tune --preset default --algorithms all --no-progress \
    > "$OUT/tune_default.txt" 2> "$OUT/tune_default.err"
echo "tune --preset default --algorithms all: $(( $(date +%s) - start )) s" | tee "$OUT/tune_time.txt"
tail -n 50 "$OUT/tune_default.txt"
$PY -m rltriton_tune.cli show --format json > "$OUT/profile_entries.json"
$PY -m rltriton_tune.cli bench --algorithms gae,vtrace --output "$OUT/bench" 2>/dev/null | tail -3
cat "$OUT/bench/bench.md" | head -30
