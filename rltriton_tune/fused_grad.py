"""Fused backward passes: one scan call computes an estimator's gradients.

The estimator's grad algorithm (:data:`rltriton_tune.algorithms.GRAD_ALGORITHMS`) reads
the output gradients, the flags and what else its formulas need, computes β itself,
scans the adjoint and writes the input gradients; it is dispatched like any call
(:func:`rltriton_tune.dispatch.run`), so on a GPU it is one tuned Triton kernel. Its
outputs are named ``grad_<input>``. A boundary input whose gradient is needed (bootstrap
values, ``last_value``, seeds) is passed to the grad call, which then writes that gradient
too (``AlgorithmSpec.boundary_grads``); V-trace's reads its boundary input's data and
always writes its gradient. With GAE's ``next_values`` the second output is next_values's
gradient; the gradients a kernel does not write are negatives of others
(``AlgorithmSpec.negated_grads``: GAE's values, then, is ``-z``; V-trace's
``log_pi_behavior`` gets minus log_pi_target's).
"""

from __future__ import annotations

import torch
from torch import Tensor

from rltriton_tune import dispatch
from rltriton_tune.algorithms import ALGORITHMS, GRAD_ALGORITHMS, AlgorithmSpec
from rltriton_tune.call import Call


def _written(spec: AlgorithmSpec, call: Call, boundary: str | None) -> tuple[str, ...]:
    """The inputs whose gradients the grad call writes, in its output order."""
    names = [name.removeprefix("grad_") for name in spec.outputs]
    if spec.name == "gae_grad" and "next_values" in call.tensors:
        names[1] = "next_values"
    return (*names, boundary) if boundary is not None else tuple(names)


def _boundary(spec: AlgorithmSpec, call: Call, needed: tuple[str, ...]) -> str | None:
    """The boundary input the grad call gets (at most one: they exclude each other): the
    one in ``needed``, or the call's own where the grad algorithm reads it."""
    among = call.tensors if spec.reads_boundary else needed
    return next((name for name in spec.boundary_grads if name in among), None)


def grad_call(call: Call, grad_output: Tensor, needed: tuple[str, ...] = (),
              saved: dict[str, Tensor] | None = None) -> Call:
    """The grad algorithm's call for an estimator ``call`` and the gradient of its first
    output (caller's layout): the flags and options of ``call``, its scalars, its layout,
    the boundary input (see :func:`_boundary`), and ``saved``: what else the grad
    algorithm reads by name (V-trace's ``grad_advantages`` and forward output ``vs``).

    Its outputs take the call's output dtype when every input in ``needed`` has it (a
    16-bit training step moves 16-bit gradients); otherwise the compute dtype, so that a
    wider input's gradient is not rounded to 16 bits first."""
    spec = ALGORITHMS[GRAD_ALGORITHMS[call.algorithm]]
    boundary = _boundary(spec, call, needed)
    narrow = all(call.tensors[name].dtype == call.out_dtype for name in needed)
    out_dtype = call.out_dtype if narrow else call.compute_dtype
    tensors = {"grads": grad_output.to(out_dtype).contiguous()}
    for name, x in (saved or {}).items():
        tensors[name] = x.to(out_dtype).contiguous()
    tensors.update((name, call.tensors[name]) for name in spec.tensors[1:]
                   if name in call.tensors and (name not in spec.boundary_grads
                                                or name == boundary))
    return Call(algorithm=spec.name, tensors=tensors,
                scalars={name: call.scalars[name] for name in spec.scalars}, n=call.n,
                t=call.t, time_major=call.time_major, starts_at=call.starts_at,
                out_dtype=out_dtype, tensor_scalars=call.tensor_scalars)


def fused_gradients(call: Call, grad_outputs: tuple[Tensor, ...], needed: tuple[str, ...],
                    outputs: tuple[Tensor, ...]) -> dict[str, Tensor]:
    """Gradients of ``sum(grad_outputs · outputs)`` of an estimator ``call`` with respect to
    the inputs ``needed``, from one call of its grad algorithm.

    ``grad_outputs`` and ``outputs`` (the forward results, read by V-trace's) are in the
    call's layout; the gradients are in the call's layout (``[N]`` for per-env inputs), in
    the dtype :func:`grad_call` picks.
    """
    spec = ALGORITHMS[GRAD_ALGORITHMS[call.algorithm]]
    # What else the grad algorithm reads by name: the gradients of the other outputs
    # (``grad_<output>``) and forward outputs (V-trace's ``vs``).
    outputs_of = call.spec.outputs
    saved = {f"grad_{name}": g
             for name, g in zip(outputs_of[1:], grad_outputs[1:], strict=True)
             if f"grad_{name}" in spec.tensors}
    if outputs:  # empty where the grad algorithm reads none (autograd.reads_outputs)
        saved.update((name, x) for name, x in zip(outputs_of, outputs, strict=True)
                     if name in spec.tensors)
    scan = grad_call(call, grad_outputs[0], needed, saved)
    results = dispatch.run(scan)
    written = dict(zip(_written(spec, call, _boundary(spec, call, needed)), results,
                       strict=True))
    found = {name: written[name] for name in needed if name in written}
    for name, source in spec.negated_grads:
        if name in needed and name not in written:
            grad = written[source]
            found[name] = torch.neg(grad) if source in needed else grad.neg_()
    return found
