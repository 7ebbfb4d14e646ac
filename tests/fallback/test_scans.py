"""The generic scans against an obvious float64 loop, in both directions."""

from __future__ import annotations

import pytest
import torch

from rltriton_tune.fallback import scans


def naive(alpha: torch.Tensor, beta: torch.Tensor, reverse: bool) -> torch.Tensor:
    a, b = alpha.double(), beta.double()
    y = torch.empty_like(a)
    carry = torch.zeros(a.shape[:-1], dtype=torch.float64)
    steps = range(a.shape[-1] - 1, -1, -1) if reverse else range(a.shape[-1])
    for t in steps:
        carry = a[..., t] + b[..., t] * carry
        y[..., t] = carry
    return y


SCANS = {
    "loop": scans.scan_loop,
    "chunked": scans.scan_chunked,
    "chunked2": lambda a, b, r: scans.scan_chunked(a, b, r, 2),
    "chunked3": lambda a, b, r: scans.scan_chunked(a, b, r, 3),
    "chunked16": lambda a, b, r: scans.scan_chunked(a, b, r, 16),
    "doubling": scans.scan_doubling,
}
T_LENGTHS = [1, 2, 3, 7, 16, 17, 64, 131]


@pytest.mark.parametrize("name", sorted(SCANS))
@pytest.mark.parametrize("reverse", [True, False])
@pytest.mark.parametrize("t_len", T_LENGTHS)
def test_scan_matches_naive(name, reverse, t_len):
    gen = torch.Generator().manual_seed(t_len)
    alpha = torch.randn(3, t_len, generator=gen, dtype=torch.float64)
    beta = torch.rand(3, t_len, generator=gen, dtype=torch.float64) * 1.2
    beta[:, ::5] = 0.0  # episode boundaries
    want = naive(alpha, beta, reverse)
    got = SCANS[name](alpha.clone(), beta.clone(), reverse)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("reverse", [True, False])
@pytest.mark.parametrize("t_len", [1, 2, 5, 17])
def test_associative_scan_combine_order(reverse, t_len):
    """The combine operator and its order, checked with the eager generic mode (CPU)."""
    gen = torch.Generator().manual_seed(t_len)
    alpha = torch.randn(2, t_len, generator=gen, dtype=torch.float64)
    beta = torch.rand(2, t_len, generator=gen, dtype=torch.float64) * 1.5
    got = scans.scan_associative(alpha, beta, reverse, combine_mode="generic")
    torch.testing.assert_close(got, naive(alpha, beta, reverse))


@pytest.mark.parametrize("name", ["loop", "chunked3", "doubling"])
def test_scan_on_time_major_views(name):
    """Scans work on transposed (time-contiguous) views, the layout time-major calls use."""
    gen = torch.Generator().manual_seed(1)
    alpha = torch.randn(29, 4, generator=gen, dtype=torch.float64).t()
    beta = torch.rand(29, 4, generator=gen, dtype=torch.float64).t()
    want = naive(alpha, beta, True)
    torch.testing.assert_close(SCANS[name](alpha.clone(), beta.clone(), True), want)


@pytest.mark.parametrize("name", ["loop", "chunked3", "doubling"])
def test_nan_stays_in_its_row(name):
    alpha = torch.ones(3, 23, dtype=torch.float64)
    beta = torch.full((3, 23), 0.5, dtype=torch.float64)
    alpha[1, 11] = float("nan")
    beta[2, 7] = float("inf")
    got = SCANS[name](alpha.clone(), beta.clone(), True)
    want = naive(alpha, beta, True)
    torch.testing.assert_close(got, want, equal_nan=True)
    assert torch.isfinite(got[0]).all()
    assert torch.isnan(got[1, :12]).all() and torch.isfinite(got[1, 12:]).all()


def test_chunked_recursion_over_many_chunks():
    """More chunks than the chunk size: the carry scan itself is chunked."""
    gen = torch.Generator().manual_seed(2)
    alpha = torch.randn(2, 1000, generator=gen, dtype=torch.float64)
    beta = torch.rand(2, 1000, generator=gen, dtype=torch.float64)
    for reverse in (True, False):
        got = scans.scan_chunked(alpha.clone(), beta.clone(), reverse, 4)
        torch.testing.assert_close(got, naive(alpha, beta, reverse))


@pytest.mark.parametrize("t_len, chunk", [(1, 2), (3, 2), (100, 8), (1023, 32), (10**6, 1024)])
def test_default_chunk_is_power_of_two_near_sqrt(t_len, chunk):
    assert scans.default_chunk(t_len) == chunk
