#!/usr/bin/env bash
# Rebuild benchmarks/results/session23/merged/: session 22's merged oracle benches plus
# the five cells session 23's rules moved, measured again under them (call 1
# `*_oracle_r23`: GAE 1500x3500 in the third held-out set; 150000x6 for GAE, V-trace,
# lambda and discounted returns in the fourth).
set -euo pipefail
cd "$(dirname "$0")/../../.."
source benchmarks/merge_start.sh 23 22
for spec in gae:_s3 gae:_s4 vtrace:_s4b lambda_returns:_s4 discounted_returns:_s4; do
    alg=${spec%:*} set=${spec#*:}
    python benchmarks/merge_bench.py $P/bench_${alg}_oracle$set/bench.json \
        --newer $S/call1/${alg}_oracle_r23/bench.json --output "$M/bench_${alg}_oracle$set"
done
