#!/usr/bin/env bash
# Session 20, device call 1 (nvidia-h200): three head-to-head probes of Retrace (A=8)
# rule bands on shapes no sweep, probe or bench has timed, then held-out set 4 for lambda
# returns continued (session 19 call 3's partial run).
# - actrows: rows of 1-32 steps at 1500-300000 rows, flat 1-64 rows a one-warp program
#   (h2h_actval read 16-32 rows best at 1-4 steps, above the rule's cap of 8; the
#   session-13 sweep of 4096x8 read 4 rows best, 8 at 1.20x).
# - actband: rows of 65-512 steps at 400-8000 rows (set 2/3 misses 2500x150, 1000x500,
#   3500x100 lie here): one flat row at 1-16 warps, two rows at 4, the 64-step loop a
#   nearby tuned entry lends 3500x100 and 5000x150, the look-back.
# - act2k: rows of 1025-2048 steps from 4 rows a SM: the (1, 256, 4) loop against 512-
#   and 1024-step chunks (h2h_actval2's misses 1200x1000 and 600x1500 wanted 512).
set -uo pipefail
S4=6x70000,90x15000,300x2800,750x1200,2200x450,6000x180,24000x60,150000x6
ACTROWS=1500x1,9000x1,60000x1,250000x1,4000x2,30000x2,200000x2,2500x3,70000x3,6000x4,300000x4,3000x6,100000x5,4096x8,20000x8,8000x12,150000x10,2000x16,40000x14,12000x20,90000x24,5000x32
ACTBAND=2000x70,6000x70,4000x90,2800x120,1200x200,3200x200,1500x260,700x300,5000x300,1800x350,900x450,400x500
ACT2K=600x1100,900x1300,1100x1800,1500x1200,2200x1100,3000x1500,4000x1050,700x2000,1600x1700,2600x2000
bash benchmarks/carry_from_results.sh
cp benchmarks/results/session19/call3/lambda_returns_oracle_s4/bench.json devcarry/bench/lambda_returns_oracle_s4/
rows=""
for r in 1 2 4 8 16 32 64; do rows+="flat:BLOCK_N=$r,num_warps=1 "; done
rows+="flat:BLOCK_N=32,num_warps=2"
band=""
for w in 1 2 4 8 16; do band+="flat:BLOCK_N=1,num_warps=$w "; done
band+="flat:BLOCK_N=2,num_warps=4 tiled:BLOCK_N=1,BLOCK_T=64,num_warps=1,num_stages=1 "
band+="tiled:BLOCK_N=1,BLOCK_T=128,num_warps=2,num_stages=1 lookback:BLOCK_N=1,BLOCK_T=128,num_warps=1"
t=tiled:BLOCK_N=1
k2="$t,BLOCK_T=256,num_warps=4,num_stages=1 $t,BLOCK_T=512,num_warps=4,num_stages=1 "
k2+="$t,BLOCK_T=512,num_warps=4,num_stages=3 $t,BLOCK_T=512,num_warps=8,num_stages=1 "
k2+="$t,BLOCK_T=1024,num_warps=8,num_stages=1 $t,BLOCK_T=256,num_warps=2,num_stages=1 "
k2+="flat:BLOCK_N=1,num_warps=8 flat:BLOCK_N=1,num_warps=16 lookback:BLOCK_N=1,BLOCK_T=256,num_warps=1"
export H2H_TOP=0
export H2H_CONFIGS_actrows="$rows" H2H_CONFIGS_actband="$band" H2H_CONFIGS_act2k="$k2"
export ORACLE_WORKERS=16 ORACLE_SECONDS=200 BENCH_SHAPES=256x128
export COMPILE_FROM="$(ls benchmarks/results/session19/merged/*/bench.json | tr '\n' ' ')"
JOBS0="h2h:retrace:$ACTROWS:actrows h2h:retrace:$ACTBAND:actband h2h:retrace:$ACT2K:act2k oracle:lambda_returns:_s4:$S4" \
SECONDS_LEFT=${SECONDS_LEFT:-540} OUT=$OUT bash benchmarks/dual_gpu.sh
