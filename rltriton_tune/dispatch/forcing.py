"""Forcing a strategy: the ``force`` context manager and ``RLTRITON_TUNE_FORCE``.

Forcing bypasses profiles and heuristics (for benchmarks, debugging and CI,
which runs the Triton kernels on CPU tensors under ``TRITON_INTERPRET=1``).
The context manager is per thread / per asyncio task (a ``ContextVar``) and
nests; it wins over the environment variable.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any

from rltriton_tune.call import ProblemKey
from rltriton_tune.dispatch import registry
from rltriton_tune.settings import ENV_FORCE
from rltriton_tune.state import STATE

#: Keys used only to ask a strategy for its parameter names (Retrace's action axis adds
#: ``REDUCE_A``).
_SAMPLE_KEYS = (ProblemKey("gae", 4096, 128), ProblemKey("retrace", 4096, 128, a=8))


@dataclass(frozen=True)
class Forced:
    """A forced choice: strategy name, (name, value) parameter pairs, and where it came from."""

    strategy: str
    params: tuple[tuple[str, Any], ...]
    origin: str  # "force" or "env"

    def params_dict(self) -> dict[str, Any]:
        return dict(self.params)


_current: ContextVar[Forced | None] = ContextVar("rltriton_tune_forced", default=None)

#: Fast accessor used on the hot path.
current = _current.get


def make_forced(strategy: str, params: Mapping[str, Any], origin: str) -> Forced:
    """Validate a strategy name and parameter names/values; ValueError names the culprit."""
    if not isinstance(strategy, str):
        raise TypeError(f"strategy must be a str, got {type(strategy).__name__}")
    names = registry.known_names()
    if strategy not in names:
        raise ValueError(f"unknown strategy {strategy!r}; expected one of {', '.join(names)}")
    available = registry.all_strategies()
    if strategy not in available:
        raise ValueError(f"strategy {strategy!r} needs Triton, which is not available here")
    impl = available[strategy]
    allowed = {name for key in _SAMPLE_KEYS
               for name in (*impl.space(key), *impl.default_params(key))}
    for name, value in params.items():
        if name not in allowed:
            raise ValueError(f"unknown parameter {name!r} for strategy {strategy!r}; "
                             f"expected some of {', '.join(sorted(allowed))}")
        if isinstance(value, bool) or not isinstance(value, (int, str, float)):
            raise ValueError(f"parameter {name!r} of strategy {strategy!r} must be an int or "
                             f"str, got {value!r}")
    return Forced(strategy, tuple(sorted(params.items())), origin)


class force:  # noqa: N801 - used like a function: ``with force("tiled"):``
    """Run every estimator call in this context with ``strategy`` and ``params``.

    Parameters not given take the strategy's defaults for each key; a parameter that
    only some keys have (Retrace's ``REDUCE_A``) is ignored for the others. A config
    the strategy rejects for a call's shape is a ``ValueError`` at that call. The
    object can be entered again after it exits, and nested in itself; the names
    are checked on entering.
    """

    def __init__(self, strategy: str, **params: Any) -> None:
        self._strategy = strategy
        self._params = params
        self._tokens = threading.local()  # a stack of tokens per thread

    def __enter__(self) -> Forced:
        forced = make_forced(self._strategy, self._params, "force")
        stack: list[Token] = self._tokens.__dict__.setdefault("stack", [])
        stack.append(_current.set(forced))
        return forced

    def __exit__(self, *exc: object) -> None:
        _current.reset(self._tokens.stack.pop())


def _parse_value(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        return text


def parse_env(text: str) -> Forced:
    """Parse ``strategy[:k=v,k=v]`` (values that look like ints become ints)."""
    strategy, _, rest = text.strip().partition(":")
    params: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"{ENV_FORCE}={text!r}: expected 'strategy:k=v,k=v', "
                             f"bad item {item!r}")
        params[name.strip()] = _parse_value(value.strip())
    try:
        return make_forced(strategy.strip(), params, "env")
    except ValueError as exc:
        raise ValueError(f"{ENV_FORCE}={text!r}: {exc}") from None


def env_forced() -> Forced | None:
    """The choice forced by ``RLTRITON_TUNE_FORCE`` (as read at import or the last
    ``dispatch.reset``), or None when unset. A bad value is a ValueError at every call."""
    if not STATE.env_forced_parsed:
        text = STATE.settings.force
        forced = parse_env(text) if text else None
        STATE.env_forced, STATE.env_forced_parsed = forced, True
    return STATE.env_forced


def effective(ctx: Forced | None) -> Forced | None:
    """The forced choice in effect: the context manager's, else the environment's."""
    return ctx if ctx is not None else env_forced()
