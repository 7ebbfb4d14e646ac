"""Studies: budgets, resume, failures as failed trials, isolation, online mode, PostgreSQL."""

import multiprocessing as mp
import os
import sys
import textwrap

import optuna
import pytest
import torch
from optuna.trial import TrialState

from rltriton_tune.call import ProblemKey
from rltriton_tune.tune.evaluate import Evaluator
from rltriton_tune.tune.isolated import IsolatedEvaluator
from rltriton_tune.tune.space import Candidate, SearchSpace
from rltriton_tune.tune.study import finalize, open_study, run_trials, study_name, tune

CPU = torch.device("cpu")
KEY = ProblemKey("gae", 16, 24)


def _trials(storage: str, key: ProblemKey = KEY):
    from rltriton_tune.tune.storage import open_storage

    study = optuna.load_study(study_name=study_name(key, CPU), storage=open_storage(storage))
    return study.get_trials(deepcopy=False)


def test_interrupted_study_resumes_within_budget(tmp_path):
    storage = str(tmp_path / "s.journal")
    assert run_trials(KEY, CPU, trials=3, storage=storage) == 3
    assert run_trials(KEY, CPU, trials=6, storage=storage) == 3
    trials = _trials(storage)
    assert len(trials) == 6
    assert sorted(t.number for t in trials) == list(range(6))
    assert run_trials(KEY, CPU, trials=6, storage=storage) == 0


def test_an_interrupted_batch_queues_its_seeds_again(tmp_path):
    """Ctrl-C while a batch is evaluated leaves its trials running; the seed configs they
    took off the queue are queued again, so the resumed study still tries every one."""
    storage = str(tmp_path / "s.journal")
    study = open_study(KEY, CPU, storage, trials=8)
    seeds = [t.system_attrs["fixed_params"]
             for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING,))]
    assert len(seeds) >= 2

    class Interrupted:
        workers = 4

        def evaluate(self, candidates, **kw):
            raise KeyboardInterrupt

        def close(self):
            pass

    with pytest.raises(KeyboardInterrupt):
        run_trials(KEY, CPU, trials=8, study=study, evaluator=Interrupted())
    resumed = open_study(KEY, CPU, storage, trials=8)
    waiting = [t.system_attrs["fixed_params"]
               for t in resumed.get_trials(deepcopy=False, states=(TrialState.WAITING,))]
    assert sorted(map(repr, waiting)) == sorted(map(repr, seeds))
    run_trials(KEY, CPU, trials=8, study=resumed)
    tried = [t.params for t in resumed.get_trials(deepcopy=False)
             if t.state == TrialState.COMPLETE]
    for seed in seeds:
        assert any(all(p.get(k) == v for k, v in seed.items()) for p in tried), seed


def test_failures_are_failed_trials_not_crashes(misbehaving):
    space = SearchSpace(KEY, CPU, {"torch": misbehaving})
    evaluator = Evaluator(KEY, CPU, {"torch": misbehaving}, time_budget_s=0.005)
    study = open_study(KEY, CPU, ":memory:", trials=12, space=space)
    for params in ({"torch.mode": "loop"}, {"torch.mode": "chunked", "torch.chunk": 16},
                   {"torch.mode": "chunked", "torch.chunk": 8}, {"torch.mode": "doubling"}):
        study.enqueue_trial({"strategy": "torch", **params})
    run_trials(KEY, CPU, trials=12, study=study, evaluator=evaluator, space=space)
    trials = study.get_trials(deepcopy=False)
    assert len(trials) == 12
    failures = {t.user_attrs.get("candidate"): t.user_attrs.get("failure")
                for t in trials if t.state == TrialState.FAIL}
    assert "simulated compile error" in failures["torch(mode=loop)"]
    assert "differs" in failures["torch(chunk=16, mode=chunked)"]
    pruned = [t for t in trials if t.state == TrialState.PRUNED]
    assert pruned and all("invalid config" in t.user_attrs["failure"] for t in pruned)
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert complete and {t.user_attrs["candidate"] for t in complete} == {"torch(mode=doubling)"}
    result = finalize(study, KEY, CPU, evaluator=evaluator, space=space, record=False)
    assert result.best.candidate == Candidate("torch", {"mode": "doubling"})
    assert result.failed >= 2 and result.entry.trials == 12


