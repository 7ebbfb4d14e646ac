"""Replacing a stored entry takes a head-to-head in this process; ``--refresh`` re-times.

A test strategy makes one config of the CPU torch strategy slow for real (it sleeps
20 ms a call, about a hundred times the config's own time at this size), so the
outcome of every head-to-head is clear without trusting any number from a file.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import optuna
import pytest
import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.dispatch.devices import device_fingerprint
from rltriton_tune.fallback import STRATEGIES
from rltriton_tune.tune import refresh as refresh_module
from rltriton_tune.tune.evaluate import Evaluator
from rltriton_tune.tune.space import Candidate
from rltriton_tune.tune.study import finalize, stored_params
from rltriton_tune.tuning_db import Entry, load_profiles, record
from rltriton_tune.tuning_db.fingerprint import software_versions
from rltriton_tune.tuning_db.state import invalidate_cache

CPU = torch.device("cpu")
KEY = ProblemKey("gae", 8, 16)
REAL = STRATEGIES["torch"]
FAST = {"mode": "doubling"}
SLOW = {"mode": "loop"}


class SlowLoop:
    """The torch strategy, with mode ``loop`` made slow by a real sleep per call."""

    name = "torch"

    def __getattr__(self, name):
        return getattr(REAL, name)

    def prepare(self, key, params):
        inner = REAL.prepare(key, params)
        if params.get("mode") != "loop":
            return inner

        def slow(call):
            time.sleep(0.02)
            return inner(call)
        return slow


@pytest.fixture(autouse=True)
def _fresh_profiles():
    invalidate_cache()
    yield
    invalidate_cache()


def _evaluator() -> Evaluator:
    return Evaluator(KEY, CPU, {"torch": SlowLoop()}, time_budget_s=0.01)


def _stored(params, time_us: float, date: str) -> None:
    record(device_fingerprint(CPU), [Entry(KEY, "torch", dict(params), time_us, trials=5,
                                           date=date)])


def _study_that_found(params) -> optuna.Study:
    """An in-memory study whose only completed trial is ``params``."""
    study = optuna.create_study(direction="minimize")
    study.add_trial(optuna.trial.create_trial(
        params={}, distributions={}, value=1.0,
        user_attrs={"candidate": f"torch({params})", "strategy": "torch", "params": params}))
    return study


def _current() -> Entry:
    invalidate_cache()
    return load_profiles(device_fingerprint(CPU)).entries[KEY.as_text()]


def test_a_worse_new_choice_does_not_replace_the_stored_entry():
    # The stored entry is old and claims a terrible time: neither its date nor its
    # number decides; timing its config beside the new choice does.
    _stored(FAST, 1e6, "2000-01-01T00:00:00Z")
    result = finalize(_study_that_found(SLOW), KEY, CPU, evaluator=_evaluator(),
                      measure_baselines=False)
    assert result.stored is not None and result.kept_stored
    assert result.runner_up.candidate.params == SLOW  # both were timed, in this process
    kept = _current()
    assert kept.params == FAST and kept.device_time_us < 1e6  # a fresh time, not the file's


def test_a_better_new_choice_replaces_an_entry_dated_in_the_future():
    _stored(SLOW, 0.001, "9999-12-31T00:00:00Z")
    result = finalize(_study_that_found(FAST), KEY, CPU, evaluator=_evaluator(),
                      measure_baselines=False)
    assert not result.kept_stored and result.runner_up.candidate.params == SLOW
    assert _current().params == FAST


def test_a_stored_config_that_fails_here_is_replaced_without_a_timing():
    _stored({"mode": "no-such-mode"}, 1.0, "2026-01-01T00:00:00Z")
    result = finalize(_study_that_found(SLOW), KEY, CPU, evaluator=_evaluator(),
                      measure_baselines=False)
    assert "no-such-mode" in result.stored_error
    assert _current().params == SLOW


def test_refresh_retimes_and_keeps_or_replaces_by_head_to_head(monkeypatch):
    monkeypatch.setattr(refresh_module, "make_evaluator", lambda *a, **k: _evaluator())
    monkeypatch.setattr(refresh_module, "heuristic_choice", lambda key, device: None)
    fp = device_fingerprint(CPU)
    record(fp, [Entry(KEY, "torch", SLOW, 0.001, runner_up={"strategy": "torch",
                                                             "params": FAST},
                      date="9999-12-31T00:00:00Z")])
    invalidate_cache()
    (done,) = refresh_module.refresh(CPU, ["gae"])
    assert done.replaced and done.new.params == FAST
    assert done.new.runner_up["params"] == SLOW
    assert done.seconds is not None and done.seconds > 0
    assert _current().params == FAST
    assert _current().extra.get("refreshed") == refresh_module.REFRESH_VERSION
    # the chosen config was also timed at the key's off-grid companions and with the
    # other flag sets real calls carry, which are recorded (the slow one, far slower at
    # the key, could not be chosen: it is not timed there)
    times = _current().extra["companions"]
    assert sorted(times) == ["gae|bootstrap+trunc|float32|env|N=5|T=9",
                             "gae|bootstrap+trunc|float32|env|N=8|T=16",
                             "gae|last_value|float32|env|N=5|T=9",
                             "gae|last_value|float32|env|N=8|T=16",
                             "gae|none|float32|env|N=11|T=15", "gae|none|float32|env|N=5|T=9"]
    assert all(us > 0 for us in times.values())
    assert _current().software == software_versions()  # re-timed on this stack
    (again,) = refresh_module.refresh(CPU, ["gae"])  # now the stored config wins: kept
    assert not again.replaced and _current().params == FAST


def test_refresh_starts_no_entry_past_its_deadline(monkeypatch):
    """--max-seconds: an entry not yet started when the deadline passes is left as stored
    (and not marked refreshed), so --missing-only picks it up on the next run."""
    monkeypatch.setattr(refresh_module, "make_evaluator", lambda *a, **k: _evaluator())
    monkeypatch.setattr(refresh_module, "heuristic_choice", lambda key, device: None)
    _stored(SLOW, 0.001, "9999-12-31T00:00:00Z")
    assert refresh_module.refresh(CPU, ["gae"], deadline=time.monotonic() - 1) == []
    assert _current().params == SLOW and not _current().extra.get("refreshed")
    (done,) = refresh_module.refresh(CPU, ["gae"], deadline=time.monotonic() + 600)
    assert _current().extra.get("refreshed") == refresh_module.REFRESH_VERSION


def test_refresh_with_no_working_config_leaves_the_entry(monkeypatch):
    monkeypatch.setattr(refresh_module, "make_evaluator", lambda *a, **k: _evaluator())
    monkeypatch.setattr(refresh_module, "heuristic_choice", lambda key, device: None)
    _stored({"mode": "no-such-mode"}, 3.0, "2026-01-01T00:00:00Z")
    (done,) = refresh_module.refresh(CPU, ["gae"])
    assert done.new is None and "no config works here" in done.error
    assert _current().params == {"mode": "no-such-mode"}


def test_a_choice_for_the_neighbourhood_keeps_the_fastest_other_as_runner_up(monkeypatch):
    """When the companions pick a finalist slower at the key, the entry records it, its
    companion times, and the fastest of the others as its runner-up."""
    from rltriton_tune.tune import study as study_module
    from rltriton_tune.tune.neighbours import Choice

    seen = []

    def pick_slowest(key, measured, *args, **kwargs):
        seen.append([o.candidate.params["mode"] for o in measured])
        return Choice(len(measured) - 1, ("gae|none|float32|env|N=5|T=9",),
                      (tuple(float(i + 1) for i in range(len(measured))),))

    monkeypatch.setattr(study_module, "choose_for_neighbourhood", pick_slowest)
    _stored(FAST, 1.0, "2026-01-01T00:00:00Z")
    result = finalize(_study_that_found(SLOW), KEY, CPU, evaluator=_evaluator(),
                      measure_baselines=False)
    assert seen == [["doubling", "loop"]]  # fastest first
    assert result.best.candidate.params == SLOW
    assert result.runner_up.candidate.params == FAST
    entry = _current()
    assert entry.params == SLOW and entry.runner_up["params"] == FAST
    assert entry.extra["companions"] == {"gae|none|float32|env|N=5|T=9": 2.0}
    # without the neighbourhood choice, the fastest at the key wins
    result = finalize(_study_that_found(FAST), KEY, CPU, evaluator=_evaluator(),
                      measure_baselines=False, neighbourhood=False)
    assert result.best.candidate.params == FAST and len(seen) == 1
    assert "companions" not in _current().extra


def test_refresh_times_the_rules_config_and_keeps_it_when_faster(monkeypatch):
    """The built-in rules' config for the device is a contender: after a kernel change it
    can beat a stored config that no study or runner-up would bring back."""
    from rltriton_tune.tune.space import Candidate

    asked = []

    def rules(key, space, sm_count):
        asked.append((key, sm_count))
        return Candidate("torch", dict(FAST))

    monkeypatch.setattr(refresh_module, "make_evaluator", lambda *a, **k: _evaluator())
    monkeypatch.setattr(refresh_module, "heuristic_choice", lambda key, device: None)
    monkeypatch.setattr(refresh_module, "builtin_choice", rules)
    _stored(SLOW, 0.001, "2026-01-01T00:00:00Z")  # no runner-up to fall back on
    (done,) = refresh_module.refresh(CPU, ["gae"])
    assert asked == [(KEY, refresh_module.device_sm_count(CPU))]
    assert done.replaced and done.new.params == FAST
    assert _current().params == FAST and _current().runner_up["params"] == SLOW


def test_refresh_times_the_configs_of_related_entries_and_keeps_one_when_faster(monkeypatch):
    """The configs the device's related entries chose (``related_choices``: other flag
    sets, dtypes, estimators and shapes) are contenders: they bring strategies the
    stored config, its runner-up and the rules never offer. The entry records how many
    there were."""
    from rltriton_tune.tune.space import Candidate

    asked = []

    def related(key, device, space):
        asked.append((key, device))
        return [Candidate("torch", dict(FAST)), Candidate("torch", dict(SLOW))]

    monkeypatch.setattr(refresh_module, "make_evaluator", lambda *a, **k: _evaluator())
    monkeypatch.setattr(refresh_module, "heuristic_choice", lambda key, device: None)
    monkeypatch.setattr(refresh_module, "builtin_choice", lambda *a: None)
    monkeypatch.setattr(refresh_module, "related_choices", related)
    _stored(SLOW, 0.001, "2026-01-01T00:00:00Z")  # no runner-up to fall back on
    (done,) = refresh_module.refresh(CPU, ["gae"])
    assert asked == [(KEY, CPU)]
    assert done.replaced and done.new.params == FAST
    # the stored config is among them: one joined the contenders
    assert _current().params == FAST and _current().extra["related"] == 1


def _record_contenders(monkeypatch) -> list:
    """Make a refresh time nothing but record its contenders (in the returned list), with
    only the entry's own configs among them (no dispatch, rules, rl-triton or related
    ones)."""
    timed = []

    class Recording:
        time_budget_s = 0.01

        def evaluate(self, contenders, budget_s=None, gate=True):
            timed.extend(contenders)
            return []

        def close(self):
            pass

    monkeypatch.setattr(refresh_module, "make_evaluator", lambda *a, **k: Recording())
    monkeypatch.setattr(refresh_module, "heuristic_choice", lambda key, device: None)
    monkeypatch.setattr(refresh_module, "builtin_choice", lambda *a: None)
    monkeypatch.setattr(refresh_module, "rl_triton_finalist", lambda *a: None)
    monkeypatch.setattr(refresh_module, "related_choices", lambda *a: [])
    return timed


def test_refresh_times_the_stored_config_with_each_switch_setting(monkeypatch):
    """Retrace's action pre-pass came after its entries were tuned: a refresh times the
    stored config with ``REDUCE_A`` flipped too, so it finds where the pre-pass pays
    without a new search; other estimators and the torch fallback get no variant."""
    from rltriton_tune.tune.space import Candidate

    retrace = ProblemKey("retrace", 64, 32, flags="trunc", a=4)
    stored = Candidate("tiled", {"BLOCK_N": 8, "BLOCK_T": 16, "num_warps": 1,
                                 "num_stages": 1, "REDUCE_A": 0})
    assert refresh_module.switch_variants(retrace, stored) == [
        Candidate("tiled", {**stored.params, "REDUCE_A": 1})]
    # An entry stored before a switch existed has its default setting, 0; flat also
    # offers the tile order of backward scans.
    bare = Candidate("flat", {"BLOCK_N": 1, "num_warps": 2, "num_stages": 1})
    assert refresh_module.switch_variants(retrace, bare) == [
        Candidate("flat", {**bare.params, "REDUCE_A": 1}),
        Candidate("flat", {**bare.params, "DESCEND": 1})]
    # The register cap is a variant where it caps something (8 warps or more)
    wide = Candidate("flat", {"BLOCK_N": 1, "num_warps": 16, "num_stages": 1})
    assert refresh_module.switch_variants(retrace, wide) == [
        Candidate("flat", {**wide.params, "REDUCE_A": 1}),
        Candidate("flat", {**wide.params, "DESCEND": 1}),
        Candidate("flat", {**wide.params, "TWO_BLOCKS": 1})]
    assert refresh_module.switch_variants(KEY, Candidate("tiled", dict(stored.params))) == []
    assert refresh_module.switch_variants(retrace, Candidate("torch", FAST)) == []

    timed = _record_contenders(monkeypatch)
    done = refresh_module.refresh_entry(Entry(retrace, "tiled", dict(stored.params), 1.0), CPU)
    assert "no config works here" in done.error
    assert [c.params["REDUCE_A"] for c in timed] == [0, 1]


def test_refresh_times_flat_configs_of_backward_scans_in_both_tile_orders():
    """``DESCEND`` (flat only, env-major backward scans): a refresh times the stored flat
    config with its tiles descending too; forward scans, time-major keys and other
    strategies get no such variant."""
    from rltriton_tune.tune.space import Candidate

    flat = Candidate("flat", {"BLOCK_N": 1, "num_warps": 4, "num_stages": 1})
    gae = ProblemKey("gae", 333, 150, flags="last_value")
    assert refresh_module.switch_variants(gae, flat) == [
        Candidate("flat", {**flat.params, "DESCEND": 1})]
    on = Candidate("flat", {**flat.params, "DESCEND": 1})
    assert refresh_module.switch_variants(gae, on) == [
        Candidate("flat", {**flat.params, "DESCEND": 0})]
    assert refresh_module.switch_variants(ProblemKey("eligibility_traces", 333, 150), flat) == []
    assert refresh_module.switch_variants(ProblemKey("gae", 333, 150, layout="time"), flat) == []
    tiled = Candidate("tiled", {"BLOCK_N": 1, "BLOCK_T": 64, "num_warps": 1, "num_stages": 1})
    assert refresh_module.switch_variants(gae, tiled) == []


def test_a_winner_recorded_before_a_parameter_existed_is_stored_complete():
    """A stored runner-up from before flat had DESCEND can win a refresh; the entry then
    stores the setting it ran with (the default), so shipped entries validate unchanged."""
    from rltriton_tune.tune.space import Candidate
    from rltriton_tune.tune.study import runner_up_record, stored_params

    key = ProblemKey("discounted_returns", 512, 32)
    old = Candidate("flat", {"BLOCK_N": 4, "num_stages": 1, "num_warps": 4})
    assert stored_params(key, old) == {"BLOCK_N": 4, "DESCEND": 0, "TWO_BLOCKS": 0,
                                       "num_stages": 1, "num_warps": 4}
    assert stored_params(key, Candidate("torch", {"mode": "loop"})) == {"mode": "loop"}
    bad = Candidate("flat", {"BLOCK_N": 3})  # not a power of two: stored as it is
    assert stored_params(key, bad) == {"BLOCK_N": 3}
    outcome = type("Outcome", (), {"candidate": old,
                                   "timing": type("T", (), {"device_us": 2.0})()})()
    assert runner_up_record(outcome, key)["params"]["DESCEND"] == 0


def test_a_runner_up_stored_without_a_newer_parameter_is_not_timed_twice(monkeypatch):
    """The stored runner-up, recorded before flat had DESCEND, is the stored config's
    DESCEND=0 twin: the refresh times it once."""
    from rltriton_tune.tune import refresh as refresh_module
    from rltriton_tune.tuning_db import Entry

    key = ProblemKey("discounted_returns", 512, 32)
    full = {"BLOCK_N": 4, "DESCEND": 0, "TWO_BLOCKS": 0, "num_stages": 1, "num_warps": 4}
    old = {k: v for k, v in full.items() if k != "DESCEND"}
    seen = []

    class Evaluator:
        time_budget_s = 0.01

        def evaluate(self, contenders, budget_s=None, gate=False):
            seen.extend(c.label() for c in contenders)
            return []  # nothing works: the refresh reports and records nothing

        def close(self):
            pass

    monkeypatch.setattr(refresh_module, "make_evaluator", lambda *a, **k: Evaluator())
    for name in ("heuristic_choice", "rl_triton_finalist"):
        monkeypatch.setattr(refresh_module, name, lambda *a, **k: None)
    monkeypatch.setattr(refresh_module, "builtin_choice", lambda *a, **k: None)
    entry = Entry(key, "flat", full, 2.0, runner_up={"strategy": "flat", "params": old})
    refresh_module.refresh_entry(entry, CPU)
    assert len(seen) == len(set(seen)) == 2  # the stored config and its DESCEND=1 twin
    assert "flat(BLOCK_N=4, DESCEND=0, TWO_BLOCKS=0, num_stages=1, num_warps=4)" in seen


def test_a_sibling_gpus_entries_are_refreshed_without_their_evidence(monkeypatch):
    """A GPU served by a sibling's profile re-times its entries; what the sibling measured
    (trials, baselines) is not carried into this GPU's profile."""
    from rltriton_tune.tuning_db import locations

    h200 = {"kind": "cuda", "name": "NVIDIA H200", "capability": "9.0", "sm_count": 132,
            "abi": 1}
    h100 = {**h200, "name": "NVIDIA H100 80GB HBM3"}
    sibling = Entry(KEY, "torch", dict(FAST), 3.0, baselines={"torch_compile": 9.0},
                    trials=16, extra={"method": "optuna"})
    record(h200, [sibling], locations.shipped_dir())
    record(h100, [Entry(ProblemKey("gae", 16, 16), "torch", dict(FAST), 2.0, trials=4)])
    monkeypatch.setattr(refresh_module, "fingerprint_of", lambda device: h100)
    got = {e.key.as_text(): e for e in refresh_module.entries_to_refresh(CPU, ["gae"])}
    assert (got[KEY.as_text()].trials, got[KEY.as_text()].baselines,
            got[KEY.as_text()].extra) == (0, {}, {})
    assert got[KEY.as_text()].params == FAST
    assert got["gae|none|float32|env|N=16|T=16"].trials == 4  # this GPU's own: as stored


