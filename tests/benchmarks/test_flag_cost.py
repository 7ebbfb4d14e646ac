"""benchmarks/flag_cost.py: the smoke run times every flag set an estimator accepts at the
base key's config, records the ones SPEC refuses, resumes by (cell, strategy), and
BENCHMARKS.md summarises its rows."""

from __future__ import annotations


def test_smoke_times_each_accepted_flag_set_against_its_base(script, tmp_path):
    flag_cost = script("flag_cost")
    assert flag_cost.main(["--smoke", "--output", str(tmp_path)]) == 0
    rows = flag_cost.read_rows_by_pair(tmp_path / "flag_cost.jsonl")
    assert [(r["algorithm"], r["strategy"]) for r in rows] == [
        ("gae", "flat"), ("episodic_prefix_sum", "flat")]
    gae, prefix = rows
    # GAE: the base, then every flag set SPEC accepts; the others are listed as refused
    assert set(gae["flags"]) | set(gae["refused"]) == set(flag_cost.flag_sets("gae"))
    assert {"none", "last_value", "bootstrap+trunc", "next"} <= set(gae["flags"])
    assert "last_value+trunc" in gae["refused"] and not gae["errors"]
    assert set(prefix["flags"]) == {"none", "seed", "starts_at", "seed+starts_at"}
    for row in rows:
        base = row["flags"][row["base"]]
        assert base["ratio"] == base["bytes_ratio"] == base["per_byte"] == 1.0
        for m in row["flags"].values():
            assert m["device_us"] > 0
            assert abs(m["per_byte"] * m["bytes_ratio"] - m["ratio"]) < 1e-9
    # an [N, T] input adds a full read; an [N] one a little
    assert gae["flags"]["trunc"]["bytes_ratio"] == 1.25
    assert 1.0 < gae["flags"]["last_value"]["bytes_ratio"] < 1.1
    assert all(r["params"]["BLOCK_N"] >= 1 for r in rows)


def test_resume_skips_pairs_done_and_a_fresh_run_starts_over(script, tmp_path, capsys):
    flag_cost = script("flag_cost")
    args = ["--smoke", "--output", str(tmp_path), "--estimators", "eligibility_traces"]
    assert flag_cost.main(args) == 0
    path = tmp_path / "flag_cost.jsonl"
    assert len(path.read_text().splitlines()) == 1
    capsys.readouterr()
    assert flag_cost.main([*args, "--resume"]) == 0
    assert len(path.read_text().splitlines()) == 1        # nothing measured again
    assert "flag sets timed" not in capsys.readouterr().out
    assert flag_cost.main(args) == 0
    assert len(path.read_text().splitlines()) == 1        # replaced, not appended


def test_a_strategy_not_searched_for_the_key_is_recorded_not_timed(script, tmp_path, capsys):
    """``sequential`` reads env-major rows uncoalesced, so the tuner never searches it
    there: its flag paths on an env-major cell would say nothing about a served call."""
    import torch

    flag_cost = script("flag_cost")
    args = ["--smoke", "--output", str(tmp_path), "--estimators", "gae", "--strategies",
            "sequential", "--shapes", "3x6:env,3x6:time"]
    assert flag_cost.main(args) == 0
    env, time_major = flag_cost.read_rows_by_pair(tmp_path / "flag_cost.jsonl")
    assert "uncoalesced" in env["not_searched"] and env["flags"] == {}
    assert "not_searched" not in time_major and "last_value" in time_major["flags"]
    out = capsys.readouterr().out
    assert "not searched" in out and flag_cost.summary([env])["paths"] == 0
    assert flag_cost.warm_tasks([("gae", 32, 6, "env", "sequential")],
                                torch.device("cpu")) == []
    assert flag_cost.main([*args, "--resume"]) == 0       # recorded: not measured again
    assert len((tmp_path / "flag_cost.jsonl").read_text().splitlines()) == 2


