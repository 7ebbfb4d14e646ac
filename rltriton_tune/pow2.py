"""Powers of two, as tiles, chunks and warp counts are sized (no GPU imports)."""

from __future__ import annotations


def next_pow2(x: int) -> int:
    """Smallest power of two >= max(x, 1)."""
    return 1 << max(int(x) - 1, 0).bit_length()


def pow2_floor(x: int) -> int:
    """Largest power of two <= x, and 1 for x < 1."""
    return 1 << max(0, int(x).bit_length() - 1)


#: Largest alignment hint: 16 elements cover a 16-byte vector of every supported dtype.
MAX_ALIGN = 16


def pow2_divisor(x: int, cap: int = MAX_ALIGN) -> int:
    """Largest power of two, at most ``cap``, that divides ``x`` (``cap`` for 0)."""
    x = int(x)
    return cap if x == 0 else min(cap, x & -x)
