#!/usr/bin/env bash
# Issue 6 on nvidia-h200-x2: `rltriton-tune bench` of all seven estimators (float32,
# env-major; default grid + held-out shapes), one process per estimator so that each
# finished estimator's report survives the time limit. GPU 1 runs the estimators in
# $ORACLE with --oracle (exhaustive sweep per cell, cached in <output>/oracle: seed it
# with earlier sweep tables); GPU 0 runs the rest without. First the fresh-install check.
# Usage: SECONDS_LEFT=520 ORACLE="gae vtrace" BENCH=devcarry/bench bash benchmarks/bench_h200.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
BENCH=$(realpath -m "${BENCH:-devcarry/bench}"); mkdir -p "$BENCH"
ORACLE=${ORACLE:-"gae vtrace"}
REST=${REST:-"retrace lambda_returns discounted_returns eligibility_traces episodic_prefix_sum"}
end=$(( $(date +%s) + ${SECONDS_LEFT:-520} ))
[ -d dist ] && bash benchmarks/fresh_install_doctor.sh > "$OUT/fresh_install_doctor.txt" 2>&1
source "$(dirname "$0")/device_env.sh" || exit 1
bench() {  # gpu algorithm output [--oracle]
    left=$(( end - $(date +%s) )); [ "$left" -gt 30 ] || return
    CUDA_VISIBLE_DEVICES=$1 timeout "$left" python3 -m rltriton_tune.cli bench --algorithms "$2" \
        --held-out --resume --budget "${BUDGET:-0.05}" --compile-workers 16 --output "$3" "${@:4}" \
        > "$3.log" 2>&1
    echo "bench $2 ${*:4} on GPU $1: rc $? at $(( ${SECONDS_LEFT:-520} - end + $(date +%s) )) s" \
        | tee -a "$BENCH/times.txt"
}
(for alg in $ORACLE; do bench 1 "$alg" "$BENCH/${alg}_oracle" --oracle; done) &
(for alg in $REST; do bench 0 "$alg" "$BENCH/$alg"; done
 for alg in $ORACLE; do bench 0 "$alg" "$BENCH/$alg"; done) &  # in case the oracle runs time out
wait
tar czf "$OUT/bench.tgz" -C "$(dirname "$BENCH")" "$(basename "$BENCH")"
cat "$BENCH/times.txt"
