"""benchmarks/search_quality.py: the smoke run sweeps the CPU space, replays the
searches on it and runs the tuner once (in a subprocess: the script points the tuning
database at a scratch folder through the environment)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "search_quality.py"


def test_smoke_replays_searches_against_the_exhaustive_table(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(SCRIPT.parents[1])}
    done = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--output", str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((tmp_path / "search_quality.json").read_text())
    (result,) = summary["results"]
    assert result["key"].startswith("gae|") and result["configs"] >= 1
    assert len(result["curves"]["tpe"]) == summary["seeds"] == 2
    best = result["exhaustive_best_us"]
    assert all(c[-1] >= best for curves in result["curves"].values() for c in curves)
    assert result["live"]["trials"] >= 1
