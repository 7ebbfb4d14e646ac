"""force() and RLTRITON_TUNE_FORCE: validation, precedence, nesting, threads, and the
Triton strategies run through the public functions under TRITON_INTERPRET=1."""

from __future__ import annotations

import os
import threading

import pytest
import torch

from rltriton_tune import dispatch
from rltriton_tune.call import ProblemKey
from rltriton_tune.dispatch import explain, force, memo
from rltriton_tune.dispatch.forcing import parse_env
from rltriton_tune.estimators import ESTIMATORS
from rltriton_tune.kernels import STRATEGY_NAMES, triton_available
from rltriton_tune.problems import random_inputs
from rltriton_tune.reference import reference
from rltriton_tune.state import STATE

needs_interpreter = pytest.mark.skipif(
    not triton_available() or (not torch.cuda.is_available()
                               and os.environ.get("TRITON_INTERPRET") != "1"),
    reason="needs Triton (on CPU: TRITON_INTERPRET=1, set by tests/conftest.py)")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def check(key, seed=0):
    kwargs = random_inputs(key, device=DEVICE, seed=seed)
    got = ESTIMATORS[key.algorithm](**kwargs)
    got = got if isinstance(got, tuple) else (got,)
    want = reference(key.algorithm, **kwargs)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g.cpu().double(), w, rtol=1e-5, atol=1e-5)


def test_force_validates_strategy_and_params():
    with pytest.raises(ValueError, match="unknown strategy 'tiledd'"):
        with force("tiledd"):
            pass
    with pytest.raises(ValueError, match="unknown parameter 'BLOCK_Q' for strategy 'torch'"):
        with force("torch", BLOCK_Q=4):
            pass
    with pytest.raises(ValueError, match="parameter 'chunk' of strategy 'torch' must be"):
        with force("torch", chunk=[4]):
            pass


def test_forced_config_invalid_for_the_shape_is_a_clear_error():
    with force("torch", mode="nonsense"):
        with pytest.raises(ValueError, match="forced config torch .* is invalid for gae"):
            explain("gae", 4, 8, device="cpu")


def test_force_nests_and_restores():
    with force("torch", mode="loop"):
        assert explain("gae", 4, 8, device="cpu").params == {"mode": "loop"}
        with force("torch", mode="doubling"):
            d = explain("gae", 4, 8, device="cpu")
            assert (d.params, d.source) == ({"mode": "doubling"}, "forced")
        assert explain("gae", 4, 8, device="cpu").params == {"mode": "loop"}
    assert explain("gae", 4, 8, device="cpu").source == "fallback:cpu"


def test_force_applies_to_calls_and_is_memoised_separately():
    key = ProblemKey("gae", 4, 8)
    check(key)
    with force("torch", mode="chunked", chunk=2):
        check(key)
        assert memo.decisions()[(key, torch.device("cpu"))].params == {"mode": "chunked",
                                                                         "chunk": 2}
    check(key)
    assert len(STATE.table) == 2  # one launcher per (shape, forced choice)


def test_force_is_per_thread():
    seen = {}
    inside = threading.Event()
    done = threading.Event()

    def other():
        inside.wait()
        seen["other"] = explain("gae", 4, 8, device="cpu").source
        done.set()

    thread = threading.Thread(target=other)
    thread.start()
    with force("torch", mode="loop"):
        inside.set()
        done.wait(10)
        seen["here"] = explain("gae", 4, 8, device="cpu").source
    thread.join()
    assert seen == {"other": "fallback:cpu", "here": "forced"}


def test_env_force_is_parsed_and_used(monkeypatch):
    forced = parse_env("torch:mode=chunked, chunk=4")
    assert (forced.strategy, forced.params_dict()) == ("torch", {"mode": "chunked", "chunk": 4})
    monkeypatch.setenv("RLTRITON_TUNE_FORCE", "torch:mode=loop")
    dispatch.reset()
    d = explain("gae", 4, 8, device="cpu")
    assert (d.strategy, d.params, d.source, d.detail) == ("torch", {"mode": "loop"}, "forced",
                                                          "RLTRITON_TUNE_FORCE")
    check(ProblemKey("gae", 4, 8))
    with force("torch", mode="doubling"):  # the context manager wins over the environment
        assert explain("gae", 4, 8, device="cpu").params == {"mode": "doubling"}


