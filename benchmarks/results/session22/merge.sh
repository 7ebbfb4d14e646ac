#!/usr/bin/env bash
# Rebuild benchmarks/results/session22/merged/: session 21's merged oracle benches with
# set 4's Retrace completed (call 2's resumed report: 750x1200 and 300x2800 added, its
# earlier rows folded back in). Calls 1-3 otherwise ran head-to-head probes only.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source benchmarks/merge_start.sh 22 21
python benchmarks/merge_bench.py $S/call2/retrace_oracle_s4/bench.json --fold-unreached \
    --output "$M/bench_retrace_oracle_s4"
