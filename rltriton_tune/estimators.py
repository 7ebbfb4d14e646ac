"""The seven public estimators: validation, normalisation, hand-off to dispatch.

Each public function only gathers its arguments in the canonical order of
:data:`rltriton_tune.algorithms.ALGORITHMS` and calls one shared validator,
driven by that table, which builds a :class:`~rltriton_tune.call.Call` and hands
it to :func:`rltriton_tune.dispatch.run`. Validation is cheap and never
synchronises the device (the one data-dependent check, Retrace's action range,
runs on CPU tensors only), so calls can be captured in CUDA graphs.
"""

from __future__ import annotations

import inspect
import math
import numbers
import sys
from collections.abc import Callable
from typing import Any

import torch

from rltriton_tune import dispatch, fallback, hot_path, ops
from rltriton_tune.algorithms import (
    ADJOINT_SCANS,
    ALGORITHMS,
    GRAD_ALGORITHMS,
    STARTS_AT,
    AlgorithmSpec,
)
from rltriton_tune.autograd import requires_grad as _requires_grad
from rltriton_tune.call import Call
from rltriton_tune.hot_path import HotPath

Tensor = torch.Tensor

_is_compiling = torch.compiler.is_compiling
#: Dtypes of floating inputs on every device (float64 is taken on a CPU too).
FLOAT_DTYPES = frozenset({torch.float32, torch.float16, torch.bfloat16})
_INTEGERS = frozenset({torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64})
#: Unsigned integers wider than a byte: integer tensors for SPEC.md, but the kernels and
#: many torch operations take none, so such flags and actions are converted on the way in.
_WIDE_UNSIGNED = frozenset({torch.uint16, torch.uint32, torch.uint64})
#: Dtypes of flag inputs (terminateds, truncateds): any non-zero value is set.
FLAG_DTYPES = FLOAT_DTYPES | _INTEGERS | {torch.bool}
_BOUNDARIES = {"ends_at": False, "starts_at": True}

# Kinds of tensor argument, which decide the shape and dtype rules.
_STEP, _FLAG, _INT, _PER_ENV, _PER_ACTION = range(5)
# Shape rules: the reference's [*B, T] shape, one value per environment [*B], or
# [*B, T, A]; and the dtypes each kind takes without further checks (float64 and the
# errors are decided by _check_dtype).
_SAME_SHAPE, _ENV_SHAPE, _ACTION_SHAPE = range(3)
_SHAPE_RULES = {_STEP: _SAME_SHAPE, _FLAG: _SAME_SHAPE, _INT: _SAME_SHAPE,
                _PER_ENV: _ENV_SHAPE, _PER_ACTION: _ACTION_SHAPE}
_ACCEPTED = {_STEP: FLOAT_DTYPES, _FLAG: FLAG_DTYPES, _INT: _INTEGERS, _PER_ENV: FLOAT_DTYPES,
             _PER_ACTION: FLOAT_DTYPES}
_STRIDED = torch.strided
_HOT_RULES = {_SAME_SHAPE: hot_path.SAME, _ENV_SHAPE: hot_path.ENV, _ACTION_SHAPE: hot_path.ACTION}


class _Plan:
    """Everything the validator needs about one algorithm, precomputed as tuples."""

    __slots__ = ("algorithm", "function", "spec", "names", "kinds", "optional", "scalars",
                 "shape_source", "source_name", "first_float", "single", "last_value_rule",
                 "entries", "hot")

    def __init__(self, spec: AlgorithmSpec, function: str) -> None:
        self.algorithm = spec.name
        self.function = function
        self.spec = spec
        self.names = spec.tensors
        self.kinds = tuple(self._kind(spec, name) for name in spec.tensors)
        self.optional = frozenset(spec.optional)
        self.scalars = spec.scalars
        # The first required [N, T] input: its shape and device are the reference.
        self.shape_source = next(
            i for i, (name, kind) in enumerate(zip(self.names, self.kinds, strict=True))
            if kind in (_STEP, _FLAG, _INT) and name not in self.optional
        )
        self.source_name = self.names[self.shape_source]
        self.first_float = spec.tensors.index(spec.first_float)
        self.single = len(spec.outputs) == 1
        # (last_value, bootstrap_values, truncateds, next_values) positions, for the
        # "not both" rules of GAE and V-trace.
        self.last_value_rule = (
            tuple(spec.tensors.index(name)
                  for name in ("last_value", "bootstrap_values", "truncateds", "next_values"))
            if "last_value" in spec.tensors else None
        )
        # Per tensor argument, in canonical order: (name, shape rule, dtypes accepted
        # without a further look, kind, optional), so that the validator's loop branches
        # once per rule instead of once per kind.
        self.entries = tuple(
            (name, _SHAPE_RULES[kind], _ACCEPTED[kind], kind, name in self.optional)
            for name, kind in zip(self.names, self.kinds, strict=True)
        )
        # The usual call's generated fast path (same checks; anything else comes here).
        self.hot = HotPath(
            self.algorithm,
            tuple((name, _HOT_RULES[rule], accepted, optional)
                  for name, rule, accepted, _, optional in self.entries),
            self.scalars, self.shape_source, self.first_float, self.single,
            lambda values: _check_exclusive(self, values) if self.last_value_rule else None,
            actions=self.names.index("actions") if "actions" in spec.integer else None
        ).function()

    @staticmethod
    def _kind(spec: AlgorithmSpec, name: str) -> int:
        if name in spec.per_env:
            return _PER_ENV
        if name in spec.per_action:
            return _PER_ACTION
        if name in spec.integer:
            return _INT
        if name in spec.flags_inputs:
            return _FLAG
        return _STEP


