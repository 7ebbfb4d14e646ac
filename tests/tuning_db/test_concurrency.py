"""Several writers at once lose nothing; a writer killed mid-write leaves a valid file."""

import multiprocessing
import os
import random
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import tuning_db_helpers as helpers
from tuning_db_helpers import H200, entry

from rltriton_tune.tuning_db import Profile, profile_path, read_profile, record
from rltriton_tune.tuning_db.schema import dumps

WORKERS = 8
PER_WORKER = 12


@pytest.fixture(scope="module")
def mp():
    """Start fresh processes that share no state with this one.

    ``forkserver`` starts one clean interpreter (preloading the package and torch
    once) and forks every worker from it, so ten workers cost one interpreter
    start instead of ten; as with ``spawn``, nothing is inherited from the test
    process. Where it is unavailable, plain ``spawn``.
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["rltriton_tune.tuning_db"])
    return ctx


def test_eight_processes_recording_at_once_lose_nothing(tmp_path, mp):
    barrier = mp.Barrier(WORKERS)
    workers = [mp.Process(target=helpers.record_one_by_one,
                          args=(str(tmp_path), w, PER_WORKER, barrier)) for w in range(WORKERS)]
    for proc in workers:
        proc.start()
    for proc in workers:
        proc.join(timeout=120)
    assert [proc.exitcode for proc in workers] == [0] * WORKERS
    path = profile_path(H200, tmp_path)
    entries = read_profile(path).entries
    expected = {f"gae|none|float32|env|N={1000 + w}|T={i + 1}"
                for w in range(WORKERS) for i in range(PER_WORKER)}
    assert set(entries) == expected
    assert all(entries[k].params == {"worker": entries[k].key.n - 1000} for k in expected)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name, path.name + ".lock"]


def test_threads_recording_at_once_lose_nothing(tmp_path):
    def work(w):
        for i in range(5):
            record(H200, [entry(n=w + 1, t=i + 1)], tmp_path)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(work, range(4)))
    assert len(read_profile(profile_path(H200, tmp_path)).entries) == 20


def test_writer_killed_at_random_moments_leaves_a_valid_file(tmp_path, mp):
    """SIGKILL a process that rewrites a large profile in a tight loop, at random
    moments, many times: every time the file is exactly one complete version."""
    path = profile_path(H200, tmp_path)
    texts = [dumps(Profile(H200, {e.key.as_text(): e for e in
                                  (entry(n=n + 1, t=8, version=v) for n in range(3000))}
                           ).to_json()) for v in (0, 1)]
    path.write_text(texts[1])
    rng = random.Random(1234)
    mid_write = 0
    for _ in range(10):
        done = mp.Value("i", 0)
        proc = mp.Process(target=helpers.write_forever, args=(str(path), texts, done))
        proc.start()
        deadline = time.monotonic() + 60
        while done.value < 1 and time.monotonic() < deadline:
            time.sleep(0.001)
        time.sleep(rng.uniform(0.0, 0.05))
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        assert proc.exitcode == -signal.SIGKILL
        assert path.read_text() in texts  # never truncated, never a mix of versions
        assert len(read_profile(path).entries) == 3000
        leftovers = list(tmp_path.glob(".*.tmp"))
        mid_write += bool(leftovers)  # killed between creating the temp file and renaming it
        for stale in leftovers:
            stale.unlink()
    assert mid_write > 0, "no kill landed inside a write: the test did not exercise the case"


def test_writer_killed_inside_a_write_leaves_the_old_file(tmp_path, mp):
    """Deterministic variant: kill while the temp file is written but not yet renamed."""
    path = profile_path(H200, tmp_path)
    record(H200, [entry(n=1)], tmp_path)
    before = path.read_bytes()
    started = mp.Event()
    proc = mp.Process(target=helpers.hang_in_fsync, args=(str(tmp_path), started))
    proc.start()
    assert started.wait(60)
    assert len(list(tmp_path.glob(".*.tmp"))) == 1  # a write is in flight, lock held
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    assert path.read_bytes() == before
    assert record(H200, [entry(n=2)], tmp_path) == path
    assert not list(tmp_path.glob(".*.tmp"))
    assert {k.split("|")[4] for k in read_profile(path).entries} == {"N=1", "N=2"}
