#!/usr/bin/env bash
# Session 19, device call 2 (nvidia-h200), after call 1's two rule changes (V-trace rows
# of 2049-3072 steps from 2 rows a SM: the mid-long chunk loop; per-action rows of up to
# 16 steps: at least 256 elements a one-warp program):
# - the one bench row whose choice moved (set 4's V-trace 300x2800), re-measured;
# - both rules checked head to head on shapes no probe has timed (vval, actval), and the
#   Retrace 1024-step-tile band probed (act1k: set 2/3 misses 450x1000, 600x700 lie there);
# - held-out set 4 continued: discounted returns 750x1200 (partial sweep) and 300x2800,
#   then lambda returns (first measurements).
set -uo pipefail
S4=6x70000,90x15000,300x2800,750x1200,2200x450,6000x180,24000x60,150000x6
VVAL=290x2300,480x3000,600x3050,1000x2600,1700x2900,2400x2150,3300x2500
ACTVAL=9000x2,50000x4,120000x3,60000x1,30000x6
ACT1K=300x900,400x800,550x950,700x600,900x1000,1000x800,1400x700,2000x650
bash benchmarks/carry_from_results.sh _r19:vtrace:300x2800
cp benchmarks/results/session19/call1/discounted_returns_oracle_s4/bench.json devcarry/bench/discounted_returns_oracle_s4/
f=flat:BLOCK_N=1
export H2H_TOP=0
export H2H_CONFIGS_vval="$f,num_warps=16 tiled:BLOCK_N=1,BLOCK_T=256,num_warps=2,num_stages=3 tiled:BLOCK_N=1,BLOCK_T=512,num_warps=4,num_stages=3 tiled:BLOCK_N=1,BLOCK_T=1024,num_warps=8,num_stages=3"
export H2H_CONFIGS_actval="flat:BLOCK_N=4,num_warps=1 flat:BLOCK_N=8,num_warps=1 flat:BLOCK_N=16,num_warps=1 flat:BLOCK_N=32,num_warps=1 flat:BLOCK_N=8,num_warps=2"
export H2H_CONFIGS_act1k="$f,num_warps=4 $f,num_warps=8 $f,num_warps=16 tiled:BLOCK_N=1,BLOCK_T=256,num_warps=4,num_stages=1 tiled:BLOCK_N=1,BLOCK_T=512,num_warps=4,num_stages=1 tiled:BLOCK_N=1,BLOCK_T=512,num_warps=4,num_stages=3 tiled:BLOCK_N=1,BLOCK_T=1024,num_warps=8,num_stages=3 lookback:BLOCK_N=1,BLOCK_T=128,num_warps=1 lookback:BLOCK_N=1,BLOCK_T=256,num_warps=1"
export ORACLE_WORKERS=16 ORACLE_SECONDS=150 BENCH_SHAPES=256x128
export COMPILE_FROM="$(ls benchmarks/results/session18/merged/*/bench.json | tr '\n' ' ')"
JOBS0="oracle:vtrace:_r19:300x2800 h2h:vtrace:$VVAL:vval h2h:retrace:$ACTVAL:actval h2h:retrace:$ACT1K:act1k oracle:discounted_returns:_s4:$S4 oracle:lambda_returns:_s4:$S4" \
SECONDS_LEFT=${SECONDS_LEFT:-540} OUT=$OUT bash benchmarks/dual_gpu.sh