def _shape(x: Tensor) -> tuple[int, ...]:
    return tuple(x.shape)


def dtype_problem(name: str, x: Tensor, flag: bool = False) -> str | None:
    """Why a floating (``flag``: flag) input's dtype is refused, or None where it is
    taken: float32/float16/bfloat16 (flags: integers and bool too) anywhere, float64 on
    CPU only. Shared with ``rltriton_tune.torchrl``, whose errors name its own arguments."""
    if x.dtype in (FLAG_DTYPES if flag else FLOAT_DTYPES) or (flag and x.dtype in _WIDE_UNSIGNED):
        return None
    what = "a float, bool or integer flag tensor" if flag else "float32, float16 or bfloat16"
    if x.dtype is torch.float64:
        if x.device.type == "cpu":
            return None
        return f"{name} has dtype {x.dtype}; expected {what} (float64 is supported on CPU only)"
    return f"{name} has dtype {x.dtype}; expected {what} (or float64 on CPU)"


class ExclusiveArgumentsError(ValueError, AssertionError):
    """Two arguments that exclude each other were both given.

    A ``ValueError`` that is also an ``AssertionError``: rl-triton 0.1.3 asserts
    that ``last_value`` and ``bootstrap_values`` are not both given, so code
    written against it that catches ``AssertionError`` keeps working.
    """


def _scalar(plan: _Plan, name: str, value: Any, device: torch.device) -> float | Tensor:
    """A scalar argument as a float, or as a 0-d tensor on ``device``.

    Python numbers (numpy scalars too) and 0-d CPU tensors become floats (reading a
    CPU tensor syncs nothing); NaN, bools and non-real values are refused. A 0-d
    tensor on ``device`` when that is not the CPU stays a tensor: reading it would
    wait for the device, so its value is not checked (NaN propagates) and the call
    is computed by the torch implementation, which reads it on the device.
    """
    kind = type(value)
    if kind is float:
        if value != value:
            raise ValueError(f"{plan.function}: {name} is NaN")
        return value
    if kind is int:
        return ops.as_float(name, value, plan.function)
    if isinstance(value, Tensor):
        if value.dim() != 0:
            raise ValueError(f"{plan.function}: {name} must be a number or a 0-d tensor, "
                             f"got a tensor of shape {_shape(value)}")
        if value.dtype is torch.bool or value.is_complex():
            raise TypeError(f"{plan.function}: {name} must be a real number, got a "
                            f"{value.dtype} tensor")
        if value.device.type != "cpu":
            if value.device != device:
                raise ValueError(f"{plan.function}: {name} is on {value.device} but the "
                                 f"inputs are on {device}; a 0-d tensor scalar must be on "
                                 "the CPU or on the inputs' device")
            return value.detach()
        value = value.item()
    elif isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _not_a_number(plan.function, name, value)
    value = ops.as_float(name, value, plan.function)
    if math.isnan(value):
        raise ValueError(f"{plan.function}: {name} is NaN")
    return value


def _not_both(function: str, first: str, second: str, why: str = "") -> ExclusiveArgumentsError:
    return ExclusiveArgumentsError(f"{function}: give {first} or {second}, not both{why}")


