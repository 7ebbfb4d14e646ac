# Sourced from the checkout's root by benchmarks/results/sessionNN/merge.sh as
# `source benchmarks/merge_start.sh NN PREVIOUS`: S is session NN's results folder, P the
# previous session's merged/ benches and M session NN's merged/, rebuilt as a copy of P
# that the caller then brings up to date (benchmarks/merge_bench.py, copied reports).
S=benchmarks/results/session$1
P=benchmarks/results/session$2/merged
M=$S/merged
rm -rf "$M"
mkdir -p "$M"
cp -r "$P/." "$M/"
