#!/usr/bin/env bash
# Session 21, device call 3 (nvidia-h200): the wide-action rules (heuristic.ACTION_NARROW_A
# and what follows it, fitted on call 2's h2h_a18fit and h2h_a18val) checked head to head
# on shapes no probe has timed: A=18 again (a18new), and the action counts they
# extrapolate to, A=12 (next_pow2 16), A=32 and A=64; the same 32 configs as call 2
# plus each key's dispatched one. Everything lands in one tarball ($OUT/probes.tgz).
set -uo pipefail
t0=$(date +%s)
source benchmarks/device_env.sh || exit 1
source benchmarks/device_probe.sh
cfgs=()
for r in 1 2 4 8; do for w in 1 2 4 8 16; do cfgs+=(--config "flat:BLOCK_N=$r,num_warps=$w,num_stages=1"); done; done
for c in 64:1 64:2 64:4 128:2 128:4 256:4 256:8 512:8; do
    cfgs+=(--config "tiled:BLOCK_N=1,BLOCK_T=${c%:*},num_warps=${c#*:},num_stages=1"); done
for c in 128:1 256:1 512:1 256:2; do
    cfgs+=(--config "lookback:BLOCK_N=1,BLOCK_T=${c%:*},num_warps=${c#*:}"); done
probe a18new retrace 18 3000x6,50000x12,6000x24,20000x48,1800x96,150x150,3000x180,400x350,60x700,300x900,24x8000,8x20000 140 "${cfgs[@]}"
probe a12 retrace 12 10000x8,5000x30,2000x64,600x200,3000x400,150x800,30x4000 90 "${cfgs[@]}"
probe a32 retrace 32 20000x4,3000x20,6000x50,1000x100,400x300,2500x500,120x900,20x6000 110 "${cfgs[@]}"
probe a64 retrace 64 8000x8,2000x40,500x120,1500x250,80x700,10x10000 90 "${cfgs[@]}"