def test_repeated_config_reuses_the_first_result():
    space = SearchSpace(KEY, CPU)
    study = open_study(KEY, CPU, ":memory:", trials=4, space=space)
    for _ in range(3):
        study.enqueue_trial({"strategy": "torch", "torch.mode": "loop"})
    calls = []
    evaluator = Evaluator(KEY, CPU, space.strategies, time_budget_s=0.005)
    real = evaluator.evaluate
    evaluator.evaluate = lambda cands, **kw: calls.append(len(cands)) or real(cands, **kw)
    queued = len(study.get_trials())  # the study's seed configs, then the three repeats
    run_trials(KEY, CPU, trials=queued, study=study,
               evaluator=evaluator, space=space, batch=1)
    loops = [t for t in study.get_trials() if t.user_attrs.get("candidate") == "torch(mode=loop)"]
    assert len(loops) >= 3 and len({t.value for t in loops}) == 1
    distinct = {t.user_attrs["candidate"] for t in study.get_trials()
                if t.state != TrialState.PRUNED}
    assert sum(calls) == len(distinct) < queued  # each config ran once; repeats reused it


def test_tune_records_entry_with_baseline_and_runner_up(tmp_path):
    from rltriton_tune.dispatch.devices import device_fingerprint
    from rltriton_tune.tuning_db import load_profiles

    result = tune(KEY, CPU, trials=5, storage=str(tmp_path / "j.journal"))
    entry = load_profiles(device_fingerprint(CPU)).entries[KEY.as_text()]
    assert entry.strategy == "torch" and entry.trials == 5
    assert "torch_loop" in entry.baselines and entry.device_time_us > 0
    assert entry.params == result.best.candidate.params


def test_isolated_worker_survives_a_crashing_config(tmp_path):
    script = tmp_path / "crashy_child.py"
    script.write_text(textwrap.dedent("""
        import os
        from rltriton_tune.fallback import STRATEGIES
        real = STRATEGIES["torch"]
        original = real.prepare
        def prepare(key, params):
            if params.get("mode") == "loop":
                os._exit(139)
            return original(key, params)
        real.prepare = prepare
        from rltriton_tune.tune.isolated import _child_main
        _child_main()
    """))
    evaluator = IsolatedEvaluator(KEY, CPU, time_budget_s=0.005,
                                  command=[sys.executable, str(script)])
    outs = evaluator.evaluate([Candidate("torch", {"mode": "doubling"}),
                               Candidate("torch", {"mode": "loop"}),
                               Candidate("torch", {"mode": "chunked", "chunk": 8})])
    assert outs[0].ok and outs[2].ok
    assert not outs[1].ok and "worker process died (exit status 139" in outs[1].error


def test_isolated_tuning_runs_to_a_recorded_entry(tmp_path):
    """``tune --isolate``: trials and the final re-measure in child processes, with the
    evaluator's default timing budget (one per device, as in-process)."""
    from rltriton_tune.dispatch.devices import device_fingerprint
    from rltriton_tune.tune.evaluate import default_budget_s
    from rltriton_tune.tuning_db import load_profiles

    assert IsolatedEvaluator(KEY, CPU).time_budget_s == default_budget_s(CPU) \
        == Evaluator(KEY, CPU, {}).time_budget_s
    result = tune(KEY, CPU, trials=2, storage=str(tmp_path / "j.journal"), isolate=True)
    entry = load_profiles(device_fingerprint(CPU)).entries[KEY.as_text()]
    assert entry.params == result.best.candidate.params and entry.device_time_us > 0


def test_online_tune_key_is_bounded_and_recorded(monkeypatch):
    """The trials stop at two thirds of the budget and the re-measure gets a share of
    the rest, on a clock the test moves (0.1 s at each reading), so a loaded machine
    changes nothing; the entry is recorded."""
    from types import SimpleNamespace

    from rltriton_tune.dispatch.devices import device_fingerprint
    from rltriton_tune.tune import online
    from rltriton_tune.tune import study as study_mod
    from rltriton_tune.tuning_db import load_profiles

    now = [0.0]

    def clock() -> float:
        now[0] += 0.1
        return now[0]

    fake_time = SimpleNamespace(monotonic=clock)
    monkeypatch.setattr(online, "time", fake_time)
    monkeypatch.setattr(study_mod, "time", fake_time)
    seen = {}

    def run_trials(*args, **kwargs):
        seen["timeout_s"] = kwargs["timeout_s"]
        seen["done"] = done = real_run_trials(*args, **kwargs)
        return done

    def finalize(*args, **kwargs):
        seen["remeasure_s"] = kwargs["remeasure_s"]
        return real_finalize(*args, **kwargs)

    real_run_trials, real_finalize = study_mod.run_trials, study_mod.finalize
    monkeypatch.setattr(study_mod, "run_trials", run_trials)
    monkeypatch.setattr(study_mod, "finalize", finalize)
    key = ProblemKey("discounted_returns", 8, 16)
    entry = online.tune_and_record(key, CPU, device_fingerprint(CPU), 1.0)
    assert entry is not None and entry.key == key
    assert key.as_text() in load_profiles(device_fingerprint(CPU)).entries
    assert seen["timeout_s"] == pytest.approx(2 / 3)
    # Start at 0.1 s, deadline set at 0.2 s (0.87 s): the loop's readings at 0.3 ... 0.8 s
    # run a trial each, the one at 0.9 s stops it, far below the 64-trial cap; at 1.0 s
    # 0.1 s of the budget is left, an eighth of it for the re-measure.
    assert 1 <= seen["done"] <= 6 < online.MAX_TRIALS
    assert seen["remeasure_s"] == pytest.approx(0.1 / 8)


