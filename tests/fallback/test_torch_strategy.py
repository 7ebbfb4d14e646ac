"""The "torch" strategy behind the Strategy protocol, and the dispatch seam."""

from __future__ import annotations

import pytest
import torch

from rltriton_tune import dispatch
from rltriton_tune.fallback import CPU_MODES, STRATEGIES, compile_usable, default_mode
from rltriton_tune.strategy import InvalidConfig

from .helpers import assert_matches, expected, make_case, make_key

STRATEGY = STRATEGIES["torch"]


def test_protocol_basics():
    assert STRATEGY.name == "torch"
    for device in ("cpu", "meta"):
        assert STRATEGY.available(torch.device(device))


def test_space_lists_cpu_modes_and_compile_only_with_cuda():
    space = STRATEGY.space(make_key("gae", 64, 1000))
    assert set(CPU_MODES) <= set(space["mode"])
    assert ("compile" in space["mode"]) == compile_usable()
    assert space["chunk"] and all(2 <= c < 1000 for c in space["chunk"])
    assert STRATEGY.space(make_key("gae", 64, 1))["chunk"] == [2]


@pytest.mark.parametrize("params, message", [
    ({"mode": "fast"}, "mode must be one of"),
    ({"mode": "chunked", "chunk": 1}, "chunk must be an integer >= 2"),
    ({"mode": "chunked", "chunk": 8.0}, "chunk must be an integer >= 2"),
    ({"mode": "loop", "block": 4}, "unknown parameter"),
])
def test_validate_rejects_invalid(params, message):
    with pytest.raises(InvalidConfig, match=message):
        STRATEGY.validate(make_key("gae", 4, 64), params)


@pytest.mark.skipif(compile_usable(), reason="compile is valid where CUDA is available")
def test_compile_is_invalid_without_cuda():
    with pytest.raises(InvalidConfig, match="compile"):
        STRATEGY.validate(make_key("gae", 4, 64), {"mode": "compile"})


def test_validate_normalises():
    key = make_key("gae", 4, 100)
    assert STRATEGY.validate(key, {"mode": "loop", "chunk": 64}) == {"mode": "loop"}
    assert STRATEGY.validate(key, {"mode": "chunked"}) == {"mode": "chunked", "chunk": 8}
    assert STRATEGY.validate(key, {"mode": "chunked", "chunk": 16}) == {"mode": "chunked",
                                                                         "chunk": 16}
    assert STRATEGY.validate(key, {}) == STRATEGY.default_params(key)


@pytest.mark.parametrize("n, t, mode", [(1, 10**6, "doubling"), (16, 8192, "doubling"),
                                        (256, 128, "doubling"), (4096, 32, "loop"),
                                        (100_000, 64, "loop"), (4096, 8192, "chunked")])
def test_default_rule(n, t, mode):
    assert default_mode(n, t) == mode
    params = STRATEGY.default_params(make_key("gae", n, t))
    assert params["mode"] == mode
    assert STRATEGY.validate(make_key("gae", n, t), params) == params


@pytest.mark.parametrize("params", [{"mode": m} for m in CPU_MODES] + [{"mode": "chunked",
                                                                       "chunk": 4}])
def test_prepare_gives_a_working_launcher(params):
    key = make_key("vtrace", 3, 21, "bootstrap+trunc", "time", "bfloat16")
    kwargs, call = make_case(key)
    launcher = STRATEGY.prepare(key, params)
    assert_matches(launcher(call), expected("vtrace", kwargs), "bfloat16")


def test_dispatch_seam_runs_the_fallback_on_cpu():
    key = make_key("gae", 5, 33, "last_value")
    kwargs, call = make_case(key)
    assert_matches(dispatch.run(call), expected("gae", kwargs), "float32")


def test_measure_reports_every_mode():
    from rltriton_tune.tune.cpu_modes import measure

    rows = measure("discounted_returns", "time", torch.device("cpu"), False,
                   grid=((3, 40), (1, 30_000)))
    assert set(rows[0]["times_ms"]) == set(CPU_MODES)
    assert set(rows[1]["times_ms"]) == {"chunked", "doubling"}
    assert all(v > 0 for row in rows for v in row["times_ms"].values())
    assert rows[0]["default"] == default_mode(3, 40)
