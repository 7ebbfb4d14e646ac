"""End-to-end dispatch on CPU: correct results, memo behaviour, threads, logging,
corrupt profiles, launch failures and online mode."""

from __future__ import annotations

import logging
import threading
import warnings

import pytest
import torch

from rltriton_tune import dispatch
from rltriton_tune.algorithms import ESTIMATOR_NAMES
from rltriton_tune.call import ProblemKey
from rltriton_tune.dispatch import memo, registry
from rltriton_tune.dispatch.decide import Decision
from rltriton_tune.estimators import ESTIMATORS, prepare_call
from rltriton_tune.problems import random_inputs
from rltriton_tune.reference import reference
from rltriton_tune.state import STATE
from rltriton_tune.tuning_db import Entry, load_profiles
from rltriton_tune.tuning_db.fingerprint import device_fingerprint

KEYS = {
    "gae": ProblemKey("gae", 5, 17, flags="trunc"),
    "vtrace": ProblemKey("vtrace", 4, 9),
    "retrace": ProblemKey("retrace", 3, 7, flags="trunc", a=4),
    "lambda_returns": ProblemKey("lambda_returns", 6, 11, flags="bootstrap+trunc"),
    "discounted_returns": ProblemKey("discounted_returns", 2, 30, layout="time"),
    "eligibility_traces": ProblemKey("eligibility_traces", 7, 5, flags="seed"),
    "episodic_prefix_sum": ProblemKey("episodic_prefix_sum", 3, 12, flags="starts_at"),
}


def as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def assert_matches_reference(key, seed=0):
    kwargs = random_inputs(key, seed=seed)
    got = as_tuple(ESTIMATORS[key.algorithm](**kwargs))
    want = as_tuple(reference(key.algorithm, **kwargs))
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g.double(), w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_every_estimator_is_correct_through_dispatch(algorithm):
    assert_matches_reference(KEYS[algorithm])
    assert_matches_reference(KEYS[algorithm], seed=1)  # memo hit
    decision = memo.decisions()[(KEYS[algorithm], torch.device("cpu"))]
    assert (decision.strategy, decision.source) == ("torch", "fallback:cpu")


def test_memo_returns_the_same_launcher_and_prepares_once(monkeypatch):
    prepares = []
    impl = registry.torch_strategies()["torch"]
    real_prepare = type(impl).prepare

    def counting_prepare(self, key, params):
        prepares.append(key)
        return real_prepare(self, key, params)

    monkeypatch.setattr(type(impl), "prepare", counting_prepare)
    call = prepare_call("gae", **random_inputs(KEYS["gae"]))
    assert memo.lookup(call) is None
    first = dispatch.run(call)
    launcher = memo.lookup(call)
    assert launcher is not None
    second = dispatch.run(call)
    assert memo.lookup(call) is launcher
    assert len(prepares) == 1
    torch.testing.assert_close(first, second)


def test_inline_memo_key_matches_memo_key():
    call = prepare_call("retrace", **random_inputs(KEYS["retrace"]))
    dispatch.run(call)
    assert memo.memo_key(call, None) in STATE.table
    assert len(STATE.table) == 1


def test_memo_hit_calls_only_the_memoised_launcher(monkeypatch):
    """A hit goes straight to the memoised launcher: no decision, no preparation.
    (Its cost is measured by benchmarks/dispatch_overhead.py, not asserted here.)"""
    from rltriton_tune.dispatch import forcing

    call = prepare_call("gae", **random_inputs(ProblemKey("gae", 3, 4)))
    dispatch.run(call)
    outputs = (torch.empty(0),)
    seen = []

    def noop(c):
        seen.append(c)
        return outputs

    STATE.table[memo.memo_key(call, forcing.current())] = noop

    def no_miss(*args):
        raise AssertionError("a memo hit must not take the miss path")

    monkeypatch.setattr(dispatch, "_miss", no_miss)
    assert dispatch.run(call) is outputs
    assert dispatch.run(call) is outputs
    assert seen == [call, call]


def test_concurrent_threads_with_different_shapes_get_correct_results():
    keys = [ProblemKey("gae", n, t) for n, t in [(3, 5), (4, 9), (7, 3), (2, 17)]] + \
           [ProblemKey("vtrace", 3, 8), ProblemKey("discounted_returns", 5, 6, layout="time")]
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(keys) * 2)

    def worker(key, seed):
        try:
            barrier.wait()
            for i in range(5):
                assert_matches_reference(key, seed=seed + i)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k, s))
               for s in (0, 100) for k in keys]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert len(memo.decisions()) == len(keys)


def test_debug_log_records_each_new_decision_once(monkeypatch, caplog):
    monkeypatch.setenv("RLTRITON_TUNE_LOG", "debug")
    dispatch.reset()
    caplog.set_level(logging.DEBUG, logger="rltriton_tune")
    for _ in range(3):
        assert_matches_reference(KEYS["gae"])
        assert_matches_reference(KEYS["vtrace"])
    lines = [r.getMessage() for r in caplog.records if r.name == "rltriton_tune"]
    assert len(lines) == 2, lines
    assert KEYS["gae"].as_text() in lines[0] and "fallback:cpu" in lines[0]


