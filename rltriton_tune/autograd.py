"""Gradients of the estimators: the adjoint recurrence, run through the dispatcher.

Every estimator is ``y[t] = α[t] + β[t]·y[t±1]`` with pointwise α, β built from
its inputs (:mod:`rltriton_tune.fallback.coefficients`) and, for V-trace and
Retrace, a pointwise ``finish`` turning ``y`` into the outputs. Every estimator but
Retrace runs its whole backward pass as one call of its grad algorithm
(:mod:`rltriton_tune.fused_grad`). Retrace (and, for tests, any estimator) takes three
phases, :func:`phased_gradients`; for a loss ``L`` with output gradients ``g_out``:

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
import warnings

import torch
from torch import Tensor

from rltriton_tune import dispatch
from rltriton_tune.algorithms import ADJOINT_SCANS, ALGORITHMS, GRAD_ALGORITHMS
from rltriton_tune.call import Call
from rltriton_tune.fallback.coefficients import build
from rltriton_tune.fallback.compiled import _dynamo_limits
from rltriton_tune.fused_grad import fused_gradients


@functools.cache
def differentiable(algorithm: str) -> tuple[str, ...]:
    """The tensor inputs of ``algorithm`` that get gradients: all but flags and integers."""
    spec = ALGORITHMS[algorithm]
    return tuple(name for name in spec.tensors
                 if name not in spec.flags_inputs and name not in spec.integer)


_grad_enabled = torch.is_grad_enabled


def requires_grad(call: Call) -> bool:
    """Whether autograd must record ``call``: grad mode on and some input requires grad.

    The one check the no-grad hot path pays (about 0.3 us)."""
    if not _grad_enabled():
        return False
    for x in call.tensors.values():
        if x.requires_grad:
            return True
    return False


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
    tensors = {"grads": call.logical(grads).contiguous(),
               "beta": call.logical(beta).contiguous()}
    scan_call = Call(algorithm=algorithm, tensors=tensors, scalars={}, n=call.n, t=call.t,
                     time_major=call.time_major, out_dtype=grads.dtype)
    return call.logical(dispatch.run(scan_call)[0])


def _scan_value(call: Call, outputs: tuple[Tensor, ...]) -> Tensor:
    """The scan result ``y`` (logical ``[N, T]``, compute dtype) from the outputs:
    the output itself, or ``vs - values`` (V-trace), ``q_ret - q_values`` (Retrace)."""
    y = call.logical(outputs[0]).to(call.compute_dtype)
    if len(outputs) == 1:
        return y
    base = "values" if call.algorithm == "vtrace" else "q_values"
    return y - call.logical(call.tensors[base]).to(call.compute_dtype)


class _Phases:
    """The two pointwise phases of a backward pass for one kind of call (algorithm, inputs
    present and needed, scalars, layout): plain functions of tensors, so that they can
    be compiled (:data:`FUSE`) and reused for every call of that kind.

    ``before(fixed, y, g_out, wrt) -> (β, g_y, g_from_finish)``: β for the adjoint scan,
    and the output gradients pulled back through the finisher;
    ``after(fixed, y, g_alpha, g_from_finish, wrt) -> grads``: the builder's pull-back of
    ``(g_α, g_α·y[t±1])`` plus the finisher's part.
    """

    def __init__(self, algorithm: str, scalars: tuple[tuple[str, float], ...],
                 time_major: bool, a: int, starts_at: bool, out_dtype: torch.dtype,
                 needed: tuple[str, ...]) -> None:
        self.algorithm, self.scalars, self.time_major = algorithm, dict(scalars), time_major
        self.a, self.starts_at, self.out_dtype, self.needed = a, starts_at, out_dtype, needed
        self.n_out = len(ALGORITHMS[algorithm].outputs)
        self.reverse = ALGORITHMS[algorithm].direction == "backward"

    def _build(self, fixed: dict[str, Tensor], wrt: tuple[Tensor, ...]):
        tensors = {**fixed, **dict(zip(self.needed, wrt, strict=True))}
        shape = next(iter(tensors.values())).shape
        n, t = (shape[1], shape[0]) if self.time_major else (shape[0], shape[1])
        return build(Call(algorithm=self.algorithm, tensors=tensors, scalars=self.scalars, n=n,
                          t=t, time_major=self.time_major, a=self.a, starts_at=self.starts_at,
                          out_dtype=self.out_dtype))

    def before(self, fixed: dict[str, Tensor], y: Tensor, g_out: list[Tensor],
               wrt: list[Tensor]) -> tuple[Tensor, Tensor, list[Tensor]]:
        if self.n_out == 1:
            return self._build(fixed, tuple(wrt)).beta, g_out[0], []

        def finished(y_in: Tensor, *w: Tensor):
            coeffs = self._build(fixed, w)
            return tuple(coeffs.finish(y_in.clone())), coeffs.beta.detach()

        _, pull_back, beta = torch.func.vjp(finished, y, *wrt, has_aux=True)
        g_y, *from_finish = pull_back(tuple(g_out))
        return beta, g_y, list(from_finish)

    def after(self, fixed: dict[str, Tensor], y: Tensor, g_alpha: Tensor,
              from_finish: list[Tensor], wrt: list[Tensor]) -> list[Tensor]:
        def coefficients(*w: Tensor) -> tuple[Tensor, Tensor]:
            coeffs = self._build(fixed, w)
            return coeffs.alpha, coeffs.beta

        _, pull_back = torch.func.vjp(coefficients, *wrt)
        grads = list(pull_back((g_alpha, g_alpha * _neighbour(y, self.reverse))))
        if from_finish:
            grads = [g + f for g, f in zip(grads, from_finish, strict=True)]
        return grads


#: Whether backward passes run their pointwise phases through torch.compile, so that each
#: is one or two fused kernels instead of dozens of eager ones: "auto" (on CUDA), True
#: (everywhere: tests) or False. A phase that fails to compile runs eagerly from then on.
FUSE: bool | str = "auto"

_failed: set[tuple] = set()


@functools.lru_cache(maxsize=256)
def _phases(kind: tuple) -> _Phases:
    return _Phases(*kind)


@functools.lru_cache(maxsize=256)
def _compiled(kind: tuple, phase: str):
    return torch.compile(getattr(_phases(kind), phase), fullgraph=True)


def _run_phase(kind: tuple, phase: str, device: torch.device, *args):
    fuse = FUSE if FUSE != "auto" else device.type == "cuda"
    if fuse and (kind, phase) not in _failed:
        try:
            # Every kind compiles the same code object: lift dynamo's recompile limit (at
            # the default 8, later kinds would silently run eagerly) and make hitting it an
            # error, caught below.
            with torch._dynamo.config.patch(_dynamo_limits()):
                return _compiled(kind, phase)(*args)
        except Exception as exc:  # a compile failure costs speed, never the gradient
            _failed.add((kind, phase))
            warnings.warn(f"rltriton_tune: the fused {phase} phase of a {kind[0]} backward "
                          f"pass failed to compile ({type(exc).__name__}: {exc}); it runs "
                          "eagerly", RuntimeWarning, stacklevel=2)
    return getattr(_phases(kind), phase)(*args)


def reads_outputs(algorithm: str) -> bool:
    """Whether :func:`gradients` of ``algorithm`` reads its forward outputs: Retrace's
    phases do (its scan value), and a grad algorithm that takes an output as an input
    (V-trace's ``vs``); the others need only the inputs, so their outputs need not be
    kept for the backward pass (where a caller may then edit them in place)."""
    if algorithm not in GRAD_ALGORITHMS:
        return True
    grad_inputs = ALGORITHMS[GRAD_ALGORITHMS[algorithm]].tensors
    return any(name in grad_inputs for name in ALGORITHMS[algorithm].outputs)


def gradients(call: Call, outputs: tuple[Tensor, ...], grad_outputs: tuple[Tensor, ...],
              needed: tuple[str, ...]) -> dict[str, Tensor]:
    """Gradients of ``sum(grad_outputs · outputs)`` with respect to the inputs ``needed``.

    ``outputs`` are the forward results of ``call`` (empty where :func:`reads_outputs` says
    they are not read) and ``grad_outputs`` their gradients, both in the call's layout;
    ``needed`` names floating inputs of ``call`` (a subset of :func:`differentiable`).
    Returns gradients shaped like the call's tensors (the caller casts them to the input's
    dtype). Needs N >= 1 and T >= 1.

    Estimators with a grad algorithm take the fused path (one scan call); Retrace the
    three steps of :func:`phased_gradients`.
    """
    if call.algorithm in GRAD_ALGORITHMS:
        return fused_gradients(call, grad_outputs, needed, outputs)
    return phased_gradients(call, outputs, grad_outputs, needed)


def phased_gradients(call: Call, outputs: tuple[Tensor, ...], grad_outputs: tuple[Tensor, ...],
                     needed: tuple[str, ...]) -> dict[str, Tensor]:
    """:func:`gradients` in three steps, for any estimator: the pointwise phase before the
    adjoint scan, the scan, the pointwise phase after it.

    The pointwise work uses ``torch.func.vjp`` rather than ``torch.autograd.grad``: this
    runs inside a custom operator's implementation, where autograd's dispatch keys are
    excluded.
    """
    cd = call.compute_dtype
    kind = (call.algorithm, tuple(sorted(call.scalars.items())), call.time_major, call.a,
            call.starts_at, call.out_dtype, needed)
    device = call.device
    y = _scan_value(call, outputs)
    fixed = {name: x.detach() for name, x in call.tensors.items() if name not in needed}
    wrt = [call.tensors[name].detach() for name in needed]
    g_out = [call.logical(g).to(cd) for g in grad_outputs]
    beta, g_y, from_finish = _run_phase(kind, "before", device, fixed, y, g_out, wrt)
    g_alpha = adjoint_scan(g_y, beta, call.spec.direction == "backward", call)
    grads = _run_phase(kind, "after", device, fixed, y, g_alpha, from_finish, wrt)
    return dict(zip(needed, grads, strict=True))