def test_a_refresh_cut_short_has_covered_every_algorithms_plain_keys_first():
    """Entries come plain float32 first, for every algorithm at a shape before the next
    shape (coarse to fine), in the order the algorithms were asked for; flag sets and
    other dtypes after them."""
    shapes = [(8, 8), (4096, 4096), (64, 512)]
    keys = [ProblemKey(alg, n, t, dtype, "env", flags)
            for alg in ("gae", "vtrace") for n, t in shapes
            for dtype in ("float32", "bfloat16") for flags in ("none", "last_value")]
    record(device_fingerprint(CPU), [Entry(k, "torch", dict(FAST), 1.0) for k in keys])
    got = [e.key.as_text() for e in refresh_module.entries_to_refresh(CPU, ["vtrace", "gae"])]
    assert sorted(got) == sorted(k.as_text() for k in keys)
    assert got[:6] == [ProblemKey(alg, n, t).as_text()
                       for n, t in [(8, 8), (4096, 4096), (64, 512)]
                       for alg in ("vtrace", "gae")]
    later = got[6:]
    assert all("|none|float32|" not in text for text in later)
    # the keys differing in the flag set or the dtype alone come before those in both
    both = [i for i, text in enumerate(later) if "last_value|bfloat16" in text]
    assert both == list(range(len(later) - len(both), len(later)))
    assert refresh_module.entries_to_refresh(CPU, ["retrace"]) == []


