#!/usr/bin/env bash
# Session 20, device call 2 (nvidia-h200), after call 1's per-action rule changes (rows of
# 1-2 steps: 32 a one-warp program; 17-32 steps: 2; one flat row: at most 4 warps, and
# 128-step tiles 256 elements a warp):
# - the seven bench rows whose choice moved, re-measured against their sweep tables
#   (main 1800x220, 5000x75, 20000x28; set 2 1300x300, 2500x150, 40000x20; set 3 25000x24);
# - the three rules checked head to head on shapes no probe has timed (actval3);
# - held-out set 4 for Retrace (first measurements), as far as the call's time goes.
set -uo pipefail
S4=150000x6,24000x60,6000x180,2200x450,750x1200,300x2800,90x15000,6x70000
MOVED=1800x220,5000x75,20000x28,1300x300,2500x150,40000x20,25000x24
ACTVAL3=700x1,40000x1,12000x2,120000x2,3000x18,15000x26,70000x21,200000x30,1600x100,3800x80,9000x110,20000x70,1100x170,2300x240,4200x380,7000x200,1400x480
bash benchmarks/carry_from_results.sh _r20:retrace:$MOVED
val=""
for r in 1 2 4 8 16 32; do val+="flat:BLOCK_N=$r,num_warps=1 "; done
for w in 2 4 8 16; do val+="flat:BLOCK_N=1,num_warps=$w "; done
export H2H_TOP=0 H2H_CONFIGS_actval3="$val"
export ORACLE_WORKERS=16 ORACLE_SECONDS=150 BENCH_SHAPES=256x128
export COMPILE_FROM="$(ls benchmarks/results/session19/merged/*/bench.json | tr '\n' ' ')"
JOBS0="oracle:retrace:_r20:$MOVED h2h:retrace:$ACTVAL3:actval3 oracle:retrace:_s4:$S4" \
SECONDS_LEFT=${SECONDS_LEFT:-540} OUT=$OUT bash benchmarks/dual_gpu.sh
