#!/usr/bin/env bash
# Session 18, device call 2 (nvidia-h200-x2), after the one-row flat rule (8 warps) and
# the per-action 2048-4096-step rules: oracle re-measures of the 13 bench rows whose
# choice moved; head-to-head validation of both rules on shapes no rule has seen; the
# rest of held-out set 4 for V-trace (GPU 0 resumes call 1's run, GPU 1 the last three).
set -uo pipefail
VAL=30x2000,60x3000,180x1400,650x900,2000x1000,3500x700,130x3900,170x2100,380x2700,800x2000,1200x1900,6000x1300
VALR=350x3100,450x2400,800x1500,1200x2000,3000x1100,500x4000,700x3000,1500x1200
ALGS=gae,vtrace,lambda_returns,discounted_returns,eligibility_traces,episodic_prefix_sum
LIGHT=discounted_returns,lambda_returns,eligibility_traces,episodic_prefix_sum
bash benchmarks/carry_from_results.sh _r18:gae:100x3000,350x1300,150x4000,300x2800,750x1200 \
    _r18:$LIGHT:100x3000,350x1300
cp benchmarks/results/session18/call1/vtrace_oracle_s4/bench.json devcarry/bench/vtrace_oracle_s4/
f=flat:BLOCK_N=1
export H2H_TOP=0
export H2H_CONFIGS_flatval="$f,num_warps=2 $f,num_warps=4 $f,num_warps=8 $f,num_warps=16 flat:BLOCK_N=2,num_warps=8 tiled:BLOCK_N=1,BLOCK_T=512,num_warps=4,num_stages=3 tiled:BLOCK_N=1,BLOCK_T=1024,num_warps=8,num_stages=3"
export H2H_CONFIGS_flatvalr="$f,num_warps=4 $f,num_warps=8 $f,num_warps=16 tiled:BLOCK_N=1,BLOCK_T=256,num_warps=4,num_stages=1 tiled:BLOCK_N=1,BLOCK_T=512,num_warps=4,num_stages=3 tiled:BLOCK_N=1,BLOCK_T=1024,num_warps=8,num_stages=3 lookback:BLOCK_N=1,BLOCK_T=256,num_warps=1 lookback:BLOCK_N=1,BLOCK_T=128,num_warps=1"
export ORACLE_WORKERS=14 ORACLE_SECONDS=150 BENCH_SHAPES=256x128
export COMPILE_FROM="$(ls benchmarks/results/session17/merged/*/bench.json benchmarks/results/session18/call1/*/bench.json | tr '\n' ' ')"
JOBS0="oracle:vtrace:_s4:300x2800,750x1200,2200x450 oracle:eligibility_traces:_r18:100x3000,350x1300 oracle:episodic_prefix_sum:_r18:100x3000,350x1300" \
JOBS1="oracle:gae:_r18:100x3000,350x1300,150x4000,300x2800,750x1200 oracle:discounted_returns:_r18:100x3000,350x1300 oracle:lambda_returns:_r18:100x3000,350x1300 h2h:$ALGS:$VAL:flatval h2h:retrace:$VALR:flatvalr oracle:vtrace:_s4b:6000x180,24000x60,150000x6" \
SECONDS_LEFT=${SECONDS_LEFT:-540} OUT=$OUT bash benchmarks/dual_gpu.sh
