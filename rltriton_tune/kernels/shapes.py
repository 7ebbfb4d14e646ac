"""Kernel configs sized from the problem's shape alone, without Triton imports (the
built-in rules use them on machines without Triton too)."""

from __future__ import annotations

from rltriton_tune.call import DTYPES_BY_NAME, ProblemKey
from rltriton_tune.pow2 import next_pow2, pow2_floor
from rltriton_tune.strategy import Params


def vector_elems(key: ProblemKey) -> int:
    """Elements of the key's dtype in one 16-byte vector (4 float32, 8 16-bit): the
    widest load a thread makes along the contiguous axis."""
    return 16 // DTYPES_BY_NAME[key.dtype].itemsize


def time_major_columns(key: ProblemKey, sm_count: int | None = None) -> Params:
    """A time-major tile of whole columns a thread, its loads pipelined ahead of the scan.

    One warp holds up to one 16-byte vector of environments per lane (``BLOCK_N`` of 128
    float32 columns), fewer where that would leave under two programs per multiprocessor
    (when ``sm_count`` is known), down to 16 columns (64 bytes of a float32 step), and
    1024 elements in all (8 steps at least), so each thread scans its columns in
    registers while the next tiles load. A tile of 512 elements or fewer loads four tiles
    ahead (5 stages), a larger one two (3 stages): about the same bytes in flight.

    H200, float32, 1 warp: GAE 32768x2048 (64, 16, 3 stages) 258 us, (128, 16, 3) 254;
    at 8192x2048, (16, 32, 5) 76 us against (32, 32, 3) 92 and (128, 16, 3) 221; at
    4096x2048, (16, 32, 5) 57 against (32, 32, 3) 89 (V-trace 114 against 202,
    discounted returns 46 against 99, and 50 at 3 stages). Programs, not row
    contiguity, decide there: 64-byte rows on 256-512 programs beat 512-byte rows on
    64. Not for per-action keys (Retrace): their action loop inside the tile is not
    pipelined."""
    bn = 32 * vector_elems(key)
    if sm_count:
        bn = min(bn, max(MIN_COLUMNS, pow2_floor(key.n // (2 * sm_count))))
    bn = min(bn, next_pow2(key.n))
    bt = min(next_pow2(key.t), 32, max(8, 1024 // bn))
    stages = 5 if bn * bt <= 512 else 3
    return {"BLOCK_N": bn, "BLOCK_T": bt, "num_warps": 1, "num_stages": stages}


#: The narrowest column block :func:`time_major_columns` gives where the key has too few
#: environments to fill the GPU with wider ones.
MIN_COLUMNS = 16


#: Shared memory one program may use (bytes): the H100's and H200's 227 KB per block.
#: Configs whose pipelined buffers exceed it fail to compile there.
SHARED_BYTES = 227 * 1024


def stage_buffer_bytes(key: ProblemKey, tile_elems: int, stages: int) -> int:
    """Shared memory the pipelined loads of a tile loop take, about: ``stages - 1``
    buffers of each per-step input tile, 4 bytes an element at most, plus one tile for a
    neighbouring step's load (GAE reads ``values`` at t and t + 1). Per-action inputs
    are loaded in an inner loop, which is not pipelined. Compiled for sm_90, GAE
    env-major (8, 1024, 16 warps, 3 stages) takes 263,168 B; this gives 262,144."""
    spec = key.spec
    inputs = sum(1 for name in key.passed_tensors
                 if name not in spec.per_env and name not in spec.per_action)
    return max(0, stages - 1) * tile_elems * 4 * (inputs + 1)


def stage_buffers_too_big(key: ProblemKey, tile_elems: int, stages: int) -> str | None:
    """Why a pipelined tile loop of ``stages`` would not fit in :data:`SHARED_BYTES`
    (a search's skip reason), or None where it fits."""
    buffers = stage_buffer_bytes(key, tile_elems, stages)
    if buffers > SHARED_BYTES:
        return f"{stages} stages need {buffers} B of shared memory"
    return None