def _check_exclusive(plan: _Plan, values: tuple[Any, ...]) -> None:
    """SPEC's rules between ``last_value``, ``bootstrap_values``, ``truncateds`` and
    ``next_values`` (GAE and V-trace)."""
    last_i, boot_i, trunc_i, following_i = plan.last_value_rule  # type: ignore[misc]
    last, following = values[last_i], values[following_i]
    if last is None and following is None:  # the usual call: nothing can conflict
        return
    boot = values[boot_i]
    function = plan.function
    if following is not None:
        why = " (next_values already holds the value after every step)"
        if last is not None:
            raise _not_both(function, "next_values", "last_value", why)
        if boot is not None:
            raise _not_both(function, "next_values", "bootstrap_values", why)
    if last is not None:
        if boot is not None:
            raise _not_both(function, "last_value", "bootstrap_values")
        if values[trunc_i] is not None:
            raise ValueError(f"{function}: last_value cannot be combined with truncateds; "
                             "pass bootstrap_values (or next_values) instead")


def _check_dtype(plan: _Plan, name: str, kind: int, x: Tensor) -> Tensor:
    """The dtype rules of a tensor whose dtype is not among those its kind takes at once:
    float64 on CPU passes (floating and flag inputs), wide unsigned flags become bool and
    wide unsigned actions int64 (one conversion), anything else is a TypeError."""
    if x.dtype in _WIDE_UNSIGNED and kind in (_FLAG, _INT):
        return x != 0 if kind == _FLAG else x.to(torch.int64)
    problem = (f"{name} has dtype {x.dtype}; expected an integer tensor" if kind == _INT
               else dtype_problem(name, x, kind == _FLAG))
    if problem is not None:
        raise TypeError(f"{plan.function}: {problem}")
    return x


def _build(plan: _Plan, values: tuple[Any, ...], scalar_values: tuple[Any, ...],
           time_major: bool, starts_at: bool = False) -> Call:
    """Validate one call's arguments and normalise them into a :class:`Call`.

    ``[*B, T]`` inputs (``[T, *B]`` time-major) are flattened to ``[N, T]`` (``[T, N]``)
    with ``N = prod(B)``, per-env inputs ``[*B]`` to ``[N]`` and per-action inputs
    ``[*B, T, A]`` (``[T, *B, A]``) to ``[N, T, A]`` (``[T, N, A]``): views where the
    strides allow. ``Call.shape`` then keeps the caller's shape for the outputs.

    This runs on every call, so each tensor property is read once, and the rarer
    checks (float64, the error messages) run only when a cheap test fails.
    """
    function = plan.function
    if time_major is not True and time_major is not False:
        raise _not_a_bool(function, time_major)
    if plan.last_value_rule is not None:
        _check_exclusive(plan, values)

    source = values[plan.shape_source]
    if not isinstance(source, Tensor):
        raise _not_a_tensor(function, plan.source_name, source)
    if source.layout is not _STRIDED or source.is_nested:  # before its shape, which raises
        raise TypeError(f"{function}: {not_dense(plan.source_name, source)}")
    shape = source.shape
    ndim = len(shape)
    if ndim < 2:
        layout = "[T, *B] (time_major=True)" if time_major else "[*B, T]"
        raise ValueError(f"{function}: {plan.source_name} must be {layout} with "
                         f"at least one batch dim, got shape {_shape(source)} (a single "
                         f"sequence x of T steps is x.unsqueeze({-1 if time_major else 0}))")
    device = source.device
    if ndim == 2:
        n = shape[1] if time_major else shape[0]
        batch = None
        env_shape: tuple[int, ...] = (n,)
    else:
        batch = shape[1:] if time_major else shape[:-1]
        env_shape = tuple(batch)
        n = math.prod(batch)
    t = shape[0] if time_major else shape[-1]
    flat = (t, n) if time_major else (n, t)
    a = 0
    per_action_name = ""

    tensors: dict[str, Tensor] = {}
    # No strict zip (it costs 0.1 us): every caller gathers values from plan.names.
    for (name, rule, accepted, kind, optional), x in zip(plan.entries, values):  # noqa: B905
        if x is None:
            if optional:
                continue
            raise TypeError(f"{function}: {name} is required (got None)")
        if not isinstance(x, Tensor):
            raise _not_a_tensor(function, name, x)
        if x.layout is not _STRIDED or x.is_nested:  # say so, not a torch error
            raise TypeError(f"{function}: {not_dense(name, x)}")
        other = x is not source  # the reference needs no comparison with itself
        if rule == _SAME_SHAPE:
            if other and x.shape != shape:
                raise ValueError(f"{function}: {name} has shape {_shape(x)} but "
                                 f"{plan.source_name} has shape {_shape(source)}; "
                                 "they must match")
            if batch is not None:
                x = x.reshape(flat)
        elif rule == _ENV_SHAPE:
            if x.shape != env_shape:
                raise ValueError(f"{function}: {name} has shape {_shape(x)}; expected "
                                 f"{env_shape} (one value per environment of "
                                 f"{plan.source_name} with shape {_shape(source)})")
            if batch is not None:
                x = x.reshape(n)
        else:
            xs = x.shape
            if len(xs) != ndim + 1 or xs[:-1] != shape:
                dims = "[T, *B, A]" if time_major else "[*B, T, A]"
                raise ValueError(f"{function}: {name} has shape {_shape(x)}; expected {dims} "
                                 f"with leading dims {_shape(source)} like {plan.source_name}")
            if per_action_name and xs[-1] != a:
                raise ValueError(f"{function}: {name} has {xs[-1]} actions (shape {_shape(x)}) "
                                 f"but {per_action_name} has {a} (shape "
                                 f"{_shape(values[plan.names.index(per_action_name)])})")
            a = xs[-1]
            per_action_name = name
            if batch is not None:
                x = x.reshape(*flat, a)
        if other and x.device != device:
            raise ValueError(f"{function}: {name} is on {x.device} but {plan.source_name} is "
                             f"on {device}; all inputs must be on one device")
        if x.dtype not in accepted:
            x = _check_dtype(plan, name, kind, x)
        tensors[name] = x if x.is_contiguous() else x.contiguous()

    scalars, tensor_scalars = _scalars(plan, scalar_values, device)
    if per_action_name:
        if a == 0 and n and t:
            raise ValueError(f"{function}: {' and '.join(plan.spec.per_action)} have no "
                             f"actions (A = 0, shape "
                             f"{_shape(values[plan.names.index(per_action_name)])})")
        if n and t and source.is_cpu:
            low, high = map(int, torch.aminmax(tensors["actions"]))  # one pass for both
            if low < 0 or high >= a:
                given = values[plan.names.index("actions")]
                if low < 0 and given.dtype in _WIDE_UNSIGNED:
                    # int64 wrapped the unsigned values of 2**63 and more to negatives
                    raise ValueError(f"{function}: actions has values of 2**63 or more, "
                                     f"outside [0, {a}) for {a} actions")
                raise ValueError(f"{function}: actions has values in [{low}, {high}], outside "
                                 f"[0, {a}) for {a} actions")
    # Positional, in Call's field order: keyword construction costs twice as much.
    call = Call(plan.algorithm, tensors, scalars, n, t, time_major, a, starts_at,
                values[plan.first_float].dtype, None if batch is None else tuple(shape),
                tensor_scalars)
    call._device = device
    return call