def test_retraces_plain_key_in_a_refresh_is_its_truncations_key():
    """Retrace's plain flag set is ``trunc`` (its required flag): it comes before the
    bootstrap one, which sorts first by name."""
    keys = [ProblemKey("retrace", n, 16, "float32", "env", flags, 4)
            for n in (8, 64) for flags in ("bootstrap+trunc", "trunc")]
    record(device_fingerprint(CPU), [Entry(k, "torch", dict(FAST), 1.0) for k in keys])
    got = [e.key.flags for e in refresh_module.entries_to_refresh(CPU, ["retrace"])]
    assert got == ["trunc", "trunc", "bootstrap+trunc", "bootstrap+trunc"]


class RecordingPool:
    """A compile pool that passes every candidate and notes which keys it gated, and
    which of its checks were still running (``results`` not yet asked) at each timing
    the evaluators made (``busy_at_timing``)."""

    def __init__(self):
        self.keys, self.running, self.busy_at_timing = [], set(), []

    def start(self, key, device, candidates, limit=None):
        text = key.as_text()
        self.keys.append(text)
        self.running.add(text)
        verdicts = [None] * len(candidates)

        def results():
            self.running.discard(text)
            return verdicts

        return SimpleNamespace(results=results)

    def check(self, key, device, candidates, limit=None):
        return self.start(key, device, candidates, limit).results()


