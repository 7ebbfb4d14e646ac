"""benchmarks/switches.py: the smoke run builds and times every variant of the flat
kernel at rl-triton's config, and the switches are restored whatever happens."""

from __future__ import annotations

import json

import pytest


def test_smoke_times_every_variant_and_writes_them(script, tmp_path):
    switches = script("switches")
    assert switches.main(["--smoke", "--output", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "switches.json").read_text())
    assert [r["cell"] for r in data["rows"]] == list(switches.SMOKE_CELLS)
    for row in data["rows"]:
        # every variant computes what the built kernel computes, so every one is timed;
        # the config variants where the config takes them (TWO_BLOCKS: 8 warps or more,
        # rl-triton's config at 1,000 steps)
        capped = row["params"]["num_warps"] >= 8
        vtrace = row["cell"].startswith("vtrace")   # its builder has an exact variant
        assert set(row["device_us"]) == set(switches.VARIANTS) | (
            set(switches.PARAM_VARIANTS) if capped else set()) | (
            {switches.EXACT} if vtrace else set())
        assert capped == vtrace
        assert all(us > 0 for us in row["device_us"].values())
        assert row["params"]["BLOCK_N"] == 1          # rl-triton's config: a row a program
        assert "rl_triton" in row["errors"]          # no CUDA here: the peer is skipped
    table = switches.report(data["rows"])
    assert "gae\\|none" in table and table.count("\n") == 1 + len(data["rows"])
    assert "two blocks" in table.splitlines()[0] and "exact finish" in table.splitlines()[0]


def test_switches_are_restored_after_a_failure(script):
    from rltriton_tune.kernels import launch

    switches = script("switches")
    before = (launch.ALIGN_HINTS, launch.FLIP_RUNS, launch.DESCEND_ALWAYS)
    with pytest.raises(RuntimeError), switches.switched(switches.VARIANTS[
            "descending, hints off"]):
        assert launch.DESCEND_ALWAYS and not launch.ALIGN_HINTS
        raise RuntimeError("a variant failed to build")
    assert (launch.ALIGN_HINTS, launch.FLIP_RUNS, launch.DESCEND_ALWAYS) == before
