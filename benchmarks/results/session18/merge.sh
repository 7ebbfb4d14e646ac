#!/usr/bin/env bash
# Rebuild benchmarks/results/session18/merged/: session 17's merged oracle benches (every
# row still what dispatch ships) plus held-out set 4: GAE from call 1 with the two cells
# whose choice the one-row flat rule moved, measured again in call 2 (_r18), and V-trace
# from call 1 (s4a), call 2 (s4) and call 2 on GPU 1 (s4b) as measured; discounted
# returns from call 3.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source benchmarks/merge_start.sh 18 17
python benchmarks/merge_bench.py $S/call1/gae_oracle_s4/bench.json \
    --newer $S/call2/gae_oracle_r18/bench.json --output "$M/bench_gae_oracle_s4"
cp -r $S/call1/vtrace_oracle_s4 "$M/bench_vtrace_oracle_s4a"
cp -r $S/call2/vtrace_oracle_s4 "$M/bench_vtrace_oracle_s4"
cp -r $S/call2/vtrace_oracle_s4b "$M/bench_vtrace_oracle_s4b"
cp -r $S/call3/discounted_returns_oracle_s4 "$M/bench_discounted_returns_oracle_s4"
