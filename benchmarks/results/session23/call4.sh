#!/usr/bin/env bash
# Session 23, device call 4 (nvidia-h200): the many-action look-back chunk rule of the
# working tree (many_actions.LOOKBACK_CHUNK: 128 steps from 7 programs a SM, 64 below,
# whatever the action count; fitted on every many-action look-back key probed in
# sessions 21-23) checked head to head on 16 shapes no probe has timed, A = 26-384,
# several near the 7-programs line; look-back chunks of 32-256 steps, one and two warps.
set -uo pipefail
t0=$(date +%s)
source benchmarks/device_env.sh || exit 1
source benchmarks/device_probe.sh
PROBE_MARGIN=15
lb=()
for c in 32:1 64:1 128:1 256:1 64:2 128:2; do
    lb+=(--config "lookback:BLOCK_N=1,BLOCK_T=${c%:*},num_warps=${c#*:}"); done
probe lba26 retrace 26 200x1200,20x9000 45 "${lb[@]}"
probe lba32 retrace 32 15x8000 35 "${lb[@]}"
probe lba40 retrace 40 60x1500,25x20000 45 "${lb[@]}"
probe lba48 retrace 48 40x3000 35 "${lb[@]}"
probe lba64 retrace 64 110x1000 35 "${lb[@]}"
probe lba72 retrace 72 120x800,30x6000 45 "${lb[@]}"
probe lba100 retrace 100 90x1200 35 "${lb[@]}"
probe lba160 retrace 160 150x600,12x15000 50 "${lb[@]}"
probe lba200 retrace 200 80x1000,40x4000 50 "${lb[@]}"
probe lba384 retrace 384 100x400,6x20000 60 "${lb[@]}"
