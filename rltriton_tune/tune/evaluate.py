"""Run candidates: prepare (compile), correctness gate, then timing.

Preparing and gating run in parallel first: in a :class:`CompilePool` of worker
processes (one per CPU core) when one is given, else on a thread pool. Timing
then runs one candidate at a time, with nothing else on the device. Every
failure (invalid config, compile error, wrong result, timeout, exception) becomes
an :class:`Outcome` with a reason, never an exception.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import statistics
import traceback
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.strategy import Strategy
from rltriton_tune.tune.compile_pool import CompilePool
from rltriton_tune.tune.gate import Gate
from rltriton_tune.tune.measure import Bench, Timing
from rltriton_tune.tune.space import Candidate

#: Seconds a candidate may spend compiling and passing the gate.
DEFAULT_COMPILE_TIMEOUT_S = 120.0
#: Interleaved timing rounds per batch on a GPU (see ``Evaluator._time_in_rounds``).
GPU_ROUNDS = 3


@dataclass(frozen=True)
class Outcome:
    """What happened to one candidate: a timing, or the reason it failed."""

    candidate: Candidate
    timing: Timing | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.timing is not None


def describe(exc: BaseException) -> str:
    """One line naming the exception and where it came from."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}{where}"[:500]


def default_budget_s(device: torch.device) -> float:
    """Seconds of timing per candidate when none is asked for: 0.1 on a GPU, 0.03 on the
    CPU (host timing of the torch implementations)."""
    return 0.1 if torch.device(device).type == "cuda" else 0.03


class Evaluator:
    """Evaluates candidates of one key on one device, in this process."""

    def __init__(self, key: ProblemKey, device: torch.device, strategies: dict[str, Strategy],
                 *, seed: int = 0, workers: int | None = None,
                 compile_timeout_s: float = DEFAULT_COMPILE_TIMEOUT_S,
                 time_budget_s: float | None = None, pool: CompilePool | None = None,
                 rounds: int | None = None, quick: bool = False) -> None:
        self.key = key
        self.pool = pool
        self.device = torch.device(device)
        self.strategies = strategies
        self.seed = seed
        self.compile_timeout_s = compile_timeout_s
        cuda = self.device.type == "cuda"
        self.time_budget_s = (time_budget_s if time_budget_s is not None
                              else default_budget_s(self.device))
        self.workers = workers or (min(8, os.cpu_count() or 1) if cuda else 1)
        self.rounds = max(1, rounds if rounds is not None else (GPU_ROUNDS if cuda else 1))
        #: First-pass timing (see :class:`~rltriton_tune.tune.measure.Bench`).
        self.quick = quick
        self._threads: cf.ThreadPoolExecutor | None = None
        self._bench: Bench | None = None
        self.gate = Gate(key, self.device)

    @property
    def bench(self) -> Bench:
        if self._bench is None:
            self._bench = Bench(self.key, self.device, self.seed, quick=self.quick)
        return self._bench

    def check(self, cand: Candidate) -> None:
        """Compile ``cand`` and gate it against the reference; raise on any failure."""
        strategy = self.strategies[cand.strategy]
        if self.device.type == "cuda":
            with torch.cuda.device(self.device):
                self.gate.check(strategy, cand.params)
                torch.cuda.synchronize(self.device)
        else:
            self.gate.check(strategy, cand.params)

    def _time(self, cand: Candidate, budget_s: float) -> Outcome:
        try:
            launcher = self.strategies[cand.strategy].prepare(self.key, cand.params)
            timing = self.bench.time(launcher, budget_s)
        except Exception as exc:  # noqa: BLE001 - a failing candidate is a failed trial
            return Outcome(cand, error=f"timing failed: {describe(exc)}")
        if not timing.device_us > 0:
            return Outcome(cand, error=f"timing failed: non-positive time {timing.device_us}")
        return Outcome(cand, timing=timing)

    def evaluate(self, candidates: Sequence[Candidate], budget_s: float | None = None,
                 gate: bool = True, gated: Sequence[str | None] | None = None
                 ) -> list[Outcome]:
        """Gate every candidate (in parallel), then time those that passed, in rounds.

        ``gated``: the gate's verdicts, already obtained (from :meth:`CompilePool.start`),
        one per candidate; the gate is then not run again.
        """
        budget = self.time_budget_s if budget_s is None else budget_s
        if gated is not None:
            if len(gated) != len(candidates):
                raise ValueError(f"gated has {len(gated)} verdicts for {len(candidates)} "
                                 "candidates")
        elif gate:
            gated = self.verdicts(candidates)
        errors = {i: e for i, e in enumerate(gated or ()) if e}
        timed = self._time_in_rounds({i: c for i, c in enumerate(candidates) if i not in errors},
                                     budget)
        return [Outcome(c, error=errors[i]) if i in errors else timed[i]
                for i, c in enumerate(candidates)]

    def verdicts(self, candidates: Sequence[Candidate]) -> list[str | None]:
        """The gate's verdict on each candidate (compiled and checked, in parallel; in
        ``pool``'s workers where given): None where it passed, else why it failed."""
        if not candidates:
            return []
        if self.pool is not None:
            return list(self.pool.check(self.key, self.device, candidates))
        errors: list[str | None] = [None] * len(candidates)
        if self.workers > 1 and len(candidates) > 1:
            if self._threads is None:
                self._threads = cf.ThreadPoolExecutor(self.workers, "rltriton-tune-compile")
            futures = [self._threads.submit(self.check, c) for c in candidates]
            for i, fut in enumerate(futures):
                try:
                    fut.result(timeout=self.compile_timeout_s)
                except cf.TimeoutError:
                    errors[i] = f"timeout: compile/check exceeded {self.compile_timeout_s:g} s"
                except Exception as exc:  # noqa: BLE001
                    errors[i] = describe(exc)
        else:
            for i, cand in enumerate(candidates):
                try:
                    self.check(cand)
                except Exception as exc:  # noqa: BLE001
                    errors[i] = describe(exc)
        return errors

    def _time_in_rounds(self, candidates: dict[int, Candidate],
                        budget_s: float) -> dict[int, Outcome]:
        """Time the candidates in interleaved rounds; each gets the median of its rounds.

        On a GPU, timing one candidate after another lets clock and thermal drift
        favour some positions: on the H200 the first candidate after a gate phase
        read up to 12% fast on ~2 us kernels. Rounds spread
        every candidate's samples over the whole batch, so drift averages out.
        """
        if not candidates:
            return {}
        rounds = self.rounds if len(candidates) > 1 else 1
        samples: dict[int, list[Timing]] = {i: [] for i in candidates}
        failed: dict[int, Outcome] = {}
        order = list(candidates)
        for r in range(rounds):
            for i in order[r % len(order):] + order[:r % len(order)]:  # rotate the start
                if i in failed:
                    continue
                out = self._time(candidates[i], budget_s / rounds)
                if out.ok:
                    samples[i].append(out.timing)
                else:
                    failed[i] = out
        return {i: failed[i] if i in failed else Outcome(candidates[i], timing=Timing(
                    statistics.median(t.device_us for t in samples[i]),
                    statistics.median(t.host_us for t in samples[i])))
                for i in candidates}

    def close(self) -> None:
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)
            self._threads = None