def test_online_tune_key_never_raises(monkeypatch):
    import rltriton_tune.tune.space as space_mod
    from rltriton_tune.tune.online import tune_key

    def boom(*a, **k):
        raise RuntimeError("no strategies")

    monkeypatch.setattr(space_mod, "SearchSpace", boom)
    assert tune_key(KEY, CPU, 0.5) is None


def _pg_worker(url: str, key_text: str, trials: int, queue, barrier) -> None:
    key = ProblemKey.from_text(key_text)
    first = [True]

    def after_trial(_trial) -> None:
        # Each worker finishes one trial, then waits for the other to finish one:
        # both take part however the scheduler orders the two processes.
        if first[0]:
            first[0] = False
            barrier.wait(timeout=120)

    queue.put(run_trials(key, torch.device("cpu"), trials=trials, storage=url, batch=1,
                         on_trial=after_trial))


@pytest.mark.skipif(not os.environ.get("RLTRITON_TUNE_TEST_PG_URL"),
                    reason="RLTRITON_TUNE_TEST_PG_URL not set (run .ci/start-postgres.sh)")
def test_two_workers_share_one_postgresql_study():
    url = os.environ["RLTRITON_TUNE_TEST_PG_URL"]
    key = ProblemKey("discounted_returns", 16, 16)
    from rltriton_tune.tune.storage import open_storage

    storage = open_storage(url)
    name = study_name(key, CPU)
    try:
        optuna.delete_study(study_name=name, storage=storage)
    except KeyError:
        pass
    open_study(key, CPU, url, trials=16)  # created and seeded once, before the workers
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_pg_worker, args=(url, key.as_text(), 16, queue, barrier))
             for _ in range(2)]
    for p in procs:
        p.start()
    counts = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    trials = optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False)
    numbers = [t.number for t in trials]
    assert len(numbers) == len(set(numbers)) == sum(counts) >= 16
    assert sorted(numbers) == list(range(len(numbers)))
    assert all(t.state in (TrialState.COMPLETE, TrialState.FAIL, TrialState.PRUNED)
               for t in trials)
    assert all(c > 0 for c in counts)


def test_parallel_workers_share_one_journal_study(tmp_path):
    from rltriton_tune.tune.parallel import run_workers

    storage = str(tmp_path / "shared.journal")
    key = ProblemKey("eligibility_traces", 8, 16)
    open_study(key, CPU, storage, trials=8)
    events = []
    errors = run_workers([key], ["cpu", "cpu"], trials=8, timeout_s=None, storage=storage,
                         on_event=lambda kind, payload: events.append((kind, payload)))
    assert errors == []
    kinds = [kind for kind, _ in events]
    trials = _trials(storage, key)
    numbers = [t.number for t in trials]
    # Each worker counts the other's running trials, so the budget is overshot by at most
    # one batch (CPU evaluators run batches of one) when both ask at the same instant.
    assert len(numbers) == len(set(numbers)) == kinds.count("trial")
    assert 8 <= len(numbers) <= 9
    assert kinds.count("key-done") == 2
    (summary,) = [payload for kind, payload in events if kind == "finalized"]
    # Finalized once the budget was reached; the other worker may still have been
    # finishing its last trial then.
    assert summary["key"] == key.as_text() and 8 <= summary["trials"] <= len(numbers)
    assert summary["entry"]["algorithm"] == "eligibility_traces"


def test_running_trials_of_other_workers_hold_budget_until_stale(tmp_path):
    from datetime import datetime, timedelta

    from rltriton_tune.tune.study import STALE_AFTER_S, in_flight

    storage = str(tmp_path / "s.journal")
    study = open_study(KEY, CPU, storage, trials=5)
    for _ in range(3):
        study.ask()  # another worker's trials, still running
    assert in_flight(study) == 3
    later = datetime.now() + timedelta(seconds=STALE_AFTER_S + 1)
    assert in_flight(study, now=later) == 0
    assert run_trials(KEY, CPU, trials=5, storage=storage, shared=True) == 2
    # A lone run resuming after a crash: trials left running are dead, the budget is full.
    assert run_trials(KEY, CPU, trials=5, storage=storage) == 3


