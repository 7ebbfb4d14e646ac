"""Builders and process workers shared by the tuning-database tests."""

from __future__ import annotations

import os
import time
from pathlib import Path

from rltriton_tune.call import ProblemKey
from rltriton_tune.tuning_db import Entry, record
from rltriton_tune.tuning_db.store import write_atomic

H200 = {"kind": "cuda", "name": "NVIDIA H200", "capability": "9.0", "sm_count": 132,
        "triton": "3.6", "abi": 1}
A100 = {"kind": "cuda", "name": "NVIDIA A100-SXM4-80GB", "capability": "8.0", "sm_count": 108,
        "triton": "3.6", "abi": 1}


def entry(n: int = 4096, t: int = 32, strategy: str = "tiled", time_us: float = 2.5,
          date: str = "2026-11-30T01:00:00Z", algorithm: str = "gae", **params) -> Entry:
    """One entry for ``algorithm`` at ``(n, t)``; ``params`` default to a tiled config."""
    return Entry(
        key=ProblemKey(algorithm, n, t),
        strategy=strategy,
        params=params or {"ROWS": 4, "CHUNK": 16, "num_warps": 4},
        device_time_us=time_us,
        runner_up={"strategy": "flat", "params": {}, "device_time_us": time_us + 1.0},
        baselines={"flat_heuristic": time_us + 1.0, "torch_compile": time_us + 2.0},
        trials=29,
        date=date,
    )


def record_one_by_one(directory: str, worker: int, count: int, barrier) -> None:
    """Process target: wait for every worker, then record ``count`` distinct entries,
    one write each, into the same H200 profile."""
    barrier.wait()
    for i in range(count):
        record(H200, [entry(n=1000 + worker, t=i + 1, worker=worker)], Path(directory))


def write_forever(path: str, texts: list[str], done) -> None:
    """Process target: atomically rewrite ``path`` with each of ``texts`` in turn, forever."""
    i = 0
    while True:
        write_atomic(Path(path), texts[i % len(texts)])
        i += 1
        done.value = i


def hang_in_fsync(directory: str, started) -> None:
    """Process target: start a write and block inside it (temp file written, not renamed)."""
    def stuck(fd: int) -> None:
        started.set()
        time.sleep(600)

    os.fsync = stuck
    record(H200, [entry(n=77, t=7, strategy="flat")], Path(directory))
