"""Bench report helpers: ratios and the headline numbers, on hand-made rows."""

import math

import pytest
import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.fallback import STRATEGIES
from rltriton_tune.tune.bench import CONFIRM_ROUNDS, add_ratios, confirm_oracle, summarize
from rltriton_tune.tune.space import Candidate


def _row(dispatched, flat, compile_us, oracle, held_out=False):
    row = {"device_us": {"dispatched": dispatched, "flat_heuristic": flat},
           "compile_us": compile_us, "oracle_us": oracle, "held_out": held_out}
    add_ratios(row, "cuda")
    return row


def test_ratios_and_summary_by_hand():
    rows = [_row(10.0, 20.0, 40.0, 10.0), _row(4.0, 4.0, 16.0, 3.9),
            _row(5.0, 4.5, None, 4.0, held_out=True)]
    assert rows[0]["speedup"] == 2.0 and rows[0]["speedup_compile"] == 4.0
    assert rows[2]["vs_oracle"] == 1.25 and rows[2]["speedup_compile"] is None
    s = summarize(rows)
    assert s["cells"] == 3 and s["held_out_cells"] == 1 and s["oracle_cells"] == 3
    assert s["oracle_incomplete_cells"] == 0
    assert s["within_5pct_of_oracle"] == pytest.approx(2 / 3)  # 1.0 and 1.026 pass, 1.25 not
    assert s["worst_vs_oracle"] == 1.25
    assert s["geomean_speedup_flat"] == pytest.approx(math.prod([2.0, 1.0, 0.9]) ** (1 / 3))
    assert s["min_speedup_flat"] == pytest.approx(0.9)
    assert s["geomean_speedup_compile"] == pytest.approx(math.sqrt(4.0 * 4.0))
    assert s["compile_cells"] == 2 and s["min_speedup_compile"] == 4.0 and s["flat_cells"] == 3


def test_summary_of_rows_without_baselines_is_empty_not_an_error():
    s = summarize([{"device_us": {"dispatched": 1.0}, "speedup": None}])
    assert s["within_5pct_of_oracle"] is None and s["geomean_speedup_flat"] is None


def test_resume_keeps_rows_only_from_the_same_device_and_software():
    import torch

    from rltriton_tune.tune.bench import _device_name, _triton_version, reusable_rows, row_key

    row = {"algorithm": "gae", "N": 8, "T": 4, "A": 0, "dtype": "float32", "layout": "env",
           "flags": "none", "strategy": "torch", "params": {"mode": "loop"}}
    cpu = torch.device("cpu")
    same = {"device_name": _device_name(cpu), "torch": torch.__version__,
            "triton": _triton_version(), "rows": [row]}
    assert list(reusable_rows(same, cpu, oracle=False)) == [row_key(row)]
    assert reusable_rows(same, cpu, oracle=True) == {}  # no oracle measured in that row
    assert reusable_rows({**same, "device_name": "another GPU"}, cpu, oracle=False) == {}
    assert reusable_rows({**same, "torch": "0.0"}, cpu, oracle=False) == {}
    assert reusable_rows(None, cpu, oracle=False) == {}
    capped = {**same, "rows": [{**row, "oracle_us": 1.0, "oracle_complete": False}]}
    assert reusable_rows(capped, cpu, oracle=True) == {}  # its sweep goes on
    done = {**same, "rows": [{**row, "oracle_us": 1.0, "oracle_complete": True}]}
    assert list(reusable_rows(done, cpu, oracle=True)) == [row_key(row)]
    # Another config won the first reading: kept only once re-measured head to head.
    beaten = {**row, "oracle_us": 1.0, "oracle": "torch(mode='doubling')"}
    assert reusable_rows({**same, "rows": [beaten]}, cpu, oracle=True) == {}
    confirmed = {**beaten, "oracle_dispatched_us": 1.02}
    assert list(reusable_rows({**same, "rows": [confirmed]}, cpu, oracle=True)) == \
        [row_key(row)]


