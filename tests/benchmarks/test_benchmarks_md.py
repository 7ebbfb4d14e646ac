"""benchmarks/benchmarks_md.py: the page's numbers from peers.py rows and bench reports,
and BENCHMARKS.md as committed is what the generator writes from the results folders."""

from __future__ import annotations

import json
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _row(alg: str, n: int, t: int, ours: float, rl: float | None, **extra) -> dict:
    us = {"dispatched": ours, **({"rl_triton": rl} if rl else {})}
    return {"cell": f"{alg}|none|float32|env|N={n}|T={t}", "algorithm": alg, "N": n, "T": t,
            "A": 0, "dtype": "float32", "layout": "env", "flags": "none", "device_us": us,
            "host_us": dict(us), "agree": {}, "errors": {}, "device_name": "NVIDIA X1",
            "torch": "2", "triton": "3", "date": "2026-01-01", **extra}


def test_peer_tables_count_geomean_worst_and_slow_cells(script, tmp_path):
    md = script("benchmarks_md")
    folder = tmp_path / "results" / "x1"
    folder.mkdir(parents=True)
    rows = [_row("gae", 8, 8, 1.0, 2.0), _row("gae", 77, 24, 1.0, 0.5),
            _row("vtrace", 64, 32, 2.0, 2.0), _row("vtrace", 8, 8, 1.0, None)]
    rows[3]["agree"] = {"torchrl": False}
    (folder / "peers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pairs = md.peer_ratios(rows, "rl_triton")
    assert [p for p, _ in pairs] == [2.0, 0.5, 1.0]
    geo, worst, slower, cells = md.ratio_cells(pairs)
    assert geo == md.format_ratio(1.0) and worst.startswith(md.format_ratio(0.5))
    assert "77x24" in worst and (slower, cells) == ("1", "3")
    page = md.benchmarks_md([folder], tmp_path / "BENCHMARKS.md")
    assert page.index("## Summary") < page.index("How to read") < page.index("#### gae")
    assert "#### vtrace" in page and "vs rl-triton 0.1.3" in page
    assert "vtrace|none|float32|env|N=8|T=8: torchrl" in page  # disagreement listed
    assert math.isclose(md.geomean([2.0, 0.5]), 1.0)


def test_layout_pairs_compare_time_major_with_env_major_above_the_size_limit(script):
    md = script("benchmarks_md")
    big, small = 300e6, 1e6

    def cell(layout, n, t, ours, size, alg="gae"):
        return _row(alg, n, t, ours, None, layout=layout, bytes=size)

    rows = [cell("env", 4096, 4096, 100.0, big), cell("time", 4096, 4096, 150.0, big),
            cell("env", 8192, 4096, 200.0, big), cell("time", 8192, 4096, 210.0, big),
            cell("env", 64, 64, 1.0, small), cell("time", 64, 64, 5.0, small),  # too small
            cell("time", 512, 512, 9.0, big)]  # no env-major partner
    pairs = md.layout_pairs(rows)
    assert sorted(round(p, 3) for p, _ in pairs) == [1.05, 1.5]
    # 1 GB/s: the floor of a 300 MB cell is 300e6 / 1e9 s = 300000 us
    lines = md.layout_lines(rows, bandwidth_gbs=1.0)
    every = next(line for line in lines if line.startswith("| **all**"))
    assert f"| {math.sqrt(1.5 * 1.05):.2f}x | 1.50x (none, 4096x4096) | 1 | 2 |" in every
    env = next(line for line in lines if line.startswith("| env |"))
    assert "| 0.00x |" in env and "| 2 | 2 |" in env  # far under the floor: both within
    assert md.layout_lines([r for r in rows if r["layout"] == "env"], 1.0) == []


def test_readme_block_is_replaced_between_markers(script):
    md = script("benchmarks_md")
    text = f"intro\n{md.BEGIN}\nold\n{md.END}\nrest\n"
    assert md.replace_block(text, "NEW") == "intro\nNEW\nrest\n"


def test_committed_benchmarks_md_is_generated(script):
    md = script("benchmarks_md")
    folders = md.find_folders(ROOT / "benchmarks" / "results")
    assert folders, "no results folder"
    assert md.benchmarks_md(folders, ROOT / "BENCHMARKS.md") == \
        (ROOT / "BENCHMARKS.md").read_text(), \
        "BENCHMARKS.md is stale: run python benchmarks/benchmarks_md.py"


def test_committed_readme_performance_block_is_generated(script):
    md = script("benchmarks_md")
    folders = md.find_folders(ROOT / "benchmarks" / "results")
    readme = (ROOT / "README.md").read_text()
    assert md.replace_block(readme, md.readme_block(folders)) == readme, \
        "README performance block is stale: python benchmarks/benchmarks_md.py --readme README.md"


def test_overhead_table_shows_the_stages_a_report_has(script):
    md = script("benchmarks_md")
    row = {"case": "gae-none", "strategy": "flat", "public_us": 20.0, "empty_triton_us": 11.0,
           "torch_add_us": 6.0, "over_floor_us": 9.0}
    old = md.overhead_lines({"rows": [row]})
    assert "validation" not in old[0] and old[2].count("|") == old[0].count("|")
    staged = {**row, "validate_us": 3.5, "dispatch_us": 0.5, "launcher_us": 12.25}
    lines = md.overhead_lines({"rows": [staged]})
    assert "| validation | dispatch | launcher |" in lines[0]
    assert "| 3.5 | 0.5 | 12.2 |" in lines[2]
    assert lines[2].count("|") == lines[1].count("|") == lines[0].count("|")
    parts = {**staged, "pack_us": 3.0, "launch_us": 8.5, "direct_launch": True}
    lines = md.overhead_lines({"rows": [parts, {**parts, "direct_launch": False}]})
    assert "| launcher: packing | launcher: launch |" in lines[0]
    assert "| flat (direct) | 20.0 | 3.5 | 0.5 | 12.2 | 3.0 | 8.5 |" in lines[2]
    assert "| flat (generic) |" in lines[3]
    # A stage some rows lack (the fast path, in a report of a tree where Retrace took the
    # general path) is a column,
    # with "-" where a row has no time.
    lines = md.overhead_lines({"rows": [{**parts, "fast_path_us": 2.5}, parts]})
    assert "| dispatch | fast path | launcher |" in lines[0]
    assert "| 0.5 | 2.5 | 12.2 |" in lines[2] and "| 0.5 | - | 12.2 |" in lines[3]
    assert lines[3].count("|") == lines[0].count("|")
    # The public call with recording off and on: last, where a report has them.
    recorded = {**row, "unrecorded_us": 20.5, "recorded_us": 21.25}
    lines = md.overhead_lines({"rows": [recorded, row]})
    assert lines[0].endswith("| public - empty launch | recording off | recording on |")
    assert lines[2].endswith("| 9.0 | 20.5 | 21.2 |") and lines[3].endswith("| 9.0 | - | - |")
    assert lines[1].count("|") == lines[2].count("|") == lines[0].count("|")


def test_backward_table_has_a_row_per_measurement(script):
    md = script("benchmarks_md")
    row = {"algorithm": "gae", "N": 4096, "T": 128, "flags": "bootstrap+trunc",
           "grad_inputs": ["rewards", "values"], "forward_us": 3.42, "backward_us": 18.76,
           "ratio": 5.48}
    lines = md.backward_lines({"rows": [row, {**row, "N": 32768}]})
    assert len(lines) == 4
    assert lines[2] == ("| gae | 4096x128 | bootstrap+trunc | rewards, values | 3.4 | 18.8 "
                        "| 5.48x |")
    assert lines[2].count("|") == lines[1].count("|") == lines[0].count("|")


def test_rows_of_a_profile_no_longer_shipped_are_labelled(script):
    """Bench rows whose ``source`` names a profile the package does not ship say so."""
    md = script("benchmarks_md")
    shipped = next(md.SHIPPED_PROFILES.glob("*.json")).name
    old = [{"source": "profile:cuda-gone-abi1-0000000000.json"}, {"source": "rules"}]
    assert md.earlier_profiles(old) == ["cuda-gone-abi1-0000000000.json"]
    assert "cuda-gone-abi1-0000000000.json" in md.earlier_note(old)[0]
    current = [{"source": f"borrowed:gae|none|float32|env|N=8|T=8@/x/{shipped}"}]
    assert md.earlier_profiles(current) == [] and md.earlier_note(current) == []


def test_the_peer_scope_is_read_from_the_rows(script):
    md = script("benchmarks_md")
    rows = [{"N": 8, "T": 16, "dtype": "float32", "layout": "env",
             "device_us": {"dispatched": 1.0, "rl_triton": 1.1}},
            {"N": 8, "T": 32, "dtype": "bfloat16", "layout": "time",
             "device_us": {"dispatched": 1.0, "torchrl": None}}]
    scope = md.peer_scope(rows)
    assert "2 shapes, bfloat16, float32, env-major and time-major" in scope
    assert scope.endswith("peers timed: rl-triton 0.1.3.")


def test_decision_sources_count_own_keys_nearby_keys_siblings_and_rules(script):
    md = script("benchmarks_md")
    own, other = "cuda-nvidia-x1-cc9.0-abi1-00.json", "cuda-nvidia-x2-cc9.0-abi1-11.json"
    rows = [{"device_name": "NVIDIA X1", "source": f"profile:{own}"},
            {"device_name": "NVIDIA X1", "source": f"borrowed:gae|none@{own}"},
            {"device_name": "NVIDIA X1", "source": f"borrowed:gae|none@{own}"},
            {"device_name": "NVIDIA X1", "source": f"borrowed:gae|none@{other}"},
            {"device_name": "NVIDIA X1", "source": "rules"}]
    line = md.decision_sources(rows)
    assert f"`{own}` (1 cells at their own key, 2 from a nearby key)" in line
    assert f"`{other}`, a sibling GPU's profile (1 cells)" in line
    assert line.endswith("rules (1 cells).")


def test_flag_paths_are_reported_apart_for_default_and_dispatched_configs(script):
    """A flag path over the target at the dispatched config is what a call gets: it
    shows in its own columns, named by the strategy dispatch chose."""
    def row(strategy, per_byte, dispatched=None):
        return {"algorithm": "gae", "layout": "time", "N": 4096, "T": 512, "base": "none",
                "strategy": strategy, "dispatched": dispatched,
                "flags": {"none": {"per_byte": 1.0}, "trunc": {"per_byte": per_byte},
                          "last_value": {"per_byte": 1.01}}}

    md = script("benchmarks_md")
    lines = md.flag_lines([row("tiled", 1.02),
                                      row("dispatched", 1.24, {"strategy": "flat"})])
    assert lines[2] == ("| gae | time | 2 | 2 | 1.020 (trunc, tiled, 4096x512) | 2 | 1 | "
                        "1.240 (trunc, flat, 4096x512) |")
    only_defaults = md.flag_lines([row("tiled", 1.02)])
    assert only_defaults[2].endswith("| - | - | - |")


def test_a_failed_cell_is_left_out_of_the_layout_floor_and_source_lines(script, tmp_path):
    """``peers.py`` records a cell that failed with its error alone (no bytes, source or
    times): the page is still written, and the cell counts nowhere."""
    md = script("benchmarks_md")
    big = 300e6

    def cell(layout, n, t, ours):
        return _row("gae", n, t, ours, None, layout=layout, bytes=big,
                    cell=f"gae|none|float32|{layout}|N={n}|T={t}",
                    source="profile:cuda-nvidia-x1-cc9.0-abi1-00.json")

    failed = {key: value for key, value in cell("time", 8192, 4096, 0.0).items()
              if key not in ("bytes", "source")}
    failed.update(device_us={}, host_us={}, errors={"cell": "RuntimeError: out of memory"})
    rows = [cell("env", 4096, 4096, 100.0), cell("time", 4096, 4096, 150.0),
            cell("env", 8192, 4096, 200.0), failed]
    assert [round(p, 3) for p, _ in md.layout_pairs(rows)] == [1.5]
    lines = md.layout_lines(rows, bandwidth_gbs=1.0)
    assert next(line for line in lines if line.startswith("| time |")).endswith("| 1 | 1 |")
    assert md.decision_sources(rows) == ("Decisions served from: "
                                         "`cuda-nvidia-x1-cc9.0-abi1-00.json` (3 cells at "
                                         "their own key, 0 from a nearby key).")
    folder = tmp_path / "results" / "x1"
    folder.mkdir(parents=True)
    (folder / "peers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert "### Time-major against env-major" in md.benchmarks_md([folder],
                                                                  tmp_path / "BENCHMARKS.md")


def test_rows_measured_with_a_config_their_entry_no_longer_holds_are_named(script, tmp_path,
                                                                          monkeypatch):
    md = script("benchmarks_md")
    entry = {"algorithm": "gae", "flags": "none", "dtype": "float32", "layout": "env",
             "N": 64, "T": 32, "A": 0, "strategy": "flat",
             "params": {"BLOCK_N": 2, "DESCEND": 0, "num_warps": 4}}
    (tmp_path / "gpu.json").write_text(json.dumps({"entries": [entry]}))
    monkeypatch.setattr(md, "SHIPPED_PROFILES", tmp_path)
    row = {"algorithm": "gae", "flags": "none", "dtype": "float32", "layout": "env", "N": 64,
           "T": 32, "A": 0, "cell": "gae|none|float32|env|N=64|T=32",
           "source": "profile:gpu.json", "strategy": "flat",
           "params": {"BLOCK_N": 2, "num_warps": 4}}  # DESCEND=0 added since: the same
    other = {**row, "params": {"BLOCK_N": 1, "num_warps": 4}}
    borrowed = {**other, "source": "borrowed:gae|none|float32|env|N=64|T=32@gpu.json"}
    assert md.stale_cells([row, borrowed]) == []
    stages = {**row, "params": {**row["params"], "num_stages": 3}}  # flat ignores stages
    assert md.stale_cells([stages]) == []
    assert md.stale_cells([other]) == [other]
    assert md.stale_cells([{**row, "strategy": "tiled"}])[0]["strategy"] == "tiled"
    note = md.stale_note([other])
    assert "1 cells" in note[0] and "--shapes 64x32" in note[0]


def test_a_folder_of_rows_from_two_software_stacks_names_both(script, tmp_path):
    md = script("benchmarks_md")
    row = {"device_name": "GPU", "torch": "2.11", "triton": "3.6"}
    assert md.folder_header(tmp_path, [row, row]) == "GPU, torch 2.11, Triton 3.6"
    newer = {**row, "torch": "2.14", "triton": "3.8"}
    assert md.folder_header(tmp_path, [row, newer, newer]) == (
        "GPU, torch 2.14, Triton 3.8 (2 rows); torch 2.11, Triton 3.6 (1 rows)")
    assert md.folder_header(tmp_path, []).startswith(tmp_path.name)