def test_dispatched_times_the_flag_sets_at_dispatchs_choice_for_the_base(script, tmp_path,
                                                                         monkeypatch):
    """``dispatched`` takes the strategy and config dispatch chooses for the base key; a
    choice that is not a Triton kernel (the CPU fallback) is recorded, not timed."""
    from rltriton_tune.dispatch.decide import Decision

    flag_cost = script("flag_cost")
    args = ["--smoke", "--output", str(tmp_path), "--estimators", "gae", "--strategies",
            "dispatched"]
    assert flag_cost.main(args) == 0          # on the CPU dispatch runs the torch fallback
    (row,) = flag_cost.read_rows_by_pair(tmp_path / "flag_cost.jsonl")
    assert row["strategy"] == "dispatched" and row["flags"] == {}
    assert "not a Triton kernel" in row["errors"]["none"]

    chosen = {"BLOCK_N": 2, "BLOCK_T": 8, "num_warps": 1, "num_stages": 1}
    asked = []

    def decide(key, device):
        asked.append(key.flags)
        return Decision(key, "tiled", dict(chosen), "profile", path="h.json")

    monkeypatch.setattr(flag_cost, "decide", decide)
    assert flag_cost.main(args) == 0
    (row,) = flag_cost.read_rows_by_pair(tmp_path / "flag_cost.jsonl")
    assert asked == ["none"]                  # decided once, for the base key
    assert row["dispatched"] == {"strategy": "tiled", "source": "profile:h.json"}
    assert {k: row["params"][k] for k in chosen} == chosen
    assert {"none", "last_value", "bootstrap+trunc"} <= set(row["flags"]) and not row["errors"]
    assert flag_cost.strategies_for(None, flag_cost.torch.device("cpu"))[-1] == "dispatched"
    # compiled ahead apart from the strategy's default config, not in its place
    cpu = flag_cost.torch.device("cpu")
    both = flag_cost.warm_tasks([("gae", 32, 6, "env", "tiled"),
                                 ("gae", 32, 6, "env", "dispatched")], cpu)
    assert len(both) == 2 * len(flag_cost.warm_tasks([("gae", 32, 6, "env", "tiled")], cpu))


def test_retrace_has_no_flag_path_and_is_not_measured(script, tmp_path):
    flag_cost = script("flag_cost")
    assert flag_cost.flag_sets("retrace") == ["trunc"]   # required: the base itself
    assert flag_cost.flag_sets("eligibility_traces") == ["none", "seed"]
    assert flag_cost.main(["--smoke", "--output", str(tmp_path), "--estimators", "retrace"]) == 0
    assert flag_cost.read_rows_by_pair(tmp_path / "flag_cost.jsonl") == []


def test_benchmarks_md_summarises_flag_rows(script):
    md = script("benchmarks_md")
    row = {"algorithm": "gae", "layout": "env", "strategy": "flat", "N": 8, "T": 16,
           "base": "none", "flags": {
               "none": {"per_byte": 1.0}, "last_value": {"per_byte": 1.02},
               "trunc": {"per_byte": 1.2}}}
    lines = md.flag_lines([row])
    assert lines[2] == "| gae | env | 2 | 1 | 1.200 (trunc, flat, 8x16) | - | - | - |"


def test_kernels_are_compiled_ahead_in_worker_processes(script):
    """The GPU run's compile step, on the CPU under the interpreter: one task per flag set
    SPEC and the strategy accept, each on a narrow key, and a worker runs them."""
    import concurrent.futures as cf
    import multiprocessing as mp

    import torch

    flag_cost = script("flag_cost")
    tasks = flag_cost.warm_tasks([("episodic_prefix_sum", 32, 6, "env", "flat"),
                                  ("gae", 32, 6, "env", "flat")], torch.device("cpu"))
    keys = [task[1] for task in tasks]
    assert len(keys) == 4 + 7 and all("|N=16|" in key for key in keys)  # narrowed from 32
    assert not any("last_value+trunc" in key for key in keys)  # refused by SPEC
    with cf.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as pool:
        assert flag_cost.warm(pool, tasks[:2]) == 0
