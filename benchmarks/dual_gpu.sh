#!/usr/bin/env bash
# One device call on nvidia-h200-x2: two job lists run side by side, $JOBS0 on GPU 0 and
# $JOBS1 on GPU 1, each job in order until $SECONDS_LEFT runs out (a cut job resumes in the
# next call: bench --resume, oracle partial tables, the tuner's journal in $DB). Results
# accumulate in $CARRY (carry it to the next call); a tarball of it lands in $OUT.
# Jobs: gputests[:PATH] (the `gpu` tests of PATH, default the whole suite) | align (benchmarks/align_probe.py,
#       $ALIGN_SECONDS) | rules (benchmarks/rule_probe.py, $RULE_ALGORITHMS) |
#       lookback ($LOOKBACK_TEST_SECONDS, 0: no tests; $PROBE_SECONDS; $LOOKBACK_SHAPES NxT,...;
#       $LOOKBACK_ALGORITHMS) |
#       reverse (benchmarks/reverse_scan_probe.py) | costs (benchmarks/lookback_costs.py) |
#       gateprof:KEY (benchmarks/gate_profile.py: where a sweep's gate time goes for that
#       problem key, e.g. 'gateprof:retrace|trunc|float32|env|N=900|T=400|A=8' (quote the
#       job list); $GATEPROF_WORKERS pool processes) |
#       sweep:ALG[:DTYPES[:NxT,...[:TAG]]] (benchmarks/oracle_sweep.py: the oracle's exhaustive
#       sweeps of bench:ALG's keys (or of those dtypes and shapes), into the tables
#       oracle:ALG[:TAG] reads; $SWEEP_WORKERS compile processes;
#       $SWEEP_DROP=STRATEGY,...: measure those strategies again after a kernel change) |
#       h2h:ALG,...:NxT,...[:NAME[:A]] (benchmarks/headtohead_probe.py: the best configs of
#       those keys' sweep tables in bench/ALG_oracle*/oracle, timed head to head at every
#       key, into h2h_NAME; $H2H_TOP configs a table; $H2H_CONFIGS_NAME: more configs,
#       'strategy:k=v,...' separated by spaces, timed at every key; A: Retrace's actions) |
#       bench:ALG[:TAG[:NxT,...]] | oracle:ALG[:TAG[:NxT,...]] (bench --oracle into
#       bench/ALG_oracleTAG, with those held-out shapes instead of $HELD_OUT;
#       $ORACLE_SECONDS per key, $ORACLE_WORKERS compile processes (8); bench
#       runs see only the shipped profile; $BENCH_SHAPES: grid NxT,... instead of the preset's; $HELD_OUT: NxT,... instead of the built-in
#       held-out shapes; $BENCH_LAYOUTS: env, time or env,time; $COMPILE_FROM: earlier
#       bench.json files whose torch.compile baselines are taken over) |
#       tune:DTYPE:LAYOUT:TRUNCATIONS[:ALG,...[:NxT,...]] (default preset, those estimators
#       ($TUNE_ALGORITHMS or all) and shapes (the preset's grid), $TRIALS trials) |
#       strategies:ALG,ALG,...[:DIR[:N,...[:T,...]]] (benchmarks/strategies.py, issue 3's
#       strategy table, on those N x T cells (the whole grid); with DIR, the copy of the
#       package and benchmarks in DIR: an A/B against older kernels; $STRATEGIES: only
#       those strategies, comma-separated) |
#       costs ($COSTS_BASELINE: another lookback.py timed beside the shipped one).
# Usage: JOBS0="bench:gae tune:float32:env:on" JOBS1="lookback bench:vtrace" \
#        SECONDS_LEFT=540 bash benchmarks/dual_gpu.sh
set -uo pipefail
cd "$(dirname "$0")/.."
source "$(dirname "$0")/device_env.sh" || exit 1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
CARRY=$(realpath -m "${CARRY:-devcarry}"); mkdir -p "$CARRY/bench" "$CARRY/logs"
export RLTRITON_TUNE_DB="$CARRY/db"
end=$(( $(date +%s) + ${SECONDS_LEFT:-540} ))
job() {  # gpu job
    local gpu=$1 spec=$2 left start rc
    left=$(( end - $(date +%s) )); [ "$left" -gt 25 ] || { echo "$spec: no time left"; return; }
    start=$(date +%s)
    IFS=: read -r kind a b c d e <<< "$spec"
    case $kind in
    gputests) CUDA_VISIBLE_DEVICES=$gpu timeout "$left" python3 -m pytest -q -m gpu \
        -p no:cacheprovider --durations=15 "${a:-tests}" \
        > "$CARRY/logs/gpu_tests${a:+_$(basename "$a" .py)}.log" 2>&1 ;;
    strategies) local name="strategies_${a//,/_}${b:+_$(basename "$b")}${c:+_n${c//,/_}}"
        CUDA_VISIBLE_DEVICES=$gpu timeout "$left" python3 "${b:-.}/benchmarks/strategies.py" \
        --output "$CARRY/$name" --algorithms "$a" ${c:+--n "$c"} ${d:+--t "$d"} \
        --max-seconds "$(( left - 30 ))" ${STRATEGIES:+--strategies "$STRATEGIES"} \
        > "$CARRY/logs/$name.log" 2>&1 ;;
    gateprof) local name="gateprof_$(tr '|=' '_-' <<< "$a")"
        CUDA_VISIBLE_DEVICES=$gpu timeout "$left" python3 benchmarks/gate_profile.py \
        --key "$a" --output "$CARRY/$name" ${GATEPROF_WORKERS:+--workers "$GATEPROF_WORKERS"} \
        > "$CARRY/logs/$name.log" 2>&1 ;;
    align) CUDA_VISIBLE_DEVICES=$gpu timeout "$left" python3 benchmarks/align_probe.py \
        --output "$CARRY/align" --max-seconds "${ALIGN_SECONDS:-200}" \
        --sections "${ALIGN_SECTIONS:-align,wide,action}" > "$CARRY/logs/align.log" 2>&1 ;;
    reverse) CUDA_VISIBLE_DEVICES=$gpu timeout "$left" python3 benchmarks/reverse_scan_probe.py \
        --output "$CARRY/reverse" > "$CARRY/logs/reverse.log" 2>&1 ;;
    costs) CUDA_VISIBLE_DEVICES=$gpu timeout "$left" python3 benchmarks/lookback_costs.py \
        --output "$CARRY/costs" ${COSTS_BASELINE:+--baseline "$COSTS_BASELINE"} \
        > "$CARRY/logs/costs.log" 2>&1 ;;
    rules) CUDA_VISIBLE_DEVICES=$gpu timeout "$left" python3 benchmarks/rule_probe.py \
        --output "$CARRY/rules" --algorithms "${RULE_ALGORITHMS:-gae,vtrace,eligibility_traces}" \
        --max-seconds "$(( left - 30 ))" > "$CARRY/logs/rules.log" 2>&1 ;;
    lookback) CUDA_VISIBLE_DEVICES=$gpu OUT=$CARRY/lookback \
        TEST_SECONDS=${LOOKBACK_TEST_SECONDS:-150} \
        PROBE_SECONDS=${PROBE_SECONDS:-$(( left < 300 ? left - 160 : 140 ))} timeout "$left" \
        bash benchmarks/lookback_gpu.sh > "$CARRY/logs/lookback.log" 2>&1 ;;
    sweep) CUDA_VISIBLE_DEVICES=$gpu timeout "$left" python3 benchmarks/oracle_sweep.py \
        --algorithms "$a" ${HELD_OUT:+--held-out "$HELD_OUT"} --max-seconds "$(( left - 20 ))" \
        ${b:+--dtypes "$b"} ${c:+--shapes "$c"} \
        ${SWEEP_WORKERS:+--workers "$SWEEP_WORKERS"} ${SWEEP_DROP:+--drop "$SWEEP_DROP"} \
        --dir "$CARRY/bench/${a}_oracle${d}/oracle" \
        > "$CARRY/logs/sweep_$a${b:+_$b}${d}_gpu$gpu.log" 2>&1 ;;
    h2h) local name="h2h_${c:-${a//,/_}}" tables=() named="H2H_CONFIGS_${c:-${a//,/_}}"
        for alg in ${a//,/ }; do for t in "$CARRY/bench/${alg}"_oracle*/oracle; do
            [ -d "$t" ] && tables+=(--tables "$t"); done; done
        for cfg in ${!named:-}; do tables+=(--config "$cfg"); done
        CUDA_VISIBLE_DEVICES=$gpu timeout "$left" python3 benchmarks/headtohead_probe.py \
        "${tables[@]}" --algorithms "$a" --shapes "$b" --top "${H2H_TOP:-6}" ${d:+--actions "$d"} \
        --max-seconds "$(( left - 30 ))" --output "$CARRY/$name" > "$CARRY/logs/$name.log" 2>&1 ;;
    bench|oracle) local extra=(); [ "$kind" = oracle ] && \
        extra=(--oracle --oracle-seconds "${ORACLE_SECONDS:-25}" --compile-workers "${ORACLE_WORKERS:-8}")
        RLTRITON_TUNE_DB="$CARRY/bench_db" CUDA_VISIBLE_DEVICES=$gpu timeout "$left" \
        python3 -m rltriton_tune.cli bench \
        --algorithms "$a" --held-out ${c:-${HELD_OUT:-}} ${BENCH_SHAPES:+--shapes "$BENCH_SHAPES"} --layouts "${BENCH_LAYOUTS:-env}" --resume \
        --budget "${BUDGET:-0.05}" "${extra[@]}" ${COMPILE_FROM:+--compile-from $COMPILE_FROM} \
        --output "$CARRY/bench/${a}_$kind$b" > "$CARRY/logs/${kind}_$a$b.log" 2>&1 ;;
    tune) CUDA_VISIBLE_DEVICES=$gpu timeout "$left" python3 -m rltriton_tune.cli tune \
        --preset default --algorithms "${d:-${TUNE_ALGORITHMS:-all}}" --trials "${TRIALS:-6}" \
        --dtypes "$a" --layouts "$b" ${e:+--shapes "$e"} \
        --truncations "$c" --devices 0 --no-compile-baseline --max-seconds "$(( left - 15 ))" \
        --no-progress > "$CARRY/logs/tune_${a}_${b}_${c}${d:+_${d//,/_}}.log" 2>&1 ;;
    *) echo "unknown job $spec"; return ;;
    esac
    rc=$?
    echo "GPU $gpu $spec: rc $rc in $(( $(date +%s) - start )) s" | tee -a "$CARRY/times.txt"
}
(for j in ${JOBS0:-}; do job 0 "$j"; done) &
(for j in ${JOBS1:-}; do job 1 "$j"; done) &
wait
nvidia-smi --query-gpu=index,name,memory.used --format=csv > "$CARRY/logs/nvidia_smi.txt" 2>&1
tar czf "$OUT/carry.tgz" -C "$(dirname "$CARRY")" "$(basename "$CARRY")"
tail -n 30 "$CARRY/times.txt"
