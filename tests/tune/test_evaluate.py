"""Evaluator: candidates timed in interleaved rounds, medians per candidate."""

import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.tune.evaluate import Evaluator, Outcome
from rltriton_tune.tune.measure import Timing
from rltriton_tune.tune.space import Candidate, SearchSpace
from rltriton_tune.tune.study import all_strategies_for

CPU = torch.device("cpu")
KEY = ProblemKey("gae", 16, 24)


def test_timing_rounds_interleave_candidates_and_take_medians(monkeypatch):
    space = SearchSpace(KEY, CPU)
    evaluator = Evaluator(KEY, CPU, all_strategies_for(CPU, space), rounds=3)
    cands = [Candidate("torch", {"mode": m}) for m in ("loop", "chunked", "doubling")]
    order, clock = [], iter(range(100))

    def fake_time(cand, budget_s):
        order.append(cand.params["mode"])
        tick = next(clock)
        # The first timing of the batch reads fast, as drift would make it.
        return Outcome(cand, timing=Timing(device_us=1.0 if tick == 0 else 10.0 + tick,
                                           host_us=5.0))

    monkeypatch.setattr(evaluator, "_time", fake_time)
    out = evaluator.evaluate(cands, gate=False)
    assert order == ["loop", "chunked", "doubling", "chunked", "doubling", "loop",
                     "doubling", "loop", "chunked"]
    # loop's samples are ticks 0, 5, 7 -> 1.0, 15.0, 17.0: the fast outlier does not win.
    assert [o.timing.device_us for o in out] == [15.0, 13.0, 14.0]
