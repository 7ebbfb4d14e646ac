#!/usr/bin/env bash
# Session 22, device call 3 (nvidia-h200): the many-action rules as refitted after call 2
# (rltriton_tune/dispatch/many_actions.py: warps and look-back chunks by loaded elements,
# steps x A) checked head to head on shapes no probe has timed, at A=32, 40 and 80 (the
# same 50 configs as calls 1-2 plus each key's dispatched one), in one tarball.
set -uo pipefail
t0=$(date +%s)
source benchmarks/device_env.sh || exit 1
P=probes; mkdir -p $P
wide=()
for r in 1 2 4 8 16; do for w in 1 2 4 8 16; do wide+=(--config "flat:BLOCK_N=$r,num_warps=$w,num_stages=1"); done; done
for c in 32 64 128 256; do for w in 1 2 4 8; do
    wide+=(--config "tiled:BLOCK_N=1,BLOCK_T=$c,num_warps=$w,num_stages=1"); done; done
for c in 64:1 128:1 128:2 256:1 256:2; do
    wide+=(--config "lookback:BLOCK_N=1,BLOCK_T=${c%:*},num_warps=${c#*:}"); done
probe() {  # name actions shapes seconds
    timeout "$4" python3 benchmarks/headtohead_probe.py --algorithms retrace --shapes "$3" \
        --actions "$2" --top 0 "${wide[@]}" --max-seconds "$(( $4 - 15 ))" \
        --output "$P/h2h_$1" > "$P/h2h_$1.log" 2>&1
    echo "h2h_$1: rc $? at $(( $(date +%s) - t0 )) s" | tee -a "$P/times.txt"
    tar czf "$OUT/probes.tgz" $P
}
probe a40chk 40 35000x3,7000x10,1800x28,5000x45,900x110,2200x240,350x450,50x3000,15x25000 115
probe a32chk 32 80000x1,5500x7,1100x48,3500x120,450x200,150x1500,40x12000 90
probe a80chk 80 12000x2,4500x9,1500x35,600x90,2000x200,250x350,30x5000,5x60000 100
