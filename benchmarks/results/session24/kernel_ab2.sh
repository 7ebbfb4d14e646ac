#!/usr/bin/env bash
# Written in session 24, which had no device time: NOT RUN YET. nvidia-h200 call 2 of 2
# (about 9 minutes): the Retrace strategy sweeps of 256x32768 (look-back and tiled),
# float32 and bfloat16, with the shipping kernels, whole tiles without bounds masks, the
# tile loop's L2 prefetch and both. The bfloat16 line needs 151 us (169.3 now).
P=kernel_ab2
source benchmarks/results/session24/ab_common.sh || exit 1
sweep shipped_long shipped 256 32768 lookback,tiled
sweep even_long even 256 32768 lookback,tiled
sweep prefetch_long prefetch 256 32768 tiled
sweep both_long both 256 32768 lookback,tiled