def not_dense(name: str, x: Tensor) -> str:
    """The error for a sparse, mkldnn or nested tensor (a strided nested tensor has no
    shape to compare: torch raises an internal error when it is read)."""
    kind = "a nested tensor" if x.is_nested else f"layout {x.layout}"
    return f"{name} must be a dense tensor, got {kind}"


def _scalars(plan: _Plan, scalar_values: tuple[Any, ...], device: torch.device
             ) -> tuple[dict[str, float | Tensor], bool]:
    """The scalar arguments by name, and whether any stayed a 0-d device tensor. Python
    floats, the usual scalars, are taken as they are (NaN refused); everything else is
    converted (or refused) by :func:`_scalar`. Values decide these rules, so they run on
    every call.

    One loop, and a ``zip`` without ``strict``: every caller gathers ``scalar_values``
    from ``plan.scalars`` (the public functions, :func:`call_arguments`, the operators),
    and on CPython a strict ``zip`` and a ``dict(zip(...))`` each cost more than the
    loop itself (this was 0.3 us of the usual call)."""
    scalars: dict[str, float | Tensor] = {}
    tensor_scalars = False
    for name, value in zip(plan.scalars, scalar_values):  # noqa: B905 (see above)
        if type(value) is not float or value != value:
            value = _scalar(plan, name, value, device)
            if type(value) is not float:
                tensor_scalars = True
        scalars[name] = value
    return scalars, tensor_scalars


def _empty(plan: _Plan, call: Call) -> Tensor | tuple[Tensor, ...]:
    """Outputs of an empty call (N = 0 or T = 0), without dispatching anything."""
    shape = call.shape or ((call.t, call.n) if call.time_major else (call.n, call.t))
    device = call.device
    outputs = tuple(torch.empty(shape, dtype=call.out_dtype, device=device)
                    for _ in plan.spec.outputs)
    return outputs[0] if plan.single else outputs


def _fallback(call: Call) -> tuple[Tensor, ...]:
    """The torch implementation, for calls whose scalars are 0-d device tensors: the
    Triton kernels take scalars as numbers, which reading such a tensor would wait for."""
    return fallback.launch(call, fallback.default_mode(call.n, call.t))


