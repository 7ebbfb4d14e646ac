#!/usr/bin/env bash
# Session 22, device call 1 (nvidia-h200):
# - Retrace with 32 and 64 actions (every rule for A >= 25 is the A=8 one, 1.1-1.9x off at
#   session 21's h2h_a32/h2h_a64): head to head on fit shapes across the bands, one-row and
#   multi-row flat (1-16 rows x 1-16 warps), chunk loops (32-256 steps x 1-8 warps) and
#   look-back chunks (64-256 steps), plus each key's dispatched config;
# - run-to-run spread of the few-row look-back choices that the oracle benches call misses
#   (Retrace 256 vs 512-step chunks at 6x70000 and 12x45000, where session 17's probe put
#   256 first at 13 of 14 shapes): the same probe twice, in two processes (lbrep1, lbrep2);
# - set 4's Retrace sweep resumed (750x1200) with whatever time is left.
# Everything the probes write lands in one tarball ($OUT/probes.tgz).
set -uo pipefail
t0=$(date +%s)
LEFT=${SECONDS_LEFT:-565}
source benchmarks/device_env.sh || exit 1
source benchmarks/device_probe.sh
lb=()
for c in 1:128:1 1:256:1 1:512:1 1:1024:1 1:2048:1 2:256:2 2:512:2 2:1024:2; do
    IFS=: read -r n t w <<< "$c"
    lb+=(--config "lookback:BLOCK_N=$n,BLOCK_T=$t,num_warps=$w"); done
probe a32fit retrace 32 30000x3,12000x10,4000x24,8000x40,2000x70,700x150,3000x200,1200x400,5000x260,250x600,60x2000,12x20000 170 "${WIDE[@]}"
probe a64fit retrace 64 15000x4,4000x12,1000x30,3000x60,250x100,800x200,2500x300,150x500,40x1500,6x30000 150 "${WIDE[@]}"
for i in 1 2; do
    probe lbrep$i retrace,gae,vtrace,lambda_returns,discounted_returns 8 6x70000,12x45000,7x150000,30x20000 45 "${lb[@]}"
done
S4=90x15000,6000x180,2200x450,750x1200,300x2800,150000x6,24000x60,6x70000
bash benchmarks/carry_from_results.sh
cp benchmarks/results/session21/call2/retrace_oracle_s4/bench.json devcarry/bench/retrace_oracle_s4/
export ORACLE_WORKERS=16 ORACLE_SECONDS=900 BENCH_SHAPES=256x128
export COMPILE_FROM="$(ls benchmarks/results/session21/merged/*/bench.json | tr '\n' ' ')"
JOBS0="oracle:retrace:_s4:$S4" SECONDS_LEFT=$(( LEFT - $(date +%s) + t0 )) OUT=$OUT \
    bash benchmarks/dual_gpu.sh
