# Sourced by the device call scripts (benchmarks/results/sessionNN/callK.sh), after
# benchmarks/device_env.sh: `probe` runs one head-to-head probe into $P/h2h_NAME with its
# log, and tars $P into $OUT/probes.tgz after each probe, so a call cut short still
# returns every probe it finished. The caller sets t0 (the call's start, `date +%s`).
P=${P:-probes}
mkdir -p "$P"

# probe NAME ALGORITHMS ACTIONS SHAPES SECONDS CONFIG_ARGS...: time the --config args (and
# each key's dispatched config) head to head at every (algorithm, shape), stopping new keys
# PROBE_MARGIN seconds (default 20) before the SECONDS limit.
probe() {
    local name=$1 algs=$2 a=$3 shapes=$4 secs=$5; shift 5
    timeout "$secs" python3 benchmarks/headtohead_probe.py --algorithms "$algs" --shapes "$shapes" \
        --actions "$a" --top 0 "$@" --max-seconds "$(( secs - ${PROBE_MARGIN:-20} ))" \
        --output "$P/h2h_$name" > "$P/h2h_$name.log" 2>&1
    echo "h2h_$name: rc $? at $(( $(date +%s) - t0 )) s" | tee -a "$P/times.txt"
    tar czf "$OUT/probes.tgz" "$P"
}

# The 50 configs of the many-action probes (sessions 22-23), as --config args in WIDE:
# flat 1-16 rows x 1-16 warps, chunk loops of 32-256 steps x 1-8 warps, look-back chunks.
WIDE=()
for r in 1 2 4 8 16; do for w in 1 2 4 8 16; do
    WIDE+=(--config "flat:BLOCK_N=$r,num_warps=$w,num_stages=1"); done; done
for c in 32 64 128 256; do for w in 1 2 4 8; do
    WIDE+=(--config "tiled:BLOCK_N=1,BLOCK_T=$c,num_warps=$w,num_stages=1"); done; done
for c in 64:1 128:1 128:2 256:1 256:2; do
    WIDE+=(--config "lookback:BLOCK_N=1,BLOCK_T=${c%:*},num_warps=${c#*:}"); done
