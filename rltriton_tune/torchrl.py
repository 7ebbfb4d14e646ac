"""TorchRL's functional value estimators, computed by rltriton-tune.

Drop-in equivalents of ``torchrl.objectives.value.functional``'s
:func:`generalized_advantage_estimate`, :func:`vec_generalized_advantage_estimate`,
:func:`td_lambda_return_estimate`, :func:`vec_td_lambda_return_estimate` and
:func:`vtrace_advantage_estimate`: the same argument names, ``time_dim``, trailing
feature dims (``[*B, T, *F]``, ``[*B, T, 1]`` in TorchRL's modules), done /
terminated semantics and return tuples. TorchRL itself is not needed to call them.

How TorchRL's conventions map onto the estimators (one scan each, no Python loop):

* ``done`` ends the trace (rltriton-tune's ``max(term, trunc)``) and ``terminated``
  (``done`` when not given) zeroes the next value; ``next_state_value[t]`` is the
  value of the state after step ``t`` at every step (``next_values=``).
* The time axis is moved last (a view; ``time_dim=0`` is read time-major in place)
  and the other dims, features included, become batch dims.
* ``gamma``, ``lmbda`` and the clipping thresholds are numbers or 0-d tensors. A
  0-d tensor on a GPU (TorchRL's modules keep them as buffers) is read to the host
  once per call so that the fused kernels serve it (TorchRL's own ``vec_`` GAE reads
  tensors to the host too); a CPU one is passed on unread, so that ``torch.compile``
  traces it. Per-step tensors (``steps_to_next_obs``) are not supported here:
  :func:`patch_torchrl` leaves such calls to TorchRL.
* Errors name these functions' arguments (``done``, ``lmbda``, ...), not the
  estimators' they map to.

:func:`patch_torchrl` makes TorchRL's ``GAE``, ``TDLambdaEstimator`` and ``VTrace``
modules call these functions (docs/torchrl.md).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import math
import numbers
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor

from rltriton_tune.estimators import (
    compute_gae,
    compute_lambda_returns,
    compute_vtrace,
    dtype_problem,
    not_dense,
    traced_scalar,
)
from rltriton_tune.ops import as_float, type_name

__all__ = [
    "generalized_advantage_estimate",
    "vec_generalized_advantage_estimate",
    "td_lambda_return_estimate",
    "vec_td_lambda_return_estimate",
    "vtrace_advantage_estimate",
    "patch_torchrl",
]


class _Layout:
    """Moves ``time_dim`` to where the estimators read it, and back."""

    def __init__(self, reference: Tensor, time_dim: int) -> None:
        ndim = reference.dim()
        if isinstance(time_dim, bool) or not isinstance(time_dim, int):
            raise TypeError(f"time_dim must be an int, got {type(time_dim).__name__}")
        if ndim == 0 or not -ndim <= time_dim < ndim:
            raise ValueError(f"time_dim={time_dim} does not fit tensors of shape "
                             f"{tuple(reference.shape)}")
        self.dim = time_dim % ndim
        self.single = ndim == 1                 # [T]: one batch row of its own
        self.time_major = ndim > 1 and self.dim == 0
        self.last = self.dim == ndim - 1

    def into(self, x: Tensor) -> Tensor:
        if self.single:
            return x.unsqueeze(0)
        if self.time_major or self.last:
            return x
        return x.movedim(self.dim, -1)

    def back(self, y: Tensor) -> Tensor:
        if self.single:
            return y.squeeze(0)
        if self.time_major or self.last:
            return y
        return y.movedim(-1, self.dim)


_FLAG_NAMES = ("done", "terminated")


def _check_tensors(**tensors: Tensor | None) -> None:
    """TorchRL's rule, every tensor argument has one shape, and the estimators' rules
    (dense, one device, accepted dtypes), checked here so that the errors name these
    functions' arguments rather than the estimators' (``done`` is their ``truncateds``).
    Only ``terminated`` may be None."""
    for name, x in tensors.items():
        if x is None and name != "terminated":
            raise TypeError(f"{name} is required (got None)")
    given = {name: x for name, x in tensors.items() if x is not None}
    for name, x in given.items():
        if not isinstance(x, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type_name(x)}")
        if x.layout is not torch.strided or x.is_nested:
            raise TypeError(not_dense(name, x))
        problem = dtype_problem(name, x, flag=name in _FLAG_NAMES)
        if problem is not None:
            raise TypeError(problem)
    first = next(iter(given))  # a required argument
    device = given[first].device
    for name, x in given.items():
        if x.device != device:
            raise ValueError(f"{name} is on {x.device} but {first} is on {device}; all "
                             "tensors must be on one device")
    shapes = {name: tuple(x.shape) for name, x in given.items()}
    if len(set(shapes.values())) > 1:
        listed = ", ".join(f"{name} {shape}" for name, shape in shapes.items())
        raise ValueError(f"all tensors must share one shape; got {listed}")


def _scalar(name: str, value: Any) -> float | Tensor:
    """A number as a float, or a 0-d tensor: read to the host on a GPU, passed on unread
    on a CPU (its NaN check is made here outside torch.compile, which cannot trace the
    read). Errors name the argument (NaN, bools, non-real values, meta tensors)."""
    if torch.compiler.is_compiling():
        # A numpy scalar is traced as a 0-d array: a 0-d tensor, as the estimators take it.
        value = traced_scalar(value)
    if isinstance(value, Tensor):
        if value.dim() != 0:
            raise ValueError(f"{name} must be a number or a 0-d tensor, got a tensor of shape "
                             f"{tuple(value.shape)} (per-step values are not supported)")
        if value.dtype is torch.bool or value.is_complex():
            raise TypeError(f"{name} must be a real number, got a {value.dtype} tensor")
        if value.device.type == "meta":
            raise ValueError(f"{name} is a meta tensor, which holds no value")
        if value.device.type == "cpu":
            if not torch.compiler.is_compiling() and math.isnan(value.item()):
                raise ValueError(f"{name} is NaN")
            return value
        value = value.item()
    elif isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number or a 0-d tensor, got {type_name(value)}")
    value = as_float(name, value)
    if math.isnan(value):
        raise ValueError(f"{name} is NaN")
    return value


def generalized_advantage_estimate(
    gamma: float | Tensor,
    lmbda: float | Tensor,
    state_value: Tensor,
    next_state_value: Tensor,
    reward: Tensor,
    done: Tensor,
    terminated: Tensor | None = None,
    *,
    time_dim: int = -2,
) -> tuple[Tensor, Tensor]:
    """``(advantage, value_target)`` as TorchRL's function of the same name.

    ``advantage[t] = δ[t] + γλ(1 - done[t]) advantage[t+1]`` with
    ``δ[t] = reward[t] + γ(1 - terminated[t]) next_state_value[t] - state_value[t]``,
    and ``value_target = advantage + state_value``. All tensors share one shape
    ``[*B, T, *F]`` with time at ``time_dim``; ``terminated`` defaults to ``done``.
    """
    _check_tensors(state_value=state_value, next_state_value=next_state_value, reward=reward,
                   done=done, terminated=terminated)
    layout = _Layout(reward, time_dim)
    into = layout.into
    advantage = compute_gae(
        into(reward), into(state_value), into(done if terminated is None else terminated),
        None if terminated is None else into(done), _scalar("gamma", gamma),
        _scalar("lmbda", lmbda), next_values=into(next_state_value),
        time_major=layout.time_major)
    advantage = layout.back(advantage)
    return advantage, advantage + state_value


#: TorchRL's vectorised variant computes the same thing; here both are one scan.
vec_generalized_advantage_estimate = generalized_advantage_estimate


def td_lambda_return_estimate(
    gamma: float | Tensor,
    lmbda: float | Tensor,
    next_state_value: Tensor,
    reward: Tensor,
    done: Tensor,
    terminated: Tensor | None = None,
    rolling_gamma: bool | None = None,
    *,
    time_dim: int = -2,
) -> Tensor:
    """TD(λ) returns as TorchRL's function of the same name.

    ``G[t] = reward[t] + γ((1 - λ) nv[t] + λ (nv[t] if done[t] else G[t+1]))`` with
    ``nv = next_state_value·(1 - terminated)`` and ``G[T] = nv[T-1]``. ``rolling_gamma``
    only matters for per-step gammas, which are not supported: ``False`` is an error
    (as in TorchRL with a scalar gamma).
    """
    if rolling_gamma is False:
        raise ValueError("rolling_gamma=False is expected only with time-sensitive gamma or "
                         "lambda values, which rltriton_tune.torchrl does not support")
    _check_tensors(next_state_value=next_state_value, reward=reward, done=done,
                   terminated=terminated)
    layout = _Layout(reward, time_dim)
    into = layout.into
    following = into(next_state_value)
    if terminated is None:      # every end is a termination: G = r there
        ends, cut = into(done), None
    else:                       # truncations (done, not terminated) bootstrap nv[t]
        ends, cut = into(terminated), into(torch.logical_and(done, torch.logical_not(
            terminated)))
    returns = compute_lambda_returns(
        into(reward), following, ends, cut, _scalar("gamma", gamma), _scalar("lmbda", lmbda),
        bootstrap_values=following, time_major=layout.time_major)
    return layout.back(returns)


#: TorchRL's vectorised variant computes the same thing; here both are one scan.
vec_td_lambda_return_estimate = td_lambda_return_estimate


def vtrace_advantage_estimate(
    gamma: float | Tensor,
    log_pi: Tensor,
    log_mu: Tensor,
    state_value: Tensor,
    next_state_value: Tensor,
    reward: Tensor,
    done: Tensor,
    terminated: Tensor | None = None,
    rho_thresh: float | Tensor = 1.0,
    c_thresh: float | Tensor = 1.0,
    time_dim: int = -2,
) -> tuple[Tensor, Tensor]:
    """``(advantages, vs)`` as TorchRL's function of the same name.

    With ``ρ = min(rho_thresh, exp(log_pi - log_mu))`` and ``c = min(c_thresh, ·)``:
    ``vs = state_value + D``,
    ``D[t] = ρ[t](reward[t] + γ(1 - terminated[t]) next_state_value[t] - state_value[t])
    + γ c[t] (1 - done[t]) D[t+1]``, and ``advantages[t] = ρ[t](reward[t] +
    γ(1 - terminated[t]) vs'[t] - state_value[t])`` where ``vs'[t]`` is ``vs[t+1]``,
    or ``next_state_value[t]`` where ``done[t]`` and at the last step.
    """
    _check_tensors(log_pi=log_pi, log_mu=log_mu, state_value=state_value,
                   next_state_value=next_state_value, reward=reward, done=done,
                   terminated=terminated)
    layout = _Layout(reward, time_dim)
    into = layout.into
    vs, advantages = compute_vtrace(
        into(log_pi), into(log_mu), into(state_value), into(reward),
        into(done if terminated is None else terminated),
        None if terminated is None else into(done), _scalar("gamma", gamma),
        _scalar("rho_thresh", rho_thresh), _scalar("c_thresh", c_thresh),
        next_values=into(next_state_value), time_major=layout.time_major)
    return layout.back(advantages), layout.back(vs)


# ---------------------------------------------------------------- TorchRL's modules

#: TorchRL names the value modules call, and their replacements here.
_REPLACED: dict[str, Callable[..., Any]] = {
    "generalized_advantage_estimate": generalized_advantage_estimate,
    "vec_generalized_advantage_estimate": vec_generalized_advantage_estimate,
    "td_lambda_return_estimate": td_lambda_return_estimate,
    "vec_td_lambda_return_estimate": vec_td_lambda_return_estimate,
    "vtrace_advantage_estimate": vtrace_advantage_estimate,
}

#: Arguments that may hold per-step tensors in TorchRL (then TorchRL's own code runs).
_SCALAR_ARGS = ("gamma", "lmbda", "rho_thresh", "c_thresh")


def _with_fallback(ours: Callable[..., Any], theirs: Callable[..., Any]) -> Callable[..., Any]:
    """``ours``, except for calls with per-step scalars (``steps_to_next_obs``), which
    go to TorchRL's original."""
    names = list(inspect.signature(theirs).parameters)

    @functools.wraps(theirs)
    def estimate(*args: Any, **kwargs: Any) -> Any:
        bound = dict(zip(names, args, strict=False)) | kwargs
        for name in _SCALAR_ARGS:
            value = bound.get(name)
            if isinstance(value, Tensor) and value.dim() != 0:
                return theirs(*args, **kwargs)
        if bound.get("rolling_gamma") is False:
            return theirs(*args, **kwargs)
        return ours(*args, **kwargs)

    return estimate


@contextmanager
def patch_torchrl() -> Iterator[None]:
    """Within the block, TorchRL's value modules (``GAE``, ``TDLambdaEstimator``,
    ``VTrace``) compute their estimates with these functions.

    It rebinds the functional names in ``torchrl.objectives.value.advantages`` (where
    the modules look them up) and restores them on exit. Calls these functions do not
    support (per-step gammas) still run TorchRL's own code.
    """
    module = importlib.import_module("torchrl.objectives.value.advantages")
    saved = {name: getattr(module, name) for name in _REPLACED if hasattr(module, name)}
    try:
        for name, original in saved.items():
            setattr(module, name, _with_fallback(_REPLACED[name], original))
        yield
    finally:
        for name, original in saved.items():
            setattr(module, name, original)