@pytest.mark.parametrize(("text", "match"), [
    ("nosuch", "RLTRITON_TUNE_FORCE='nosuch': unknown strategy 'nosuch'"),
    ("torch:mode", "bad item 'mode'"),
    ("torch:BLOCK_N=4", "unknown parameter 'BLOCK_N'"),
])
def test_bad_env_force_is_a_clear_error(monkeypatch, text, match):
    monkeypatch.setenv("RLTRITON_TUNE_FORCE", text)
    dispatch.reset()
    with pytest.raises(ValueError, match=match):
        explain("gae", 4, 8, device="cpu")


@needs_interpreter
@pytest.mark.parametrize("strategy", STRATEGY_NAMES)  # every strategy can be forced
def test_forced_triton_strategy_matches_the_reference(strategy):
    layout = "time" if strategy == "sequential" else "env"
    keys = [ProblemKey("gae", 5, 17, layout=layout, flags="trunc"),
            ProblemKey("vtrace", 3, 9, layout=layout),
            ProblemKey("retrace", 3, 6, layout=layout, flags="trunc", a=3),
            ProblemKey("eligibility_traces", 4, 7, layout=layout, flags="seed")]
    with force(strategy):
        for key in keys:
            check(key)
            decision = memo.decisions()[(key, torch.device(DEVICE, 0) if DEVICE == "cuda"
                                         else torch.device("cpu"))]
            assert (decision.strategy, decision.source) == (strategy, "forced")


@needs_interpreter
@pytest.mark.parametrize("reduce_actions", [0, 1])
def test_a_forced_action_pre_pass_leaves_keys_without_actions_alone(reduce_actions):
    """REDUCE_A exists for Retrace keys only: forced, it serves Retrace, while the adjoint
    scans of Retrace's backward pass and other estimators run without it."""
    key = ProblemKey("retrace", 3, 5, flags="trunc", a=4)
    kwargs = random_inputs(key, device=DEVICE, seed=1)
    for name in ("action_probs_target", "next_q_values_all", "q_values"):
        kwargs[name] = kwargs[name].clone().requires_grad_()
    with force("tiled", REDUCE_A=reduce_actions):
        q_ret, adv = ESTIMATORS["retrace"](**kwargs)
        (q_ret.sum() + adv.sum()).backward()
        check(ProblemKey("gae", 4, 7, flags="last_value"))
        decision = explain("retrace", 3, 5, flags="trunc", A=4, device=DEVICE)
        assert decision.params["REDUCE_A"] == reduce_actions
        assert "REDUCE_A" not in explain("gae", 4, 7, device=DEVICE).params
    want = reference("retrace", **{k: v.detach() if torch.is_tensor(v) else v
                                   for k, v in kwargs.items()})
    for got, expected in zip((q_ret, adv), want, strict=True):
        torch.testing.assert_close(got.detach().cpu().double(), expected, rtol=1e-5, atol=1e-5)
    assert all(torch.isfinite(kwargs[n].grad).all()
               for n in ("action_probs_target", "next_q_values_all", "q_values"))


@needs_interpreter
def test_env_forced_triton_strategy_with_params(monkeypatch):
    monkeypatch.setenv("RLTRITON_TUNE_FORCE", "tiled:BLOCK_N=2,BLOCK_T=4")
    dispatch.reset()
    key = ProblemKey("discounted_returns", 5, 19, flags="bootstrap+trunc")
    check(key)
    decision = explain("discounted_returns", 5, 19, flags="trunc+bootstrap", device=DEVICE)
    assert decision.strategy == "tiled"
    assert decision.params["BLOCK_N"] == 2 and decision.params["BLOCK_T"] == 4
    dispatch.reset()


@pytest.mark.skipif(not triton_available(), reason="needs Triton")
def test_forcing_a_strategy_the_device_cannot_run(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")  # CPU tensors, no interpreter
    with force("tiled"):
        with pytest.raises(ValueError, match="forced strategy 'tiled' cannot run on device cpu"):
            explain("gae", 4, 8, device="cpu")
    monkeypatch.setenv("RLTRITON_TUNE_FORCE", "tiled")
    dispatch.reset()
    with pytest.warns(dispatch.FallbackWarning, match="ignoring RLTRITON_TUNE_FORCE"):
        assert explain("gae", 4, 8, device="cpu").source == "fallback:cpu"