def test_no_log_without_the_env_var(caplog):
    caplog.set_level(logging.DEBUG, logger="rltriton_tune")
    assert_matches_reference(KEYS["gae"])
    assert not [r for r in caplog.records if r.name == "rltriton_tune"]


@pytest.mark.parametrize("content", [b"{\"schema\": \"rltriton-tune-profile\", \"vers",
                                     b"\x00\xff garbage", b"{\"schema\": \"other\"}"])
def test_corrupt_profile_gives_one_warning_and_correct_results(tmp_path, monkeypatch, content):
    monkeypatch.setenv("RLTRITON_TUNE_DB", str(tmp_path))
    dispatch.reset()
    (tmp_path / "broken.json").write_bytes(content)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert_matches_reference(KEYS["gae"])
        assert_matches_reference(KEYS["vtrace"])
        assert_matches_reference(KEYS["gae"], seed=3)
    relevant = [w for w in caught if "broken.json" in str(w.message)]
    assert len(relevant) == 1, [str(w.message) for w in caught]


def test_cpu_profile_entry_is_used_by_calls(profiles):
    key = KEYS["gae"]
    path = profiles.write(device_fingerprint("cpu"), [(key, "torch", {"mode": "loop"})])
    assert_matches_reference(key)
    decision = memo.decisions()[(key, torch.device("cpu"))]
    assert decision.source == f"profile:{path}"
    assert decision.params == {"mode": "loop"}


def test_calls_follow_a_profile_changed_in_the_process(profiles):
    """An entry recorded, then cleared, in this process serves the next calls of a key that
    was already memoised, as ``explain`` says, and a ``force()`` memo survives."""
    from rltriton_tune.tuning_db import clear, record

    key = KEYS["gae"]
    cpu = torch.device("cpu")
    fp = device_fingerprint("cpu")
    assert_matches_reference(key)
    assert memo.decisions()[(key, cpu)].origin == "fallback"
    with dispatch.force("torch", mode="loop"):
        assert_matches_reference(key)
    record(fp, [Entry(key, "torch", {"mode": "chunked", "chunk": 4}, 1.0)])
    assert dispatch.explain("gae", 5, 17, flags="trunc").origin == "profile"
    assert_matches_reference(key, seed=1)
    decision = memo.decisions()[(key, cpu)]
    assert (decision.origin, decision.params) == ("profile", {"mode": "chunked", "chunk": 4})
    clear(fp)
    assert_matches_reference(key, seed=2)
    assert memo.decisions()[(key, cpu)].origin == "fallback"
    assert any(k[-1] is not None for k in STATE.table)  # the force() context's launcher


class FailingTriton:
    """A Triton-like strategy whose launcher raises, like a compile error on first launch."""

    name = "tiled"

    def __init__(self):
        self.launches = 0

    def available(self, device):
        return True

    def space(self, key):
        return {"BLOCK_N": [1]}

    def default_params(self, key):
        return {"BLOCK_N": 1}

    def validate(self, key, params):
        return dict(params)

    def prepare(self, key, params):
        def launch(call):
            self.launches += 1
            raise RuntimeError("CompilationError: fake")
        return launch


def test_a_config_that_fails_is_dropped_and_the_call_still_succeeds(monkeypatch):
    """A config that fails to compile on this stack (here: every launch of the fake Triton
    strategy raises) is dropped for the process with one warning; the call succeeds."""
    failing = FailingTriton()
    monkeypatch.setattr(registry, "triton_strategies", lambda: {"tiled": failing})
    real_decide = memo.decide

    def decide_tiled(key, device, forced=None, *, online=False):
        if any(s == "tiled" for _, s, _ in STATE.failed_configs):
            return real_decide(key, device, forced, online=online)
        return Decision(key, "tiled", {"BLOCK_N": 1}, "rules", "test")

    monkeypatch.setattr(memo, "decide", decide_tiled)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            assert_matches_reference(KEYS["gae"])
            assert_matches_reference(KEYS["vtrace"])
    assert failing.launches == 1  # dropped after its first failure, for every shape
    dropped = [w for w in caught if "not using it again" in str(w.message)]
    assert len(dropped) == 1 and "fake" in str(dropped[0].message)
    decision = memo.decisions()[(KEYS["gae"], torch.device("cpu"))]
    assert decision.strategy == "torch" and decision.source.startswith("fallback:")
    assert any("fake" in reason for reason in STATE.failed_configs.values())


def test_failure_of_the_torch_fallback_propagates():
    kwargs = random_inputs(KEYS["retrace"])
    kwargs["actions"] = kwargs["actions"] + 100  # out of range: a ValueError on CPU
    with pytest.raises(ValueError):
        ESTIMATORS["retrace"](**kwargs)