def test_refresh_gates_its_contenders_in_the_pool_at_the_key_and_its_companions(monkeypatch):
    """``tune --refresh`` hands its compile pool down: the contenders are gated in the
    pool's workers at the entry's key and at every companion (each one a binary of its
    own), not one after another in the refreshing process."""
    from rltriton_tune.tune import study as study_module

    monkeypatch.setattr(refresh_module, "heuristic_choice", lambda key, device: None)
    record(device_fingerprint(CPU), [Entry(KEY, "torch", SLOW, 1.0, runner_up={
        "strategy": "torch", "params": FAST}, date="2026-01-01T00:00:00Z")])
    invalidate_cache()
    pool = RecordingPool()
    make_evaluator = study_module.make_evaluator

    def watched(*args, **kwargs):  # each companion's timing notes the checks running
        evaluator = make_evaluator(*args, **kwargs)
        evaluate = evaluator.evaluate

        def timed(*a, **k):
            pool.busy_at_timing.append(sorted(pool.running))
            return evaluate(*a, **k)

        evaluator.evaluate = timed
        return evaluator

    monkeypatch.setattr(study_module, "make_evaluator", watched)
    (done,) = refresh_module.refresh(CPU, ["gae"], pool=pool)
    assert done.new is not None
    assert pool.keys[0] == KEY.as_text()
    # every companion's candidates were handed to the pool at once, up front, and their
    # timing took those verdicts; a finalist an off-grid screen kept (the CPU timings
    # decide whether one is) is gated later at the other partly filled companions, for
    # itself alone
    companions = _current().extra["companions"]
    assert sorted(pool.keys[1:1 + len(companions)]) == sorted(companions)
    assert set(pool.keys[1 + len(companions):]) <= set(companions)
    # and no companion's timing ran beside a check (the gate's kernels would disturb it)
    assert len(pool.busy_at_timing) == len(companions)
    assert not any(pool.busy_at_timing), pool.busy_at_timing


