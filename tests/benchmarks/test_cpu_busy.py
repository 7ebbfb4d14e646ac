"""benchmarks/cpu_busy.py runs end to end: both conditions and every cell, as JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "cpu_busy.py"


@pytest.mark.parametrize("rule", [[], ["--no-thread-rule"]])
def test_cpu_busy_smoke(tmp_path, rule):
    out = tmp_path / "busy.json"
    env = {**os.environ, "PYTHONPATH": str(SCRIPT.parents[1])}
    subprocess.run([sys.executable, str(SCRIPT), "--shapes", "2x16,3x5", "--reps", "1",
                    "--modes", "--neighbours", "1", "--json", str(out), *rule],
                   check=True, env=env, timeout=300, capture_output=True)
    data = json.loads(out.read_text())
    assert data["thread_rule"] is not rule
    cells = {(row["n"], row["t"], row["cell"]) for row in data["rows"]}
    assert {(2, 16, "public"), (3, 5, "public"), (2, 16, "doubling@1t")} <= cells
    for row in data["rows"]:
        assert row["quiet_ms"] > 0 and row["busy_ms"] > 0
        assert abs(row["ratio"] - row["busy_ms"] / row["quiet_ms"]) < 1e-9
