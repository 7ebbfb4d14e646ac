"""Kernel configs sized from the problem's shape alone, without Triton imports (the
built-in rules use them on machines without Triton too)."""

from __future__ import annotations

from rltriton_tune.call import DTYPES_BY_NAME, ProblemKey
from rltriton_tune.pow2 import next_pow2, pow2_floor
from rltriton_tune.strategy import Params


def time_major_columns(key: ProblemKey, sm_count: int | None = None) -> Params:
    """A time-major tile of whole columns a thread, loads three tiles ahead.

    One warp holds up to one 16-byte vector of environments per lane (``BLOCK_N`` of 128
    float32 columns), fewer where that would leave under two programs per multiprocessor
    (when ``sm_count`` is known), and 1024 elements in all (8 steps at least), so each
    thread scans its columns in registers while the next tiles load. H200, float32 time-major: GAE
    32768x2048 (128, 16) 254 us; 8192x2048 (32, 32) 92 us against (128, 16) 221 us."""
    bn = 32 * max(1, 16 // DTYPES_BY_NAME[key.dtype].itemsize)
    if sm_count:
        bn = min(bn, max(32, pow2_floor(key.n // (2 * sm_count))))
    bn = min(bn, next_pow2(key.n))
    bt = min(next_pow2(key.t), 32, max(8, 1024 // bn))
    return {"BLOCK_N": bn, "BLOCK_T": bt, "num_warps": 1, "num_stages": 3}
