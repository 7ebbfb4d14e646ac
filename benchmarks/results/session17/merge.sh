#!/usr/bin/env bash
# Rebuild benchmarks/results/session17/merged/: session 16's merged oracle benches with the
# cells that session 17 measured again after the look-back rule change (call2, call3) in
# place of their rows.
set -euo pipefail
cd "$(dirname "$0")/../../.."
S=benchmarks/results/session17
M=$S/merged
shopt -s nullglob
NEW=$(echo $S/call2/*_oracle_r17/bench.json $S/call3/*_oracle_r17b/bench.json)
rm -rf "$M"
for base in benchmarks/results/session16/merged/*/bench.json; do
    name=$(basename "$(dirname "$base")")
    python benchmarks/merge_bench.py "$base" --newer $NEW --output "$M/$name"
done
