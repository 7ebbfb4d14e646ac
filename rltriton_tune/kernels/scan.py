"""Shared ``@triton.jit`` pieces of the scan cores: the combine operators, tile scans (backward
ones in flipped per-thread runs) and carry handling."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def combine(a1, b1, a2, b2):
    """(a1, b1) then (a2, b2): the composition of two affine steps y -> a + b*y."""
    return a2 + b2 * a1, b1 * b2


@triton.jit
def combine_next(a1, b1, c1, d1, a2, b2, c2, d2):
    """``combine`` on (whole segment, segment without its last step in scan order).

    The second pair is the composition of every step of a segment but its last, so
    a scan of it gives each position the value of its predecessor in scan order (the
    neighbour the carry comes from: ``y[t+1]`` of a backward scan). A single step
    starts as (its own map, the identity)."""
    return a2 + b2 * a1, b1 * b2, c2 + d2 * a1, b1 * d2


@triton.jit
def _runs(x, R: tl.constexpr):
    """[rows, BLOCK] as [rows, BLOCK // R, R] runs of R steps, each run flipped."""
    return tl.flip(tl.reshape(x, [x.shape[0], x.shape[1] // R, R]), 2)


@triton.jit
def _unruns(x):
    """Inverse of ``_runs``."""
    return tl.reshape(tl.flip(x, 2), [x.shape[0], x.shape[1] * x.shape[2]])


@triton.jit
def _run_ends(x, R: tl.constexpr):
    """Each run's value at its last position in scan order ([rows, runs])."""
    return tl.sum(tl.where((tl.arange(0, R) == R - 1)[None, None, :], x, 0.0), axis=2)


@triton.jit
def _entering(ya, yb, R: tl.constexpr):
    """What enters each run from the runs after it (a backward scan's predecessors):
    (value, product of beta), from the runs' own scans ``ya``, ``yb``."""
    ra = _run_ends(ya, R)
    rb = _run_ends(yb, R)
    zero = tl.zeros_like(ra)
    if ra.shape[1] == 1:  # one run per row: nothing enters it within the tile
        return zero[:, :, None], zero[:, :, None] + 1.0
    _, _, xa, xb = tl.associative_scan((ra, rb, zero, zero + 1.0), 1, combine_next,
                                       reverse=True)
    return xa[:, :, None], xb[:, :, None]


@triton.jit
def scan_pairs(a, b, REVERSE: tl.constexpr, RUN: tl.constexpr):
    """Scan [rows, BLOCK] tiles of affine steps along axis 1: (y, product of beta).

    Triton lowers a reverse ``associative_scan`` with lane-reversing shuffles on every
    element, which leaves 16-bit backward scans issue-bound. With RUN > 1 a backward
    scan runs forward instead within RUN-step runs (each thread's contiguous steps,
    flipped in registers), and only the runs' aggregates take a reverse scan across
    threads (H200, bfloat16 4096x8192: 91 -> 56 us).
    """
    if REVERSE and RUN > 1:
        R: tl.constexpr = RUN if RUN < a.shape[1] else a.shape[1]
        ya, yb = tl.associative_scan((_runs(a, R), _runs(b, R)), 2, combine)
        xa, xb = _entering(ya, yb, R)
        return _unruns(ya + yb * xa), _unruns(yb * xb)
    else:
        return tl.associative_scan((a, b), 1, combine, reverse=REVERSE)


@triton.jit
def scan_pairs_next(a, b, REVERSE: tl.constexpr, RUN: tl.constexpr):
    """``scan_pairs`` that also gives each position its predecessor's value and product
    in scan order (``y[t+1]``, ``prod b[t+1..]`` of a backward scan; 0 and 1 at the
    tile's first position)."""
    zero = tl.zeros_like(a)
    if REVERSE and RUN > 1:
        R: tl.constexpr = RUN if RUN < a.shape[1] else a.shape[1]
        z = _runs(zero, R)
        ya, yb, yc, yd = tl.associative_scan((_runs(a, R), _runs(b, R), z, z + 1.0), 2,
                                             combine_next)
        xa, xb = _entering(ya, yb, R)
        return (_unruns(ya + yb * xa), _unruns(yb * xb), _unruns(yc + yd * xa),
                _unruns(yd * xb))
    else:
        return tl.associative_scan((a, b, zero, zero + 1.0), 1, combine_next, reverse=REVERSE)


@triton.jit
def scan_tile(a, b, carry, feed, REVERSE: tl.constexpr, RUN: tl.constexpr):
    """Scan a [rows, BLOCK] tile along axis 1 starting from ``carry`` ([rows]).

    The carry is folded into alpha at the ``feed`` position (the tile's last
    column for a backward scan, its first for a forward one). Returns
    (y, product of beta) for every position; RUN as in ``scan_pairs``.
    """
    a = tl.where(feed, a + b * carry[:, None], a)
    return scan_pairs(a, b, REVERSE, RUN)


@triton.jit
def scan_tile_next(a, b, carry, feed, REVERSE: tl.constexpr, NEXT: tl.constexpr,
                   RUN: tl.constexpr):
    """``scan_tile`` that also gives each position its neighbour's value and product
    (``y[t+1]``, ``prod b[t+1..]`` of a backward scan; the carry at the feed position).

    Without ``NEXT`` the neighbour values are the tile's own (no extra work): builders
    whose ``finish`` does not read them get the plain scan."""
    if NEXT:
        a = tl.where(feed, a + b * carry[:, None], a)
        y, p, yn, pn = scan_pairs_next(a, b, REVERSE, RUN)
        yn = tl.where(feed, carry[:, None] + tl.zeros_like(a), yn)
        return y, p, yn, pn
    else:
        y, p = scan_tile(a, b, carry, feed, REVERSE, RUN)
        return y, p, y, p


@triton.jit
def take(x, where):
    """The column of ``x`` selected by the one-hot ``where`` ([1, BLOCK]), as [rows]."""
    return tl.sum(tl.where(where, x, 0.0), axis=1)


@triton.jit
def edges(BLOCK: tl.constexpr, REVERSE: tl.constexpr):
    """(feed, out): where the incoming carry enters a tile and where the outgoing one leaves."""
    loc = tl.arange(0, BLOCK)[None, :]
    first = loc == 0
    last = loc == BLOCK - 1
    if REVERSE:
        return last, first
    else:
        return first, last


@triton.jit
def tile_start(i, n_tiles, base, BLOCK: tl.constexpr, REVERSE: tl.constexpr):
    """Start index of the i-th tile processed (tiles visited last-to-first when REVERSE)."""
    if REVERSE:
        return base + (n_tiles - 1 - i) * BLOCK
    else:
        return base + i * BLOCK


@triton.jit
def block_indices(pid, BLOCK: tl.constexpr, BIG: tl.constexpr):
    """Indices [BLOCK] of block ``pid``: int64 when offsets may pass 2^31, and then the
    program id is widened before the multiply (``pid * BLOCK`` in int32 wraps there)."""
    if BIG:
        return pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    else:
        return pid * BLOCK + tl.arange(0, BLOCK)


@triton.jit
def wide_product(x, y, BIG: tl.constexpr):
    """``x * y`` of two integers, in int64 when offsets may pass 2^31: an int32 product
    wraps before any later cast (``(NC * N).to(tl.int64)`` does not widen it)."""
    if BIG:
        return tl.cast(x, tl.int64) * y
    else:
        return x * y


@triton.jit
def row_block(pid, BLOCK_N: tl.constexpr, BIG: tl.constexpr):
    """Row indices [BLOCK_N, 1] of row block ``pid`` (see :func:`block_indices`)."""
    return block_indices(pid, BLOCK_N, BIG)[:, None]


@triton.jit
def time_block(t0, BLOCK_T: tl.constexpr, BIG: tl.constexpr, DESCEND: tl.constexpr = False):
    """Time indices [1, BLOCK_T] from ``t0`` (last to first with ``DESCEND``).

    A descending tile turns a backward scan into a forward one over the tile. Triton
    lowers a reverse ``associative_scan`` with a lane-reversing butterfly on every
    element even where the scanned axis lies within each thread (time-major tiles of
    whole columns per thread: ~800 shuffles in a 128 x 8 tile); where steps are not
    contiguous in memory (time-major inputs), the order costs the loads nothing."""
    if DESCEND:
        ts = t0 + (BLOCK_T - 1 - tl.arange(0, BLOCK_T))[None, :]
    else:
        ts = t0 + tl.arange(0, BLOCK_T)[None, :]
    if BIG:
        return ts.to(tl.int64)
    else:
        return ts


@triton.jit
def _span_tile(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, N, T, A, sn, st, se, san,
               sat, saa, osn, ost, S0, S1, S2, S3, rows, carry, i, base, n_tiles,
               COEFFS: tl.constexpr, FINISH: tl.constexpr, REVERSE: tl.constexpr,
               F_TRUNC: tl.constexpr, F_BOOT: tl.constexpr, F_ENV: tl.constexpr,
               F_STARTS: tl.constexpr, BLOCK_A: tl.constexpr, BIG: tl.constexpr,
               BLOCK_T: tl.constexpr, NEXT: tl.constexpr, RUN: tl.constexpr, DESCEND: tl.constexpr):
    """Scan and store the i-th tile of ``scan_span`` from ``carry``; the carry leaving it."""
    SCAN_REVERSE: tl.constexpr = REVERSE and not DESCEND
    feed, out = edges(BLOCK_T, SCAN_REVERSE)
    ts = time_block(tile_start(i, n_tiles, base, BLOCK_T, REVERSE), BLOCK_T, BIG, DESCEND)
    a, b = COEFFS(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, rows, ts, N, T, A, sn, st, se, san, sat,
                  saa, S0, S1, S2, S3, F_TRUNC, F_BOOT, F_ENV, F_STARTS, BLOCK_A)
    y, _, y_next, _ = scan_tile_next(a, b, carry, feed, SCAN_REVERSE, NEXT, RUN)
    FINISH(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, rows, ts, y, y_next, N, T, A, sn,
           st, se, san, sat, saa, osn, ost, S0, S1, S2, S3, F_TRUNC, F_BOOT, F_ENV, F_STARTS,
           BLOCK_A)
    return take(y, out)


@triton.jit
def scan_span(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, N, T, A, sn, st, se, san, sat,
              saa, osn, ost, S0, S1, S2, S3, rows, carry, base, n_tiles, COEFFS: tl.constexpr,
              FINISH: tl.constexpr, REVERSE: tl.constexpr, F_TRUNC: tl.constexpr,
              F_BOOT: tl.constexpr, F_ENV: tl.constexpr, F_STARTS: tl.constexpr,
              BLOCK_A: tl.constexpr, BIG: tl.constexpr, BLOCK_T: tl.constexpr, NEXT: tl.constexpr,
              RUN: tl.constexpr, DESCEND: tl.constexpr, STAGES: tl.constexpr = 1):
    """Scan ``n_tiles`` (at least one) BLOCK_T tiles from time ``base`` starting from
    ``carry``, storing the outputs of each tile; returns the carry leaving the span.
    Tiles are visited in scan order; with DESCEND each holds its steps last to first and
    is scanned forward.

    STAGES > 1 software-pipelines the tile loop: each tile's loads are issued STAGES - 1
    tiles ahead (asynchronous copies to shared memory). Triton pipelines a loop without
    a matrix product only when the loop itself asks for stages (``tl.range``); the
    kernel's ``num_stages`` launch option alone leaves it unpipelined.

    Per-env inputs (``F_ENV``: ``last_value`` at T-1, seeds at t = 0) act on the first
    tile in scan order only. An unpipelined loop peels that tile off, so that the loop's
    tiles neither load nor select them (H200, GAE 24000x300 tiled (1, 256, 4): 61.1 us
    with ``last_value`` against 55.9 without, the per-env load repeated in every tile).
    A pipelined loop keeps every tile in the loop: a peeled tile waits for its own loads
    before the loop's prologue issues the next ones, and the per-env load of a later
    tile is one vector whose latency the stages hide."""
    # GAE's and V-trace's next_values ride in the bootstrap slot with F_ENV set and are
    # read at every step, as is a per-env input with F_ENV = 2 (launch._env_flag): only a
    # per-env input of the first tile leaves the later tiles.
    ENV_REST: tl.constexpr = (F_ENV and F_BOOT) or F_ENV == 2
    PEEL: tl.constexpr = F_ENV and STAGES == 1
    LOOP_ENV: tl.constexpr = ENV_REST if PEEL else F_ENV
    start = 0
    if PEEL:
        carry = _span_tile(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, N, T, A, sn, st,
                           se, san, sat, saa, osn, ost, S0, S1, S2, S3, rows, carry, 0, base,
                           n_tiles, COEFFS, FINISH, REVERSE, F_TRUNC, F_BOOT, True, F_STARTS,
                           BLOCK_A, BIG, BLOCK_T, NEXT, RUN, DESCEND)
        start = 1
    for i in tl.range(start, n_tiles, num_stages=STAGES):
        carry = _span_tile(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, N, T, A, sn, st,
                           se, san, sat, saa, osn, ost, S0, S1, S2, S3, rows, carry, i, base,
                           n_tiles, COEFFS, FINISH, REVERSE, F_TRUNC, F_BOOT, LOOP_ENV, F_STARTS,
                           BLOCK_A, BIG, BLOCK_T, NEXT, RUN, DESCEND)
    return carry


@triton.jit
def true_sizes(N, T, A, sn, st, san, sat, osn, ost, ALIGN_N: tl.constexpr,
               ALIGN_T: tl.constexpr, ALIGN_A: tl.constexpr):
    """The sizes and strides from their packed arguments (see ``Packer.args``).

    Along the contiguous axis of the ``[N, T]`` tensors (T for env-major, N for
    time-major) the host divides the size and the strides by ``ALIGN_T`` / ``ALIGN_N``,
    the power of two (up to 16) the size is a multiple of; likewise A and the
    per-action strides by ``ALIGN_A``. Multiplying back tells the compiler so: loads and
    stores become vector accesses and masks stay uniform per vector, as for sizes that
    are multiples of 16, which Triton detects itself.
    """
    return (N * ALIGN_N, T * ALIGN_T, A * ALIGN_A, sn * ALIGN_T, st * ALIGN_N,
            san * ALIGN_A, sat * ALIGN_A, osn * ALIGN_T, ost * ALIGN_N)
