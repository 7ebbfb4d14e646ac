"""Compile and gate candidates in worker processes, one per CPU core.

Triton's compiler front end holds the GIL, so compiling on threads barely
overlaps. Worker processes compile each candidate (and check it against the
reference, see :mod:`~rltriton_tune.tune.gate`) in parallel; the binaries land
in Triton's on-disk cache, so when the tuning process then prepares the same
config to time it, it loads the binary instead of compiling it again. Timing
stays in the tuning process, with the workers idle, so it is not disturbed.

A worker that dies (a config that faults the GPU) or hangs fails the
candidates it held; the pool is replaced and the run goes on. A run that ends by an
exception (Ctrl-C, SIGTERM in the CLI) kills its workers rather than waiting for their
compiles, and a worker whose tuning process is gone (SIGKILL) ends by itself.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing as mp
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.problems import data_bytes

#: Seconds one candidate may spend compiling and passing the gate in a worker.
DEFAULT_TIMEOUT_S = 120.0
#: Most workers started by default: each holds a CUDA context (about 0.5 GB of GPU
#: memory), and past 16 compiles no longer dominate a batch on an H200.
MAX_DEFAULT_WORKERS = 16
#: Keys whose inputs exceed this many bytes are not kept by a worker between checks:
#: :class:`PendingChecks` bounds how many checks of a big key run at once, but not
#: which workers take them, so only freeing its inputs bounds the memory they hold
#: (the gate draws them on the device again, in milliseconds).
KEEP_INPUTS_MAX_BYTES = 1 << 28
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
    finally:
        if data_bytes(evaluator.key) > KEEP_INPUTS_MAX_BYTES:
            evaluator.gate.forget_full()
            if evaluator.device.type == "cuda":
                torch.cuda.empty_cache()
    return None


#: Seconds between a worker's checks that its tuning process is still there.
PARENT_POLL_S = 1.0


def _worker_start(parent: int) -> None:
    """Worker start-up: one CPU thread for torch (the pool's processes are the parallelism;
    a torch thread per core in every worker would oversubscribe the cores), and a watchdog
    that ends the worker once ``parent``, the tuning process, is gone: a worker busy with a
    long or hung compile would otherwise outlive a killed run. (Not ``PR_SET_PDEATHSIG``:
    it fires when the thread that started the worker ends, and a feeder thread does.)"""
    torch.set_num_threads(1)
    threading.Thread(target=_exit_without, args=(parent,), name="rltriton-tune-watchdog",
                     daemon=True).start()


def _exit_without(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(1)


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
            self._pool = cf.ProcessPoolExecutor(self.workers, mp_context=mp.get_context("spawn"),
                                                initializer=_worker_start,
                                                initargs=(os.getpid(),))
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
        except (BrokenProcessPool, cf.CancelledError):  # its worker died, or was killed
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
        """Let the workers finish what they hold, then end them."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> CompilePool:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        # Leaving on an exception (an interrupt, say): kill the workers, whose compiles
        # may take minutes, rather than wait for them.
        if exc_type is not None:
            self._discard()
        else:
            self.close()


class PendingChecks:
    """Checks submitted to a :class:`CompilePool`; :meth:`results` waits for them.

    A feeder thread keeps ``limit`` checks in flight from the start: each finished check
    frees a slot for the next candidate at once, so one slow compile holds up one slot,
    not a whole group, and the workers keep compiling while the caller does other work.
    """

    def __init__(self, pool: CompilePool, key: ProblemKey, device: torch.device,
                 candidates: Sequence[Any], limit: int | None) -> None:
        self.pool, self.key, self.device = pool, key, device
        self.candidates = list(candidates)
        self.limit = max(1, limit) if limit is not None else max(1, len(self.candidates))
        self._futures: dict[int, cf.Future] = {}
        self._halted = False
        self._changed = threading.Condition()
        self._slots = threading.Semaphore(self.limit)
        self._feeder = threading.Thread(target=self._feed, name="rltriton-tune-feeder",
                                        daemon=True)
        self._feeder.start()

    def _submit(self, i: int) -> cf.Future:
        cand = self.candidates[i]
        try:
            return self.pool._executor().submit(self.pool.task, self.key.as_text(),
                                                str(self.device), cand.strategy,
                                                dict(cand.params))
        except (BrokenProcessPool, RuntimeError) as exc:  # broken or shut down meanwhile
            failed: cf.Future = cf.Future()
            failed.set_exception(BrokenProcessPool(str(exc)))
            return failed

    def _feed(self) -> None:
        for i in range(len(self.candidates)):
            self._slots.acquire()
            with self._changed:
                if self._halted:
                    return
                fut = self._submit(i)
                self._futures[i] = fut
                self._changed.notify_all()
            fut.add_done_callback(lambda _done: self._slots.release())

    def _halt(self) -> None:
        """Stop submitting: the pool broke, the candidates left are re-run below."""
        with self._changed:
            self._halted = True
            self._changed.notify_all()
        self._slots.release()  # wake the feeder if it waits for a slot

    def _future(self, i: int) -> cf.Future | None:
        """Candidate ``i``'s future once submitted; ``None`` if feeding stopped first."""
        with self._changed:
            self._changed.wait_for(lambda: i in self._futures or self._halted)
            return self._futures.get(i)

    def results(self) -> list[str | None]:
        """``None`` per candidate that passed, else why not (blocks until all are done).

        If a worker dies, which in-flight candidate killed it is unknown, so every
        candidate the broken pool left unfinished is re-run alone in a fresh one.
        """
        pool, n = self.pool, len(self.candidates)
        results: list[str | None] = [None] * n
        unfinished = []
        for i in range(n):
            fut = self._future(i)
            if fut is None:
                results[i] = DIED
            else:
                results[i], broken = pool._wait(fut)
                if broken:
                    self._halt()
                    pool._discard()
            if results[i] is DIED:
                unfinished.append(i)
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
    with CompilePool(workers or default_workers(share)) as pool:
        yield pool
