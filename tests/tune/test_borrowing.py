"""Measuring borrowing factors (CPU strategies stand in for kernels) and storing them."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import torch

from rltriton_tune import dispatch
from rltriton_tune.call import ProblemKey
from rltriton_tune.dispatch.decide import load_profiles, usable_strategies
from rltriton_tune.dispatch.devices import device_fingerprint
from rltriton_tune.tune import borrowing
from rltriton_tune.tuning_db import Entry, record
from rltriton_tune.tuning_db.store import record_borrowing

CPU = device_fingerprint("cpu")


def entries():
    loop, chunked = {"mode": "loop"}, {"mode": "chunked", "chunk": 4}
    return [Entry(ProblemKey("gae", 8, 16), "torch", loop, 1.0),
            Entry(ProblemKey("gae", 8, 16, flags="last_value"), "torch", chunked, 1.0),
            Entry(ProblemKey("gae", 8, 32), "torch", chunked, 1.0),
            Entry(ProblemKey("gae", 8, 16, dtype="bfloat16"), "torch", loop, 1.0),
            Entry(ProblemKey("vtrace", 8, 16), "torch", loop, 1.0)]


def test_pairs_differ_in_exactly_one_dimension():
    record(CPU, entries())
    found = borrowing.pairs(load_profiles(CPU))
    assert {p.dimension for p in found} == {"flags", "dtype", "shape"}
    assert all(p.target.split("|")[0] == p.source.split("|")[0] for p in found)
    assert not [p for p in found if "vtrace" in p.target]  # no partner of its own


def test_measure_and_factors_on_cpu():
    record(CPU, entries())
    usable, _ = usable_strategies(torch.device("cpu"))
    rows = borrowing.measure(load_profiles(CPU), torch.device("cpu"), usable, budget_s=0.002)
    assert rows and all(r["slowdown"] >= 1.0 for r in rows)
    found = borrowing.factors(rows)
    assert set(found) <= {"flags", "dtype", "shape"} and all(f >= 1.0 for f in found.values())


def test_factors_take_the_mean_and_scale_shape_by_distance():
    rows = [{"dimension": "flags", "slowdown": s, "distance": 0.0} for s in (1.0, 1.2, 1.5)]
    rows += [{"dimension": "shape", "slowdown": 1.21, "distance": 2.0}]
    rows += [{"dimension": "shape", "slowdown": 1.3, "distance": 1.0}]
    assert borrowing.factors(rows) == {"flags": 1.2333, "shape": 1.2}


def test_stored_factors_survive_later_merges_and_reach_the_lookup():
    record(CPU, entries()[:2])
    record_borrowing(CPU, {"flags": 1.5})
    record(CPU, entries()[2:])
    dispatch.reset()
    profiles = load_profiles(CPU)
    assert profiles.borrowing == {"flags": 1.5} and len(profiles.entries) == 5


def test_cli_borrowing_stores_factors(tmp_path):
    record(CPU, entries())
    out = subprocess.run([sys.executable, "-m", "rltriton_tune.cli", "tune", "--device", "cpu",
                          "--borrowing", "--algorithms", "gae"], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert "mean slowdown" in out.stdout
    dispatch.reset()
    assert load_profiles(CPU).borrowing


def test_cli_borrowing_that_cannot_store_is_one_error_line_after_the_factors(capsys):
    """A folder that refuses the write (here a folder stands where the evidence file goes)
    ends the command in one error line, after the factors measured are printed."""
    from rltriton_tune.cli import main
    from rltriton_tune.tuning_db import fingerprint_id, user_dir

    record(CPU, entries())
    (user_dir() / f"borrowing-{fingerprint_id(CPU)}.jsonl").mkdir()
    code = main(["tune", "--device", "cpu", "--borrowing", "--algorithms", "gae"])
    out, err = capsys.readouterr()
    assert code == 1 and "mean slowdown" in out
    assert err.count("\n") == 1 and "tune --borrowing: cannot store the factors above" in err
    dispatch.reset()
    assert not load_profiles(CPU).borrowing


def test_a_shape_pair_times_the_config_dispatch_would_borrow(monkeypatch):
    """Across shapes dispatch takes the neighbour's off-grid config where it serves (at
    steps that fill part of their span: 20 of 32), else its own: the measured pair times
    the same one."""
    timed = []

    class Recording:
        def __init__(self, *args, **kwargs):
            pass

        def evaluate(self, candidates, budget_s=None):
            timed.append([c.params["mode"] for c in candidates])
            return [SimpleNamespace(ok=True, timing=SimpleNamespace(device_us=1.0))
                    for _ in candidates]

        def close(self):
            pass

    from rltriton_tune.tune import evaluate

    monkeypatch.setattr(evaluate, "Evaluator", Recording)
    loop, doubling = {"mode": "loop"}, {"mode": "doubling"}
    chunked = {"mode": "chunked", "chunk": 8}
    usable, _ = usable_strategies(torch.device("cpu"))
    for off_grid, borrowed in (({"strategy": "torch", "params": chunked}, "chunked"),
                               ({"strategy": "warp9", "params": {}}, "loop")):
        record(CPU, [Entry(ProblemKey("gae", 8, 20), "torch", doubling, 1.0),
                     Entry(ProblemKey("gae", 8, 32), "torch", loop, 1.0,
                           extra={"off_grid": off_grid})])
        dispatch.reset()
        timed.clear()
        borrowing.measure(load_profiles(CPU), torch.device("cpu"), usable, budget_s=0.002)
        # 8x16's own config against what 8x32 lends it (its off-grid config where that
        # can serve, else its own), and 8x32's own against 8x16's
        assert sorted(timed) == [["doubling", borrowed], ["loop", "doubling"]]
