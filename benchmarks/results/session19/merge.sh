#!/usr/bin/env bash
# Rebuild benchmarks/results/session19/merged/: session 18's merged oracle benches plus
# session 19: the two rows whose choice a session-19 rule moved, measured again (set 4's
# V-trace 300x2800, call 2 `vtrace_oracle_r19`; set 2's Retrace 600x700, call 3
# `retrace_oracle_r19`), set 4's discounted returns complete (call 2) and set 4's lambda
# returns as far as call 3 got.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source benchmarks/merge_start.sh 19 18
python benchmarks/merge_bench.py benchmarks/results/session18/merged/bench_vtrace_oracle_s4/bench.json \
    --newer $S/call2/vtrace_oracle_r19/bench.json --output "$M/bench_vtrace_oracle_s4"
python benchmarks/merge_bench.py benchmarks/results/session18/merged/bench_retrace_oracle_fresh/bench.json \
    --newer $S/call3/retrace_oracle_r19/bench.json --output "$M/bench_retrace_oracle_fresh"
rm -rf "$M/bench_discounted_returns_oracle_s4"
cp -r $S/call2/discounted_returns_oracle_s4 "$M/bench_discounted_returns_oracle_s4"
cp -r $S/call3/lambda_returns_oracle_s4 "$M/bench_lambda_returns_oracle_s4"
