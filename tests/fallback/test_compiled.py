"""The torch strategy's torch.compile modes on CPU.

On a GPU machine these modes compile with inductor (tests marked ``gpu`` in
test_large.py). Here dynamo traces the same whole-call graph and runs it with its
``eager`` backend, in seconds: the strategy's mode mapping, the traced builder, scan
and finisher of every estimator, and the launcher's edge cases are checked on CPU.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from rltriton_tune.call import Call
from rltriton_tune.fallback import STRATEGIES, compiled
from rltriton_tune.fallback import torch_strategy as fallback_strategy

from .helpers import FLAG_SETS, assert_matches, expected, make_case, make_key

TORCH = STRATEGIES["torch"]


@pytest.fixture
def compile_on_cpu(monkeypatch):
    """torch.compile with dynamo's eager backend, and the compile modes allowed here."""
    import torch._dynamo

    real_compile = torch.compile
    monkeypatch.setattr(torch, "compile",
                        lambda fn, **kw: real_compile(fn, **dict(kw, backend="eager")))
    monkeypatch.setattr(fallback_strategy, "compile_usable", lambda: True)
    compiled._compiled.cache_clear()  # no graph compiled with another backend
    torch._dynamo.reset()
    yield
    compiled._compiled.cache_clear()
    torch._dynamo.reset()


@pytest.mark.parametrize("algorithm", sorted(FLAG_SETS))
def test_compile_doubling_mode_matches_reference(compile_on_cpu, algorithm):
    for layout in ("env", "time"):
        key = make_key(algorithm, 3, 11, FLAG_SETS[algorithm][-1], layout)
        params = TORCH.validate(key, {"mode": "compile_doubling"})
        assert params == {"mode": "compile_doubling"}
        kwargs, call = make_case(key, seed=4)
        assert_matches(TORCH.prepare(key, params)(call), expected(algorithm, kwargs), "float32")


def test_compile_mode_runs_the_associative_scan(compile_on_cpu, monkeypatch):
    """``compile`` is the associative scan (generic combine mode off CUDA)."""
    seen = []
    real = compiled._scan_for

    def spy(name, device):
        seen.append((name, device.type))
        return real(name, device)

    monkeypatch.setattr(compiled, "_scan_for", spy)
    key = make_key("vtrace", 2, 9, "bootstrap+trunc", "time")
    kwargs, call = make_case(key, seed=6)
    assert_matches(TORCH.prepare(key, {"mode": "compile"})(call), expected("vtrace", kwargs),
                   "float32")
    assert seen == [("associative", "cpu")]


def test_retrace_out_of_range_action_gives_a_nan_row(compile_on_cpu):
    key = make_key("retrace", 3, 12, "trunc")
    kwargs, call = make_case(key, seed=1)
    actions = call.tensors["actions"].clone()
    actions[1, 5] = 99
    call = dataclasses.replace(call, tensors=dict(call.tensors, actions=actions))
    q_ret, adv = TORCH.prepare(key, {"mode": "compile_doubling"})(call)
    assert torch.isnan(q_ret[1]).all() and torch.isnan(adv[1]).all()
    want = expected("retrace", kwargs)
    for row in (0, 2):
        torch.testing.assert_close(q_ret[row].double(), want[0][row], rtol=2e-5, atol=2e-5)


def test_one_graph_per_key_and_scalars(compile_on_cpu):
    """The compiled launcher keys its graphs by problem and scalar values, and an empty
    call returns empty outputs without compiling."""
    key = make_key("gae", 2, 7)
    launcher = TORCH.prepare(key, {"mode": "compile_doubling"})
    for gamma in (0.9, 0.5, 0.9):
        kwargs, call = make_case(key, seed=2, gamma=gamma)
        assert_matches(launcher(call), expected("gae", kwargs), "float32")
    assert compiled._compiled.cache_info().currsize == 2
    empty_key = make_key("gae", 0, 7)
    nothing = torch.empty(0, 7)
    empty = Call("gae", {"rewards": nothing, "values": nothing, "terminateds": nothing},
                 {"gamma": 0.9, "lambda_": 0.9}, n=0, t=7)
    outs = TORCH.prepare(empty_key, {"mode": "compile_doubling"})(empty)
    assert [o.shape for o in outs] == [(0, 7)]
    assert compiled._compiled.cache_info().currsize == 2


def test_unknown_baseline_scan_is_an_error():
    with pytest.raises(ValueError, match="scan must be one of"):
        compiled.compiled_launcher(make_key("gae", 2, 7), "blelloch")
