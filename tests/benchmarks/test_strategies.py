"""benchmarks/strategies.py: the smoke sweep checks and times its candidates and writes
the JSON and the markdown report."""

from __future__ import annotations

import json

import pytest


def test_smoke_sweep_writes_checked_records(script, tmp_path):
    strategies = script("strategies")
    assert strategies.main(["--smoke", "--output", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "strategies.json").read_text())
    timed = [r for r in data["records"] if r.get("device_us")]
    assert timed and all(r["correct"] is True and r["strategy"] == "flat" for r in timed)
    assert {(r["N"], r["T"]) for r in data["records"]} == {(4, 8)}
    assert "# Strategy sweep" in (tmp_path / "strategies.md").read_text()


def test_the_grid_takes_each_layout_asked_for(script, tmp_path):
    """``--layouts time`` sweeps the grid's cells time-major, every strategy that takes
    them (the GAE time-major pass, sequential against tiled, is then left out)."""
    strategies = script("strategies")
    assert strategies.main(["--smoke", "--layouts", "time", "--output", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "strategies.json").read_text())
    assert data["records"] and {r["layout"] for r in data["records"]} == {"time"}
    args = strategies.parse_args(["--layouts", "env,time", "--device", "cpu", "--quick",
                                  "--algorithms", "vtrace", "--output", str(tmp_path)])
    assert args.layouts == ["env", "time"]
    with pytest.raises(SystemExit):
        strategies.parse_args(["--layouts", "rows", "--output", str(tmp_path)])


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


def test_report_merges_runs_split_over_gpus(script, tmp_path):
    """benchmarks/strategies_report.py's command line: two runs' JSON merged into one
    (every record kept, the longest run's time, both stop reasons), then its Markdown
    report and the GAE speedup plot beside it; one source needs no --output, several do."""
    strategies, report = script("strategies"), script("strategies_report")
    assert strategies.main(["--smoke", "--output", str(tmp_path / "a")]) == 0
    first = json.loads((tmp_path / "a" / "strategies.json").read_text())
    second = {"meta": {**first["meta"], "elapsed_s": first["meta"].get("elapsed_s", 0) + 7.0,
                       "stopped": "--max-seconds reached"},
              "records": first["records"]}
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "strategies.json").write_text(json.dumps(second))
    merged = tmp_path / "m" / "strategies.json"
    sources = [str(tmp_path / run / "strategies.json") for run in ("a", "b")]
    assert report.main([*sources, "--output", str(merged)]) == 0
    data = json.loads(merged.read_text())
    assert len(data["records"]) == 2 * len(first["records"])
    assert data["meta"]["merged_from"] == sources
    assert data["meta"]["elapsed_s"] == second["meta"]["elapsed_s"]
    assert data["meta"]["stopped"] == "--max-seconds reached"
    assert "# Strategy sweep" in merged.with_suffix(".md").read_text()
    assert merged.with_name("strategies_gae.png").stat().st_size > 0
    with pytest.raises(SystemExit):
        report.main(sources)  # several sources without --output


def test_report_reads_the_shipped_profile_of_the_run_s_gpu(script, tmp_path, monkeypatch):
    """The "dispatched" column reads the shipped profile measured on the run's GPU (its
    ``meta["device"]``); one of another GPU would name configs this GPU does not run."""
    from rltriton_tune import dispatch
    from rltriton_tune.tuning_db import shipped_dir
    from rltriton_tune.tuning_db.store import read_profile

    monkeypatch.delenv("RLTRITON_TUNE_SHIPPED_DB")  # the package's own profiles
    dispatch.reset()  # settings are read again
    report = script("strategies_report")
    shipped = sorted(shipped_dir().glob("*.json"))
    assert len(shipped) > 1
    for path in shipped:
        profile = read_profile(path)
        assert report.shipped_entries(profile.fingerprint["name"]) == dict(profile.entries)
    assert report.shipped_entries("cpu") == {}
    data = {"meta": {"device": "NVIDIA H100 80GB HBM3"}, "records": []}
    (tmp_path / "strategies.json").write_text(json.dumps(data))
    seen = []
    monkeypatch.setattr(report, "write_report", lambda src, md, entries: seen.append(entries))
    monkeypatch.setattr(report, "plot_speedup", lambda data, png: png)
    assert report.main([str(tmp_path / "strategies.json")]) == 0
    assert seen == [report.shipped_entries("NVIDIA H100 80GB HBM3")] and seen[0]