def _run(plan: _Plan, values: tuple[Any, ...], scalar_values: tuple[Any, ...],
         time_major: bool, starts_at: bool = False) -> Tensor | tuple[Tensor, ...]:
    # Under torch.compile, and when autograd must record the call, the call goes through
    # its custom operator (rltriton_tune.ops), which runs _direct and has a backward.
    if _is_compiling():
        scalar_values = tuple(traced_scalar(value) for value in scalar_values)
        _check_traced(plan, values, scalar_values, time_major)
        return ops.estimate(plan.algorithm, values, scalar_values, time_major, starts_at)
    outputs = plan.hot(values, scalar_values, time_major, starts_at)
    if outputs is not None:
        return outputs
    call = _build(plan, values, scalar_values, time_major, starts_at)
    if _requires_grad(call):
        return ops.estimate(plan.algorithm, values, scalar_values, time_major, starts_at)
    return _dispatch(plan, call)


def traced_scalar(value: Any) -> Any:
    """A scalar as the operator takes it under torch.compile, where the eager call reads
    it as a float: a numpy scalar (which dynamo traces as a 0-d array, a graph input) as
    a 0-d tensor, another real number (a ``Fraction``, a constant) as a float; a tensor,
    a float, an integer (the operator's conversion names one too large for a float) and
    anything else as it is, for :func:`_check_traced` to name."""
    if isinstance(value, (Tensor, float, int)):
        return value
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, (numpy.ndarray, numpy.generic)) \
            and value.ndim == 0:
        return torch.as_tensor(value)
    if isinstance(value, numbers.Real):
        try:
            return float(value)
        except (OverflowError, ValueError):
            return value
    return value


def _check_traced(plan: _Plan, values: tuple[Any, ...], scalar_values: tuple[Any, ...],
                  time_major: Any) -> None:
    """Under torch.compile, the checks of what the operator's schema would convert or fail
    on with torch's own message: time_major (1 would become True), the scalars' types
    (True would become 1.0) and non-tensor inputs. The tensors' checks run in the
    operator, when the graph runs. Raised while tracing: with ``fullgraph=True`` torch
    wraps the error in a ``torch._dynamo`` one that carries this message."""
    function = plan.function
    if time_major is not True and time_major is not False:
        raise _not_a_bool(function, time_major)
    for name, x in zip(plan.names, values, strict=True):
        if x is not None and not isinstance(x, Tensor):
            raise _not_a_tensor(function, name, x)
    for name, value in zip(plan.spec.scalars, scalar_values, strict=True):
        if isinstance(value, bool) or not isinstance(value, (numbers.Real, Tensor)):
            raise _not_a_number(function, name, value)


# The type errors that both the eager validation (_build, _scalar) and the traced one
# (_check_traced) raise, so that a compiled call names a bad argument as an eager one does.

def _not_a_bool(function: str, time_major: Any) -> TypeError:
    return TypeError(f"{function}: time_major must be a Python bool, got "
                     f"{ops.type_name(time_major)}")


def _not_a_tensor(function: str, name: str, x: Any) -> TypeError:
    return TypeError(f"{function}: {name} must be a torch.Tensor, got {type(x).__name__}")


def _not_a_number(function: str, name: str, value: Any) -> TypeError:
    return TypeError(f"{function}: {name} must be a Python number or a 0-d tensor, "
                     f"got {ops.type_name(value)}")


def _direct(plan: _Plan, values: tuple[Any, ...], scalar_values: tuple[Any, ...],
            time_major: bool, starts_at: bool = False) -> Tensor | tuple[Tensor, ...]:
    """Validate and dispatch, recording nothing for autograd (the operators' forward)."""
    return _dispatch(plan, _build(plan, values, scalar_values, time_major, starts_at))


def _dispatch(plan: _Plan, call: Call) -> Tensor | tuple[Tensor, ...]:
    if call.n == 0 or call.t == 0:
        return _empty(plan, call)
    if call.tensor_scalars:
        outputs = _fallback(call)
    else:
        outputs = dispatch.run(call)
    if call.shape is not None:  # [*B, T] inputs: outputs back to the caller's shape
        outputs = tuple(y.reshape(call.shape) for y in outputs)
    return outputs[0] if plan.single else outputs


def _boundary(plan: _Plan, boundary: Any) -> bool:
    """``boundary`` as the ``starts_at`` flag; anything but the two names is an error
    (raised outside any ``except``, which torch.compile can trace)."""
    if isinstance(boundary, str) and boundary in _BOUNDARIES:
        return _BOUNDARIES[boundary]
    raise ValueError(f"{plan.function}: boundary must be 'ends_at' or 'starts_at', "
                     f"got {boundary!r}")