def test_finalize_gates_the_finalists_at_the_companions_in_the_pool():
    """A tuning run's pool also serves its final round: the finalists are gated at each
    of the key's companions in the pool's workers."""
    study = _study_that_found(FAST)
    study.add_trial(optuna.trial.create_trial(
        params={}, distributions={}, value=2.0,
        user_attrs={"candidate": f"torch({SLOW})", "strategy": "torch", "params": SLOW}))
    pool = RecordingPool()
    result = finalize(study, KEY, CPU, pool=pool, measure_baselines=False, record=False)
    companions = result.choice.extra()["companions"]  # two finalists: timed at each
    assert companions and set(companions) <= set(pool.keys)


@pytest.mark.parametrize("path", ["refresh", "finalize"])
def test_rl_tritons_config_is_the_floor_of_the_neighbourhood_choice(monkeypatch, path):
    """Where rl-triton's config is among the contenders (on CUDA), the neighbourhood
    choice is told which one it is (``neighbours.choose``'s ``floor``), in a refresh and
    in a tuning run's final round."""
    from rltriton_tune.tune import study as study_module
    from rltriton_tune.tune.neighbours import Choice
    from rltriton_tune.tune.space import Candidate

    floors = []

    def spy(key, finalists, key_us, *args, floor=None, **kwargs):
        floors.append(None if floor is None else finalists[floor].params)
        return Choice(0, floor_held=floor is not None)

    floor = Candidate("torch", dict(SLOW))
    monkeypatch.setattr(study_module, "choose", spy)
    monkeypatch.setattr(study_module, "rl_triton_finalist", lambda *a: floor)
    monkeypatch.setattr(refresh_module, "rl_triton_finalist", lambda *a: floor)
    monkeypatch.setattr(refresh_module, "heuristic_choice", lambda key, device: None)
    monkeypatch.setattr(refresh_module, "builtin_choice", lambda *a: None)
    monkeypatch.setattr(refresh_module, "make_evaluator", lambda *a, **k: _evaluator())
    if path == "refresh":
        _stored(FAST, 1.0, "2026-01-01T00:00:00Z")
        (done,) = refresh_module.refresh(CPU, ["gae"])
        assert done.new is not None and done.new.extra["floor"] == floor.label()
    else:
        finalize(_study_that_found(FAST), KEY, CPU, evaluator=_evaluator(),
                 measure_baselines=False, record=False)
    assert floors == [SLOW]
    # without it among them (off CUDA), there is no floor
    monkeypatch.setattr(study_module, "rl_triton_finalist", lambda *a: None)
    monkeypatch.setattr(refresh_module, "rl_triton_finalist", lambda *a: None)
    floors.clear()
    if path == "refresh":
        refresh_module.refresh(CPU, ["gae"])
    else:
        finalize(_study_that_found(FAST), KEY, CPU, evaluator=_evaluator(),
                 measure_baselines=False, record=False)
    assert floors == [None]


