#!/usr/bin/env bash
# Written in session 24, which had no device time: NOT RUN YET. nvidia-h200 call 1 of 2
# for issue 3's last unmet line (bfloat16 Retrace at least 1.6x faster than float32 at
# 256x32768 and 32768x128), about 8 minutes with the machine's start:
# - benchmarks/align_probe.py's `tiles` section: the dispatched and rl-triton flat
#   configs of 22 keys (float32 and bfloat16), shipping kernels against whole tiles
#   without bounds masks (launch.EVEN_TILES) and against the tile loop's L2 prefetch of
#   the next tile (launch.PREFETCH_L2), each interleaved with the shipping kernel;
# - the Retrace strategy sweeps of 32768x128 (flat: no tile loop, so masks only).
# The kernels' instruction census, compiled without a GPU: sass_census/ beside this.
P=kernel_ab1
source benchmarks/results/session24/ab_common.sh || exit 1
python3 benchmarks/align_probe.py --output "$P/probe" --sections tiles --max-seconds 300 \
    > "$P/probe.log" 2>&1
echo "probe: rc $? at $(( $(date +%s) - t0 )) s" | tee -a "$P/times.txt"
tar czf "$OUT/$P.tgz" "$P"
sweep shipped_short shipped 32768 128 flat,tiled
sweep even_short even 32768 128 flat,tiled
