"""The compile pool: candidates gated in worker processes; dead workers fail only their own."""

import multiprocessing as mp
import os
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.tune.compile_pool import DIED, CompilePool, compile_pool_for
from rltriton_tune.tune.evaluate import Evaluator
from rltriton_tune.tune.space import Candidate, SearchSpace
from rltriton_tune.tune.study import all_strategies_for

CPU = torch.device("cpu")
KEY = ProblemKey("gae", 16, 24)


@pytest.fixture
def crashy(tmp_path, monkeypatch):
    """A worker task that kills its process for strategy "crash" (importable by the workers)."""
    (tmp_path / "crashy_task.py").write_text(textwrap.dedent("""
        import os

        def task(key, device, strategy, params):
            if strategy == "crash":
                os._exit(3)
            return None if strategy == "ok" else f"bad {strategy}"
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    import crashy_task

    return crashy_task.task


def test_workers_gate_real_candidates():
    good = Candidate("torch", {"mode": "loop"})
    with CompilePool(workers=2) as pool:
        results = pool.check(KEY, CPU, [good, Candidate("torch", {"mode": "nope"}),
                                         Candidate("missing", {})])
    assert results[0] is None
    assert "mode" in results[1]
    assert "unknown strategy 'missing'" in results[2]


def test_a_dying_worker_fails_only_the_candidate_that_killed_it(crashy):
    cands = [Candidate(s, {}) for s in ("ok", "crash", "ok", "other", "ok")]
    with CompilePool(workers=2, task=crashy) as pool:
        results = pool.check(KEY, CPU, cands)
        assert results == [None, DIED, None, "bad other", None]
        # The pool is replaced and keeps working.
        assert pool.check(KEY, CPU, [Candidate("ok", {})]) == [None]


@pytest.mark.parametrize("limit", [None, 1, 2])
def test_started_checks_give_the_same_verdicts_at_any_limit(crashy, limit):
    cands = [Candidate(s, {}) for s in ("ok", "crash", "ok", "other", "ok")]
    with CompilePool(workers=2, task=crashy) as pool:
        pending = pool.start(KEY, CPU, cands, limit)
        assert pending.results() == [None, DIED, None, "bad other", None]


@pytest.fixture
def recording(tmp_path, monkeypatch):
    """A worker task that marks itself running (a file in ``running/``) and records how
    many checks it saw running, itself included, when it started and before it ended.
    A check whose params hold ``wait`` waits for that event first (up to a minute: the
    check fails if it never comes); one holding ``done`` sets it as it ends."""
    (tmp_path / "running").mkdir()
    (tmp_path / "recording_task.py").write_text(textwrap.dedent("""
        import os

        def task(key, device, strategy, params):
            record = os.environ["RECORD_DIR"]
            mine = os.path.join(record, "running", strategy)
            open(mine, "w").close()
            seen = [len(os.listdir(os.path.join(record, "running")))]
            if "wait" in params and not params["wait"].wait(60):
                return f"{strategy} waited in vain"
            seen.append(len(os.listdir(os.path.join(record, "running"))))
            os.remove(mine)
            with open(os.path.join(record, strategy), "w") as f:
                f.write(" ".join(map(str, seen)))
            if "done" in params:
                params["done"].set()
            return None
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("RECORD_DIR", str(tmp_path))
    import recording_task

    def seen() -> dict[str, list[int]]:
        return {p.name: [int(x) for x in p.read_text().split()]
                for p in tmp_path.iterdir() if p.name.startswith("c")}

    return recording_task.task, seen


def test_a_slow_check_holds_one_slot_not_the_group(recording):
    """limit 2: c0 cannot end before c3 has (it waits for c3's event), so c1, c2 and c3
    must run one after another in the other slot while c0 holds its own (checks going
    out in groups would leave c0 waiting in vain); never more than two run at once."""
    task, seen = recording
    with mp.get_context("spawn").Manager() as manager:
        c3_done = manager.Event()
        cands = ([Candidate("c0", {"wait": c3_done})]
                 + [Candidate(f"c{i}", {}) for i in (1, 2)] + [Candidate("c3", {"done": c3_done})])
        with CompilePool(workers=4, task=task) as pool:
            assert pool.start(KEY, CPU, cands, limit=2).results() == [None] * 4
    counts = seen()
    assert sorted(counts) == ["c0", "c1", "c2", "c3"]
    assert all(1 <= n <= 2 for each in counts.values() for n in each), counts


def test_evaluator_takes_verdicts_gated_elsewhere(misbehaving):
    space = SearchSpace(KEY, CPU, {"torch": misbehaving})
    evaluator = Evaluator(KEY, CPU, all_strategies_for(CPU, space))
    doubling = Candidate("torch", {"mode": "doubling"})
    out = evaluator.evaluate([doubling, doubling], gated=[None, "failed elsewhere"])
    assert out[0].ok and out[1].error == "failed elsewhere"
    with pytest.raises(ValueError, match="1 verdicts for 2"):
        evaluator.evaluate([doubling, doubling], gated=[None])


def test_evaluator_uses_the_pool_for_the_gate(crashy):
    space = SearchSpace(KEY, CPU)
    evaluator = Evaluator(KEY, CPU, all_strategies_for(CPU, space),
                          pool=CompilePool(workers=1, task=crashy))
    try:
        out = evaluator.evaluate([Candidate("crash", {})])
    finally:
        evaluator.pool.close()
    assert not out[0].ok and out[0].error == DIED


@pytest.mark.parametrize("device, workers, isolate", [("cpu", None, False), ("cuda", 0, False),
                                                      ("cuda", None, True)])
def test_no_pool_where_it_cannot_help(device, workers, isolate):
    with compile_pool_for(torch.device(device), workers, isolate) as pool:
        assert pool is None



def test_default_workers_share_the_cores_and_stay_bounded(monkeypatch):
    from rltriton_tune.tune import compile_pool

    monkeypatch.setattr(compile_pool.os, "sched_getaffinity", lambda _pid: set(range(128)))
    assert compile_pool.default_workers() == compile_pool.MAX_DEFAULT_WORKERS == 16
    assert compile_pool.default_workers(share=16) == 8
    monkeypatch.setattr(compile_pool.os, "sched_getaffinity", lambda _pid: {0})
    assert compile_pool.default_workers(share=2) == 1


@pytest.mark.parametrize("keep_max, kept", [(1 << 40, True), (0, False)])
def test_a_worker_frees_a_big_keys_full_size_inputs_after_each_check(monkeypatch, keep_max,
                                                                      kept):
    """Which worker takes a check is not up to the pool, so a big key's full-size gate
    inputs are freed after each check instead of piling up in every worker."""
    from rltriton_tune.tune import compile_pool

    monkeypatch.setattr(compile_pool, "KEEP_INPUTS_MAX_BYTES", keep_max)
    monkeypatch.setattr(compile_pool, "_evaluators", {})
    key = ProblemKey("gae", 300, 300)  # above the gate's cap: a small copy plus full size
    verdict = compile_pool.check_in_worker(key.as_text(), "cpu", "torch", {"mode": "loop"})
    assert verdict is None
    [evaluator] = compile_pool._evaluators.values()
    assert evaluator.gate.small != key
    assert (evaluator.gate._full is not None) is kept
    compile_pool._forget_keys()


@pytest.fixture
def sleepy(tmp_path, monkeypatch):
    """A worker task that writes its process id to ``pids/`` and sleeps a minute (a long
    or hung compile)."""
    (tmp_path / "pids").mkdir()
    (tmp_path / "sleepy_task.py").write_text(textwrap.dedent(f"""
        import os, time

        def task(key, device, strategy, params):
            open(os.path.join({str(tmp_path / "pids")!r}, str(os.getpid())), "w").close()
            time.sleep(60)
            return None
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    import sleepy_task

    return sleepy_task.task, tmp_path / "pids"


def _busy_workers(pids_dir, count: int) -> list[int]:
    deadline = time.monotonic() + 60
    while len(list(pids_dir.iterdir())) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return [int(p.name) for p in pids_dir.iterdir()]


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its parent to reap it does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _gone_within(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(_alive(pid) for pid in pids)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_leaving_on_an_exception_kills_busy_workers_at_once(sleepy):
    """An interrupt while workers compile: the pool kills them rather than wait out their
    compiles (``close`` would wait a minute here)."""
    task, pids_dir = sleepy
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        with CompilePool(workers=2, task=task) as pool:
            pool.start(KEY, CPU, [Candidate("a", {}), Candidate("b", {})])
            busy = _busy_workers(pids_dir, 2)
            raise KeyboardInterrupt
    assert len(busy) == 2 and _gone_within(busy, 10)
    assert time.monotonic() - start < 40


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_workers_end_once_their_tuning_process_is_killed(sleepy, tmp_path):
    """A tuning process killed outright (SIGKILL, no clean-up) leaves no worker behind:
    each ends within a poll or two of its parent's death."""
    task, pids_dir = sleepy
    code = textwrap.dedent(f"""
        import os, sys, time, torch
        sys.path.insert(0, {str(tmp_path)!r})
        import sleepy_task
        from rltriton_tune.call import ProblemKey
        from rltriton_tune.tune.compile_pool import CompilePool
        from rltriton_tune.tune.space import Candidate
        pool = CompilePool(workers=1, task=sleepy_task.task)
        pool.start(ProblemKey("gae", 16, 24), torch.device("cpu"), [Candidate("a", {{}})])
        while not os.listdir({str(pids_dir)!r}):
            time.sleep(0.05)
        os._exit(0)
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    busy = [int(p.name) for p in pids_dir.iterdir()]
    assert len(busy) == 1 and _gone_within(busy, 15)