_GAE = _Plan(ALGORITHMS["gae"], "compute_gae")
_VTRACE = _Plan(ALGORITHMS["vtrace"], "compute_vtrace")
_RETRACE = _Plan(ALGORITHMS["retrace"], "compute_retrace")
_LAMBDA = _Plan(ALGORITHMS["lambda_returns"], "compute_lambda_returns")
_RETURNS = _Plan(ALGORITHMS["discounted_returns"], "compute_discounted_returns")
_TRACES = _Plan(ALGORITHMS["eligibility_traces"], "compute_eligibility_traces")
_PREFIX = _Plan(ALGORITHMS["episodic_prefix_sum"], "compute_episodic_prefix_sum")


_COMMON_DOC = """
    Shapes: ``[N, T]`` inputs may be ``[*B, T]`` (any number, at least one, of batch
    dims), or ``[T, *B]`` with ``time_major=True`` (read without a transposed copy);
    per-env inputs are then ``[*B]``; outputs have the shape of the ``[*B, T]`` inputs.
    Flags may be float, bool or integer tensors (non-zero is true);
    float16/bfloat16 inputs are accumulated in float32 and the outputs take the
    dtype of ``{first}``. Scalars are Python numbers or 0-d tensors (a 0-d tensor
    on a GPU is used there without a sync by the torch implementation, also under
    torch.compile; a backward pass reads it with ``float()``).
    Inputs are never modified; outputs carry no gradient for the scalars.
"""

_BOOTSTRAP_DOC = """
    The value after the last step and at truncations (the bootstrap) is, in order:

    * ``next_values`` (keyword-only, shape of ``values``): V(s_{t+1}) for every step
      t. It is ``nv[t]`` at every step (in place of ``values[t+1]``), the last and
      truncated steps included, and V-trace's ``nvs[t]`` at the last step and at
      truncations. Terminations still zero it and ``truncateds`` still end the
      trace. Excludes ``last_value`` and ``bootstrap_values``.
    * ``bootstrap_values`` (shape of ``values``): ``b[t]`` is used at ``t = T-1`` and
      wherever ``truncateds[t]`` is set; ``values[t+1]`` elsewhere.
    * ``last_value`` (``[N]`` / ``[*B]``): shorthand for ``bootstrap_values`` zero
      except ``b[T-1] = last_value``; not with ``truncateds`` (where would a truncated
      step's value come from?) nor with ``bootstrap_values``.
    * none of these: **the bootstrap is zero**, i.e. every row is treated as ending
      in a terminal state after step T-1 (right for complete episodes only).

    Giving two that exclude each other raises :class:`ExclusiveArgumentsError`, a
    ``ValueError`` that is also the ``AssertionError`` rl-triton 0.1.3 raised.
"""


def compute_gae(
    rewards: Tensor,
    values: Tensor,
    terminateds: Tensor,
    truncateds: Tensor | None = None,
    gamma: float | Tensor = 0.99,
    lambda_: float | Tensor = 0.95,
    bootstrap_values: Tensor | None = None,
    last_value: Tensor | None = None,
    *,
    next_values: Tensor | None = None,
    time_major: bool = False,
) -> Tensor:
    """Generalized advantage estimates, shaped like ``rewards``.

    ``A[t] = δ[t] + γλ(1 - done[t]) A[t+1]``, ``A[T] = 0``, with
    ``δ[t] = r[t] + γ(1 - term[t]) nv[t] - values[t]`` and ``done = max(term, trunc)``;
    ``nv[t]`` is ``values[t+1]`` or the bootstrap below.
    """
    return _run(_GAE, (rewards, values, terminateds, truncateds, bootstrap_values, last_value,
                       next_values),
                (gamma, lambda_), time_major)


def compute_vtrace(
    log_pi_target: Tensor,
    log_pi_behavior: Tensor,
    values: Tensor,
    rewards: Tensor,
    terminateds: Tensor,
    truncateds: Tensor | None = None,
    gamma: float | Tensor = 0.99,
    rho_bar: float | Tensor = 1.0,
    c_bar: float | Tensor = 1.0,
    bootstrap_values: Tensor | None = None,
    last_value: Tensor | None = None,
    *,
    next_values: Tensor | None = None,
    time_major: bool = False,
) -> tuple[Tensor, Tensor]:
    """V-trace targets and policy-gradient advantages, ``(vs, advantages)``.

    With ``ratio = exp(log_pi_target - log_pi_behavior)``, ``ρ = min(rho_bar, ratio)``
    and ``c = min(c_bar, ratio)``: ``vs[t] = values[t] + D[t]``,
    ``D[t] = ρ[t] (r[t] + γ(1 - term[t]) nv[t] - values[t]) + γ c[t] (1 - done[t]) D[t+1]``,
    and ``advantages[t] = ρ[t] (r[t] + γ(1 - term[t]) nvs[t] - values[t])``, where
    ``nv[t]`` is ``values[t+1]`` or the bootstrap below and ``nvs[t]`` is ``vs[t+1]``,
    or the bootstrap at the last step and at truncations (with ``next_values``:
    ``next_values[t]`` there, ``vs[t+1]`` elsewhere, as TorchRL's V-trace).
    """
    return _run(_VTRACE, (log_pi_target, log_pi_behavior, values, rewards, terminateds,
                          truncateds, bootstrap_values, last_value, next_values),
                (gamma, rho_bar, c_bar), time_major)


