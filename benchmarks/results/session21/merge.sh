#!/usr/bin/env bash
# Rebuild benchmarks/results/session21/merged/: session 20's merged oracle benches plus
# session 21: the four cells the nearest-entry margin rule moved, measured again under it
# (call 1 `*_oracle_r21m`: GAE and discounted returns 200x2500 in the second set, GAE and
# Retrace 3500x100 in the third), and set 4's Retrace as far as call 2 got (6000x180 and
# 2200x450 added; its resumed report's earlier rows folded back in).
set -euo pipefail
cd "$(dirname "$0")/../../.."
source benchmarks/merge_start.sh 21 20
for spec in gae:_fresh discounted_returns:_fresh gae:_s3 retrace:_s3; do
    alg=${spec%:*} set=${spec#*:}
    python benchmarks/merge_bench.py $P/bench_${alg}_oracle$set/bench.json \
        --newer $S/call1/${alg}_oracle_r21m/bench.json --output "$M/bench_${alg}_oracle$set"
done
python benchmarks/merge_bench.py $S/call2/retrace_oracle_s4/bench.json --fold-unreached \
    --output "$M/bench_retrace_oracle_s4"
