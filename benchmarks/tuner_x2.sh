#!/usr/bin/env bash
# Issue 5 on nvidia-h200-x2: the same tune on one GPU and on two (--devices 0,1), each
# with a fresh profile folder, study journal and Triton cache, so neither reuses the
# other's compiles; then the exhaustive search-quality tables, one estimator per GPU.
# Usage on the device machine (repo root, wheels in .whl/):
#   OUT=... ALGOS=gae,vtrace SQ_SECONDS=300 bash benchmarks/tuner_x2.sh
# SQ0 / SQ1: "algorithm:shapes" swept on GPU 0 / GPU 1, one after the other.
set -uo pipefail
cd "$(dirname "$0")/.."
source "$(dirname "$0")/device_env.sh" || exit 1
OUT=${OUT:-/tmp/out}; W=/tmp/w; mkdir -p "$OUT" "$W"
ALGOS=${ALGOS:-gae,vtrace}
SQ0=${SQ0:-"vtrace:4096x512,1024x64,16384x16"}
SQ1=${SQ1:-"vtrace:4096x8,32768x32,256x128 gae:4096x8,16384x16,1024x64"}
nvidia-smi -L | tee "$W/env.txt"
for devices in 0 0,1; do
    tag=gpus_${devices/,/_}
    start=$(date +%s)
    RLTRITON_TUNE_DB="$W/$tag/db" TRITON_CACHE_DIR="$W/$tag/triton" timeout "${TUNE_TIMEOUT:-280}" \
        python3 -m rltriton_tune.cli tune --preset default --algorithms "$ALGOS" \
        --devices "$devices" --no-progress > "$W/$tag.txt" 2> "$W/$tag.err"
    echo "tune --preset default --algorithms $ALGOS --devices $devices: rc $? in $(( $(date +%s) - start )) s" | tee -a "$W/times.txt"
done
if [ -n "${SQ_SECONDS:-}" ]; then
    mkdir -p "$W/sq"  # fresh tables, timed in interleaved rounds
    for gpu in 0 1; do
        jobs=$([ $gpu = 0 ] && echo "$SQ0" || echo "$SQ1")
        (for job in $jobs; do
            CUDA_VISIBLE_DEVICES=$gpu python3 benchmarks/search_quality.py --output "$W/sq" \
                --exhaustive-only --compile-workers 16 --algorithms "${job%%:*}" \
                --shapes "${job#*:}" >> "$W/sq/log$gpu.txt" 2>&1
        done) &
    done
    end=$(( $(date +%s) + SQ_SECONDS ))
    while [ -n "$(jobs -r)" ] && [ "$(date +%s)" -lt "$end" ]; do sleep 5; done
    pkill -f search_quality.py; sleep 2  # partial tables stay in sq/*.partial.json
fi
tar czf "$OUT/tuner_x2.tgz" --exclude=triton -C "$W" .
cat "$W/times.txt"
