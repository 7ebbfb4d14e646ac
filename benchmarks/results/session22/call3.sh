#!/usr/bin/env bash
# Session 22, device call 3 (nvidia-h200): the many-action rules as refitted after call 2
# (rltriton_tune/dispatch/many_actions.py: warps and look-back chunks by loaded elements,
# steps x A) checked head to head on shapes no probe has timed, at A=32, 40 and 80 (the
# same 50 configs as calls 1-2 plus each key's dispatched one), in one tarball.
set -uo pipefail
t0=$(date +%s)
source benchmarks/device_env.sh || exit 1
source benchmarks/device_probe.sh
PROBE_MARGIN=15
probe a40chk retrace 40 35000x3,7000x10,1800x28,5000x45,900x110,2200x240,350x450,50x3000,15x25000 115 "${WIDE[@]}"
probe a32chk retrace 32 80000x1,5500x7,1100x48,3500x120,450x200,150x1500,40x12000 90 "${WIDE[@]}"
probe a80chk retrace 80 12000x2,4500x9,1500x35,600x90,2000x200,250x350,30x5000,5x60000 100 "${WIDE[@]}"