def test_a_refresh_records_the_off_grid_config_and_drops_a_stale_one(monkeypatch):
    """The choice's off-grid config (``neighbours.off_grid_choice``) is recorded with the
    entry; a later refresh whose choice has none leaves none behind."""
    from rltriton_tune.tune.neighbours import Choice, OffGrid

    below = "gae|none|float32|env|N=5|T=9"
    beyond = "gae|none|float32|env|N=9|T=19"
    choices = [Choice(0, (below, beyond), ((1.3, 1.0), (1.0, 1.3)),
                      off_grid=OffGrid(1, ("torch", dict(SLOW)), ((below, 1.0),)),
                      beyond_timed=True),
               Choice(0, (below, beyond), ((1.0, 1.3), (2.0, 1.0)),
                      off_grid_beyond=OffGrid(1, ("torch", {"mode": "loop"}), ((beyond, 1.0),)),
                      beyond_timed=True),
               Choice(0, (below,), ((1.0, 1.3),))]
    monkeypatch.setattr(refresh_module, "make_evaluator", lambda *a, **k: _evaluator())
    monkeypatch.setattr(refresh_module, "heuristic_choice", lambda key, device: None)
    monkeypatch.setattr(refresh_module, "choose_for_neighbourhood",
                        lambda *a, **k: choices.pop(0))
    record(device_fingerprint(CPU), [Entry(KEY, "torch", FAST, 1.0, runner_up={
        "strategy": "torch", "params": SLOW}, date="2026-01-01T00:00:00Z")])
    invalidate_cache()
    refresh_module.refresh(CPU, ["gae"])
    assert _current().extra["off_grid"] == {"strategy": "torch", "params": SLOW,
                                            "companions": {below: 1.0}}
    assert _current().extra["off_grid_beyond"] is None  # timed beyond: the entry's own
    refresh_module.refresh(CPU, ["gae"])
    assert _current().extra["off_grid"] is None
    # completed with its strategy's defaults, as the entry's own config is
    assert _current().extra["off_grid_beyond"]["params"] == stored_params(
        KEY, Candidate("torch", {"mode": "loop"}))
    refresh_module.refresh(CPU, ["gae"])  # nothing beyond timed: no stale field left
    assert _current().extra["off_grid"] is None
    assert "off_grid_beyond" not in _current().extra


