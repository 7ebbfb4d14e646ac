#!/usr/bin/env bash
# Session 18, device call 1 (nvidia-h200-x2): finish held-out set 4 (GAE resume, then
# V-trace) on GPU 0; on GPU 1 the one-row flat band head to head (warps 2-16, two rows,
# chunk loops; N=120-5000 x T=600-4000, no set-4 or bench shape) and issue 3's Retrace
# bfloat16 A/B (shipped kernel vs benchmarks/results/session17/retrace_shift/shift_only.patch).
set -uo pipefail
S4=6x70000,90x15000,300x2800,750x1200,2200x450,6000x180,24000x60,150000x6
BAND=400x700,1500x800,5000x600,150x1800,280x1500,450x1100,1000x1700,2500x1300,120x2600,140x3300,200x2300,330x3000,250x4000
BANDR=1000x1700,2500x1300,600x2000,300x3600,1800x900
ALGS=gae,vtrace,lambda_returns,discounted_returns,eligibility_traces,episodic_prefix_sum
bash benchmarks/carry_from_results.sh
mkdir -p devcarry/bench/gae_oracle_s4
cp -r benchmarks/results/session17/call4/gae_oracle_s4/. devcarry/bench/gae_oracle_s4/
rm -rf /tmp/v && cp -r . /tmp/v && (cd /tmp/v && git apply benchmarks/results/session17/retrace_shift/shift_only.patch) || echo "patch failed"
f=flat:BLOCK_N=1
export H2H_TOP=0
export H2H_CONFIGS_flatband="$f,num_warps=2 $f,num_warps=4 $f,num_warps=8 $f,num_warps=16 flat:BLOCK_N=2,num_warps=8 tiled:BLOCK_N=1,BLOCK_T=256,num_warps=2,num_stages=3 tiled:BLOCK_N=1,BLOCK_T=512,num_warps=4,num_stages=3 tiled:BLOCK_N=1,BLOCK_T=1024,num_warps=8,num_stages=3"
export H2H_CONFIGS_flatbandr="$f,num_warps=4 $f,num_warps=8 $f,num_warps=16 $f,num_warps=32 tiled:BLOCK_N=1,BLOCK_T=256,num_warps=4,num_stages=1 tiled:BLOCK_N=1,BLOCK_T=512,num_warps=4,num_stages=3 tiled:BLOCK_N=1,BLOCK_T=1024,num_warps=8,num_stages=3 lookback:BLOCK_N=1,BLOCK_T=256,num_warps=1"
export ORACLE_WORKERS=14 ORACLE_SECONDS=150 BENCH_SHAPES=256x128
export COMPILE_FROM="$(ls benchmarks/results/session17/merged/*/bench.json | tr '\n' ' ')"
JOBS0="oracle:gae:_s4:$S4 oracle:vtrace:_s4:$S4" \
JOBS1="h2h:$ALGS:$BAND:flatband h2h:retrace:$BANDR:flatbandr strategies:retrace::256:32768 strategies:retrace:/tmp/v:256:32768 strategies:retrace::32768:128 strategies:retrace:/tmp/v:32768:128" \
SECONDS_LEFT=${SECONDS_LEFT:-540} OUT=$OUT bash benchmarks/dual_gpu.sh
