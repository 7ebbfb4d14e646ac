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
