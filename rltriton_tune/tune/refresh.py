"""``tune --refresh``: re-time the entries this device uses, on this software stack.

Each entry's stored config is gated and timed again beside its stored runner-up
and the built-in heuristic's choice, on the same inputs in one process; the
fastest is recorded with its fresh time (so the stored config stays only if it
still wins). An entry none of whose configs works here is left as it is and
reported.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.tune.space import Candidate, SearchSpace, heuristic_choice
from rltriton_tune.tune.study import fingerprint_of, make_evaluator


@dataclass
class Refreshed:
    """The outcome of refreshing one entry."""

    key: ProblemKey
    old: Any
    new: Any = None
    error: str | None = None

    @property
    def replaced(self) -> bool:
        """Whether another config beat the stored one."""
        return self.new is not None and (self.new.strategy, self.new.params) != (
            self.old.strategy, self.old.params)


def entries_to_refresh(device: torch.device, algorithms: Iterable[str]) -> list[Any]:
    """The entries this device uses now (user over shipped) for ``algorithms``."""
    from rltriton_tune.tuning_db import load_profiles

    wanted = set(algorithms)
    entries = load_profiles(fingerprint_of(device)).entries.values()
    return sorted((e for e in entries if e.key.algorithm in wanted),
                  key=lambda e: e.key.as_text())


def refresh_entry(entry: Any, device: torch.device, *, isolate: bool = False,
                  seed: int = 0, budget_s: float | None = None) -> Refreshed:
    """Time ``entry``'s config against its runner-up and the heuristic's choice; return
    the entry to record (``new``: the winner with fresh times) or why there is none."""
    from rltriton_tune.tuning_db.schema import utc_now

    key = entry.key
    stored = Candidate(entry.strategy, dict(entry.params))
    contenders = [stored]
    if entry.runner_up:
        contenders.append(Candidate(entry.runner_up["strategy"],
                                    dict(entry.runner_up.get("params", {}))))
    heuristic = heuristic_choice(key, device)
    if heuristic is not None:
        contenders.append(heuristic)
    contenders = list({c.label(): c for c in contenders}.values())
    space = SearchSpace(key, device)
    evaluator = make_evaluator(key, device, space, isolate=isolate, seed=seed)
    try:
        budget = budget_s if budget_s is not None else 2 * getattr(evaluator, "time_budget_s",
                                                                   0.1)
        outcomes = evaluator.evaluate(contenders, budget_s=budget, gate=True)
    finally:
        evaluator.close()
    ok = sorted((o for o in outcomes if o.ok), key=lambda o: o.timing.device_us)
    if not ok:
        reasons = "; ".join(f"{o.candidate.label()}: {o.error}" for o in outcomes)
        return Refreshed(key, entry, error=f"no config works here ({reasons})"[:500])
    best = ok[0]
    runner = None
    if len(ok) > 1:
        runner = {"strategy": ok[1].candidate.strategy, "params": dict(ok[1].candidate.params),
                  "device_time_us": round(ok[1].timing.device_us, 3)}
    extra = dict(entry.extra)
    extra.update(host_us=round(best.timing.host_us, 3), refreshed=True)
    new = replace(entry, strategy=best.candidate.strategy, params=dict(best.candidate.params),
                  device_time_us=round(best.timing.device_us, 3), runner_up=runner,
                  date=utc_now(), extra=extra)
    return Refreshed(key, entry, new=new)


def refresh(device: torch.device, algorithms: Iterable[str], *, isolate: bool = False,
            seed: int = 0, budget_s: float | None = None,
            on_entry: Callable[[Refreshed], None] | None = None) -> list[Refreshed]:
    """Refresh every entry of ``algorithms`` this device uses and record the winners
    (each replaces its entry: it won a head-to-head). Returns one result per entry."""
    from rltriton_tune.tuning_db import record

    results = []
    for entry in entries_to_refresh(device, algorithms):
        done = refresh_entry(entry, device, isolate=isolate, seed=seed, budget_s=budget_s)
        results.append(done)
        if on_entry is not None:
            on_entry(done)
    fresh = [r.new for r in results if r.new is not None]
    if fresh:
        record(fingerprint_of(device), fresh)
    return results