def fake_tuner(monkeypatch, tune_key):
    """Install online tuning with ``tune_key`` standing in for the Optuna search."""
    from rltriton_tune.tune import online

    monkeypatch.setattr(online, "tune_key", tune_key)
    online.install()
    monkeypatch.setattr(STATE, "online_tuner", STATE.online_tuner)


def test_online_mode_tunes_records_and_reuses(monkeypatch):
    monkeypatch.setenv("RLTRITON_TUNE_ONLINE", "1")
    monkeypatch.setenv("RLTRITON_TUNE_ONLINE_BUDGET", "0.5")
    dispatch.reset()
    seen = []

    def tune_key(key, device, budget_s):
        seen.append((key, device, budget_s))
        return Entry(key=key, strategy="torch", params={"mode": "chunked", "chunk": 4},
                     device_time_us=12.0)

    fake_tuner(monkeypatch, tune_key)
    key = KEYS["gae"]
    assert_matches_reference(key)
    assert seen == [(key, torch.device("cpu"), 0.5)]
    decision = memo.decisions()[(key, torch.device("cpu"))]
    assert (decision.source, decision.params) == ("online", {"mode": "chunked", "chunk": 4})
    assert load_profiles(device_fingerprint("cpu")).entries[key.as_text()].strategy == "torch"
    # A later process (simulated by a reset) finds the recorded entry and does not tune again.
    dispatch.reset()
    assert_matches_reference(key, seed=2)
    assert len(seen) == 1
    assert memo.decisions()[(key, torch.device("cpu"))].source.startswith("profile:")


def test_online_mode_turned_on_after_import_tunes_after_a_reset(monkeypatch):
    """The environment is read again by ``dispatch.reset()``: RLTRITON_TUNE_ONLINE=1 set
    after the import turns online tuning on there, as it does at import."""
    from rltriton_tune.tune import online

    seen = []

    def tune_key(key, device, budget_s):
        seen.append(key)
        return Entry(key=key, strategy="torch", params={"mode": "loop"}, device_time_us=1.0)

    monkeypatch.setattr(online, "tune_key", tune_key)
    monkeypatch.setattr(STATE, "online_tuner", None)
    monkeypatch.setenv("RLTRITON_TUNE_ONLINE", "1")
    dispatch.reset()
    assert_matches_reference(KEYS["gae"])
    assert seen == [KEYS["gae"]]
    assert memo.decisions()[(KEYS["gae"], torch.device("cpu"))].origin == "online"


@pytest.mark.parametrize("outcome", ["raise", "none"])
def test_online_failure_falls_back_to_the_normal_order(monkeypatch, outcome):
    monkeypatch.setenv("RLTRITON_TUNE_ONLINE", "1")
    dispatch.reset()
    calls = []

    def tune_key(key, device, budget_s):
        calls.append(budget_s)
        if outcome == "raise":
            raise RuntimeError("tuner exploded")
        return None

    fake_tuner(monkeypatch, tune_key)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_matches_reference(KEYS["vtrace"])
        assert_matches_reference(KEYS["vtrace"], seed=1)
    assert calls == [2.0]  # default budget, tried once
    assert memo.decisions()[(KEYS["vtrace"], torch.device("cpu"))].source == "fallback:cpu"


@pytest.mark.parametrize("text", ["0", "False", "off", "no", ""])
def test_online_mode_off_never_tunes(monkeypatch, text):
    monkeypatch.setenv("RLTRITON_TUNE_ONLINE", text)
    dispatch.reset()
    fake_tuner(monkeypatch, lambda *a: pytest.fail("tuned without RLTRITON_TUNE_ONLINE"))
    assert_matches_reference(KEYS["gae"])



@pytest.mark.parametrize(("index", "guarded"), [(1, True), (0, False)])
def test_a_call_on_a_cuda_device_other_than_the_current_runs_under_its_guard(
        monkeypatch, index, guarded):
    """Kernels launch on the current CUDA device: a call whose tensors live on another
    runs under ``torch.cuda.device`` of theirs, as a torch op would; one on the current
    device takes no guard. (CPU check of the logic: devices and launch are stand-ins.)"""
    current = [0]
    entered = []

    class Guard:
        def __init__(self, device):
            self.device, self.before = torch.device(device), None

        def __enter__(self):
            entered.append(self.device)
            self.before, current[0] = current[0], self.device.index

        def __exit__(self, *exc):
            current[0] = self.before

    launched_on = []
    monkeypatch.setattr(dispatch, "current_cuda_device", lambda: current[0])
    monkeypatch.setattr(torch.cuda, "device", Guard)
    monkeypatch.setattr(dispatch, "_miss",
                        lambda call, mk, forced: launched_on.append(current[0]) or ("out",))
    call = prepare_call("gae", **random_inputs(ProblemKey("gae", 3, 4)))
    call._device = torch.device("cuda", index)
    assert dispatch.run(call) == ("out",)
    assert launched_on == [index]
    assert entered == ([torch.device("cuda", index)] if guarded else [])
    assert current == [0]
