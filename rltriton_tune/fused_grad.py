"""Fused backward passes: one scan call computes a single-output estimator's gradients.

The estimator's grad algorithm (:data:`rltriton_tune.algorithms.GRAD_ALGORITHMS`) reads
the output gradient and the flags, computes β itself, scans the adjoint and writes the
``[N, T]`` input gradients; it is dispatched like any call (:func:`rltriton_tune.dispatch.run`),
so on a GPU it is one tuned Triton kernel. Its outputs are named ``grad_<input>``; the
first is always the adjoint ``z`` (the gradient of α). The gradients of the boundary
inputs (bootstrap values, ``last_value``, ``next_values``, seeds) are pointwise in ``z``
and the flags, computed here in torch:

============================  ======================================================
``gae``                       ``next_values``: γ(1-term)·z; ``bootstrap_values``:
                              γ(1-term)·z where nv = b (t = T-1 or truncated);
                              ``last_value``: γ(1-term[T-1])·z[T-1]
``lambda_returns``            ``bootstrap_values``: γ·trunc·z, plus
``discounted_returns``        β[T-1]·z[T-1] at T-1 (the folded G[T] = b[T-1])
``eligibility_traces``        ``seed_values``: β[0]·z[0] = γλ·z[0]
``episodic_prefix_sum``       ``seed_values``: β[0]·z[0] (1, or 1-done[0] with starts_at)
============================  ======================================================
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from rltriton_tune import dispatch
from rltriton_tune.algorithms import ALGORITHMS, GRAD_ALGORITHMS
from rltriton_tune.call import Call
from rltriton_tune.fallback.coefficients import Inputs
from rltriton_tune.fallback.threads import serial_below


def grad_call(call: Call, grad_output: Tensor, needed: tuple[str, ...] = ()) -> Call:
    """The grad algorithm's call for an estimator ``call`` and the gradient of its output
    (caller's layout): the flags and options of ``call``, its scalars, its layout.

    Its outputs take the call's output dtype when every input in ``needed`` has it and
    the grad algorithm writes all of their gradients itself (a 16-bit training step moves
    16-bit gradients); otherwise the compute dtype, so that a wider input's gradient and
    the boundary gradients, computed from ``z``, are not rounded to 16 bits first."""
    spec = ALGORITHMS[GRAD_ALGORITHMS[call.algorithm]]
    written = {name.removeprefix("grad_") for name in spec.outputs}
    narrow = all(name in written and call.tensors[name].dtype == call.out_dtype
                 for name in needed)
    out_dtype = call.out_dtype if narrow else call.compute_dtype
    tensors = {"grads": grad_output.to(out_dtype).contiguous()}
    tensors.update((name, call.tensors[name]) for name in spec.tensors[1:]
                   if name in call.tensors)
    return Call(algorithm=spec.name, tensors=tensors,
                scalars={name: call.scalars[name] for name in spec.scalars}, n=call.n,
                t=call.t, time_major=call.time_major, starts_at=call.starts_at,
                out_dtype=out_dtype, tensor_scalars=call.tensor_scalars)


class _Boundary(Inputs):
    """A call's inputs (logical ``[N, T]`` views, flags as 0/1) and the adjoint ``z`` of
    its grad call, both in the compute dtype."""

    def __init__(self, call: Call, z: Tensor) -> None:
        super().__init__(call)
        self.z = call.logical(z).to(self.cd)

    def done(self, step: int) -> Tensor:
        """``[N]``: whether step ``step`` ends an episode (terminated or truncated)."""
        term, trunc = self.flag("terminateds", step), self.flag("truncateds", step)
        return term if trunc is None else torch.maximum(term, trunc)

    def gamma(self) -> float:
        return self.call.scalars["gamma"]  # type: ignore[return-value]

    def set(self, name: str) -> Tensor | None:
        """``[N, T]`` bool: where flag ``name`` is true (non-zero, NaN included; SPEC);
        fresh, None if absent (as :meth:`flag`)."""
        x = self.raw(name)
        return None if x is None else x != 0

    def where(self, mask: Tensor) -> Tensor:
        """γ·z where ``mask``, else 0: fresh, in two whole-tensor passes (these gradients
        are whole-tensor torch work after the fused scan, so passes are what they cost)."""
        return torch.where(mask, self.z, 0.0).mul_(self.gamma())


def _gae(b: _Boundary, needed: tuple[str, ...]) -> dict[str, Tensor]:
    # nv[t] = next_values[t] everywhere, else b[t] at cut steps (t = T-1 or truncated),
    # with gradient γ(1-term[t])·z[t]. The three inputs exclude each other.
    if "last_value" in needed:
        last = (1 - b.flag("terminateds", -1)).mul_(b.z[:, -1]).mul_(b.gamma())
        return {"last_value": last}
    if "next_values" not in needed and "bootstrap_values" not in needed:
        return {}
    kept = b.raw("terminateds") == 0  # not terminated (NaN counts as terminated)
    if "next_values" in needed:
        return {"next_values": b.call.logical(b.where(kept))}
    cut = b.set("truncateds")
    if cut is None:
        cut = torch.zeros_like(kept)
    cut[:, -1] = True
    return {"bootstrap_values": b.call.logical(b.where(kept.logical_and_(cut)))}


def _returns(decay: Callable[[_Boundary], float]):
    """Gradient of a returns estimator's ``bootstrap_values``: γ·trunc[t]·z[t], plus
    β[T-1]·z[T-1] = decay·(1-done[T-1])·z[T-1] at T-1."""

    def boundary(b: _Boundary, needed: tuple[str, ...]) -> dict[str, Tensor]:
        if "bootstrap_values" not in needed:
            return {}
        trunc = b.set("truncateds")
        grad = torch.zeros_like(b.z) if trunc is None else b.where(trunc)
        last = (1 - b.done(-1)).mul_(b.z[:, -1]).mul_(decay(b))
        grad[:, -1] += last
        return {"bootstrap_values": b.call.logical(grad)}

    return boundary


def _seeded(first_beta: Callable[[_Boundary], Tensor | float]):
    """Gradient of a forward estimator's ``seed_values``: β[0]·z[0]."""

    def boundary(b: _Boundary, needed: tuple[str, ...]) -> dict[str, Tensor]:
        if "seed_values" not in needed:
            return {}
        return {"seed_values": b.z[:, 0] * first_beta(b)}

    return boundary


def _prefix_first_beta(b: _Boundary) -> Tensor | float:
    return 1 - b.flag("dones", 0) if b.call.starts_at else 1.0


_BOUNDARY: dict[str, Callable[[_Boundary, tuple[str, ...]], dict[str, Tensor]]] = {
    "gae": _gae,
    "lambda_returns": _returns(lambda b: b.gamma() * b.call.scalars["lambda_"]),
    "discounted_returns": _returns(lambda b: b.gamma()),
    "eligibility_traces": _seeded(lambda b: b.gamma() * b.call.scalars["lambda_"]),
    "episodic_prefix_sum": _seeded(_prefix_first_beta),
}


def fused_gradients(call: Call, grad_output: Tensor, needed: tuple[str, ...]
                    ) -> dict[str, Tensor]:
    """Gradients of ``sum(grad_output · output)`` of a single-output estimator ``call`` with
    respect to the inputs ``needed``, from one call of its grad algorithm.

    ``grad_output`` is in the call's layout; the gradients are in the call's layout (``[N]``
    for per-env inputs), in the dtype :func:`grad_call` picks for the ``[N, T]`` inputs the
    grad algorithm writes and in the compute dtype for the boundary inputs.
    """
    scan = grad_call(call, grad_output, needed)
    outputs = dispatch.run(scan)
    written = {name.removeprefix("grad_"): out
               for name, out in zip(scan.spec.outputs, outputs, strict=True)}
    found = {name: written[name] for name in needed if name in written}
    rest = tuple(name for name in needed if name not in written)
    if rest:
        # A few whole-tensor operations: on a CPU, one thread unless they are large, like
        # the torch implementations (rltriton_tune.fallback.threads).
        with serial_below(call.device, call.n * call.t):
            found.update(_BOUNDARY[call.algorithm](_Boundary(call, outputs[0]), rest))
    return found
