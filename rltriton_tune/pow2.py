"""Powers of two, as tiles, chunks and warp counts are sized (no GPU imports)."""

from __future__ import annotations


def next_pow2(x: int) -> int:
    """Smallest power of two >= max(x, 1)."""
    return 1 << max(int(x) - 1, 0).bit_length()


def pow2_floor(x: int) -> int:
    """Largest power of two <= x, and 1 for x < 1."""
    return 1 << max(0, int(x).bit_length() - 1)
