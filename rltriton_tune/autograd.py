"""Gradients of the estimators: the adjoint recurrence, run through the dispatcher.

Every estimator is ``y[t] = α[t] + β[t]·y[t±1]`` with pointwise α, β built from
its inputs (:mod:`rltriton_tune.fallback.coefficients`) and, for V-trace and
Retrace, a pointwise ``finish`` turning ``y`` into the outputs. For a loss ``L``
with output gradients ``g_out``:

1. ``g_y``: the output gradients pulled back through ``finish`` (autograd through
   the torch finisher; the identity for the single-output estimators);
2. ``g_α``: the adjoint recurrence, the same linear scan run the other way with β
   read one step over (``adjoint_scan_forward`` / ``adjoint_scan_backward`` in
   :data:`rltriton_tune.algorithms.ALGORITHMS`), dispatched like any estimator
   call, so on a GPU it runs fused in the tuned Triton kernel for its own key;
3. ``g_β[t] = g_α[t]·y[t±1]`` (the neighbour the carry came from, 0 at the edge);
4. the input gradients: autograd through the torch coefficient builder, which is
   recomputed from the inputs (pointwise), with ``(g_α, g_β)`` as its output
   gradients, plus what ``finish`` contributed in step 1.

Only floating data inputs get gradients (:func:`differentiable`); flags and
integer actions get none. ``min(clip, ratio)`` has the subgradient of
``torch.clamp_max`` (1 where ``ratio <= clip``).
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from rltriton_tune import dispatch
from rltriton_tune.algorithms import ADJOINT_SCANS, ALGORITHMS
from rltriton_tune.call import Call
from rltriton_tune.fallback.coefficients import build


@functools.cache
def differentiable(algorithm: str) -> tuple[str, ...]:
    """The tensor inputs of ``algorithm`` that get gradients: all but flags and integers."""
    spec = ALGORITHMS[algorithm]
    return tuple(name for name in spec.tensors
                 if name not in spec.flags_inputs and name not in spec.integer)


def requires_grad(call: Call) -> bool:
    """Whether autograd must record ``call``: grad mode on and some input requires grad.

    The one check the no-grad hot path pays (about 0.3 us)."""
    if not torch.is_grad_enabled():
        return False
    for x in call.tensors.values():
        if x.requires_grad:
            return True
    return False


def _logical(x: Tensor, call: Call) -> Tensor:
    """A caller-layout ``[N, T]`` / ``[T, N]`` tensor as logical ``[N, T]`` (a view)."""
    return x.t() if call.time_major else x


def _neighbour(y: Tensor, reverse: bool) -> Tensor:
    """``y[t+1]`` (reverse) or ``y[t-1]`` along the last dim, 0 at the edge (fresh)."""
    out = torch.zeros_like(y)
    if reverse:
        out[:, :-1] = y[:, 1:]
    else:
        out[:, 1:] = y[:, :-1]
    return out


def adjoint_scan(grads: Tensor, beta: Tensor, reverse: bool, call: Call) -> Tensor:
    """``z`` of the adjoint recurrence of a scan with direction ``reverse`` and decay ``beta``.

    ``grads`` and ``beta`` are logical ``[N, T]`` in the compute dtype; the scan runs in
    the layout of ``call`` (time-major calls scan ``[T, N]`` storage) through
    :func:`rltriton_tune.dispatch.run`, keyed as its own problem.
    """
    algorithm = ADJOINT_SCANS["backward" if reverse else "forward"]
    tensors = {"grads": _logical(grads, call).contiguous(),
               "beta": _logical(beta, call).contiguous()}
    scan_call = Call(algorithm=algorithm, tensors=tensors, scalars={}, n=call.n, t=call.t,
                     time_major=call.time_major, out_dtype=grads.dtype)
    return _logical(dispatch.run(scan_call)[0], call)


def _scan_value(call: Call, outputs: tuple[Tensor, ...]) -> Tensor:
    """The scan result ``y`` (logical ``[N, T]``, compute dtype) from the outputs:
    the output itself, or ``vs - values`` (V-trace), ``q_ret - q_values`` (Retrace)."""
    y = _logical(outputs[0], call).to(call.compute_dtype)
    if len(outputs) == 1:
        return y
    base = "values" if call.algorithm == "vtrace" else "q_values"
    return y - _logical(call.tensors[base], call).to(call.compute_dtype)


def gradients(call: Call, outputs: tuple[Tensor, ...], grad_outputs: tuple[Tensor, ...],
              needed: tuple[str, ...]) -> dict[str, Tensor]:
    """Gradients of ``sum(grad_outputs · outputs)`` with respect to the inputs ``needed``.

    ``outputs`` are the forward results of ``call`` and ``grad_outputs`` their gradients,
    both in the call's layout; ``needed`` names floating inputs of ``call`` (a subset of
    :func:`differentiable`). Returns gradients shaped like the call's tensors, in the
    input's dtype. Needs N >= 1 and T >= 1.
    """
    cd = call.compute_dtype
    y = _scan_value(call, outputs)
    n_out = len(outputs)
    fixed = {name: x.detach() for name, x in call.tensors.items() if name not in needed}

    def pointwise(y_in: Tensor, *wrt: Tensor) -> tuple[Tensor, ...]:
        """(α, β, outputs from the scan value ``y_in``): the builder and the finisher."""
        leaf_call = Call(algorithm=call.algorithm, tensors={**fixed, **dict(zip(needed, wrt, strict=True))},
                         scalars=call.scalars, n=call.n, t=call.t, time_major=call.time_major,
                         a=call.a, starts_at=call.starts_at, out_dtype=call.out_dtype)
        coeffs = build(leaf_call)
        finished = coeffs.finish(y_in.clone()) if n_out > 1 else ()
        return coeffs.alpha, coeffs.beta, *finished

    # torch.func rather than torch.autograd.grad: this runs inside a custom operator's
    # implementation, where the autograd dispatch keys are excluded.
    primals = (y, *(call.tensors[name].detach() for name in needed))
    (alpha, beta, *finished), pull_back = torch.func.vjp(pointwise, *primals)
    reverse = call.spec.direction == "backward"
    zeros_ab = (torch.zeros_like(alpha), torch.zeros_like(beta))
    g_out = [_logical(g, call).to(cd) for g in grad_outputs]
    if n_out == 1:
        g_y, from_finish = g_out[0], None
    else:
        g_y, *from_finish = pull_back((*zeros_ab, *g_out))
    g_alpha = adjoint_scan(g_y, beta, reverse, call)
    g_beta = g_alpha * _neighbour(y, reverse)
    _, *totals = pull_back((g_alpha, g_beta, *(torch.zeros_like(f) for f in finished)))
    if from_finish is not None:
        totals = [a + b for a, b in zip(totals, from_finish, strict=True)]
    return dict(zip(needed, totals, strict=True))
