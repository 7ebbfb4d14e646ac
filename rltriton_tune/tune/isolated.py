"""``--isolate``: evaluate candidates in a child process, so a config that faults
the GPU (illegal address, abort, segfault) fails one trial instead of the run.

The parent sends one JSON request on the child's stdin; the child prints one
JSON line per finished candidate. When the child dies, the candidate it was on
is failed with the exit status and the rest are retried in a fresh child.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence

import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.tune.evaluate import Outcome, default_budget_s
from rltriton_tune.tune.measure import Timing
from rltriton_tune.tune.space import Candidate


class IsolatedEvaluator:
    """Same interface as :class:`~rltriton_tune.tune.evaluate.Evaluator`, one child per batch."""

    def __init__(self, key: ProblemKey, device: torch.device, *, seed: int = 0,
                 batch_timeout_s: float = 600.0, time_budget_s: float | None = None,
                 command: Sequence[str] | None = None) -> None:
        self.key = key
        self.command = list(command or [sys.executable, "-m", "rltriton_tune.tune.isolated"])
        self.device = torch.device(device)
        self.seed = seed
        self.batch_timeout_s = batch_timeout_s
        self.time_budget_s = (time_budget_s if time_budget_s is not None
                              else default_budget_s(self.device))

    def _run_child(self, candidates: Sequence[Candidate], budget_s: float | None,
                   gate: bool) -> tuple[dict[int, Outcome], str]:
        request = {
            "key": self.key.as_text(), "device": str(self.device), "seed": self.seed,
            "budget_s": budget_s if budget_s is not None else self.time_budget_s, "gate": gate,
            "candidates": [{"strategy": c.strategy, "params": c.params} for c in candidates],
        }
        try:
            proc = subprocess.run(self.command,
                                  input=json.dumps(request), capture_output=True, text=True,
                                  timeout=self.batch_timeout_s)
            stdout, status = proc.stdout, f"exit status {proc.returncode}"
            tail = proc.stderr.strip().splitlines()[-1:] if proc.returncode else []
        except subprocess.TimeoutExpired as exc:
            stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            status, tail = f"timeout after {self.batch_timeout_s:g} s", []
        done: dict[int, Outcome] = {}
        for line in stdout.splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            i = int(row["index"])
            timing = Timing(row["device_us"], row["host_us"]) if row.get("device_us") else None
            done[i] = Outcome(candidates[i], timing=timing, error=row.get("error"))
        why = status + (f": {tail[0][:300]}" if tail else "")
        return done, why

    def evaluate(self, candidates: Sequence[Candidate], budget_s: float | None = None,
                 gate: bool = True) -> list[Outcome]:
        results: dict[int, Outcome] = {}
        pending = list(range(len(candidates)))
        while pending:
            subset = [candidates[i] for i in pending]
            done, why = self._run_child(subset, budget_s, gate)
            for j, outcome in done.items():
                results[pending[j]] = outcome
            missing = [pending[j] for j in range(len(subset)) if j not in done]
            if not missing:
                break
            blamed = missing[0]  # the child stops at the candidate that killed it
            results[blamed] = Outcome(candidates[blamed], error=f"worker process died ({why})")
            pending = missing[1:]
        return [results[i] for i in range(len(candidates))]

    def close(self) -> None:
        """Nothing persistent to release (children exit after each batch)."""


def _child_main() -> None:
    from rltriton_tune.tune.evaluate import Evaluator
    from rltriton_tune.tune.space import SearchSpace
    from rltriton_tune.tune.study import all_strategies_for

    request = json.loads(sys.stdin.read())
    key = ProblemKey.from_text(request["key"])
    device = torch.device(request["device"])
    strategies = all_strategies_for(device, SearchSpace(key, device))
    evaluator = Evaluator(key, device, strategies, seed=request["seed"], workers=1,
                          time_budget_s=request["budget_s"])
    for i, c in enumerate(request["candidates"]):
        cand = Candidate(c["strategy"], c["params"])
        if cand.strategy not in strategies:
            row = {"index": i, "error": f"unknown strategy {cand.strategy!r}"}
        else:
            (out,) = evaluator.evaluate([cand], gate=request["gate"])
            row = {"index": i, "error": out.error}
            if out.timing is not None:
                row.update(device_us=out.timing.device_us, host_us=out.timing.host_us)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    _child_main()
