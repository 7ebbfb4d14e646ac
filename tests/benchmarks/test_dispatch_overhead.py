"""benchmarks/dispatch_overhead.py: the smoke run measures the public call and both
floors in one process and writes them."""

from __future__ import annotations

import json

import pytest


def test_smoke_writes_public_call_and_floors(script, tmp_path):
    overhead = script("dispatch_overhead")
    assert overhead.main(["--smoke", "--output", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "dispatch_overhead.json").read_text())
    assert [r["case"].split("|")[0] for r in report["rows"]] == ["gae", "retrace"]
    for r in report["rows"]:
        assert r["public_us"] > 0 and r["empty_triton_us"] > 0 and r["torch_add_us"] > 0
        assert r["over_floor_us"] == pytest.approx(r["public_us"] - r["empty_triton_us"])
        assert r["strategy"] and r["source"]
    # The floors are measured once, so every row shares them.
    assert len({r["empty_triton_us"] for r in report["rows"]}) == 1