def test_a_refresh_times_the_stored_off_grid_config(monkeypatch):
    """Calls of other shapes take the off-grid config: a refresh times it beside the
    others, so that it can keep its place (or win the key)."""
    timed = _record_contenders(monkeypatch)
    off = {"strategy": "torch", "params": SLOW, "companions": {}}
    refresh_module.refresh_entry(Entry(KEY, "torch", FAST, 1.0, extra={"off_grid": off}),
                                 CPU)
    assert [c.params["mode"] for c in timed] == ["doubling", "loop"]


def test_prechecked_verdicts_serve_the_candidates_they_were_started_for():
    """A companion's verdicts started ahead serve its timing for the candidates they were
    made for; only the others (a screen added one) are gated, and all are timed
    together."""
    from rltriton_tune.tune.space import Candidate
    from rltriton_tune.tune.study import Prechecked

    calls = []

    class Evaluator:
        def verdicts(self, candidates):
            calls.append(("gated", [c.params["mode"] for c in candidates]))
            return ["refused" if c.params == CHUNKED else None for c in candidates]

        def evaluate(self, candidates, budget_s=None, gate=True, gated=None):
            calls.append((len(candidates), gate, gated))
            return []

        def close(self):
            calls.append("closed")

    CHUNKED = {"mode": "chunked"}
    ahead = [Candidate("torch", FAST), Candidate("torch", SLOW)]
    checked = Prechecked(Evaluator(), [c.label() for c in ahead], ["failed", None])
    checked.evaluate(ahead, budget_s=0.1)
    checked.evaluate([ahead[1], Candidate("torch", CHUNKED), ahead[0]], budget_s=0.1)
    checked.evaluate(ahead, budget_s=0.1, gate=False)
    checked.close()
    assert calls == [(2, True, ["failed", None]),
                     ("gated", ["chunked"]), (3, True, [None, "refused", "failed"]),
                     (2, False, None), "closed"]
