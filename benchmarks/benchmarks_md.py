"""Write BENCHMARKS.md (and the README's performance section) from ``rltriton-tune bench``.

Input: one or more ``bench.json`` files from GPU runs (for example one per
estimator group, or float32 and bfloat16 runs); their PNG heatmaps are linked
from where they lie. Output: BENCHMARKS.md with the headline numbers (share of
cells within 5% of the oracle, geometric-mean speedups over the flat heuristic
and over torch.compile), per-run tables and heatmaps. With ``--readme``, the
block between ``<!-- performance:begin -->`` and ``<!-- performance:end -->``
in the README is replaced by a short table and one plot. Each ``--fresh-runs`` adds the
bench.json files of a further held-out set (shapes no rule was read from): their held-out
cells get a summary of their own, the measure of how dispatch generalises.

    python benchmarks/benchmarks_md.py benchmarks/results/bench_h200/*/bench.json \
        --output BENCHMARKS.md --readme README.md
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from rltriton_tune.tune.bench import format_ratio, summarize, to_markdown  # noqa: E402

BEGIN, END = "<!-- performance:begin -->", "<!-- performance:end -->"
#: Shapes of the README's short table (GAE, float32, env-major): the default tuning grid.
README_SHAPES = [(4096, 8), (32768, 32), (256, 128), (4096, 512), (32768, 2048), (16, 32768)]


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def headline(summary: dict[str, Any]) -> list[str]:
    ratio = {name: format_ratio(summary[name]) for name in (
        "worst_vs_oracle", "geomean_speedup_flat", "min_speedup_flat", "geomean_speedup_compile",
        "min_speedup_compile")}
    return [
        "| measure | value | target |", "|---|---:|---:|",
        f"| cells (held-out) | {summary['cells']} ({summary['held_out_cells']}) | |",
        f"| dispatched within 5% of the oracle | {_pct(summary['within_5pct_of_oracle'])} "
        f"of {summary['oracle_cells']} | >= 95% |",
        f"| worst dispatched / oracle | {ratio['worst_vs_oracle']} | |",
        f"| geomean speedup over the flat heuristic | {ratio['geomean_speedup_flat']} "
        f"over {summary.get('flat_cells', '?')} cells | >= 1.5x |",
        f"| worst cell vs the flat heuristic | {ratio['min_speedup_flat']} | >= 0.97x |",
        f"| geomean speedup over torch.compile | {ratio['geomean_speedup_compile']} "
        f"over {summary['compile_cells']} cells | >= 2x |",
        f"| worst cell vs torch.compile | {ratio['min_speedup_compile']} | |",
    ] + [f"| {label} | {summary[better]} of {summary[cells]} | |" for label, better, cells in (
        ("built-in heuristic > 3% faster than dispatched", "heuristic_better_cells",
         "heuristic_cells"),
        ("a nearby tuned entry's config > 3% faster (held-out)", "alternative_better_cells",
         "alternative_cells"),
        ("nearest entry's config as tuned (not moved) > 3% faster (held-out)",
         "unmoved_better_cells", "unmoved_cells"),
        ("nearest entry's config as tuned (not moved) > 3% slower (held-out)",
         "unmoved_worse_cells", "unmoved_cells")) if summary.get(cells)] + (
        [f"| oracle sweeps cut short (left out above) | {summary['oracle_incomplete_cells']} | |"]
        if summary.get("oracle_incomplete_cells") else [])


def missing(rows: list[dict[str, Any]]) -> list[str]:
    """Why cells lack a measurement: each recorded error message with its count."""
    counts: dict[str, int] = {}
    for row in rows:
        for name, error in (row.get("errors") or {}).items():
            text = f"{name}: {error}"
            counts[text] = counts.get(text, 0) + 1
    if not counts:
        return []
    lines = ["Measurements missing from some cells (as recorded in the JSON):", ""]
    lines += [f"- {n} cell(s): {text}" for text, n in sorted(counts.items())]
    return [*lines, ""]


ORDINALS = ("second", "third", "fourth", "fifth")


def fresh_title(index: int) -> str:
    """The section title of the ``index``-th extra held-out set (0: the second set)."""
    return f"## Summary, the {ORDINALS[index]} held-out set"


def fresh_rows(fresh_runs: list[tuple[Path, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The held-out cells of a further held-out set's runs (their grid cells repeat the
    main runs' and would count twice)."""
    return [r for _, rep in fresh_runs for r in rep["rows"] if r.get("held_out")]


def _run_section(path: Path, rep: dict[str, Any], output: Path) -> list[str]:
    rel = os.path.relpath(path.parent, output.parent)
    body = to_markdown(rep).split("\n", 2)[2]  # drop the per-run title
    lines = [f"## Run: `{rel}`", "", *headline(summarize(rep["rows"])), "",
             body.replace("## ", "### "), ""]
    lines += [f"![{png.stem}]({rel}/{png.name})" for png in sorted(path.parent.glob("bench_*.png"))]
    return [*lines, ""]


