#!/usr/bin/env bash
# Session 20, device call 4 (nvidia-h200, the session's last ~6 device minutes): the
# per-action one-flat-row warps rule (at most 4 warps; 128-step tiles 256 elements a
# warp) checked again on 14 shapes no probe or bench has timed (actval4: rows of 66-500
# steps at 1150-30000 rows, where the bench re-measure of 1300x300 and 1800x220 read 4
# warps 1.05-1.07x off), then set 4's Retrace 90x15000 sweep continued (partial table).
set -uo pipefail
S4=90x15000,6000x180,2200x450,750x1200,300x2800,150000x6,24000x60,6x70000
ACTVAL4=1300x66,2500x100,12000x85,30000x120,1500x140,4500x170,9000x250,16000x130,1150x280,2000x300,3300x450,6000x350,10000x270,2700x500
bash benchmarks/carry_from_results.sh
cp benchmarks/results/session20/call3/retrace_oracle_s4/bench.json devcarry/bench/retrace_oracle_s4/
cp benchmarks/results/session20/call3/retrace_oracle_s4/*.partial.json devcarry/bench/retrace_oracle_s4/oracle/
val=""
for w in 1 2 4 8 16; do val+="flat:BLOCK_N=1,num_warps=$w "; done
export H2H_TOP=0 H2H_CONFIGS_actval4="$val"
export ORACLE_WORKERS=16 ORACLE_SECONDS=150 BENCH_SHAPES=256x128
export COMPILE_FROM="$(ls benchmarks/results/session19/merged/*/bench.json | tr '\n' ' ')"
JOBS0="h2h:retrace:$ACTVAL4:actval4 oracle:retrace:_s4:$S4" \
SECONDS_LEFT=${SECONDS_LEFT:-240} OUT=$OUT bash benchmarks/dual_gpu.sh