def test_builtin_heuristic_column_and_count():
    from rltriton_tune.tune.bench import to_markdown

    rows = [_row(2.0, 3.0, None, None), _row(2.0, 3.0, None, None), _row(1.0, 1.0, None, None)]
    rows[0]["heuristic_us"] = 1.5   # the heuristic beats the profile's choice
    rows[1]["heuristic_us"] = 1.99  # within 3%: not counted
    rows[2]["alternatives"] = {"nearest:a": 0.5, "nearest:b": None}  # twice as fast
    s = summarize(rows)
    assert s["heuristic_cells"] == 2 and s["heuristic_better_cells"] == 1
    assert s["alternative_cells"] == 1 and s["alternative_better_cells"] == 1
    for r, n in zip(rows, (8, 16, 32), strict=True):
        r.update(algorithm="gae", N=n, T=8, strategy="flat", params={}, full_call_us=20.0)
    report = {"device": "cuda:0", "device_name": "GPU", "torch": "x", "copy_bandwidth_gbs": 1.0,
              "rows": rows}
    md = to_markdown(report)
    assert "| built-in heuristic |" in md and "| 1.50 |" in md


def test_incomplete_oracle_cells_are_left_out_of_the_oracle_share():
    rows = [_row(10.0, 20.0, None, 10.0), _row(5.0, 5.0, None, 4.0)]
    rows[1]["oracle_complete"] = False  # its sweep was cut: 4.0 is not the oracle
    s = summarize(rows)
    assert s["oracle_cells"] == 1 and s["within_5pct_of_oracle"] == 1.0
    assert s["oracle_incomplete_cells"] == 1 and s["worst_vs_oracle"] == 1.0


def test_unmoved_config_is_counted_apart_from_the_other_entries():
    rows = [_row(2.0, 3.0, None, None), _row(2.0, 3.0, None, None)]
    rows[0]["alternatives"] = {"unmoved:k": 3.0, "nearest:a": 1.0}
    rows[1]["alternatives"] = {"unmoved:k": 1.0}
    s = summarize(rows)
    assert s["unmoved_cells"] == 2 and s["unmoved_better_cells"] == 1
    assert s["unmoved_worse_cells"] == 1
    assert s["alternative_cells"] == 1 and s["alternative_better_cells"] == 1


def test_cut_oracle_sweeps_are_marked_partial_in_the_table():
    from rltriton_tune.tune.bench import to_markdown

    rows = [_row(2.0, 3.0, None, 1.9), _row(2.0, 3.0, None, 1.8)]
    rows[1]["oracle_complete"] = False
    for r, n in zip(rows, (8, 16), strict=True):
        r.update(algorithm="gae", N=n, T=8, strategy="flat", params={}, full_call_us=20.0)
    md = to_markdown({"device": "cuda:0", "device_name": "GPU", "torch": "x",
                      "copy_bandwidth_gbs": 1.0, "rows": rows})
    assert "| 1.90 |" in md and "| 1.80 (partial) |" in md


def test_compile_baselines_are_taken_over_only_from_the_same_device_and_software():
    import torch

    from rltriton_tune.call import ProblemKey
    from rltriton_tune.tune.baselines import COMPILE, COMPILE_DOUBLING
    from rltriton_tune.tune.bench import (
        _device_name,
        _triton_version,
        compile_baselines,
        run_bench,
    )

    cpu = torch.device("cpu")
    key = ProblemKey("discounted_returns", 6, 9)
    row = {"algorithm": key.algorithm, "N": key.n, "T": key.t, "A": 0, "dtype": "float32",
           "layout": "env", "flags": "none",
           "device_us": {"dispatched": 1.0, COMPILE: 5.0, COMPILE_DOUBLING: None}}
    earlier = {"device_name": _device_name(cpu), "torch": torch.__version__,
               "triton": _triton_version(), "rows": [row]}
    assert compile_baselines([earlier], cpu) == {key: {COMPILE: 5.0, COMPILE_DOUBLING: None}}
    assert compile_baselines([{**earlier, "torch": "0.0"}], cpu) == {}
    report = run_bench([key], cpu, budget_s=0.01, compile_from=[earlier])
    (measured,) = report["rows"]
    assert measured["compile_reused"] is True
    assert measured["device_us"][COMPILE] == 5.0
    assert measured["device_us"]["dispatched"] > 0  # measured now, not taken over


def test_pool_verdicts_gate_only_the_triton_candidates_in_the_workers():
    from rltriton_tune.tune.bench import pool_verdicts
    from rltriton_tune.tune.space import Candidate

    class FakePool:
        workers = 4

        def __init__(self):
            self.asked = []

        def check(self, key, device, candidates, limit=None):
            self.asked.append(([c.strategy for c in candidates], limit))
            return ["wrong results" if c.params.get("BLOCK_N") == 2 else None
                    for c in candidates]

    key = ProblemKey("gae", 64, 32)
    cands = [Candidate("flat", {"BLOCK_N": 1}), Candidate("torch", {"mode": "compile"}),
             Candidate("tiled", {"BLOCK_N": 2, "BLOCK_T": 32}), Candidate("lookback", {})]
    pool = FakePool()
    assert pool_verdicts(pool, key, torch.device("cpu"), cands) == \
        [None, None, "wrong results", None]
    assert pool.asked == [(["flat", "tiled", "lookback"], 4)]  # torch.compile times as before
    assert pool_verdicts(None, key, torch.device("cpu"), cands) is None
    assert pool_verdicts(pool, key, torch.device("cpu"), cands[1:2]) == [None]
    assert len(pool.asked) == 1  # nothing to compile: the pool is not asked


