"""Kernel configs sized from the problem's shape alone, without Triton imports (the
built-in rules use them on machines without Triton too)."""

from __future__ import annotations

from rltriton_tune.call import DTYPES_BY_NAME, ProblemKey
from rltriton_tune.pow2 import next_pow2, pow2_divisor, pow2_floor
from rltriton_tune.strategy import Params


def vector_elems(key: ProblemKey) -> int:
    """Elements of the key's dtype in one 16-byte vector (4 float32, 8 16-bit): the
    widest load a thread makes along the contiguous axis."""
    return 16 // DTYPES_BY_NAME[key.dtype].itemsize


def lane_elems(key: ProblemKey) -> int:
    """Elements of one thread's widest load along a step of time-major inputs: a 16-byte
    vector (:func:`vector_elems`) where the environment count allows it, else the largest
    power of two dividing that count. Step t's row starts t * N elements in, so an odd N
    leaves only single-element loads: Triton then lays a block of 32 environments one
    environment a lane (compiled for sm_90, GAE 4745x1047 float32, the ``columns`` block
    (32, 32, 1 warp) holds whole columns a thread and scans without shuffles), where with
    N a multiple of 4 it lays 4 environments a lane on 8 lanes and 4 lanes take steps."""
    return pow2_divisor(key.n, cap=vector_elems(key))


def time_major_columns(key: ProblemKey, sm_count: int | None = None) -> Params:
    """A time-major tile of whole columns a thread, its loads pipelined two tiles ahead.

    One warp holds up to one 16-byte vector of environments per lane (``BLOCK_N`` of 128
    float32 columns), fewer where that would leave under two programs per multiprocessor
    (when ``sm_count`` is known), down to 8 columns (32 bytes, one memory sector, of a
    float32 step). The tile has 1024 elements (8 steps at least) up to 32 steps, 64 for
    blocks under 16 columns, so each thread scans its columns in registers while the next
    tiles load.

    Programs, not row contiguity, decide few-column keys: 32-byte rows on 512 programs
    beat 512-byte rows on 32. H200, float32, 1 warp, 3 stages, device time in us:

    ========================  =========  =========  =========  ==========
    key (time-major)          (8, 64)    (16, 32)   (32, 32)   (128, 8-16)
    ========================  =========  =========  =========  ==========
    GAE 2048x2048             36.6       -          -          -
    GAE 4096x2048             55.1       57.5       89         220
    V-trace 4096x2048         92.7       120        202        1252
    discounted 4096x2048      37.1       50         99         179
    GAE 8192x2048             -          73.8       92         221
    GAE 32768x2048            -          -          -          254
    ========================  =========  =========  =========  ==========

    (look-back, the tuned choice these replace at 2048-4096 columns: 45, 84, 148 and 78.)
    Not for per-action keys (Retrace): their action loop inside the tile is not
    pipelined."""
    bn = 32 * vector_elems(key)
    if sm_count:
        bn = min(bn, max(MIN_COLUMNS, pow2_floor(key.n // (2 * sm_count))))
    bn = min(bn, next_pow2(key.n))
    bt = min(next_pow2(key.t), 64 if bn < 16 else 32, max(8, 1024 // bn))
    return {"BLOCK_N": bn, "BLOCK_T": bt, "num_warps": 1, "num_stages": 3}


#: The narrowest column block :func:`time_major_columns` gives where the key has too few
#: environments to fill the GPU with wider ones.
MIN_COLUMNS = 8


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
