#!/usr/bin/env bash
# Session 23, device call 1 (nvidia-h200), rules of the working tree (two candidates, both
# from earlier probes and sweeps, not yet checked on shapes no probe has timed):
# - GAE (a light backward estimator reading values[t+1]) with rows of 2049-4096 steps
#   from 4 rows per SM: chunk loops (1024/8 warps below 6 rows per SM, 512/4 to 16,
#   256/2 from 16) instead of one flat row of 8 warps (heuristic.neighbour_loop);
#   checked head to head on 12 unseen GAE shapes of 3.4-30 rows per SM, with discounted
#   returns at the same shapes (which keep the flat row);
# - many rows of 5-8 steps: 64-row tiles with 8 warps instead of 4
#   (MANY_ROWS_FEW_WARPS_MAX_T = 4), checked on 6 unseen shapes x 6 estimators;
# - the five bench cells these rules move measured against their sweep tables (tag _r23):
#   GAE 1500x3500 (third held-out set), 150000x6 for GAE, V-trace, lambda and discounted
#   returns (fourth).
set -uo pipefail
t0=$(date +%s)
LEFT=${SECONDS_LEFT:-560}
source benchmarks/device_env.sh || exit 1
source benchmarks/device_probe.sh
loops=(--config "flat:BLOCK_N=1,num_warps=8,num_stages=1" --config "flat:BLOCK_N=1,num_warps=16,num_stages=1")
for c in 1024:8 512:4 512:2 256:4 256:2 256:1; do
    loops+=(--config "tiled:BLOCK_N=1,BLOCK_T=${c%:*},num_warps=${c#*:},num_stages=3"); done
tiles=()
for c in 16:4 32:4 32:8 64:2 64:4 64:8 128:4 128:8; do
    tiles+=(--config "flat:BLOCK_N=${c%:*},num_warps=${c#*:},num_stages=1"); done
probe nbloop gae,discounted_returns 8 \
    450x3700,560x3300,700x2600,850x3800,1000x2900,1300x2400,1700x3900,2000x2150,2200x3300,2700x2600,3500x2150,4000x2050 \
    150 "${loops[@]}"
probe many8 gae,vtrace,lambda_returns,discounted_returns,eligibility_traces,episodic_prefix_sum 8 \
    10000x6,30000x8,55000x7,90000x6,180000x5,400000x6 170 "${tiles[@]}"
bash benchmarks/carry_from_results.sh _r23:gae:1500x3500,150000x6 \
    _r23:vtrace,lambda_returns,discounted_returns:150000x6
export ORACLE_WORKERS=16 ORACLE_SECONDS=150 BENCH_SHAPES=256x128
export COMPILE_FROM="$(ls benchmarks/results/session22/merged/*/bench.json | tr '\n' ' ')"
JOBS0="oracle:gae:_r23:1500x3500,150000x6 oracle:vtrace:_r23:150000x6 \
oracle:lambda_returns:_r23:150000x6 oracle:discounted_returns:_r23:150000x6" \
    SECONDS_LEFT=$(( LEFT - $(date +%s) + t0 )) OUT=$OUT bash benchmarks/dual_gpu.sh
