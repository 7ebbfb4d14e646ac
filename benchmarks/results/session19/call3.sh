#!/usr/bin/env bash
# Session 19, device call 3 (nvidia-h200), after the per-action 513-4096-step rule (the
# (1, 256, 4 warps) loop from 4 rows a SM, the look-back below): set 2's Retrace 600x700
# (the one bench row it moves) re-measured; the rule checked head to head on shapes no
# probe has timed (actval2, 1024- and 2048-step tiles, N = 560-4000); then held-out set 4
# for lambda returns continued (call 2's partial run).
set -uo pipefail
S4=6x70000,90x15000,300x2800,750x1200,2200x450,6000x180,24000x60,150000x6
ACTVAL2=560x850,1200x1000,2500x700,3000x600,4000x550,600x1500,700x1400,1000x1900
bash benchmarks/carry_from_results.sh _r19:retrace:600x700
mkdir -p devcarry/bench/lambda_returns_oracle_s4/oracle
cp benchmarks/results/session19/call2/lambda_returns_oracle_s4/bench.json devcarry/bench/lambda_returns_oracle_s4/
cp benchmarks/results/session19/call2/lambda_returns_oracle_s4/oracle/*.json devcarry/bench/lambda_returns_oracle_s4/oracle/
f=flat:BLOCK_N=1
export H2H_TOP=0
export H2H_CONFIGS_actval2="$f,num_warps=8 $f,num_warps=16 tiled:BLOCK_N=1,BLOCK_T=256,num_warps=4,num_stages=1 tiled:BLOCK_N=1,BLOCK_T=512,num_warps=4,num_stages=1 lookback:BLOCK_N=1,BLOCK_T=128,num_warps=1 lookback:BLOCK_N=1,BLOCK_T=256,num_warps=1"
export ORACLE_WORKERS=16 ORACLE_SECONDS=150 BENCH_SHAPES=256x128
export COMPILE_FROM="$(ls benchmarks/results/session18/merged/*/bench.json | tr '\n' ' ')"
JOBS0="oracle:retrace:_r19:600x700 h2h:retrace:$ACTVAL2:actval2 oracle:lambda_returns:_s4:$S4" \
SECONDS_LEFT=${SECONDS_LEFT:-480} OUT=$OUT bash benchmarks/dual_gpu.sh
