"""Compile and gate candidates in worker processes, one per CPU core.

Triton's compiler front end holds the GIL, so compiling on threads barely
overlaps. Worker processes compile each candidate (and check it against the
reference, see :mod:`~rltriton_tune.tune.gate`) in parallel; the binaries land
in Triton's on-disk cache, so when the tuning process then prepares the same
config to time it, it loads the binary instead of compiling it again. Timing
stays in the tuning process, with the workers idle, so it is not disturbed.

A worker that dies (a config that faults the GPU) or hangs fails the
candidates it held; the pool is replaced and the run goes on.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing as mp
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import torch

from rltriton_tune.call import ProblemKey

#: Seconds one candidate may spend compiling and passing the gate in a worker.
DEFAULT_TIMEOUT_S = 120.0
#: Most workers started by default: each holds a CUDA context (about 0.5 GB of GPU
#: memory), and past 16 compiles no longer dominate a batch on an H200.
MAX_DEFAULT_WORKERS = 16
#: The failure of a candidate whose worker process died.
DIED = "compile worker process died (the config may fault the GPU)"

_evaluators: dict[tuple[str, str], Any] = {}


def check_in_worker(key_text: str, device_text: str, strategy: str,
                    params: dict[str, Any]) -> str | None:
    """Worker side: compile and gate one candidate; ``None`` or the reason it failed."""
    from rltriton_tune.tune.evaluate import Evaluator, describe
    from rltriton_tune.tune.space import Candidate, SearchSpace
    from rltriton_tune.tune.study import all_strategies_for

    evaluator = _evaluators.get((key_text, device_text))
    if evaluator is None:  # one per key: its gate keeps the reference cases
        _forget_keys()  # sweeps go key by key: a big key's gate inputs must not pile up
        key, device = ProblemKey.from_text(key_text), torch.device(device_text)
        evaluator = _evaluators[(key_text, device_text)] = Evaluator(
            key, device, all_strategies_for(device, SearchSpace(key, device)), workers=1)
    if strategy not in evaluator.strategies:
        return f"unknown strategy {strategy!r}"
    try:
        evaluator.check(Candidate(strategy, params))
    except Exception as exc:  # noqa: BLE001 - reported as the candidate's failure
        return describe(exc)
    return None


def _forget_keys() -> None:
    """Drop the worker's evaluators and the device memory their gates held."""
    for evaluator in _evaluators.values():
        evaluator.close()
    _evaluators.clear()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def default_workers(share: int = 1) -> int:
    """CPU cores available to this process, split among ``share`` tuning processes, at most
    :data:`MAX_DEFAULT_WORKERS` (each worker holds a CUDA context on the GPU)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(MAX_DEFAULT_WORKERS, cores // max(1, share)))


class CompilePool:
    """A pool of worker processes that compile and gate candidates for any key."""

    def __init__(self, workers: int | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                 task: Callable[[str, str, str, dict[str, Any]], str | None] | None = None
                 ) -> None:
        self.workers = workers or default_workers()
        self.timeout_s = timeout_s
        #: What a worker runs per candidate (picklable by reference); tests swap it.
        self.task = task or check_in_worker
        self._pool: cf.ProcessPoolExecutor | None = None

    def _executor(self) -> cf.ProcessPoolExecutor:
        if self._pool is None:
            self._pool = cf.ProcessPoolExecutor(self.workers, mp_context=mp.get_context("spawn"))
        return self._pool

    def _discard(self) -> None:
        """Drop the pool, killing its workers (one may be hung or dead)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.kill()
        pool.shutdown(wait=False, cancel_futures=True)

    def _wait(self, fut: cf.Future) -> tuple[str | None, bool]:
        """(result, pool broken) of one submitted check."""
        try:
            return fut.result(timeout=self.timeout_s), False
        except cf.TimeoutError:  # the worker is still busy with it: the pool must go
            return f"timeout: compile/check exceeded {self.timeout_s:g} s", True
        except BrokenProcessPool:
            return DIED, True

    def check(self, key: ProblemKey, device: torch.device, candidates: Sequence[Any],
              limit: int | None = None) -> list[str | None]:
        """For each candidate (``.strategy``, ``.params``): ``None`` if it passed, else why not.

        All candidates run in parallel (at most ``limit`` at a time: a big key's gate
        holds its inputs in every worker); if a worker dies, which candidate killed it
        is unknown, so the ones left unfinished are re-run one at a time.
        """
        return self.start(key, device, candidates, limit).results()

    def start(self, key: ProblemKey, device: torch.device, candidates: Sequence[Any],
              limit: int | None = None) -> PendingChecks:
        """Submit the checks of :meth:`check` and return at once: the workers compile
        while the caller times the previous batch."""
        return PendingChecks(self, key, device, candidates, limit)

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> CompilePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PendingChecks:
    """Checks submitted to a :class:`CompilePool`; :meth:`results` waits for them."""

    def __init__(self, pool: CompilePool, key: ProblemKey, device: torch.device,
                 candidates: Sequence[Any], limit: int | None) -> None:
        self.pool, self.key, self.device = pool, key, device
        self.candidates = list(candidates)
        self.limit = max(1, limit) if limit is not None else len(self.candidates)
        first = range(min(self.limit, len(self.candidates)))
        self._futures = {i: self._submit(i) for i in first}

    def _submit(self, i: int) -> cf.Future:
        cand = self.candidates[i]
        return self.pool._executor().submit(self.pool.task, self.key.as_text(),
                                            str(self.device), cand.strategy, dict(cand.params))

    def results(self) -> list[str | None]:
        """``None`` per candidate that passed, else why not (blocks until all are done)."""
        pool, n = self.pool, len(self.candidates)
        results: list[str | None] = [None] * n
        unfinished = []
        for start in range(0, n, self.limit):
            chunk = range(start, min(n, start + self.limit))
            futures = [self._futures.pop(i, None) or self._submit(i) for i in chunk]
            broken_any = False
            for i, fut in zip(chunk, futures, strict=True):
                results[i], broken = pool._wait(fut)
                broken_any |= broken
                if results[i] is DIED:
                    unfinished.append(i)
            if broken_any:
                pool._discard()
        for i in unfinished if len(unfinished) > 1 else ():
            results[i], broken = pool._wait(self._submit(i))
            if broken:
                pool._discard()
        return results


@contextlib.contextmanager
def compile_pool_for(device: torch.device, workers: int | None = None, isolate: bool = False,
                     share: int = 1) -> Iterator[CompilePool | None]:
    """A pool for tuning on ``device``, or ``None`` where it does not help.

    Only CUDA compiles kernels; ``isolate`` already evaluates in a child process;
    ``workers == 0`` asks for in-process threads; a daemon process (as used by
    some launchers) may not start children.
    """
    usable = (torch.device(device).type == "cuda" and not isolate and workers != 0
              and not mp.current_process().daemon)
    if not usable:
        yield None
        return
    pool = CompilePool(workers or default_workers(share))
    try:
        yield pool
    finally:
        pool.close()