def test_new_study_is_seeded_with_winners_of_sibling_keys():
    """A time-major key starts from what the env-major key of the same shape chose."""
    from dataclasses import replace

    from rltriton_tune.dispatch.devices import device_fingerprint
    from rltriton_tune.tuning_db import Entry, record

    # Chunks the search space never proposes itself (it tries powers of two).
    sibling = Entry(key=KEY, strategy="torch", params={"mode": "chunked", "chunk": 13},
                    device_time_us=5.0, runner_up={"strategy": "torch", "params": {
                        "mode": "chunked", "chunk": 7}, "device_time_us": 6.0},
                    baselines={}, trials=10, date="2026-11-30T01:00:00Z")
    record(device_fingerprint(CPU), [sibling])
    time_major = replace(KEY, layout="time")
    study = open_study(time_major, CPU, ":memory:", trials=4)
    queued = [t.system_attrs["fixed_params"] for t in study.get_trials(deepcopy=False)]
    space = SearchSpace(time_major, CPU)
    for chunk in (13, 7):
        want = space.trial_params(Candidate("torch", {"mode": "chunked", "chunk": chunk}))
        assert want in queued[:3]


def test_new_study_is_seeded_with_the_rules_config(monkeypatch):
    """The built-in rules' config for the device's SM count is queued too, even where a
    profile entry serves the key (dispatch's own choice is then that entry)."""
    from rltriton_tune.tune import study as study_module

    key = ProblemKey("gae", 16, 300)  # long enough for several chunk sizes

    def queued(rules_config):
        monkeypatch.setattr(study_module, "builtin_choice",
                            lambda key, space, sm_count: rules_config)
        study = open_study(key, CPU, ":memory:", trials=4)
        return [t.system_attrs["fixed_params"] for t in study.get_trials(deepcopy=False)]

    space = SearchSpace(key, CPU)
    without = queued(None)
    # a valid config of the space that nothing else queues
    extra = next(c for c in (Candidate("torch", {"mode": "chunked", "chunk": chunk})
                             for chunk in space._spaces["torch"]["chunk"])
                 if space.trial_params(c) not in without)
    seen = []
    monkeypatch.setattr(study_module, "device_sm_count", lambda device: seen.append(1) or 99)
    assert space.trial_params(extra) in queued(extra)
    assert seen == [1]


def test_parallel_workers_stop_at_max_seconds_and_report_incomplete_keys(tmp_path):
    from rltriton_tune.tune.parallel import run_workers

    storage = str(tmp_path / "shared.journal")
    keys = [ProblemKey("gae", 8, 16), ProblemKey("discounted_returns", 8, 16)]
    for key in keys:
        open_study(key, CPU, storage, trials=5)
    events = []
    errors = run_workers(keys, ["cpu", "cpu"], trials=5, timeout_s=None, storage=storage,
                         max_seconds=1e-6, on_event=lambda kind, p: events.append((kind, p)))
    assert errors == []
    summaries = {p["key"]: p for kind, p in events if kind == "finalized"}
    assert set(summaries) == {k.as_text() for k in keys}
    assert all("incomplete" in p and "entry" not in p for p in summaries.values())


def test_worker_finalizes_each_key_right_after_its_trials(tmp_path):
    """Finalizing overlaps the other workers' trials: a worker finalizes its key before
    it starts the next key's trials (shown with one worker, where the order is fixed)."""
    from rltriton_tune.tune.parallel import run_workers

    storage = str(tmp_path / "shared.journal")
    keys = [ProblemKey("gae", 4, 8), ProblemKey("discounted_returns", 4, 8)]
    events = []
    errors = run_workers(keys, ["cpu"], trials=3, timeout_s=None, storage=storage,
                         on_event=lambda kind, p: events.append((kind, p)))
    assert errors == []
    order = [(kind, p if kind == "key-done" else p["key"]) for kind, p in events
             if kind in ("key-done", "finalized")]
    assert order == [(kind, key.as_text()) for key in keys for kind in ("key-done", "finalized")]


