"""The estimators as PyTorch custom operators (``torch.ops.rltriton_tune.<algorithm>``).

Each estimator is one operator whose schema is generated from its row of
:data:`rltriton_tune.algorithms.ALGORITHMS`: the tensor inputs in canonical order
(``Tensor?`` for optional ones), the scalars as ``float``, then
``bool time_major, bool starts_at``; it returns one tensor or a pair. A second
operator, ``<algorithm>_backward``, computes the input gradients
(:mod:`rltriton_tune.autograd`). A call with a scalar given as a 0-d tensor takes the
twin operators ``<algorithm>_tensor_scalars`` (and its backward), whose scalars are
0-d tensors: converting one to ``float`` while tracing would be a data-dependent read
(a graph break, and on a GPU a sync); the implementation reads a CPU one on the host and
keeps a GPU one on the device, as an eager call does. All have fake-tensor
implementations, and the forwards have their autograd formula registered, so:

- ``torch.compile(fullgraph=True)`` traces a call as one opaque node: dynamo never
  sees the validation, the ``force`` context variable or the dispatcher, which run
  when the compiled graph runs;
- eager calls whose inputs require grad get a ``grad_fn`` (the public functions
  route them here; calls without grad take the direct path and never touch this).

The implementations run the public functions' own validation and dispatch
(``rltriton_tune.estimators._direct``), so results and errors are the same as eager.
Outputs are fresh tensors, never views of inputs.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from rltriton_tune.algorithms import ALGORITHMS, ESTIMATOR_NAMES, AlgorithmSpec
from rltriton_tune.autograd import differentiable, gradients, reads_outputs

NAMESPACE = "rltriton_tune"


def _estimators() -> Any:
    # Imported late: the estimators module imports this one.
    from rltriton_tune import estimators
    return estimators


def _schema_inputs(spec: AlgorithmSpec, scalar_type: str = "float") -> str:
    tensors = [f"Tensor{'?' if name in spec.optional else ''} {name}" for name in spec.tensors]
    scalars = [f"{scalar_type} {name}" for name in spec.scalars]
    return ", ".join([*tensors, *scalars, "bool time_major", "bool starts_at"])


def _split(spec: AlgorithmSpec, args: Sequence[Any]
           ) -> tuple[tuple[Any, ...], tuple[float, ...], bool, bool]:
    """(tensors, scalars, time_major, starts_at) from an operator's positional arguments."""
    k, s = len(spec.tensors), len(spec.scalars)
    return tuple(args[:k]), tuple(args[k:k + s]), bool(args[k + s]), bool(args[k + s + 1])


def _shape_source(spec: AlgorithmSpec, tensors: Sequence[Tensor | None]) -> Tensor:
    """The first required ``[N, T]``-type input: outputs have its shape."""
    for name, x in zip(spec.tensors, tensors, strict=True):
        if (name not in spec.optional and name not in spec.per_env
                and name not in spec.per_action):
            return x  # type: ignore[return-value]
    raise AssertionError(spec.name)


def _output_dtype(spec: AlgorithmSpec, tensors: Sequence[Tensor | None]) -> torch.dtype:
    return tensors[spec.tensors.index(spec.first_float)].dtype  # type: ignore[union-attr]