def test_vs_oracle_uses_the_head_to_head_dispatched_time_when_there_is_one():
    row = {"device_us": {"dispatched": 10.0, "flat_heuristic": 20.0}, "compile_us": None,
           "oracle_us": 9.0, "oracle_dispatched_us": 9.45}
    add_ratios(row, "cuda")
    assert row["speedup"] == 2.0  # the baselines compare with the batch's own reading
    assert row["vs_oracle"] == pytest.approx(1.05)


def test_confirm_oracle_re_times_the_two_configs_head_to_head(monkeypatch):
    key = ProblemKey("gae", 4, 16)
    loop, doubling = Candidate("torch", {"mode": "loop"}), Candidate("torch", {"mode": "doubling"})
    readings = {"loop": [3.0, 2.0, 2.5] * 3, "doubling": [2.2] * 9}
    seen = []

    def fake_time(self, cand, budget_s):
        from rltriton_tune.tune.evaluate import Outcome
        from rltriton_tune.tune.measure import Timing
        seen.append((cand.params["mode"], budget_s))
        return Outcome(cand, timing=Timing(readings[cand.params["mode"]].pop(), 1.0))

    monkeypatch.setattr("rltriton_tune.tune.evaluate.Evaluator._time", fake_time)
    got = confirm_oracle(key, torch.device("cpu"), dict(STRATEGIES), loop, doubling,
                         budget_s=0.01, selection_us=1.5)
    # Medians of 9 interleaved rounds each: 2.5 for the dispatched config, 2.2 beside it.
    assert got == {"oracle_selection_us": 1.5, "oracle_dispatched_us": 2.5, "oracle_us": 2.2}
    assert len(seen) == 2 * CONFIRM_ROUNDS and {m for m, _ in seen} == {"loop", "doubling"}
    assert all(b == pytest.approx(4 * 0.01 / CONFIRM_ROUNDS) for _, b in seen)


def test_confirm_oracle_keeps_the_first_reading_when_a_config_fails(monkeypatch):
    from rltriton_tune.tune.evaluate import Outcome

    monkeypatch.setattr("rltriton_tune.tune.evaluate.Evaluator._time",
                        lambda self, cand, budget_s: Outcome(cand, error="timing failed"))
    key = ProblemKey("gae", 4, 16)
    cands = [Candidate("torch", {"mode": "loop"}), Candidate("torch", {"mode": "doubling"})]
    assert confirm_oracle(key, torch.device("cpu"), dict(STRATEGIES), *cands, 0.01, 1.5) == {}


def test_a_resumed_run_cut_short_keeps_the_rows_it_did_not_reach():
    from rltriton_tune.tune.bench import UNREACHED, reusable_rows, row_key, run_bench

    cpu = torch.device("cpu")
    keys = [ProblemKey("discounted_returns", 6, 9), ProblemKey("discounted_returns", 5, 7)]
    first = run_bench(keys, cpu, budget_s=0.005)
    assert UNREACHED not in first  # a complete run reached every key

    class Cut(Exception):
        pass

    checkpoints = []

    def cut_after_one_row(report):
        checkpoints.append(report)
        raise Cut  # the job's time ran out after its first row

    # The second key's dispatch changed since (a row measured for another choice): the
    # resumed run measures it first, then its time runs out.
    stale = {**first, "rows": [first["rows"][0], {**first["rows"][1], "params": {"x": 1}}]}
    with pytest.raises(Cut):
        run_bench(list(reversed(keys)), cpu, budget_s=0.005, previous=stale,
                  checkpoint=cut_after_one_row)
    (saved,) = checkpoints
    assert [row_key(r) for r in saved["rows"]] == [keys[1]]
    assert [row_key(r) for r in saved[UNREACHED]] == [keys[0]]
    # The next resume keeps both: one measured again, one not reached yet.
    assert set(reusable_rows(saved, cpu, oracle=False)) == set(keys)