def compute_retrace(
    action_probs_target: Tensor,
    action_probs_behavior: Tensor,
    q_values: Tensor,
    next_q_values_all: Tensor,
    actions: Tensor,
    rewards: Tensor,
    terminateds: Tensor,
    truncateds: Tensor,
    gamma: float | Tensor,
    lambda_: float | Tensor = 1.0,
    c_bar: float | Tensor = 1.0,
    rho_bar: float | Tensor = 1.0,
    *,
    time_major: bool = False,
) -> tuple[Tensor, Tensor]:
    """Retrace(λ) Q targets and advantages, ``(q_ret, advantages)``.

    ``action_probs_target`` and ``next_q_values_all`` are ``[N, T, A]``; ``actions``
    is an integer ``[N, T]`` tensor; ``action_probs_behavior`` holds μ(a_t|s_t).
    ``c[t] = λ min(c_bar, π(a_t)/μ(a_t))``, ``EQ[t] = Σ_a π[t, a] Q_next[t, a]``,
    ``q_ret[t] = q_values[t] + D[t]`` with
    ``D[t] = r[t] + γ(1 - term[t]) EQ[t] - q_values[t] + γ c[t+1] (1 - done[t]) D[t+1]``.
    An action outside ``[0, A)`` is a ``ValueError`` on CPU; on a GPU (where a check
    would sync the device) it never faults and its outputs become NaN.
    """
    return _run(_RETRACE, (action_probs_target, action_probs_behavior, q_values,
                           next_q_values_all, actions, rewards, terminateds, truncateds),
                (gamma, lambda_, c_bar, rho_bar), time_major)


def compute_lambda_returns(
    rewards: Tensor,
    next_values: Tensor,
    terminateds: Tensor,
    truncateds: Tensor | None = None,
    gamma: float | Tensor = 0.99,
    lambda_: float | Tensor = 0.95,
    bootstrap_values: Tensor | None = None,
    *,
    time_major: bool = False,
) -> Tensor:
    """TD(λ) returns, shaped like ``rewards``.

    ``G[t] = r[t] + γ(1 - done[t])((1 - λ) next_values[t] + λ G[t+1]) + γ trunc[t] b[t]``,
    ``G[T] = b[T-1]`` (``b`` = ``bootstrap_values``, zero when not given: then the
    return after the last step is zero); ``next_values[t]`` is V(s_{t+1}) as the
    caller stores it (its value at truncated steps is not used: ``b`` is).
    λ = 0 gives one-step TD targets, λ = 1 discounted returns.
    """
    return _run(_LAMBDA, (rewards, next_values, terminateds, truncateds, bootstrap_values),
                (gamma, lambda_), time_major)


def compute_discounted_returns(
    rewards: Tensor,
    terminateds: Tensor,
    truncateds: Tensor | None = None,
    gamma: float | Tensor = 0.99,
    bootstrap_values: Tensor | None = None,
    *,
    time_major: bool = False,
) -> Tensor:
    """Discounted returns, shaped like ``rewards``.

    ``G[t] = r[t] + γ(1 - done[t]) G[t+1] + γ trunc[t] b[t]``, ``G[T] = b[T-1]``
    (``b`` = ``bootstrap_values``, zero when not given).
    """
    return _run(_RETURNS, (rewards, terminateds, truncateds, bootstrap_values), (gamma,),
                time_major)


def compute_eligibility_traces(
    gradients: Tensor,
    dones: Tensor,
    gamma: float | Tensor,
    lambda_: float | Tensor,
    seed_values: Tensor | None = None,
    *,
    time_major: bool = False,
) -> Tensor:
    """Accumulating eligibility traces, shaped like ``gradients`` (a forward scan).

    ``z[t] = g[t] + γλ(1 - done[t-1]) z[t-1]``, ``z[-1] = seed_values`` (default 0);
    ``done[t] = 1`` ends the episode at ``t``.
    """
    return _run(_TRACES, (gradients, dones, seed_values), (gamma, lambda_), time_major)


