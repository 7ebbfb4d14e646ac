"""The peers ``peers.py`` times beside rltriton-tune, each as "inputs -> outputs" on the
same inputs the public function gets.

- ``rl_triton``: rl-triton 0.1.3, whose public API this package copies (float32,
  env-major, CUDA only). Time-major inputs are handed over as transposed views, as a
  user with a ``[T, N]`` rollout buffer would have to; rl-triton copies them.
- ``torchrl``: TorchRL's vectorised functional estimator where one exists (GAE,
  V-trace, TD(lambda) returns, discounted returns), on ``[N, T, 1]`` inputs with the
  next-state values it expects precomputed (a TorchRL rollout stores them).
- ``torch_compile``: torch.compile of this package's torch fallback (the faster of the
  associative and the doubling scan), from :mod:`rltriton_tune.fallback.compiled`.

An adapter is ``prepare(kwargs) -> args`` (untimed: layout changes a user's storage
would already have), ``run(args) -> outputs`` (timed), and ``finish(outputs)``: the
outputs as this package returns them (order and layout), to check that the peer
computed the same numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

Kwargs = dict[str, Any]


def portable_source(source: str) -> str:
    """A decision's ``source`` with its profile path cut to the file name, so that rows of
    record read the same on every checkout (``profile:/abs/x.json`` -> ``profile:x.json``,
    ``borrowed:KEY@/abs/x.json`` -> ``borrowed:KEY@x.json``)."""
    head, sep, path = source.rpartition("@") if "@" in source else source.partition(":")
    if not sep or "/" not in path:
        return source
    return f"{head}{sep}{path.rsplit('/', 1)[-1]}"


class PeerUnavailable(Exception):
    """This peer cannot run this cell (the message says why; recorded in the row)."""


def _as_tuple(outputs: Any) -> tuple[torch.Tensor, ...]:
    return tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs,)


@dataclass(frozen=True)
class Adapter:
    prepare: Callable[[Kwargs], Any]
    run: Callable[[Any], Any]
    finish: Callable[[Any], tuple[torch.Tensor, ...]] = _as_tuple


def rl_triton_version() -> str | None:
    """rl-triton's version if it is importable, else None."""
    try:
        import rl_triton
    except Exception:  # noqa: BLE001 - any import failure means "not installed here"
        return None
    return str(getattr(rl_triton, "__version__", "?"))


# ---------------------------------------------------------------- rl-triton


def swap_time(value: Any, time_major: bool) -> Any:
    """A time-major tensor as the ``[N, T(, A)]`` view rl-triton takes (and back); anything
    else as it is."""
    if not time_major or not isinstance(value, torch.Tensor) or value.dim() < 2:
        return value
    return value.transpose(0, 1)  # [T, N(, A)] -> [N, T(, A)], a view


def rl_triton_adapter(algorithm: str, device: torch.device, dtype: str,
                      time_major: bool) -> Adapter:
    """rl-triton's function of the same name, on the same keyword arguments."""
    if rl_triton_version() is None:
        raise PeerUnavailable("rl_triton is not installed")
    if device.type != "cuda":
        raise PeerUnavailable("rl-triton's kernels need CUDA")
    if dtype != "float32":
        raise PeerUnavailable("rl-triton 0.1.3 takes float32 inputs only")
    import rl_triton

    function = getattr(rl_triton, f"compute_{algorithm}")

    def prepare(kwargs: Kwargs) -> Kwargs:
        return {name: swap_time(value, time_major)
                for name, value in kwargs.items() if name != "time_major"}

    def finish(outputs: Any) -> tuple[torch.Tensor, ...]:
        return tuple(swap_time(x, time_major) for x in _as_tuple(outputs))

    return Adapter(prepare, lambda args: function(**args), finish)


# ---------------------------------------------------------------- TorchRL


def _column(x: torch.Tensor, time_major: bool) -> torch.Tensor:
    """``[N, T]`` (or ``[T, N]``) -> TorchRL's ``[N, T, 1]``."""
    return (x.transpose(0, 1) if time_major else x).unsqueeze(-1)


def _next_values(kwargs: Kwargs, values: torch.Tensor) -> torch.Tensor:
    """V(s_{t+1}) as a TorchRL rollout stores it: ``values[t+1]``, the bootstrap value at
    the window's end and at truncations (SPEC's ``nv[t]``); ``[N, T, 1]``."""
    nv = torch.zeros_like(values)
    nv[:, :-1] = values[:, 1:]
    tm = kwargs.get("time_major", False)
    if kwargs.get("last_value") is not None:
        nv[:, -1, 0] = kwargs["last_value"].to(values.dtype)
    if kwargs.get("bootstrap_values") is not None:
        boot = _column(kwargs["bootstrap_values"], tm).to(values.dtype)
        nv[:, -1] = boot[:, -1]
        if kwargs.get("truncateds") is not None:
            trunc = _column(kwargs["truncateds"], tm) != 0
            nv = torch.where(trunc, boot, nv)
    return nv


