"""Test doubles for the tuner: a torch strategy whose modes misbehave on purpose."""

from __future__ import annotations

from typing import Any

import pytest

from rltriton_tune.call import ProblemKey
from rltriton_tune.fallback import STRATEGIES
from rltriton_tune.strategy import InvalidConfig, Launcher, Params

REAL = STRATEGIES["torch"]


class Misbehaving:
    """Like the torch strategy, but mode ``loop`` raises, ``chunked`` returns wrong
    numbers, and ``chunk=8`` is an invalid config."""

    name = "torch"

    def available(self, device) -> bool:
        return True

    def space(self, key: ProblemKey) -> dict[str, list[Any]]:
        return {"mode": ["loop", "chunked", "doubling"], "chunk": [8, 16]}

    def validate(self, key: ProblemKey, params: Params) -> Params:
        if params.get("mode") == "chunked" and params.get("chunk") == 8:
            raise InvalidConfig("chunk=8 is not allowed here")
        return REAL.validate(key, params)

    def default_params(self, key: ProblemKey) -> Params:
        return {"mode": "doubling"}

    def skip_reason(self, key: ProblemKey, params: Params,
                    sm_count: int | None = None) -> str | None:
        return None

    def prepare(self, key: ProblemKey, params: Params) -> Launcher:
        mode = params["mode"]
        inner = REAL.prepare(key, params)
        if mode == "loop":
            def broken(call):
                raise RuntimeError("simulated compile error")
            return broken
        if mode == "chunked":
            return lambda call: tuple(o + 1.0 for o in inner(call))
        return inner


@pytest.fixture
def misbehaving() -> Misbehaving:
    return Misbehaving()