def benchmarks_md(reports: list[tuple[Path, dict[str, Any]]], output: Path,
                  oracle_runs: list[tuple[Path, dict[str, Any]]] = (), note: str = "",
                  fresh_sets: list[list[tuple[Path, dict[str, Any]]]] = (),
                  fresh_notes: list[str] = ()) -> str:
    """The page: all-runs summary, each further held-out set's summary, then each run;
    ``oracle_runs`` (re-measurements of some cells with an exhaustive sweep) follow as
    their own sections, outside the all-runs summary so that no cell counts twice.
    ``note`` (what a reader should know about the runs, such as which code each
    measured) follows the header, ``fresh_notes[i]`` the summary of ``fresh_sets[i]``."""
    rows = [r for _, rep in reports for r in rep["rows"]]
    first = reports[0][1]
    lines = ["# Benchmarks", "",
             f"{first['device_name']}, torch {first['torch']}, Triton {first.get('triton')}, "
             f"measured {first.get('date', '?')} with `rltriton-tune bench` (raw JSON next to "
             "each table's heatmaps). Regenerate: `python benchmarks/benchmarks_md.py "
             "<bench.json ...> --output BENCHMARKS.md --readme README.md`.", "",
             *([note, ""] if note else []),
             "## Summary, all runs", "", *headline(summarize(rows)), "", *missing(rows)]
    notes = [*fresh_notes, *[""] * len(fresh_sets)]
    for index, runs in enumerate(fresh_sets):
        lines += [fresh_title(index), "", *([notes[index], ""] if notes[index] else []),
                  *headline(summarize(fresh_rows(runs))), ""]
    for path, rep in [*reports, *(r for runs in fresh_sets for r in runs), *oracle_runs]:
        lines += _run_section(path, rep, output)
    return "\n".join(lines)


def readme_block(reports: list[tuple[Path, dict[str, Any]]], readme: Path,
                 fresh_sets: list[list[tuple[Path, dict[str, Any]]]] = ()) -> str:
    first = reports[0][1]
    rows = {(r["N"], r["T"]): r for _, rep in reports for r in rep["rows"]
            if r["algorithm"] == "gae" and r["dtype"] == "float32" and r["layout"] == "env"
            and r["flags"] == "none" and not r.get("held_out")}
    lines = [BEGIN,
             f"## Performance ({first['device_name']}, measured {first.get('date', '?')}, "
             f"torch {first['torch']}, Triton {first.get('triton')})", "",
             "GAE, float32, env-major; device time in µs (CUDA-graph replays, inputs rotated "
             "past L2). All estimators, held-out shapes and the oracle comparison: "
             "[BENCHMARKS.md](BENCHMARKS.md).", "",
             "| N x T | dispatched | flat heuristic | torch.compile | HBM floor | speedup |",
             "|---|---:|---:|---:|---:|---:|"]
    all_rows = [r for _, rep in reports for r in rep["rows"]]
    for shape in README_SHAPES:
        r = rows.get(shape)
        if r is None:
            continue
        t = r["device_us"]
        cells = [t.get("dispatched"), t.get("flat_heuristic"), r.get("compile_us"),
                 r.get("floor_us")]
        lines.append(f"| {shape[0]} x {shape[1]} | "
                     + " | ".join("-" if x is None else f"{x:.2f}" for x in cells)
                     + f" | {format_ratio(r.get('speedup'))} |")
    lines += ["", "All estimators (float32, env-major; tuning grid and held-out shapes):", "",
              *headline(summarize(all_rows))]
    for index, runs in enumerate(fresh_sets):
        lines += ["", f"The {ORDINALS[index]} held-out set (shapes no rule was read from when "
                  "first measured; see BENCHMARKS.md):", "",
                  *headline(summarize(fresh_rows(runs)))]
    for path, _ in reports:
        png = path.parent / "bench_gae.png"
        if png.exists():
            lines += ["", f"![GAE: dispatched vs flat]({os.path.relpath(png, readme.parent)})"]
            break
    lines.append(END)
    return "\n".join(lines)


def replace_block(text: str, block: str) -> str:
    """``text`` with its performance block replaced (appended if it has none)."""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        return head + block + rest.split(END, 1)[1]
    return text.rstrip("\n") + "\n\n" + block + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("reports", type=Path, nargs="+", help="bench.json files")
    p.add_argument("--output", type=Path, default=Path("BENCHMARKS.md"))
    p.add_argument("--readme", type=Path, help="README to update between the markers")
    p.add_argument("--oracle-runs", type=Path, nargs="*", default=[],
                   help="bench.json files of --oracle runs, shown apart from the summary")
    p.add_argument("--note", default="", help="a paragraph about the runs, under the header")
    p.add_argument("--fresh-runs", type=Path, nargs="+", action="append", default=[],
                   help="bench.json files of a further held-out set, summarised apart "
                        "(repeat for each set)")
    p.add_argument("--fresh-note", action="append", default=[],
                   help="a paragraph under that set's summary (one per --fresh-runs, in order)")
    args = p.parse_args(argv)

    def load(paths: list[Path]) -> list[tuple[Path, dict[str, Any]]]:
        return [(path, json.loads(path.read_text())) for path in paths]

    reports, fresh = load(args.reports), [load(paths) for paths in args.fresh_runs]
    args.output.write_text(benchmarks_md(reports, args.output, load(args.oracle_runs),
                                         args.note, fresh, args.fresh_note))
    print(args.output)
    if args.readme:
        args.readme.write_text(replace_block(args.readme.read_text(),
                                             readme_block(reports, args.readme, fresh)))
        print(args.readme)
    return 0


if __name__ == "__main__":
    sys.exit(main())
