#!/usr/bin/env bash
# Session 21, device call 2 (nvidia-h200):
# - Retrace with 18 actions (Atari's full action set): every per-action rule was measured
#   at A=8 only. Head to head on 13 shapes across the rules' bands (a18fit) and, timed in
#   the same run but kept apart for checking whatever rule the first set suggests, 12 other
#   shapes (a18val), then 6 shapes at A=64 (a64): one-row flat (1-16 warps), 2-8 rows a
#   program, chunk loops and look-back chunks, plus each key's dispatched config;
# - set 4's Retrace sweep continued (2200x450's partial table from call 1).
set -uo pipefail
t0=$(date +%s)
LEFT=${SECONDS_LEFT:-560}
source benchmarks/device_env.sh || exit 1
cfgs=()
for r in 1 2 4 8; do for w in 1 2 4 8 16; do cfgs+=(--config "flat:BLOCK_N=$r,num_warps=$w,num_stages=1"); done; done
for c in 64:1 64:2 64:4 128:2 128:4 256:4 256:8 512:8; do
    cfgs+=(--config "tiled:BLOCK_N=1,BLOCK_T=${c%:*},num_warps=${c#*:},num_stages=1"); done
for c in 128:1 256:1 512:1 256:2; do
    cfgs+=(--config "lookback:BLOCK_N=1,BLOCK_T=${c%:*},num_warps=${c#*:}"); done
probe() {  # name actions shapes seconds
    timeout "$4" python3 benchmarks/headtohead_probe.py --algorithms retrace --shapes "$3" \
        --actions "$2" --top 0 "${cfgs[@]}" --max-seconds "$(( $4 - 20 ))" \
        --output "$OUT/h2h_$1" > "$OUT/h2h_$1.log" 2>&1
    echo "h2h_$1: rc $? at $(( $(date +%s) - t0 )) s" | tee -a "$OUT/times.txt"
}
probe a18fit 18 2048x5,16384x10,4096x20,64x80,256x80,1024x80,4000x40,12000x64,300x200,2000x300,200x1000,1500x800,16x5000 200
probe a18val 18 1500x7,30000x16,8192x32,32x80,512x100,2500x120,700x250,128x512,5000x400,100x600,800x1500,40x3000 180
probe a64 64 1024x20,4096x40,256x80,2000x200,500x1000,16x3000 100
S4=90x15000,6000x180,2200x450,750x1200,300x2800,150000x6,24000x60,6x70000
bash benchmarks/carry_from_results.sh
cp benchmarks/results/session21/call1/retrace_oracle_s4/bench.json devcarry/bench/retrace_oracle_s4/
cp benchmarks/results/session21/call1/retrace_oracle_s4/*.partial.json devcarry/bench/retrace_oracle_s4/oracle/
export ORACLE_WORKERS=16 ORACLE_SECONDS=600 BENCH_SHAPES=256x128
export COMPILE_FROM="$(ls benchmarks/results/session20/merged/*/bench.json | tr '\n' ' ')"
JOBS0="oracle:retrace:_s4:$S4" SECONDS_LEFT=$(( LEFT - $(date +%s) + t0 )) OUT=$OUT \
    bash benchmarks/dual_gpu.sh
