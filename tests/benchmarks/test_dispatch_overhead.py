"""benchmarks/dispatch_overhead.py: the smoke run measures the public call, its stages
and both floors in one process, in turn, and writes them."""

from __future__ import annotations

import json
import os

import pytest


def test_smoke_writes_public_call_and_floors(script, tmp_path):
    overhead = script("dispatch_overhead")
    assert overhead.main(["--smoke", "--output", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "dispatch_overhead.json").read_text())
    assert [r["case"].split("|")[0] for r in report["rows"]] == ["gae", "retrace", "gae"]
    for r in report["rows"]:
        assert r["public_us"] > 0 and r["empty_triton_us"] > 0 and r["torch_add_us"] > 0
        assert r["over_floor_us"] == pytest.approx(r["public_us"] - r["empty_triton_us"])
        assert r["strategy"] and r["source"]
        assert r["validate_us"] > 0 and r["dispatch_us"] > 0 and r["launcher_us"] > 0
        # recording is timed for the calls it counts: those whose key missed the database
        recorded = r["origin"] not in ("profile", "forced")
        assert ("recorded_us" in r) is recorded and ("unrecorded_us" in r) is recorded
        if recorded:
            assert r["recorded_us"] > 0 and r["unrecorded_us"] > 0
    assert "RLTRITON_TUNE_RECORD" not in os.environ  # restored after the recorded rounds
    assert any("recorded_us" in r for r in report["rows"])
    fallback, retrace, forced = report["rows"]
    # Every case's usual call takes the fast path, Retrace's too.
    assert all(r["fast_path_us"] > 0 for r in (fallback, retrace, forced))
    # The torch fallback's launcher has no parts; the forced kernel's are timed, and
    # under the interpreter every launch takes Triton's generic path.
    assert "pack_us" not in fallback and "direct_launch" not in fallback
    assert (forced["strategy"], forced["source"]) == ("flat", "forced")
    assert forced["pack_us"] > 0 and forced["launch_us"] > 0
    assert forced["direct_launch"] is False


def test_stage_timing_puts_the_memoised_launcher_back(script):
    """The dispatch stage runs against a stub launcher; the memo holds the real one after."""
    import torch

    from rltriton_tune import compute_gae
    from rltriton_tune.call import ProblemKey
    from rltriton_tune.dispatch import memo
    from rltriton_tune.estimators import prepare_call
    from rltriton_tune.problems import random_inputs

    overhead = script("dispatch_overhead")
    kwargs = random_inputs(ProblemKey("gae", 6, 5, flags="last_value"), seed=0)
    compute_gae(**kwargs)
    launcher = memo.lookup(prepare_call("gae", **kwargs))
    row = overhead.stages("gae", kwargs, torch.device("cpu"), reps=2, rounds=1)
    assert set(row) == {"validate_us", "dispatch_us", "fast_path_us", "launcher_us"}
    assert launcher is not None and memo.lookup(prepare_call("gae", **kwargs)) is launcher


def test_interleaved_timing_takes_turns_and_rotates(script):
    """Each function runs ``reps`` calls per round; the first to run rotates by round."""
    import torch

    overhead = script("dispatch_overhead")
    order: list[str] = []
    fns = {name: (lambda name=name: order.append(name)) for name in "abc"}
    times = overhead.interleaved(fns, torch.device("cpu"), reps=2, rounds=3)
    assert set(times) == set("abc") and all(t > 0 for t in times.values())
    assert order[:3] == list("abc")  # one warm-up call each
    rounds = order[3:]
    assert rounds == list("aabbcc") + list("bbccaa") + list("ccaabb")
