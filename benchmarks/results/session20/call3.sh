#!/usr/bin/env bash
# Session 20, device call 3 (nvidia-h200): held-out set 4 for Retrace continued (call 2
# completed 150000x6 and 24000x60): the two few-row keys first (cheap sweeps), then the
# mid-size ones with up to 300 s of sweep each, so that they complete rather than stop
# at a partial table; what the call's time cuts resumes next session.
set -uo pipefail
S4=6x70000,90x15000,6000x180,2200x450,750x1200,300x2800,150000x6,24000x60
bash benchmarks/carry_from_results.sh
cp benchmarks/results/session20/call2/retrace_oracle_s4/bench.json devcarry/bench/retrace_oracle_s4/
export ORACLE_WORKERS=16 ORACLE_SECONDS=300 BENCH_SHAPES=256x128
export COMPILE_FROM="$(ls benchmarks/results/session19/merged/*/bench.json | tr '\n' ' ')"
JOBS0="oracle:retrace:_s4:$S4" SECONDS_LEFT=${SECONDS_LEFT:-540} OUT=$OUT bash benchmarks/dual_gpu.sh
