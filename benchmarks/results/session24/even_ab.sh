#!/usr/bin/env bash
# Written in session 24, which had no device time: NOT RUN YET. One nvidia-h200 call
# (about 8 minutes with the machine's start) for issue 3's last unmet line (bfloat16
# Retrace at least 1.6x faster than float32 at 256x32768 and 32768x128):
# - whole tiles compiled without bounds masks (launch.EVEN_TILES; off in the shipped
#   code) against the shipped kernels: benchmarks/align_probe.py's `even` section, the
#   dispatched config and the rl-triton flat config of 22 keys, interleaved;
# - the strategy sweeps of the two cells, float32 and bfloat16, both ways, so that the
#   1.6x line is read the way benchmarks/strategies.py reads it.
# The census of the same kernels compiled without a GPU is in sass_census/ beside this.
set -uo pipefail
t0=$(date +%s)
source benchmarks/device_env.sh || exit 1
P=even_ab
mkdir -p "$P"
python3 benchmarks/align_probe.py --output "$P/probe" --sections even --max-seconds 200 \
    > "$P/probe.log" 2>&1
echo "probe: rc $? at $(( $(date +%s) - t0 )) s" | tee -a "$P/times.txt"
tar czf "$OUT/even_ab.tgz" "$P"
# The switch must reach strategies.py's spawned compile workers too: a sitecustomize
# module turns it on in every Python process started with it on the path.
mkdir -p /tmp/even_site
echo 'import rltriton_tune.kernels.launch as launch; launch.EVEN_TILES = True' \
    > /tmp/even_site/sitecustomize.py
sweep() {  # name site-dir(or empty) N T
    PYTHONPATH=${2:+$2:}$PYTHONPATH timeout 170 python3 benchmarks/strategies.py \
        --output "$P/strat_$1" --algorithms retrace --n "$3" --t "$4" \
        --strategies lookback,tiled,flat --max-seconds 150 > "$P/strat_$1.log" 2>&1
    echo "strat_$1: rc $? at $(( $(date +%s) - t0 )) s" | tee -a "$P/times.txt"
    tar czf "$OUT/even_ab.tgz" "$P"
}
PYTHONPATH=/tmp/even_site:$PYTHONPATH python3 -c \
    'import rltriton_tune.kernels.launch as l; assert l.EVEN_TILES' || exit 1
sweep shipped_long "" 256 32768
sweep even_long /tmp/even_site 256 32768
sweep shipped_short "" 32768 128
sweep even_short /tmp/even_site 32768 128
