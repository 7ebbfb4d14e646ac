#!/usr/bin/env bash
# Session 21, device call 1 (nvidia-h200):
# - the nearest-entry margin rule (session 20 item 7; `nearest_margin.patch`: reuse a
#   nearby tuned entry only where it beat its own flat-heuristic baseline by 5%), applied
#   to this copy only, and the four bench cells it moves measured against their sweep
#   tables (GAE and discounted returns 200x2500, GAE and Retrace 3500x100; tag _r21m);
# - the patch reverted, then held-out set 4's Retrace resumed from session 20's call 4
#   (its four mid-size keys have no sweep tables yet; 300 s a key).
set -uo pipefail
t0=$(date +%s)
S4=90x15000,6000x180,2200x450,750x1200,300x2800,150000x6,24000x60,6x70000
bash benchmarks/carry_from_results.sh _r21m:gae:200x2500,3500x100 \
    _r21m:discounted_returns:200x2500 _r21m:retrace:3500x100
mkdir -p devcarry/bench/retrace_oracle_s4/oracle
cp benchmarks/results/session20/call4/retrace_oracle_s4/bench.json devcarry/bench/retrace_oracle_s4/
export ORACLE_WORKERS=16 BENCH_SHAPES=256x128
export COMPILE_FROM="$(ls benchmarks/results/session20/merged/*/bench.json | tr '\n' ' ')"
git apply benchmarks/results/session21/nearest_margin.patch || exit 1
ORACLE_SECONDS=150 JOBS0="oracle:gae:_r21m:200x2500,3500x100 \
oracle:discounted_returns:_r21m:200x2500 oracle:retrace:_r21m:3500x100" \
SECONDS_LEFT=150 OUT=$OUT bash benchmarks/dual_gpu.sh
git apply -R benchmarks/results/session21/nearest_margin.patch || exit 1
ORACLE_SECONDS=300 JOBS0="oracle:retrace:_s4:$S4" \
SECONDS_LEFT=$(( ${SECONDS_LEFT:-560} - $(date +%s) + t0 )) OUT=$OUT bash benchmarks/dual_gpu.sh
