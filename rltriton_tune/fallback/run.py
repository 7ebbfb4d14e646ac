"""Compute a call's outputs with one torch scan mode: build α/β, scan, finish, lay out."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from rltriton_tune.call import Call
from rltriton_tune.fallback import scans
from rltriton_tune.fallback.coefficients import build
from rltriton_tune.fallback.threads import serial_below

#: A generic scan: (α, β, reverse) -> y, owning α and β.
Scan = Callable[[Tensor, Tensor, bool], Tensor]


def _time_contiguous(x: Tensor) -> Tensor:
    """The same logical ``[N, T]`` tensor stored time-major (``[T, N]`` contiguous)."""
    return x.t().contiguous().t()


def _to_caller(y: Tensor, call: Call) -> Tensor:
    """Logical ``[N, T]`` compute-dtype result -> caller's layout and ``out_dtype``."""
    if call.time_major:
        y = y.t()
    return y.to(call.out_dtype).contiguous()


def empty_outputs(call: Call) -> tuple[Tensor, ...]:
    shape = (call.t, call.n) if call.time_major else (call.n, call.t)
    return tuple(torch.empty(shape, dtype=call.out_dtype, device=call.device)
                 for _ in call.spec.outputs)


def compute(call: Call, scan: Scan, time_contiguous: bool = False,
            step_elements: int | None = None, regroups: bool = False) -> tuple[Tensor, ...]:
    """Outputs of ``call`` in its layout and ``out_dtype`` using ``scan``.

    ``time_contiguous`` stores α, β time-major before scanning, so that each
    step of a loop over time reads contiguous memory (worth it for env-major
    inputs with many rows). ``step_elements`` is the size of the scan's
    operations (default: the whole problem): on a CPU, each phase whose
    operations are small runs on one thread (:mod:`rltriton_tune.fallback.threads`).
    ``regroups``: ``scan`` multiplies β's together (chunked, doubling), where an
    infinite β, or a product of large ones that overflows, meets a zero one and gives
    NaN at steps whose step-by-step value is finite or ±inf. On a CPU, where looking
    costs no device synchronisation, outputs holding a NaN are computed again step by
    step (SPEC: NaN and Inf propagate exactly as the recurrence says; a NaN in the data
    gives the same outputs again).
    """
    if call.n == 0 or call.t == 0:
        return empty_outputs(call)
    device = call.device
    if device.type != "cpu" or torch.compiler.is_compiling():
        return _compute(call, scan, time_contiguous)

    def serial_scan(scan: Scan, steps: int) -> Scan:
        def run(alpha: Tensor, beta: Tensor, reverse: bool) -> Tensor:
            with serial_below(device, steps):
                return scan(alpha, beta, reverse)
        return run

    with serial_below(device, call.n * call.t * max(call.a, 1)):
        outputs = _compute(call, serial_scan(
            scan, call.n * call.t if step_elements is None else step_elements), time_contiguous)
        if regroups and any(bool(torch.isnan(y).any()) for y in outputs):
            outputs = _compute(call, serial_scan(scans.scan_loop, call.n), False)
        return outputs


def _compute(call: Call, scan: Scan, time_contiguous: bool) -> tuple[Tensor, ...]:
    coeffs = build(call)
    alpha, beta = coeffs.alpha, coeffs.beta
    if time_contiguous and alpha.stride(0) != 1:
        alpha, beta = _time_contiguous(alpha), _time_contiguous(beta)
    y = scan(alpha, beta, coeffs.reverse)
    return tuple(_to_caller(out, call) for out in coeffs.finish(y))


def loop(call: Call) -> tuple[Tensor, ...]:
    contiguous_steps = call.n >= LOOP_TRANSPOSE_MIN_N and call.t >= LOOP_TRANSPOSE_MIN_T
    return compute(call, scans.scan_loop, time_contiguous=contiguous_steps, step_elements=call.n)


def chunked(call: Call, chunk: int | None = None) -> tuple[Tensor, ...]:
    size = max(2, chunk if chunk is not None else scans.default_chunk(call.t))
    return compute(call, lambda a, b, rev: scans.scan_chunked(a, b, rev, chunk),
                   step_elements=call.n * -(-call.t // size), regroups=True)


def doubling(call: Call) -> tuple[Tensor, ...]:
    return compute(call, scans.scan_doubling, regroups=True)


#: From these sizes the loop first stores env-major α, β time-major: on the 2-core
#: CPU the scan alone at N=4096, T=512 took 16 ms on strided columns and 5 ms on
#: contiguous rows (transposes included); at T=8 the two copies cost more than they save.
LOOP_TRANSPOSE_MIN_N = 1024
LOOP_TRANSPOSE_MIN_T = 64
