#!/usr/bin/env bash
# Rebuild benchmarks/results/session16/merged/: the earlier oracle benches with the cells
# that session 16 measured again (call1-call5, oldest first) in place of their old rows.
set -euo pipefail
cd "$(dirname "$0")/../../.."
S=benchmarks/results/session16
M=$S/merged
NEW=$(ls $S/call1/*_oracle_rules/bench.json $S/call3/*_oracle_r16/bench.json \
         $S/call4/*_oracle_r16b/bench.json $S/call5/*_oracle_r16c/bench.json)
merge() { python benchmarks/merge_bench.py "$1" --newer $NEW --output "$M/$2"; }
rm -rf "$M"
for a in gae eligibility_traces vtrace lambda_returns discounted_returns episodic_prefix_sum; do
    merge benchmarks/results/session13/call3/bench_${a}_oracle/bench.json bench_${a}_oracle
done
merge benchmarks/results/session14/call3/bench_retrace_oracle/bench.json bench_retrace_oracle
merge benchmarks/results/session14/call2/bench_gae_oracle_fresh/bench.json bench_gae_oracle_fresh
for a in vtrace retrace discounted_returns; do
    merge benchmarks/results/session14/call3/bench_${a}_oracle_fresh/bench.json \
        bench_${a}_oracle_fresh
done
for a in gae vtrace retrace; do
    merge benchmarks/results/session15/bench_${a}_oracle_s3/bench.json bench_${a}_oracle_s3
done