def _return_targets(kwargs: Kwargs, rewards: torch.Tensor, lam: float) -> torch.Tensor:
    """TorchRL's ``next_state_value`` that gives SPEC's TD(lambda) / discounted returns:
    ``next_values`` (zero for discounted returns), the bootstrap value at truncations, and
    at the window's end the carry SPEC starts from, ``(1 - lambda) nv + lambda b[T-1]``."""
    tm = kwargs.get("time_major", False)
    nv = (_column(kwargs["next_values"], tm).to(rewards.dtype).clone()
          if "next_values" in kwargs else torch.zeros_like(rewards))
    boot = kwargs.get("bootstrap_values")
    boot = _column(boot, tm).to(rewards.dtype) if boot is not None else torch.zeros_like(nv)
    nv[:, -1] = (1 - lam) * nv[:, -1] + lam * boot[:, -1]
    if kwargs.get("truncateds") is not None:
        nv = torch.where(_column(kwargs["truncateds"], tm) != 0, boot, nv)
    return nv


def _dones(kwargs: Kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    tm = kwargs.get("time_major", False)
    term = _column(kwargs["terminateds"], tm) != 0
    trunc = kwargs.get("truncateds")
    done = term | (_column(trunc, tm) != 0) if trunc is not None else term
    return done, term


def torchrl_adapter(algorithm: str, time_major: bool) -> Adapter:
    """TorchRL's vectorised functional estimator for ``algorithm``."""
    try:
        from torchrl.objectives.value import functional as F
    except Exception as exc:  # noqa: BLE001
        raise PeerUnavailable(f"torchrl is not importable: {exc}") from None

    def prepare(kw: Kwargs) -> Kwargs:
        tm = kw.get("time_major", False)
        done, term = _dones(kw)
        rewards = _column(kw["rewards"], tm)
        args: Kwargs = {"reward": rewards, "done": done, "terminated": term,
                        "gamma": kw["gamma"]}
        if algorithm in ("gae", "vtrace"):
            values = _column(kw["values"], tm)
            args.update(state_value=values, next_state_value=_next_values(kw, values))
        if algorithm == "gae":
            args["lmbda"] = kw["lambda_"]
        elif algorithm == "vtrace":
            args.update(log_pi=_column(kw["log_pi_target"], tm),
                        log_mu=_column(kw["log_pi_behavior"], tm),
                        rho_thresh=kw["rho_bar"], c_thresh=kw["c_bar"])
        elif algorithm in ("lambda_returns", "discounted_returns"):
            lam = kw.get("lambda_", 1.0)
            args.update(lmbda=lam, next_state_value=_return_targets(kw, rewards, lam))
            if kw.get("truncateds") is not None:  # SPEC: a truncation bootstraps even
                args["terminated"] = term & (_column(kw["truncateds"], tm) == 0)  # if terminal
        return args

    functions: dict[str, Callable[..., Any]] = {
        "gae": F.vec_generalized_advantage_estimate,
        "vtrace": F.vtrace_advantage_estimate,
        "lambda_returns": F.vec_td_lambda_return_estimate,
        "discounted_returns": F.vec_td_lambda_return_estimate,  # with lambda = 1
    }
    if algorithm not in functions:
        raise PeerUnavailable(f"TorchRL has no functional estimator for {algorithm}")
    function = functions[algorithm]

    def finish(outputs: Any) -> tuple[torch.Tensor, ...]:
        found = tuple(swap_time(x.squeeze(-1), time_major) for x in _as_tuple(outputs))
        if algorithm == "vtrace":
            return found[::-1]  # TorchRL: (advantage, vs)
        return found[:1]  # GAE: (advantage, value target)

    return Adapter(prepare, lambda args: function(**args), finish)


# ---------------------------------------------------------------- torch.compile


def compile_adapter(key: Any, scan: str) -> Adapter:
    """torch.compile of the fallback with ``scan`` ("associative" or "doubling")."""
    from rltriton_tune.estimators import prepare_call
    from rltriton_tune.fallback.compiled import compiled_launcher

    launcher = compiled_launcher(key, scan)
    return Adapter(lambda kw: prepare_call(key.algorithm, **kw), launcher)

