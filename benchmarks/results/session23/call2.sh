#!/usr/bin/env bash
# Session 23, device call 2 (nvidia-h200), rules of commit b50ee03:
# - rows of 2049-4096 steps with many rows per SM for the five light estimators (call 1's
#   h2h_nbloop: GAE's loops missed from 15 rows per SM, where 256-step chunks with one
#   warp won, and discounted returns' flat row read 1.10-1.41x off from 10 rows per SM):
#   10 unseen shapes of 8-29 rows per SM, one flat row against nine chunk loops;
# - Retrace (A=8) rows of 2049-4096 steps from 4 rows per SM (the (1, 256, 4) loop read
#   1.075x at the third held-out set's 1500x3500, where (1, 512, 8) was the best): 8 unseen
#   shapes, ten loops.
set -uo pipefail
t0=$(date +%s)
source benchmarks/device_env.sh || exit 1
source benchmarks/device_probe.sh
loops=(--config "flat:BLOCK_N=1,num_warps=8,num_stages=1")
for c in 1024:8 512:4 512:2 512:1 256:4 256:2 256:1 128:1; do
    loops+=(--config "tiled:BLOCK_N=1,BLOCK_T=${c%:*},num_warps=${c#*:},num_stages=3"); done
aloops=()
for c in 1024:8 512:8 512:4 512:2 256:4 256:2 256:1 128:4 128:2 64:1; do
    aloops+=(--config "tiled:BLOCK_N=1,BLOCK_T=${c%:*},num_warps=${c#*:},num_stages=1"); done
probe bandrows gae,discounted_returns,lambda_returns,eligibility_traces,episodic_prefix_sum 0 \
    1100x3600,1400x2700,1600x3100,1900x2600,2100x3700,2400x2300,2600x3100,3100x2500,3300x2300,3800x2150 \
    300 "${loops[@]}"
probe act4k retrace 8 560x2300,800x3300,1100x2600,1400x3900,1800x2200,2300x3000,2900x2500,3600x2100 \
    200 "${aloops[@]}"
