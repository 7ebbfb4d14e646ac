"""Markdown report of ``strategies.json`` (written by ``strategies.py``): one table
per estimator and the strategy targets, each PASS / FAIL / n/a.

    python3 benchmarks/strategies_report.py benchmarks/results/h200/strategies.json

Runs split over GPUs (one ``strategies.py --algorithms ...`` each) are merged first:

    python3 benchmarks/strategies_report.py A/strategies.json B/strategies.json \
        --output benchmarks/results/h200/strategies.json
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

#: A candidate whose probe launch is this many times slower than the cell's best (and
#: above SLOW_FLOOR_US) is recorded from the probe alone, not graph-timed (``strategies.py``).
SLOW_FACTOR = 20.0
SLOW_FLOOR_US = 200.0
#: Relative timing noise tolerated by the "never slower than flat" target.
NOISE = 1.05
FLOOR_RATIO = 1.3
BF16_SPEEDUP = 1.6
COPY_FRACTION = 0.9

Cell = tuple[str, int, int, str, str]


def _cells(records: list[dict[str, Any]]) -> dict[tuple[str, Cell], list[dict[str, Any]]]:
    out: dict[tuple[str, Cell], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r.get("strategy") is None:
            continue
        cell = (r["algorithm"], r["N"], r["T"], r["dtype"], r["layout"])
        out[(r["purpose"], cell)].append(r)
    return out


#: ``timing`` of records skipped after a single-launch probe: their ``device_us`` is the
#: probe's event time, which on the H200 run was mostly host launch overhead
#: (100-330 us for any config), not a device time; they take no part in comparisons.
PROBE_ONLY = "probe (too slow)"


def _timed(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r.get("device_us") and r.get("correct")
            and r.get("timing") != PROBE_ONLY]


def _best(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    timed = _timed(rows)
    return min(timed, key=lambda r: r["device_us"]) if timed else None


def _params(p: dict[str, Any]) -> str:
    short = {"BLOCK_N": "BN", "BLOCK_T": "BT", "CHUNK_T": "CT", "num_warps": "w",
             "num_stages": "s", "CARRY_BLOCK": "CB"}
    return " ".join(f"{short.get(k, k)}={v}" for k, v in sorted(p.items()))


def _fmt(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _dispatched(rows: list[dict[str, Any]], entries: dict[str, Any]) -> dict[str, Any] | None:
    """The row of the config dispatch picks now: the shipped profile's entry for the key
    when this run timed that config, else the run's own dispatched row."""
    from rltriton_tune.tune.bench import row_key

    entry = entries.get(row_key(rows[0]).as_text())
    if entry is not None:
        match = _best([r for r in rows if r["strategy"] == entry.strategy
                       and r["params"] == dict(entry.params)])
        if match is not None:
            return match
    return _best([r for r in rows if r.get("dispatched")])


