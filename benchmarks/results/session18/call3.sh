#!/usr/bin/env bash
# Session 18, device call 3 (nvidia-h200): first measurements of held-out set 4 for
# discounted returns under the rules as committed (cheapest sweeps first; the call ends
# before the two mid-size keys).
set -uo pipefail
bash benchmarks/carry_from_results.sh
export ORACLE_WORKERS=16 ORACLE_SECONDS=150 BENCH_SHAPES=256x128
export COMPILE_FROM="$(ls benchmarks/results/session17/merged/*/bench.json | tr '\n' ' ')"
JOBS0="oracle:discounted_returns:_s4:6x70000,90x15000,150000x6,24000x60,6000x180,2200x450,750x1200,300x2800" \
SECONDS_LEFT=${SECONDS_LEFT:-480} OUT=$OUT bash benchmarks/dual_gpu.sh
