"""Workload recording: keys that missed the database, counted, merged into a bounded file;
``tune --from-record`` tunes them and the next run finds them."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import pytest
import torch

import rltriton_tune as R
from rltriton_tune import dispatch
from rltriton_tune.call import ProblemKey
from rltriton_tune.dispatch import record
from rltriton_tune.dispatch.devices import device_fingerprint
from rltriton_tune.state import STATE


def gae(n, t):
    return R.compute_gae(torch.randn(n, t), torch.randn(n, t), torch.zeros(n, t))


@pytest.fixture
def recording(tmp_path, monkeypatch):
    path = tmp_path / "workload.json"
    monkeypatch.setenv("RLTRITON_TUNE_RECORD", str(path))
    dispatch.reset()
    return path


def test_missed_keys_are_recorded_with_call_counts(recording):
    for _ in range(5):
        gae(4, 9)
    gae(3, 7)
    STATE.recorder.flush()
    rows = record.read_record(recording)
    assert [(r["key"], r["calls"]) for r in rows] == [
        (ProblemKey("gae", 4, 9).as_text(), 5), (ProblemKey("gae", 3, 7).as_text(), 1)]
    assert rows[0]["fingerprint"] == device_fingerprint("cpu")
    assert rows[0]["origin"] == "fallback"


def test_counts_from_several_flushes_and_processes_add_up(recording):
    gae(4, 9)
    STATE.recorder.flush()
    gae(4, 9)
    gae(4, 9)
    dispatch.reset()  # flushes, as exit does
    code = ("import torch, rltriton_tune as R\n"
            "R.compute_gae(torch.randn(4, 9), torch.randn(4, 9), torch.zeros(4, 9))\n")
    subprocess.run([sys.executable, "-c", code], check=True,
                   env={**os.environ, "RLTRITON_TUNE_RECORD": str(recording)})
    rows = record.read_record(recording)
    assert [r["calls"] for r in rows] == [4]


def test_the_file_is_bounded(recording, monkeypatch):
    monkeypatch.setattr(record, "MAX_KEYS", 3)
    for t in range(5, 10):
        for _ in range(t):
            gae(2, t)
    STATE.recorder.flush()
    rows = record.read_record(recording)
    assert [r["calls"] for r in rows] == [9, 8, 7]


def test_keys_served_by_their_own_entry_are_not_recorded(recording, tmp_path):
    from rltriton_tune.tuning_db import Entry
    from rltriton_tune.tuning_db import record as record_entries

    key = ProblemKey("gae", 4, 9)
    record_entries(device_fingerprint("cpu"),
                   [Entry(key, "torch", {"mode": "loop"}, 1.0)])
    dispatch.reset()
    gae(4, 9)
    dispatch.reset()
    assert not recording.exists() or record.read_record(recording) == []


def test_a_foreign_file_is_never_overwritten(recording):
    recording.write_text("my notes\n")
    with pytest.warns(RuntimeWarning, match="cannot write the workload record"):
        gae(4, 9)
        STATE.recorder.flush()
    assert recording.read_text() == "my notes\n"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")
def test_a_fifo_at_the_record_path_is_refused_without_opening_it(recording, join_or_unblock):
    """Opening a FIFO blocks until a writer comes: the flush must never open one (nor a
    device or folder); it warns once, naming the variable, and records nothing."""
    os.mkfifo(recording)
    worker = threading.Thread(target=lambda: (gae(4, 9), STATE.recorder.flush()), daemon=True)
    with pytest.warns(RuntimeWarning, match="RLTRITON_TUNE_RECORD=.*not a regular file"):
        worker.start()
        join_or_unblock(worker, recording, 10,
                        "the workload-record flush opened the FIFO and blocked")
    assert recording.is_fifo()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once: later calls and flushes stay quiet
        gae(4, 9)
        gae(3, 7)
        STATE.recorder.flush()
    assert STATE.recorder.counts == {} and recording.is_fifo()


@pytest.mark.parametrize("row", [
    {"key": 123, "calls": 1},                                   # a key that is no text
    {"key": "gae|none|float32|env|N=4|T=9", "calls": 1e999},    # calls: infinity
    {"key": "gae|none|float32|env|N=4|T=9", "calls": 2.5},
    {"key": "gae|none|float32|env|N=4|T=9", "calls": True},
    {"key": "gae|none|float32|env|N=4|T=9", "calls": 1},        # the empty fingerprint below
])
def test_a_malformed_record_never_stops_the_training_call(recording, row):
    """A record file with a bad row: one warning, the call's result, the file as it was."""
    text = json.dumps({"schema": record.SCHEMA, "version": record.VERSION,
                       "keys": [{**row, "fingerprint": {}}]})
    recording.write_text(text)
    with pytest.warns(RuntimeWarning, match="cannot write the workload record"):
        out = gae(4, 9)
        STATE.recorder.flush()
    assert out.shape == (4, 9) and recording.read_text() == text
    with pytest.raises(record.RecordError, match="row 0 is malformed"):
        record.read_record(recording)


