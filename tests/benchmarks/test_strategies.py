"""benchmarks/strategies.py: the smoke sweep checks and times its candidates and writes
the JSON and the markdown report."""

from __future__ import annotations

import json


def test_smoke_sweep_writes_checked_records(script, tmp_path):
    strategies = script("strategies")
    assert strategies.main(["--smoke", "--output", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "strategies.json").read_text())
    timed = [r for r in data["records"] if r.get("device_us")]
    assert timed and all(r["correct"] is True and r["strategy"] == "flat" for r in timed)
    assert {(r["N"], r["T"]) for r in data["records"]} == {(4, 8)}
    assert "# Strategy sweep" in (tmp_path / "strategies.md").read_text()


def test_retrace_configs_come_with_the_action_pre_pass(script):
    """Every hand-picked Retrace config is timed with and without ``REDUCE_A``; time-major
    Retrace adds the whole-column tiles for its pre-reduced scan; other estimators never
    name the parameter (their strategies do not take it)."""
    from rltriton_tune.call import ProblemKey
    from rltriton_tune.kernels import strategies as kernel_strategies

    strategies = script("strategies")
    key = ProblemKey("retrace", 32768, 128, "float32", "time", "trunc", a=8)
    for name in ("flat", "tiled", "sequential", "lookback"):
        picked = strategies.hand_picked(name, key)
        fused = [p for p in picked if "REDUCE_A" not in p]
        reduced = [{k: v for k, v in p.items() if k != "REDUCE_A"}
                   for p in picked if p.get("REDUCE_A") == 1]
        assert fused and all(p in reduced for p in fused), name
        for p in picked:
            kernel_strategies()[name].validate(key, p)
    tiled = strategies.hand_picked("tiled", key)
    assert {"BLOCK_N": 8, "BLOCK_T": 64, "num_warps": 1, "num_stages": 3,
            "REDUCE_A": 1} in tiled
    gae = ProblemKey("gae", 32768, 128, "float32", "time")
    assert not any("REDUCE_A" in p for n in ("flat", "tiled", "sequential", "lookback")
                   for p in strategies.hand_picked(n, gae))