def shipped_entries(device_name: str) -> dict[str, Any]:
    """Key text -> entry of the package's shipped profile measured on ``device_name`` (a
    run's ``meta["device"]``, e.g. ``NVIDIA H100 80GB HBM3``; empty if none ships): the
    "dispatched" column of an H100 run must read the H100 profile, not the H200's."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from rltriton_tune.tuning_db import shipped_dir
    from rltriton_tune.tuning_db.store import read_profile

    for path in sorted(shipped_dir().glob("*.json")):
        profile = read_profile(path)
        if (profile.fingerprint or {}).get("name") == device_name:
            return dict(profile.entries)
    return {}


def summarize(data: dict[str, Any], entries: dict[str, Any] | None = None
              ) -> dict[Cell, dict[str, Any]]:
    """Per grid/bf16/time-major cell: best Triton row, rl-triton flat row, the best flat
    one-row-per-program row, the dispatched row (see ``_dispatched``; ``entries``: the
    shipped profile's), compile best, floor."""
    cells = _cells(data["records"])
    entries = {} if entries is None else entries
    summary: dict[Cell, dict[str, Any]] = {}
    for (purpose, cell), rows in cells.items():
        if purpose == "compile":
            continue
        compiled = cells.get(("compile", cell), [])
        flat_rl = next((r for r in rows if r.get("role") == "rl_triton"), None)
        others = [r for r in rows if r.get("role") != "rl_triton"]
        summary[cell] = {
            "purpose": purpose,
            "best": _best(rows),
            "best_other": _best(others),
            "flat_rl": flat_rl if flat_rl and _timed([flat_rl]) else None,
            "flat_one_row": _best([r for r in rows if r["strategy"] == "flat"
                                   and r["params"].get("BLOCK_N") == 1]),
            "dispatched": _dispatched(rows, entries),
            "probe_only": sum(1 for r in rows if r.get("timing") == PROBE_ONLY),
            "compile": _best(compiled),
            "compile_rows": compiled,
            "floor_us": rows[0]["floor_us"],
            "data_bytes": rows[0]["data_bytes"],
            "wrong": [r for r in rows + compiled if r.get("correct") is False],
            "errors": [r for r in rows + compiled if r.get("error")
                       and r.get("correct") is not False
                       and not str(r["error"]).startswith("invalid")],
        }
    return summary


def _table(summary: dict[Cell, dict[str, Any]], algorithm: str, dtype: str,
           layout: str) -> list[str]:
    lines = ["| N | T | MB | best strategy | params | best µs | dispatched µs | "
             "flat rl-triton µs | torch.compile µs | floor µs | best/floor | speedup vs flat |",
             "|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    keys = sorted(c for c in summary if c[0] == algorithm and c[3] == dtype and c[4] == layout)
    for cell in keys:
        s = summary[cell]
        best, flat, comp = s["best"], s["flat_rl"], s["compile"]
        b = best["device_us"] if best else None
        d = s["dispatched"]["device_us"] if s.get("dispatched") else None
        f = flat["device_us"] if flat else None
        c = comp["device_us"] if comp else None
        comp_txt = "-" if c is None else f"{c:.2f} ({comp['params']['scan'][:5]})"
        lines.append(
            f"| {cell[1]} | {cell[2]} | {s['data_bytes'] / 2**20:.1f} | "
            f"{best['strategy'] if best else 'none'} | {_params(best['params']) if best else ''} | "
            f"{_fmt(b)} | {_fmt(d)} | {_fmt(f)} | {comp_txt} | {_fmt(s['floor_us'])} | "
            f"{_fmt(b / s['floor_us'] if b and s['floor_us'] else None)} | "
            f"{_fmt(f / b if b and f else None)} |")
    return lines


def targets(data: dict[str, Any], summary: dict[Cell, dict[str, Any]]) -> list[str]:
    """The strategy targets evaluated on the measured numbers."""
    big = data["meta"].get("big_bytes", 256 * 2**20)
    out: list[str] = []

    def line(ok: bool | None, text: str) -> None:
        out.append(f"- **{'n/a' if ok is None else 'PASS' if ok else 'FAIL'}** {text}")

    def gae(n: int, t: int) -> dict[str, Any] | None:
        s = summary.get(("gae", n, t, "float32", "env"))
        return s if s and s["best"] else None

    for n, t, limit in ((32768, 8, 3.0), (16, 32768, 8.0)):
        s = gae(n, t)
        got = "not measured" if s is None else \
            f"{s['best']['device_us']:.2f} µs ({s['best']['strategy']})"
        line(None if s is None else s["best"]["device_us"] <= limit,
             f"GAE N={n}, T={t} ≤ {limit:g} µs: {got}")
    s = gae(32768, 2048)
    frac = None if s is None else s["floor_us"] / s["best"]["device_us"]
    line(None if s is None else frac >= COPY_FRACTION,
         "GAE N=32768, T=2048 ≥ 90% of copy bandwidth: " + (
             "not measured" if s is None else f"{100 * frac:.1f}% ({s['best']['strategy']})"))

    grid = {c: s for c, s in summary.items() if s["purpose"] == "grid"}
    slower, compared = [], 0
    for cell, s in sorted(grid.items()):
        if s["dispatched"] and s["flat_one_row"]:
            compared += 1
            ratio = s["dispatched"]["device_us"] / s["flat_one_row"]["device_us"]
            if ratio > NOISE:
                slower.append(f"{cell[0]} N={cell[1]} T={cell[2]} ({ratio:.2f}x)")
    line(None if not compared else not slower,
         f"dispatched config never slower than the flat one-row-per-program kernel at its "
         f"best measured config (±{NOISE - 1:.0%} noise), {compared} cells compared"
         + (f"; slower in: {', '.join(slower)}" if slower else ""))
    no_flat = [f"{c[0]} N={c[1]} T={c[2]}" for c, s in sorted(grid.items()) if not s["flat_rl"]]
    if no_flat:
        out.append(f"  - flat rl-triton not runnable/valid in {len(no_flat)} cells: "
                   f"{', '.join(no_flat[:12])}{' ...' if len(no_flat) > 12 else ''}")

    over, checked = [], 0
    for cell, s in sorted(grid.items()):
        if s["data_bytes"] > big and s["best"]:
            checked += 1
            ratio = s["best"]["device_us"] / s["floor_us"]
            if ratio > FLOOR_RATIO:
                over.append(f"{cell[0]} N={cell[1]} T={cell[2]} ({ratio:.2f}x)")
    line(None if not checked else not over,
         f"within {FLOOR_RATIO}x of the HBM floor for cells > {big / 2**20:.0f} MB, "
         f"{checked} cells" + (f"; over in: {', '.join(over)}" if over else ""))

    slow, pairs = [], 0
    for cell, s in sorted(summary.items()):
        if s["purpose"] != "bf16" or not s["best"]:
            continue
        f32 = summary.get((cell[0], cell[1], cell[2], "float32", cell[4]))
        if not f32 or not f32["best"]:
            continue
        pairs += 1
        speedup = f32["best"]["device_us"] / s["best"]["device_us"]
        if speedup < BF16_SPEEDUP:
            slow.append(f"{cell[0]} N={cell[1]} T={cell[2]} ({speedup:.2f}x)")
    line(None if not pairs else not slow,
         f"bfloat16 ≥ {BF16_SPEEDUP}x faster than float32 in those cells, {pairs} cells"
         + (f"; below in: {', '.join(slow)}" if slow else ""))
    return out


def render(data: dict[str, Any], entries: dict[str, Any] | None = None) -> str:
    meta = data["meta"]
    summary = summarize(data, entries)
    bw = meta["copy_bandwidth_Bps"]
    lines = [
        "# Strategy sweep",
        "",
        f"Device: {meta['device']}; torch {meta['torch']}, Triton {meta['triton']}; "
        f"measured copy bandwidth {bw / 1e9:.0f} GB/s (read + write). "
        f"Run took {meta['elapsed_s']} s." + (f" **{meta['stopped']}**." if meta["stopped"]
                                              else ""),
        "",
        "Device time = median CUDA-graph replay per launch over input copies rotated past L2 "
        "(`tune.measure.time_cuda`); floor = bytes moved / copy bandwidth. Best = fastest "
        "correct config of a small per-cell sweep of every Triton strategy, plus the config "
        "dispatch picked on the machine. Column \"dispatched\": the config of the committed "
        "profile's entry for the cell where the run timed it (entries replaced from this run "
        "point at a config it timed), else the run's dispatched row; empty for runs before it "
        "was timed. Candidates in the JSON. Flat rl-triton = flat, BLOCK_N=1, rl-triton 0.1.3 "
        "warps. "
        "Every candidate was checked against the torch fallback on the timing inputs first.",
        "",
        f"Not graph-timed: {sum(s['probe_only'] for s in summary.values())} candidates "
        f"whose single-launch probe (device busy before its start event, so host launch "
        f"overhead is hidden) took over {SLOW_FLOOR_US:g} µs and {SLOW_FACTOR:g}x the cell's "
        "best (`timing: \"probe (too slow)\"` in the JSON; mostly the sequential kernel on "
        "env-major cells). They take no part in the comparisons.",
        "",
        "## Targets",
        "",
        *targets(data, summary),
        "",
    ]
    algorithms = sorted({c[0] for c in summary})
    for variant, title in ((("float32", "env"), "float32, env-major"),
                           (("bfloat16", "env"), "bfloat16, env-major (cells > big-bytes)"),
                           (("float32", "time"), "float32, time-major")):
        for algorithm in algorithms:
            if not any(c[0] == algorithm and c[3:] == variant for c in summary):
                continue
            lines += [f"## {algorithm} — {title}", "", *_table(summary, algorithm, *variant), ""]
    wrong = [r for s in summary.values() for r in s["wrong"]]
    errors = [r for s in summary.values() for r in s["errors"]]
    lines += ["## Wrong results and failures", ""]
    if not wrong and not errors:
        lines.append("None: every valid candidate matched the torch fallback and was timed.")
    for r in wrong + errors:
        lines.append(f"- {r['algorithm']} N={r['N']} T={r['T']} {r['dtype']} {r['layout']} "
                     f"{r['strategy']} {_params(r['params'])}: "
                     f"{'WRONG ' if r.get('correct') is False else ''}{r['error']}")
    return "\n".join(lines) + "\n"


def plot_speedup(data: dict[str, Any], png_path: Path, algorithm: str = "gae") -> Path:
    """Heatmap over N x T of the best config's speedup over flat rl-triton, labelled with
    the winning strategy (float32, env-major cells of ``algorithm``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    summary = summarize(data)
    cells = {c: s for c, s in summary.items()
             if c[0] == algorithm and c[3:] == ("float32", "env") and s["best"] and s["flat_rl"]}
    ns = sorted({c[1] for c in cells})
    ts = sorted({c[2] for c in cells})
    grid = np.full((len(ns), len(ts)), np.nan)
    fig, ax = plt.subplots(figsize=(1.2 * len(ts) + 2, 0.8 * len(ns) + 1.5))
    for (_, n, t, _, _), s in cells.items():
        i, j = ns.index(n), ts.index(t)
        grid[i, j] = s["flat_rl"]["device_us"] / s["best"]["device_us"]
        ax.text(j, i, f"{grid[i, j]:.2f}x\n{s['best']['strategy']}", ha="center",
                va="center", fontsize=8)
    image = ax.imshow(np.log2(grid), cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(ts)), [str(t) for t in ts])
    ax.set_yticks(range(len(ns)), [str(n) for n in ns])
    ax.set_xlabel("T (steps)")
    ax.set_ylabel("N (environments)")
    meta = data["meta"]
    ax.set_title(f"{algorithm}: best strategy vs flat rl-triton (device time)\n"
                 f"{meta['device']}, torch {meta['torch']}, Triton {meta['triton']}")
    fig.colorbar(image, ax=ax, label="log2 speedup")
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)
    plt.close(fig)
    return Path(png_path)


def write_report(json_path: Path, md_path: Path, entries: dict[str, Any] | None = None
                 ) -> Path:
    """Render ``json_path`` to ``md_path``; returns ``md_path``."""
    data = json.loads(Path(json_path).read_text())
    Path(md_path).write_text(render(data, entries))
    return Path(md_path)


def merge(sources: list[Path], target: Path) -> Path:
    """One JSON of several runs' records: the first run's meta, with the longest run's
    time (the runs share the machine's GPUs side by side) and every run's stop reason."""
    runs = [json.loads(Path(src).read_text()) for src in sources]
    meta = dict(runs[0]["meta"])
    meta["merged_from"] = [str(src) for src in sources]
    meta["elapsed_s"] = max(run["meta"].get("elapsed_s", 0) for run in runs)
    meta["stopped"] = "; ".join(run["meta"]["stopped"] for run in runs
                                if run["meta"].get("stopped")) or None
    merged = {"meta": meta, "records": [r for run in runs for r in run["records"]]}
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(merged, indent=1))
    return target


def main(argv: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sources", type=Path, nargs="*",
                   default=[Path("benchmarks/results/h200/strategies.json")])
    p.add_argument("--output", type=Path, help="merged JSON (needed with several sources)")
    args = p.parse_args(argv)
    if len(args.sources) > 1 and args.output is None:
        p.error("several sources need --output")
    src = merge(args.sources, args.output) if args.output else args.sources[0]
    device = json.loads(src.read_text())["meta"]["device"]
    print(write_report(src, src.with_suffix(".md"), shipped_entries(device)))
    print(plot_speedup(json.loads(src.read_text()), src.with_name(src.stem + "_gae.png")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
