"""Shared ``@triton.jit`` pieces of the scan cores: the combine operator and carry handling."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def combine(a1, b1, a2, b2):
    """(a1, b1) then (a2, b2): the composition of two affine steps y -> a + b*y."""
    return a2 + b2 * a1, b1 * b2


@triton.jit
def scan_tile(a, b, carry, feed, REVERSE: tl.constexpr):
    """Scan a [rows, BLOCK] tile along axis 1 starting from ``carry`` ([rows]).

    The carry is folded into alpha at the ``feed`` position (the tile's last
    column for a backward scan, its first for a forward one). Returns
    (y, product of beta) for every position.
    """
    a = tl.where(feed, a + b * carry[:, None], a)
    return tl.associative_scan((a, b), 1, combine, reverse=REVERSE)


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
def row_block(pid, BLOCK_N: tl.constexpr, BIG: tl.constexpr):
    """Row indices [BLOCK_N, 1] of row block ``pid`` (int64 when offsets may pass 2^31)."""
    if BIG:
        return pid.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)[:, None]
    else:
        return pid * BLOCK_N + tl.arange(0, BLOCK_N)[:, None]


@triton.jit
def time_block(t0, BLOCK_T: tl.constexpr, BIG: tl.constexpr):
    """Time indices [1, BLOCK_T] starting at ``t0``."""
    ts = t0 + tl.arange(0, BLOCK_T)[None, :]
    if BIG:
        return ts.to(tl.int64)
    else:
        return ts