def test_a_newer_record_or_a_row_without_steps_is_refused_and_kept(recording):
    """A record of a newer version is neither read (its rows may mean something else) nor
    written back as this version; a row of no environments or steps is malformed (such
    calls miss nothing)."""
    fp = {"device": "test"}
    for document, error in (
            ({"version": record.VERSION + 1, "keys": []},
             f"version {record.VERSION + 1} is not supported"),
            ({"version": record.VERSION,
              "keys": [{"key": "gae|none|float32|env|N=0|T=9", "calls": 1, "fingerprint": fp}]},
             "row 0 is malformed")):
        text = json.dumps({"schema": record.SCHEMA, **document})
        recording.write_text(text)
        with pytest.raises(record.RecordError, match=error):
            record.read_record(recording)
        dispatch.reset()
        with pytest.warns(RuntimeWarning, match="cannot write the workload record"):
            gae(4, 9)
            STATE.recorder.flush()
        assert recording.read_text() == text


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")
def test_reading_a_fifo_as_a_record_is_refused_without_opening_it(tmp_path):
    """``tune --from-record`` on a FIFO: a clear error at once, not a read that blocks."""
    fifo = tmp_path / "calls.json"
    os.mkfifo(fifo)
    result = subprocess.run([sys.executable, "-m", "rltriton_tune.cli", "tune",
                             "--from-record", str(fifo)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 1
    assert "--from-record" in result.stderr and "not a regular file" in result.stderr
    assert "Traceback" not in result.stderr


def test_rewriting_the_record_keeps_its_permissions(recording):
    gae(4, 9)
    STATE.recorder.flush()
    os.chmod(recording, 0o664)
    gae(4, 9)
    STATE.recorder.flush()
    assert recording.stat().st_mode & 0o777 == 0o664
    assert json.loads(recording.read_text())["keys"][0]["calls"] == 2


def test_a_folder_at_the_record_path_stops_recording_with_one_warning(recording):
    recording.mkdir()
    with pytest.warns(RuntimeWarning, match="RLTRITON_TUNE_RECORD=.*not a regular file"):
        gae(4, 9)
        STATE.recorder.flush()
    assert STATE.recorder.counts == {} and list(recording.iterdir()) == []


def test_record_tune_replay_round_trip(recording, tmp_path):
    """Record a run's keys, tune them on the CPU with the CLI, and a new run is served by
    the new entries (its own, exact ones), so nothing is recorded any more."""
    gae(4, 9)
    gae(3, 7)
    dispatch.reset()
    env = {**os.environ, "RLTRITON_TUNE_RECORD": ""}
    out = subprocess.run([sys.executable, "-m", "rltriton_tune.cli", "tune", "--device", "cpu",
                          "--from-record", str(recording), "--trials", "2", "--no-progress",
                          "--no-compile-baseline"],
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    dispatch.reset()
    for n, t in ((4, 9), (3, 7)):
        assert R.explain("gae", n, t, device="cpu").origin == "profile"
    before = json.loads(recording.read_text())
    gae(4, 9)
    dispatch.reset()
    assert json.loads(recording.read_text()) == before


def _calls_recorded(path) -> int:
    try:
        return sum(r["calls"] for r in record.read_record(path))
    except (OSError, record.RecordError):
        return 0


def test_a_steady_loop_is_flushed_without_waiting_for_exit(recording, monkeypatch):
    """Once the keys stop changing, the flusher thread still merges the counts every
    FLUSH_EVERY_S: a run stopped without its exit handlers loses at most that much."""
    monkeypatch.setattr(record, "FLUSH_EVERY_S", 0.05)
    for _ in range(6):
        gae(4, 9)
    deadline = time.monotonic() + 10
    while _calls_recorded(recording) < 6 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _calls_recorded(recording) == 6


def test_a_killed_run_keeps_the_counts_flushed_before_the_kill(recording):
    """SIGKILL (a preempted job) runs no exit handler; the periodic flush has the calls."""
    code = textwrap.dedent("""
        import os, signal, time, torch, rltriton_tune as R
        from rltriton_tune.dispatch import record
        record.FLUSH_EVERY_S = 0.05
        for _ in range(40):
            R.compute_gae(torch.randn(4, 9), torch.randn(4, 9), torch.zeros(4, 9))
        time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    done = subprocess.run([sys.executable, "-c", code],
                          env={**os.environ, "RLTRITON_TUNE_RECORD": str(recording)})
    assert done.returncode == -signal.SIGKILL
    assert _calls_recorded(recording) == 40


def _calls_in_child(n: int) -> None:
    for _ in range(n):
        gae(4, 9)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_multiprocessing_child_flushes_when_its_work_returns(recording):
    """A forked multiprocessing child ends with os._exit, past atexit: its counts are
    flushed when its target returns, and the parent's are not counted twice."""
    gae(4, 9)  # memoised and counted in the parent before the fork
    child = mp.get_context("fork").Process(target=_calls_in_child, args=(20,))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    STATE.recorder.flush()
    assert _calls_recorded(recording) == 21


def _calls_then_linger(n: int) -> int:
    _calls_in_child(n)
    time.sleep(0.5)  # the pool's work is done; its block is about to end
    return n


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_pools_workers_flush_before_its_block_terminates_them(recording, monkeypatch):
    """A ``Pool`` used as a context manager terminates its workers (SIGTERM: no exit
    handler, no finalizer) when its block ends: a child's flusher thread merges its
    counts every CHILD_FLUSH_EVERY_S (shortened here) before that."""
    monkeypatch.setattr(record, "CHILD_FLUSH_EVERY_S", 0.05)
    with mp.get_context("fork").Pool(2) as pool:
        assert pool.map(_calls_then_linger, [10, 10]) == [10, 10]
    assert _calls_recorded(recording) == 20


def test_the_exit_flush_waits_for_a_flush_under_way(recording, monkeypatch):
    """A flush that finds the flusher thread's write under way waits for it, instead of
    returning at once (nothing left to merge) and letting the process end mid-write."""
    real, started, release = record.merge_into, threading.Event(), threading.Event()

    def slow(*args, **kwargs):
        started.set()
        release.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(record, "merge_into", slow)
    for _ in range(5):
        gae(4, 9)
    writer = threading.Thread(target=STATE.recorder.flush)
    writer.start()
    assert started.wait(10)
    exiting = threading.Thread(target=STATE.recorder.flush)
    exiting.start()
    exiting.join(0.2)
    assert exiting.is_alive()  # waits for the write under way
    release.set()
    exiting.join(10)
    writer.join(10)
    assert _calls_recorded(recording) == 5


def test_the_counting_wrapper_keeps_the_bound_launch_and_counts_it(tmp_path):
    """A launcher's bound launch (the usual call's fast path on a GPU) stays offered
    through the recorder's wrapper, counting the launches it makes; one it declines (None)
    is counted when the call then goes through the launcher, so once either way. A
    launcher without one gets a wrapper without one."""
    recorder = record.Recorder(tmp_path / "calls.json")
    key, fp = ProblemKey("gae", 4, 9), {"device": "test"}

    def launcher(call):
        return "launched"

    launcher.bind = lambda *args, **kwargs: (lambda serve: "bound" if serve else None)
    try:
        wrapped = recorder.wrap(launcher, key, fp, "rules")  # the call that missed: 1
        go = wrapped.bind("names", "scalars", "like", True)
        assert go(True) == "bound"  # 2
        assert go(False) is None and wrapped(object()) == "launched"  # declined, then 3
        cell = recorder.counts[(key.as_text(), json.dumps(fp, sort_keys=True))]
        assert cell[0] == 3
        launcher.bind = lambda *args, **kwargs: None  # offers none for these arguments
        assert recorder.wrap(launcher, key, fp, "rules").bind("n", "s", "l", True) is None
        assert not hasattr(recorder.wrap(lambda call: None, key, fp, "rules"), "bind")
    finally:
        recorder.close()


@pytest.mark.gpu
def test_a_recorded_key_keeps_the_bound_launch_on_a_gpu(recording):
    """On a GPU a recorded key's calls still take the fast path's bound launch (the
    recorder counts through it), and every call is counted."""
    inputs = (torch.randn(37, 23, device="cuda"), torch.randn(37, 23, device="cuda"),
              torch.zeros(37, 23, device="cuda"))
    for _ in range(5):
        R.compute_gae(*inputs)
    torch.cuda.synchronize()
    assert any(callable(go) for go in STATE.bound.values())
    STATE.recorder.flush()
    assert _calls_recorded(recording) == 5


def test_a_killed_writers_temp_files_are_cleared(recording):
    stale = recording.parent / f".{recording.name}.abc123.tmp"
    stale.write_text("partial")
    record.merge_into(recording, {(ProblemKey("gae", 4, 9).as_text(),
                                   json.dumps(device_fingerprint("cpu"))): 3}, {})
    assert not stale.exists()
    assert _calls_recorded(recording) == 3
