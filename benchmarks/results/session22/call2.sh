#!/usr/bin/env bash
# Session 22, device call 2 (nvidia-h200):
# - the many-action rules (rltriton_tune/dispatch/many_actions.py, fitted on call 1's
#   h2h_a32fit/h2h_a64fit and session 21's h2h_a32/h2h_a64) checked head to head on shapes
#   no probe has timed, at A=32, 48, 64 and 100 (the same 50 configs as call 1 plus each
#   key's dispatched one);
# - the few-row look-back chunks again (call 1's lbrep found Retrace 512-step chunks ahead
#   of the rule's 256 at 6x70000 and 12x45000 in both runs, where session 17's h2h_lbfitr
#   put 256 ahead at 6x50000, 12x20000, 4x100000 and 2x300000): Retrace and GAE at all six
#   and two more, in one process;
# - set 4's Retrace sweep resumed (300x2800's partial table from call 1).
set -uo pipefail
t0=$(date +%s)
LEFT=${SECONDS_LEFT:-565}
source benchmarks/device_env.sh || exit 1
source benchmarks/device_probe.sh
lb=()
for c in 1:128:1 1:256:1 1:512:1 1:1024:1 1:2048:1 2:256:2 2:512:2 2:1024:2; do
    IFS=: read -r n t w <<< "$c"
    lb+=(--config "lookback:BLOCK_N=$n,BLOCK_T=$t,num_warps=$w"); done
probe a32val retrace 32 50000x2,9000x14,2500x36,15000x60,1500x90,900x250,4000x350,300x800,100x1200,30x9000 130 "${WIDE[@]}"
probe a48val retrace 48 25000x5,6000x20,1200x70,3000x150,600x400,70x2500,8x50000 95 "${WIDE[@]}"
probe a64val retrace 64 40000x2,6000x6,2500x20,400x64,1100x130,5000x180,200x300,20x4000 105 "${WIDE[@]}"
probe a100val retrace 100 10000x4,3000x16,800x60,1500x150,100x700,10x8000 85 "${WIDE[@]}"
probe lbrep3 retrace,gae 8 6x50000,12x20000,4x100000,2x300000,6x70000,12x45000,20x60000,10x160000 100 "${lb[@]}"
S4=90x15000,6000x180,2200x450,750x1200,300x2800,150000x6,24000x60,6x70000
bash benchmarks/carry_from_results.sh
cp benchmarks/results/session22/call1/retrace_oracle_s4/bench.json devcarry/bench/retrace_oracle_s4/
cp benchmarks/results/session22/call1/retrace_oracle_s4/*.partial.json devcarry/bench/retrace_oracle_s4/oracle/
export ORACLE_WORKERS=16 ORACLE_SECONDS=900 BENCH_SHAPES=256x128
export COMPILE_FROM="$(ls benchmarks/results/session21/merged/*/bench.json | tr '\n' ' ')"
JOBS0="oracle:retrace:_s4:$S4" SECONDS_LEFT=$(( LEFT - $(date +%s) + t0 )) OUT=$OUT \
    bash benchmarks/dual_gpu.sh
