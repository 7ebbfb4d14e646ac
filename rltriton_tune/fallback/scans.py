"""Generic torch scans of y[t] = α[t] + β[t]·y[t∓1] along the last dimension.

They know nothing about algorithms: a builder in ``coefficients`` makes α, β
with the boundary carry already folded in, so every scan starts from a zero
carry. Each scan owns the α, β it is given (it may overwrite them and may
return α's storage as the result). ``reverse=True`` is the backward recurrence
y[t] = α[t] + β[t]·y[t+1]. Pairs compose associatively (SPEC): an earlier
element (α₁, β₁) followed by a later one (α₂, β₂) gives (α₂ + β₂·α₁, β₁·β₂),
"earlier" meaning earlier in scan order.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def scan_loop(alpha: Tensor, beta: Tensor, reverse: bool,
              init: Tensor | None = None) -> Tensor:
    """A Python loop over time, vectorised over the leading dimensions; in place in α.

    ``init`` is the carry entering the first step in scan order (zero when None).
    """
    t_len = alpha.shape[-1]
    steps = range(t_len - 1, -1, -1) if reverse else range(t_len)
    prev = init
    for t in steps:
        a_t = alpha[..., t]
        if prev is not None:
            a_t.addcmul_(beta[..., t], prev)
        prev = a_t
    return alpha


def _aggregate(a3: Tensor, b3: Tensor, reverse: bool) -> tuple[Tensor, Tensor]:
    """Compose each chunk's (α, β) pairs along the last dim into one pair per chunk."""
    c_len = a3.shape[-1]
    order = range(c_len - 1, -1, -1) if reverse else range(c_len)
    first, *rest = order
    agg_a, agg_b = a3[..., first].clone(), b3[..., first].clone()
    for c in rest:
        agg_a.mul_(b3[..., c]).add_(a3[..., c])
        agg_b.mul_(b3[..., c])
    return agg_a, agg_b


def default_chunk(t_len: int) -> int:
    """sqrt(T) rounded to a power of two (at least 2): balances the three phases."""
    return max(2, 1 << round(math.log2(max(t_len, 1)) / 2))


def scan_chunked(alpha: Tensor, beta: Tensor, reverse: bool, chunk: int | None = None) -> Tensor:
    """Two-level scan: time split into chunks of ``chunk`` steps.

    Phase 1 composes every chunk's pairs (a loop of ``chunk`` steps vectorised
    over rows x chunks); phase 2 scans the chunk aggregates (recursively when
    there are more chunks than ``chunk``) to get each chunk's incoming carry;
    phase 3 re-runs each chunk from its carry. About 3·chunk + T/chunk vector
    steps instead of T.
    """
    t_len = alpha.shape[-1]
    size = max(2, chunk if chunk is not None else default_chunk(t_len))
    if t_len <= size:
        return scan_loop(alpha, beta, reverse)
    lead = alpha.shape[:-1]
    n_chunks = -(-t_len // size)
    padded = n_chunks * size
    if padded != t_len:  # identity pairs (α=0, β=1) at the end change nothing
        a = alpha.new_zeros(*lead, padded)
        b = beta.new_ones(*lead, padded)
        a[..., :t_len] = alpha
        b[..., :t_len] = beta
    else:
        a, b = alpha, beta
    a3, b3 = a.unflatten(-1, (n_chunks, size)), b.unflatten(-1, (n_chunks, size))
    agg_a, agg_b = _aggregate(a3, b3, reverse)
    if n_chunks > size:
        inclusive = scan_chunked(agg_a, agg_b, reverse, size)
    else:
        inclusive = scan_loop(agg_a, agg_b, reverse)
    carry = torch.zeros_like(inclusive)
    if reverse:
        carry[..., :-1] = inclusive[..., 1:]
    else:
        carry[..., 1:] = inclusive[..., :-1]
    scan_loop(a3, b3, reverse, init=carry)
    return a[..., :t_len]


def scan_doubling(alpha: Tensor, beta: Tensor, reverse: bool) -> Tensor:
    """Hillis-Steele log-depth scan: ceil(log2 T) rounds of whole-tensor ops."""
    t_len = alpha.shape[-1]
    a, b = alpha, beta
    d = 1
    while d < t_len:
        if reverse:
            dst, src = slice(0, t_len - d), slice(d, t_len)
        else:
            dst, src = slice(d, t_len), slice(0, t_len - d)
        a[..., dst] += b[..., dst] * a[..., src]  # the product is computed before the write
        if 2 * d < t_len:
            b[..., dst] = b[..., dst] * b[..., src]
        d *= 2
    return a


def combine(earlier: tuple[Tensor, Tensor],
            later: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
    """The associative operator on (α, β) pairs, in scan order."""
    a1, b1 = earlier
    a2, b2 = later
    return a2 + b2 * a1, b1 * b2


def scan_associative(alpha: Tensor, beta: Tensor, reverse: bool,
                     combine_mode: str = "pointwise") -> Tensor:
    """``torch._higher_order_ops.associative_scan`` over (α, β); must run under
    ``torch.compile`` for ``combine_mode="pointwise"`` (CUDA only)."""
    from torch._higher_order_ops.associative_scan import associative_scan

    out_a, _ = associative_scan(combine, (alpha, beta), dim=alpha.dim() - 1,
                                reverse=reverse, combine_mode=combine_mode)
    return out_a
