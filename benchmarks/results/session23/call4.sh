#!/usr/bin/env bash
# Session 23, device call 4 (nvidia-h200): the many-action look-back chunk rule of the
# working tree (many_actions.LOOKBACK_CHUNK: 128 steps from 7 programs a SM, 64 below,
# whatever the action count; fitted on every many-action look-back key probed in
# sessions 21-23) checked head to head on 16 shapes no probe has timed, A = 26-384,
# several near the 7-programs line; look-back chunks of 32-256 steps, one and two warps.
set -uo pipefail
t0=$(date +%s)
source benchmarks/device_env.sh || exit 1
P=probes; mkdir -p $P
lb=()
for c in 32:1 64:1 128:1 256:1 64:2 128:2; do
    lb+=(--config "lookback:BLOCK_N=1,BLOCK_T=${c%:*},num_warps=${c#*:}"); done
probe() {  # name actions shapes seconds
    local name=$1 a=$2 shapes=$3 secs=$4
    timeout "$secs" python3 benchmarks/headtohead_probe.py --algorithms retrace --shapes "$shapes" \
        --actions "$a" --top 0 "${lb[@]}" --max-seconds "$(( secs - 15 ))" \
        --output "$P/h2h_lb$name" > "$P/h2h_lb$name.log" 2>&1
    echo "h2h_lb$name: rc $? at $(( $(date +%s) - t0 )) s" | tee -a "$P/times.txt"
    tar czf "$OUT/probes.tgz" $P
}
probe a26 26 200x1200,20x9000 45
probe a32 32 15x8000 35
probe a40 40 60x1500,25x20000 45
probe a48 48 40x3000 35
probe a64 64 110x1000 35
probe a72 72 120x800,30x6000 45
probe a100 100 90x1200 35
probe a160 160 150x600,12x15000 50
probe a200 200 80x1000,40x4000 50
probe a384 384 100x400,6x20000 60
