"""Fused backward passes: one scan call computes a single-output estimator's gradients.

The estimator's grad algorithm (:data:`rltriton_tune.algorithms.GRAD_ALGORITHMS`) reads
the output gradient and the flags, computes β itself, scans the adjoint and writes the
input gradients; it is dispatched like any call (:func:`rltriton_tune.dispatch.run`), so
on a GPU it is one tuned Triton kernel. Its outputs are named ``grad_<input>``; the
first is always the adjoint ``z`` (the gradient of α). A boundary input whose gradient is
needed (bootstrap values, ``last_value``, seeds) is passed to the grad call, which then
writes that gradient too (``AlgorithmSpec.boundary_grads``). With GAE's ``next_values``
the second output is next_values's gradient, and values's gradient is ``-z``.
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


def _boundary(spec: AlgorithmSpec, needed: tuple[str, ...]) -> str | None:
    """The boundary input among ``needed`` (at most one: they exclude each other)."""
    return next((name for name in spec.boundary_grads if name in needed), None)


def grad_call(call: Call, grad_output: Tensor, needed: tuple[str, ...] = ()) -> Call:
    """The grad algorithm's call for an estimator ``call`` and the gradient of its output
    (caller's layout): the flags and options of ``call``, its scalars, its layout, and the
    boundary input in ``needed`` (for its presence: its gradient is written).

    Its outputs take the call's output dtype when every input in ``needed`` has it (a
    16-bit training step moves 16-bit gradients); otherwise the compute dtype, so that a
    wider input's gradient is not rounded to 16 bits first."""
    spec = ALGORITHMS[GRAD_ALGORITHMS[call.algorithm]]
    boundary = _boundary(spec, needed)
    narrow = all(call.tensors[name].dtype == call.out_dtype for name in needed)
    out_dtype = call.out_dtype if narrow else call.compute_dtype
    tensors = {"grads": grad_output.to(out_dtype).contiguous()}
    tensors.update((name, call.tensors[name]) for name in spec.tensors[1:]
                   if name in call.tensors and (name not in spec.boundary_grads
                                                or name == boundary))
    return Call(algorithm=spec.name, tensors=tensors,
                scalars={name: call.scalars[name] for name in spec.scalars}, n=call.n,
                t=call.t, time_major=call.time_major, starts_at=call.starts_at,
                out_dtype=out_dtype, tensor_scalars=call.tensor_scalars)


def fused_gradients(call: Call, grad_output: Tensor, needed: tuple[str, ...]
                    ) -> dict[str, Tensor]:
    """Gradients of ``sum(grad_output · output)`` of a single-output estimator ``call`` with
    respect to the inputs ``needed``, from one call of its grad algorithm.

    ``grad_output`` is in the call's layout; the gradients are in the call's layout (``[N]``
    for per-env inputs), in the dtype :func:`grad_call` picks.
    """
    scan = grad_call(call, grad_output, needed)
    spec = scan.spec
    outputs = dispatch.run(scan)
    written = dict(zip(_written(spec, call, _boundary(spec, needed)), outputs, strict=True))
    found = {name: written[name] for name in needed if name in written}
    if "values" in needed and "values" not in written:  # GAE with next_values: -z
        z = written["rewards"]
        found["values"] = torch.neg(z) if "rewards" in needed else z.neg_()
    return found
