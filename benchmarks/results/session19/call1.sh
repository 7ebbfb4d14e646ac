#!/usr/bin/env bash
# Session 19, device call 1 (nvidia-h200): head-to-head probes for three rule questions,
# on shapes no sweep, probe or bench has measured, then issue 3's Retrace bfloat16 A/B
# without the flat strategy, then the rest of held-out set 4 for discounted returns.
# - many: env-major rows of 2-16 steps at 20000-400000 rows (set 4's 150000x6 miss and
#   the main set's discounted 100000x12): flat 16-128 rows x 1-8 warps, four estimators.
# - actshort: Retrace rows of 3-900 steps at 800-150000 rows (the per-action flat band,
#   where set 2's 40000x20 and set 3's 450x1000, 1000x500 miss): rows x warps, a loop,
#   the look-back.
# - vband: V-trace's 4096-step band (set 4's 300x2800): one flat row of 8/16 warps
#   against 256-1024-step chunk loops, to validate the candidate rule in NOTES.
set -uo pipefail
MANY=20000x8,45000x5,80000x3,120000x7,250000x4,400000x2,60000x16,130000x10,200000x11,35000x13
ACTSHORT=20000x3,150000x5,80000x12,60000x20,30000x30,15000x50,8000x90,5000x150,3000x250,2000x400,1200x600,800x900
VBAND=160x3800,230x2200,270x3100,350x3300,420x2900,700x2500,900x3600,1300x2100,2000x2900,2800x2400
bash benchmarks/carry_from_results.sh
cp benchmarks/results/session18/call3/discounted_returns_oracle_s4/bench.json devcarry/bench/discounted_returns_oracle_s4/
rm -rf /tmp/v && cp -r . /tmp/v && (cd /tmp/v && git apply benchmarks/results/session17/retrace_shift/shift_only.patch) || echo "patch failed"
many=""
for r in 16 32 64 128; do for w in 1 2 4 8; do
    [ "$r$w" = 168 ] || [ "$r$w" = 1281 ] || many+="flat:BLOCK_N=$r,num_warps=$w "
done; done
act=""
for r in 1 2 4; do for w in 1 2 4; do act+="flat:BLOCK_N=$r,num_warps=$w "; done; done
act+="flat:BLOCK_N=8,num_warps=1 flat:BLOCK_N=1,num_warps=8 flat:BLOCK_N=1,num_warps=16 "
act+="tiled:BLOCK_N=1,BLOCK_T=256,num_warps=4,num_stages=1 lookback:BLOCK_N=1,BLOCK_T=128,num_warps=1"
f=flat:BLOCK_N=1
export H2H_TOP=0
export H2H_CONFIGS_many="$many" H2H_CONFIGS_actshort="$act"
export H2H_CONFIGS_vband="$f,num_warps=8 $f,num_warps=16 tiled:BLOCK_N=1,BLOCK_T=256,num_warps=2,num_stages=3 tiled:BLOCK_N=1,BLOCK_T=512,num_warps=4,num_stages=3 tiled:BLOCK_N=1,BLOCK_T=1024,num_warps=4,num_stages=3 tiled:BLOCK_N=1,BLOCK_T=1024,num_warps=8,num_stages=3"
export STRATEGIES=lookback,tiled,split
export ORACLE_WORKERS=16 ORACLE_SECONDS=150 BENCH_SHAPES=256x128
export COMPILE_FROM="$(ls benchmarks/results/session18/merged/*/bench.json | tr '\n' ' ')"
JOBS0="h2h:gae,vtrace,discounted_returns,eligibility_traces:$MANY:many h2h:retrace:$ACTSHORT:actshort h2h:vtrace:$VBAND:vband strategies:retrace::256:32768 strategies:retrace:/tmp/v:256:32768 oracle:discounted_returns:_s4:6x70000,90x15000,150000x6,24000x60,6000x180,2200x450,750x1200,300x2800" \
SECONDS_LEFT=${SECONDS_LEFT:-540} OUT=$OUT bash benchmarks/dual_gpu.sh