class _Operators:
    """The forward and backward operators of one estimator."""

    def __init__(self, algorithm: str) -> None:
        spec = ALGORITHMS[algorithm]
        self.spec = spec
        self.algorithm = algorithm
        self.single = len(spec.outputs) == 1
        self.grad_names = differentiable(algorithm)
        self.grad_slots = tuple(spec.tensors.index(name) for name in self.grad_names)
        self.reads_outputs = reads_outputs(algorithm)
        returns = "Tensor" if self.single else "(Tensor, Tensor)"
        # (forward, backward) by the scalars' schema type: Python numbers, 0-d tensors.
        self.ops: dict[str, tuple[Any, Any]] = {}
        for scalar_type, suffix, backward in (("float", "", self._backward),
                                              ("Tensor", "_tensor_scalars",
                                               self._backward_tensor_scalars)):
            inputs = _schema_inputs(spec, scalar_type)
            forward_op = torch.library.custom_op(
                f"{NAMESPACE}::{algorithm}{suffix}", self._forward, mutates_args=(),
                schema=f"({inputs}) -> {returns}")
            forward_op.register_fake(self._forward_fake)
            backward_op = torch.library.custom_op(
                f"{NAMESPACE}::{algorithm}{suffix}_backward", backward, mutates_args=(),
                schema=f"(Tensor[] grad_outputs, Tensor[] outputs, bool[] needed, {inputs}) "
                       "-> Tensor[]")
            backward_op.register_fake(self._backward_fake)
            forward_op.register_autograd(self._autograd_backward,
                                         setup_context=self._setup_context)
            self.ops[scalar_type] = (forward_op, backward_op)
        self.forward, self.backward = self.ops["float"]

    # ----------------------------------------------------------------- forward

    def _forward(self, *args: Any) -> Tensor | tuple[Tensor, ...]:
        tensors, scalars, time_major, starts_at = _split(self.spec, args)
        est = _estimators()
        with torch.no_grad():  # the fallback scans in place: nothing here is recorded
            outputs = est._direct(est._PLANS[self.algorithm], tensors, scalars, time_major,
                                  starts_at)
        return outputs if self.single else tuple(outputs)

    def _forward_fake(self, *args: Any) -> Tensor | tuple[Tensor, ...]:
        tensors, _, _, _ = _split(self.spec, args)
        like = _shape_source(self.spec, tensors)
        # The eager call's device check (``estimators._build``): this implementation also
        # serves the meta device at run time, so a call with one input there would return
        # uninitialised outputs on the others' device.
        plan = _estimators()._PLANS[self.algorithm]
        for name, x in zip(self.spec.tensors, tensors, strict=True):
            if x is not None and x.device != like.device:
                raise ValueError(f"{plan.function}: {name} is on {x.device} but "
                                 f"{plan.source_name} is on {like.device}; all inputs must "
                                 "be on one device")
        dtype = _output_dtype(self.spec, tensors)
        outputs = tuple(like.new_empty(like.shape, dtype=dtype) for _ in self.spec.outputs)
        return outputs[0] if self.single else outputs

    # ----------------------------------------------------------------- autograd

    def _setup_context(self, ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        tensors, scalars, time_major, starts_at = _split(self.spec, inputs)
        outputs = (output,) if self.single else tuple(output)
        present = [i for i, x in enumerate(tensors) if x is not None]
        ctx.present = present
        ctx.n_tensors = len(tensors)
        ctx.rest = (*scalars, time_major, starts_at)
        ctx.backward = self.ops[_scalar_type(scalars)][1]
        # Outputs are kept only where the backward pass reads them: a kept output edited
        # in place (advantages normalised with sub_) makes backward fail.
        kept = outputs if self.reads_outputs else ()
        ctx.save_for_backward(*(tensors[i] for i in present), *kept)

    def _autograd_backward(self, ctx: Any, *grad_outputs: Tensor) -> tuple[Any, ...]:
        saved = ctx.saved_tensors
        k = len(ctx.present)
        tensors: list[Tensor | None] = [None] * ctx.n_tensors
        for i, x in zip(ctx.present, saved[:k], strict=True):
            tensors[i] = x
        outputs = list(saved[k:])
        needs = ctx.needs_input_grad
        needed = [bool(needs[i]) and tensors[i] is not None for i in self.grad_slots]
        result: list[Any] = [None] * len(needs)
        given = [g for g in grad_outputs if g is not None]
        if any(needed) and given:  # every output of an estimator has the same shape
            grads_out = [torch.zeros_like(given[0]) if g is None else g for g in grad_outputs]
            grads = ctx.backward(grads_out, outputs, needed, *tensors, *ctx.rest)
            for slot, wanted, g in zip(self.grad_slots, needed, grads, strict=True):
                if wanted:
                    result[slot] = g
        return tuple(result)

    # ----------------------------------------------------------------- backward op

    def _backward(self, grad_outputs: list[Tensor], outputs: list[Tensor], needed: list[bool],
                  *args: Any) -> list[Tensor]:
        tensors, scalars, time_major, starts_at = _split(self.spec, args)
        est = _estimators()
        plan = est._PLANS[self.algorithm]
        wanted = tuple(name for name, w in zip(self.grad_names, needed, strict=True) if w)
        with torch.no_grad():
            call = est._build(plan, tensors, scalars, time_major, starts_at)
        result: list[Tensor] = []
        if call.n == 0 or call.t == 0:
            computed: dict[str, Tensor] = {}
        else:
            layout = (call.t, call.n) if call.time_major else (call.n, call.t)
            computed = gradients(call, tuple(o.reshape(layout) for o in outputs),
                                 tuple(g.reshape(layout) for g in grad_outputs), wanted)
        # Every gradient is contiguous, as _backward_fake declares: an input may be a
        # transposed view, and time-major gradients can come back transposed; compiled
        # graphs check the real strides against the fake ones.
        for slot, name, w in zip(self.grad_slots, self.grad_names, needed, strict=True):
            raw = tensors[slot]
            if not w or raw is None:
                result.append(grad_outputs[0].new_empty(0))  # as _backward_fake's
            elif name in computed:
                result.append(computed[name].reshape(raw.shape).to(raw.dtype).contiguous())
            else:
                result.append(raw.new_zeros(raw.shape))
        return result

    def _backward_tensor_scalars(self, grad_outputs: list[Tensor], outputs: list[Tensor],
                                 needed: list[bool], *args: Any) -> list[Tensor]:
        """The backward pass of a call whose scalars are 0-d tensors: they are read with
        ``float()`` (a device sync for a GPU tensor), as the gradient kernels take
        numbers."""
        tensors, scalars, time_major, starts_at = _split(self.spec, args)
        return self._backward(grad_outputs, outputs, needed, *tensors,
                              *(float(x) for x in scalars), time_major, starts_at)

    def _backward_fake(self, grad_outputs: list[Tensor], outputs: list[Tensor],
                       needed: list[bool], *args: Any) -> list[Tensor]:
        tensors, _, _, _ = _split(self.spec, args)
        result = []
        for slot, w in zip(self.grad_slots, needed, strict=True):
            raw = tensors[slot]
            if not w or raw is None:
                result.append(grad_outputs[0].new_empty(0))
            else:
                result.append(raw.new_empty(raw.shape))  # contiguous, as _backward's
        return result


#: The operators of each estimator, registered at import.
OPERATORS: dict[str, _Operators] = {name: _Operators(name) for name in ESTIMATOR_NAMES}


def _scalar_type(scalars: Sequence[Any]) -> str:
    """The schema type of a call's scalars: ``"Tensor"`` when any is a tensor (the twin
    operators), ``"float"`` otherwise."""
    return "Tensor" if any(isinstance(x, Tensor) for x in scalars) else "float"


#: The largest int a float holds: an int is compared with it, not converted and caught,
#: since torch.compile cannot trace the OverflowError of a conversion.
_LARGEST_INT = int(sys.float_info.max)


def as_float(name: str, value: Any, function: str = "") -> float:
    """``float(value)`` of a real number; one beyond a float's range (an int, a Fraction)
    is a ValueError naming the argument (after ``function: `` where given), not Python's
    bare OverflowError."""
    too_large = f"{function}: {name} is too large for a float" if function \
        else f"{name} is too large for a float"
    if isinstance(value, int) and not -_LARGEST_INT <= value <= _LARGEST_INT:
        raise ValueError(too_large)
    try:
        return float(value)
    except OverflowError:
        raise ValueError(too_large) from None


def type_name(value: Any) -> str:
    """The name of ``value``'s type for an error message, with its module where it is
    not a builtin (numpy's bool is named "bool" too)."""
    kind = type(value)
    return kind.__qualname__ if kind.__module__ == "builtins" else \
        f"{kind.__module__}.{kind.__qualname__}"


def _as_float(function: str, name: str, value: Any) -> Any:
    """Scalars enter the ``float`` schema as ``float``: numbers are converted, anything
    else is passed on for the validator to reject with its own message."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return as_float(name, value, function)
    return value  # the validator names a bool or another type


def _as_tensor(function: str, name: str, value: Any) -> Any:
    """Scalars enter the ``Tensor`` schema as 0-d tensors: a number becomes a float64
    CPU tensor (exact, read on the host), a tensor passes as it is."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return torch.tensor(as_float(name, value, function), dtype=torch.float64)
    return value


def estimate(algorithm: str, tensors: Sequence[Tensor | None], scalars: Sequence[Any],
             time_major: bool, starts_at: bool = False) -> Tensor | tuple[Tensor, ...]:
    """Run ``algorithm`` through its custom operator (autograd and torch.compile path):
    the ``float`` one, or its twin taking 0-d tensors when any scalar is a tensor."""
    scalar_type = _scalar_type(scalars)
    forward, _ = OPERATORS[algorithm].ops[scalar_type]
    convert = _as_tensor if scalar_type == "Tensor" else _as_float
    function = f"compute_{algorithm}"
    converted = [convert(function, name, value)
                 for name, value in zip(ALGORITHMS[algorithm].scalars, scalars, strict=True)]
    return forward(*tensors, *converted, time_major, starts_at)
