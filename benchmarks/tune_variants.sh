#!/usr/bin/env bash
# Issue 6: tune the H200 on the default preset's shapes for every variant of the seven
# estimators that the shipped float32/env-major/no-truncation entries do not cover:
# bfloat16 x {env, time} x truncations {off, on}, and float32 x {time x off/on, env x on}.
# Studies and profile live in $DB (carry it between calls: an interrupted run resumes).
# Usage on nvidia-h200-x2: DB=devcarry/db TRIALS=6 SECONDS_LEFT=480 bash benchmarks/tune_variants.sh
set -uo pipefail
cd "$(dirname "$0")/.."
source "$(dirname "$0")/device_env.sh" || exit 1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export RLTRITON_TUNE_DB=$(realpath -m "${DB:-devcarry/db}")
end=$(( $(date +%s) + ${SECONDS_LEFT:-480} ))
run() {  # dtypes layouts truncations
    left=$(( end - $(date +%s) )); [ "$left" -gt 20 ] || { echo "skipped $*: no time left"; return; }
    start=$(date +%s)
    python3 -m rltriton_tune.cli tune --preset default --algorithms all --trials "${TRIALS:-6}" \
        --dtypes "$1" --layouts "$2" --truncations "$3" --devices "${DEVICES:-0,1}" \
        --no-compile-baseline --max-seconds "$left" --no-progress \
        >> "$OUT/tune_variants.txt" 2>> "$OUT/tune_variants.err"
    echo "tune --dtypes $1 --layouts $2 --truncations $3: rc $? in $(( $(date +%s) - start )) s" \
        | tee -a "$OUT/tune_variants_times.txt"
}
run bfloat16 env off
run float32 time off
run float32 env on
run bfloat16 time off
run bfloat16 env on
run float32 time on
run bfloat16 time on
python3 -m rltriton_tune.cli show --format json > "$OUT/profile_entries.json"
tar czf "$OUT/db.tgz" -C "$(dirname "$RLTRITON_TUNE_DB")" "$(basename "$RLTRITON_TUNE_DB")"
tail -n 4 "$OUT/tune_variants.err"