def compute_episodic_prefix_sum(
    inputs: Tensor,
    dones: Tensor,
    seed_values: Tensor | None = None,
    boundary: str = "ends_at",
    *,
    time_major: bool = False,
) -> Tensor:
    """Per-episode running sums, shaped like ``inputs`` (a forward scan).

    ``boundary="ends_at"``: ``C[t] = x[t] + (1 - done[t-1]) C[t-1]``;
    ``boundary="starts_at"``: ``C[t] = x[t] + (1 - done[t]) C[t-1]``;
    ``C[-1] = seed_values`` (default 0).
    """
    return _run(_PREFIX, (inputs, dones, seed_values), (), time_major,
                _boundary(_PREFIX, boundary))


#: Public function of each algorithm, by algorithm name (for the tuner and benchmarks).
ESTIMATORS: dict[str, Callable[..., Any]] = {
    "gae": compute_gae,
    "vtrace": compute_vtrace,
    "retrace": compute_retrace,
    "lambda_returns": compute_lambda_returns,
    "discounted_returns": compute_discounted_returns,
    "eligibility_traces": compute_eligibility_traces,
    "episodic_prefix_sum": compute_episodic_prefix_sum,
}

for _function in ESTIMATORS.values():
    _first = ALGORITHMS[_function.__name__.removeprefix("compute_")].first_float
    _extra = _BOOTSTRAP_DOC if _function in (compute_gae, compute_vtrace) else ""
    _function.__doc__ = (_function.__doc__ or "").rstrip() + "\n" + _extra + \
        _COMMON_DOC.format(first=_first)

_PLANS: dict[str, _Plan] = {plan.algorithm: plan for plan in
                            (_GAE, _VTRACE, _RETRACE, _LAMBDA, _RETURNS, _TRACES, _PREFIX)}

_REQUIRED = object()

#: Each public function's parameters and defaults, read once at import.
_PARAMETERS: dict[str, dict[str, Any]] = {
    algorithm: {
        name: (_REQUIRED if p.default is inspect.Parameter.empty else p.default)
        for name, p in inspect.signature(function).parameters.items()
    }
    for algorithm, function in ESTIMATORS.items()
}


# The adjoint scans and the grad algorithms (the estimators' backward passes,
# rltriton_tune.autograd) have no public function, but the tuner prepares their calls like
# any estimator's: keyword arguments named like their tensors and scalars.
for _name in (*ADJOINT_SCANS.values(), *GRAD_ALGORITHMS.values()):
    _spec = ALGORITHMS[_name]
    _PLANS[_name] = _Plan(_spec, _name)
    _PARAMETERS[_name] = {
        **{name: None if name in _spec.optional else _REQUIRED for name in _spec.tensors},
        **dict.fromkeys(_spec.scalars, _REQUIRED), "time_major": False,
        **({"boundary": "ends_at"} if STARTS_AT in _spec.options else {})}


def call_arguments(algorithm: str, **kwargs: Any
                   ) -> tuple[_Plan, tuple[Any, ...], tuple[Any, ...], bool, bool]:
    """Keyword arguments of ``algorithm``'s public function, gathered as the validator takes
    them: (plan, tensor arguments, scalar arguments, time_major, starts_at). Refuses
    unknown and missing arguments like the public function."""
    try:
        plan = _PLANS[algorithm]
    except KeyError:
        raise ValueError(f"unknown algorithm {algorithm!r}; expected one of "
                         f"{sorted(_PLANS)}") from None
    parameters = _PARAMETERS[algorithm]
    unknown = kwargs.keys() - parameters.keys()
    if unknown:
        raise TypeError(f"{plan.function}: unexpected argument(s) {sorted(unknown)}")
    args = {**parameters, **kwargs}
    missing = [name for name, value in args.items() if value is _REQUIRED]
    if missing:
        raise TypeError(f"{plan.function}: missing required argument(s) {missing}")
    starts_at = _boundary(plan, args["boundary"]) if "boundary" in args else False
    return (plan, tuple(args[name] for name in plan.names),
            tuple(args[name] for name in plan.scalars), args["time_major"], starts_at)


def prepare_call(algorithm: str, **kwargs: Any) -> Call | None:
    """Validate keyword arguments of ``algorithm``'s public function into a :class:`Call`.

    Exactly what the public function does before dispatching (same checks, same
    errors); returns ``None`` for an empty problem (N = 0 or T = 0).
    """
    call = _build(*call_arguments(algorithm, **kwargs))
    return None if call.n == 0 or call.t == 0 else call
