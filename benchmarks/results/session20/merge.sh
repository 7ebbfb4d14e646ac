#!/usr/bin/env bash
# Rebuild benchmarks/results/session20/merged/: session 19's merged oracle benches plus
# session 20: set 4's lambda returns complete (call 1), the Retrace rows whose choice the
# session-20 per-action rules moved, measured again (call 2 `retrace_oracle_r20`; its
# 20000x28 and 5000x75 rows measured two rows a program and 4 warps, which the final rules
# withdrew, so those cells keep their earlier measurements of what dispatch ships), and
# set 4's Retrace as far as call 4 got (its resumed report's earlier rows folded back in).
set -euo pipefail
cd "$(dirname "$0")/../../.."
source benchmarks/merge_start.sh 20 19
rm -rf "$M/bench_lambda_returns_oracle_s4"
cp -r $S/call1/lambda_returns_oracle_s4 "$M/bench_lambda_returns_oracle_s4"
withdrawn=("retrace|trunc|float32|env|N=20000|T=28|A=8" "retrace|trunc|float32|env|N=5000|T=75|A=8")
for set in "" _fresh _s3; do
    python benchmarks/merge_bench.py \
        benchmarks/results/session19/merged/bench_retrace_oracle$set/bench.json \
        --newer $S/call2/retrace_oracle_r20/bench.json --exclude "${withdrawn[@]}" \
        --output "$M/bench_retrace_oracle$set"
done
python benchmarks/merge_bench.py $S/call4/retrace_oracle_s4/bench.json --fold-unreached \
    --output "$M/bench_retrace_oracle_s4"