def test_a_study_of_an_older_search_space_is_not_resumed(tmp_path):
    """Optuna refuses categorical choices that changed; the space revision in the study
    name starts a fresh study instead of failing on the old one."""
    import optuna

    from rltriton_tune.tune import study as study_mod
    from rltriton_tune.tune.storage import open_storage

    key = ProblemKey("gae", 8, 8)
    storage = str(tmp_path / "s.journal")
    old_name = study_name(key, CPU).replace(f"/s{study_mod.SPACE_REVISION}", "/s1")
    old = optuna.create_study(study_name=old_name, storage=open_storage(storage))
    old.add_trial(optuna.trial.create_trial(
        params={"strategy": "retired"},
        distributions={"strategy": optuna.distributions.CategoricalDistribution(["retired"])},
        value=1.0))
    result = tune(key, CPU, trials=3, storage=storage)
    assert result.study_name.endswith(f"/s{study_mod.SPACE_REVISION}")
    assert result.entry is not None and result.entry.strategy == "torch"


def test_winners_of_later_siblings_join_the_final_round(tmp_path):
    """A study never tried what sibling estimators found after it was seeded:
    ``untried_related`` lists those configs and ``finalize(extra=...)`` times them
    among the finalists (when they pass the gate)."""
    from rltriton_tune.dispatch.devices import device_fingerprint
    from rltriton_tune.tune.study import untried_related
    from rltriton_tune.tuning_db import Entry, record

    storage = str(tmp_path / "s.journal")
    space = SearchSpace(KEY, CPU)
    study = open_study(KEY, CPU, storage, trials=4, space=space)
    run_trials(KEY, CPU, trials=4, study=study, space=space)
    # Found later in the run by a sibling: a chunk the space never proposes itself.
    sibling = ProblemKey("lambda_returns", KEY.n, KEY.t)
    record(device_fingerprint(CPU), [Entry(sibling, "torch", {"mode": "chunked", "chunk": 13},
                                           5.0, trials=4, date="2026-12-01T00:00:00Z")])
    extra = untried_related(study, KEY, CPU, space)
    assert [c.label() for c in extra] == ["torch(chunk=13, mode=chunked)"]

    timed: list[str] = []

    class Recording(Evaluator):
        def evaluate(self, candidates, *args, **kwargs):
            timed.extend(c.label() for c in candidates)
            return super().evaluate(candidates, *args, **kwargs)

    evaluator = Recording(KEY, CPU, {"torch": space.strategies["torch"]})
    result = finalize(study, KEY, CPU, evaluator=evaluator, space=space, record=False,
                      measure_baselines=False, neighbourhood=False, extra=extra)
    assert "torch(chunk=13, mode=chunked)" in timed and result.best is not None


def test_a_later_siblings_config_replaces_the_entry_only_when_it_wins(monkeypatch):
    """The CLI's second round records a new entry only when one of the configs from
    outside the study comes out fastest; the first round's winner or another of the
    study's own finalists winning leaves the first result standing."""
    from types import SimpleNamespace

    from rltriton_tune.cli import tuning
    from rltriton_tune.tune import study as study_module
    from rltriton_tune.tune.evaluate import Outcome
    from rltriton_tune.tune.measure import Timing
    from rltriton_tune.tune.study import StudyResult

    first_best = Candidate("torch", {"mode": "loop"})
    sibling = Candidate("torch", {"mode": "chunked", "chunk": 13})
    first = StudyResult(KEY, "s", Outcome(first_best, Timing(9.0, 9.0)), None, trials=4,
                        baselines={"torch_loop": 9.0})
    first.entry = "first entry"
    recorded = []
    monkeypatch.setattr(study_module, "untried_related", lambda *a: [sibling])
    monkeypatch.setattr("rltriton_tune.tuning_db.record", lambda fp, es: recorded.extend(es))
    args = SimpleNamespace(isolate=False, seed=0)
    rounds = []

    def final_round(winner):
        def fake(study, key, device, **kw):
            rounds.append([c.label() for c in kw["extra"]])
            return StudyResult(KEY, "s", Outcome(winner, Timing(4.0, 4.0)), None, trials=4)
        return fake

    monkeypatch.setattr(study_module, "finalize", final_round(first_best))
    assert tuning._against_later_siblings(KEY, None, None, first, CPU, args, ()) is first
    assert rounds == [[first_best.label(), sibling.label()]] and not recorded
    own = Candidate("torch", {"mode": "doubling"})  # a study finalist, re-measured faster
    monkeypatch.setattr(study_module, "finalize", final_round(own))
    assert tuning._against_later_siblings(KEY, None, None, first, CPU, args, ()) is first
    assert not recorded
    monkeypatch.setattr(study_module, "finalize", final_round(sibling))
    again = tuning._against_later_siblings(KEY, None, None, first, CPU, args, ())
    assert again.best.candidate == sibling and again.baselines == {"torch_loop": 9.0}
    assert [e.params for e in recorded] == [sibling.params]
