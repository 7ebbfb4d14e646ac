#!/usr/bin/env bash
# Rebuild the device carry (see dual_gpu.sh) from the committed sweep tables, so a fresh
# checkout (or the device's copy of it) needs no carried tarball: each estimator's tables
# of a held-out set land in $CARRY/bench/${alg}_oracle${TAG}/oracle, where the oracle
# benches and the head-to-head probe look for them.
# Usage: CARRY=devcarry bash benchmarks/carry_from_results.sh [TAG:ALG,...:NxT,... ...]
#   Each argument adds a re-measure tag dir holding only those shapes' tables (from any
#   set, plus the 256x128 grid key for BENCH_SHAPES=256x128).
set -euo pipefail
cd "$(dirname "$0")/.."
results=benchmarks/results
carry=${CARRY:-devcarry}
sets=("oracle_session13:" "oracle_session14_fresh:_fresh" "oracle_session15_s3:_s3"
      "oracle_session18_s4:_s4")
for entry in "${sets[@]}"; do
    src=$results/${entry%%:*} tag=${entry#*:}
    for dir in "$src"/*/; do
        alg=$(basename "$dir")
        mkdir -p "$carry/bench/${alg}_oracle$tag/oracle"
        cp "$dir"*.json "$carry/bench/${alg}_oracle$tag/oracle/"
    done
done
for spec in "$@"; do
    IFS=: read -r tag algs shapes <<< "$spec"
    for alg in ${algs//,/ }; do
        dest=$carry/bench/${alg}_oracle$tag/oracle
        mkdir -p "$dest"
        for shape in ${shapes//,/ } 256x128; do
            n=${shape%x*} t=${shape#*x}
            for entry in "${sets[@]}"; do
                [ -d "$results/${entry%%:*}/$alg" ] || continue
                find "$results/${entry%%:*}/$alg" -name "exhaustive_*_N${n}_T${t}_*.json" \
                    -exec cp {} "$dest/" \;
            done
        done
        ls "$dest" | wc -l | xargs echo "$dest: tables"
    done
done
