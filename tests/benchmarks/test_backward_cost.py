"""benchmarks/backward_cost.py runs on CPU and writes one row per estimator and shape
(a smoke test: no timing is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "backward_cost.py"


def test_backward_cost_cpu_smoke(tmp_path):
    out = tmp_path / "cost.json"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--shapes", "4x8,3x5",
         "--algorithms", "gae,retrace,episodic_prefix_sum", "--rounds", "1",
         "--output", str(out)],
        capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    rows = json.loads(out.read_text())["rows"]
    assert [(r["algorithm"], r["N"], r["T"]) for r in rows] == [
        ("gae", 4, 8), ("retrace", 4, 8), ("episodic_prefix_sum", 4, 8),
        ("gae", 3, 5), ("retrace", 3, 5), ("episodic_prefix_sum", 3, 5)]
    for r in rows:
        assert r["forward_us"] > 0 and r["backward_us"] > 0
        assert r["ratio"] == r["backward_us"] / r["forward_us"]
    assert rows[1]["grad_inputs"] == ["action_probs_target", "action_probs_behavior",
                                      "q_values", "next_q_values_all", "rewards"]
    assert "backward / forward" in result.stdout


def test_unknown_algorithm_is_an_error():
    result = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu",
                             "--algorithms", "nope"], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode != 0 and "unknown algorithm" in result.stderr
