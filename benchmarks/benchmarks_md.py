"""Write BENCHMARKS.md (and the README's performance block) from the results folders.

Each folder ``benchmarks/results/<gpu>/`` may hold:

- ``peers.jsonl``: ``peers.py`` rows (the dispatched choice beside rl-triton 0.1.3,
  torch.compile and TorchRL);
- ``bench/*.json``: ``rltriton-tune bench --oracle`` reports (the dispatched choice
  beside rl-triton's kernel config, torch.compile and the best config an exhaustive
  sweep found);
- ``dispatch_overhead.json``: ``dispatch_overhead.py`` (host time per call);
- ``backward_cost.json``: ``backward_cost.py`` (backward pass against forward);
- ``flag_cost.jsonl``: ``flag_cost.py`` (each flag path against its base at one config);
- ``strategies.md``: ``strategies.py``'s report (linked).

    python benchmarks/benchmarks_md.py                 # every folder under benchmarks/results
    python benchmarks/benchmarks_md.py benchmarks/results/h200 --output BENCHMARKS.md \\
        --readme README.md
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))

from flag_cost import TARGET  # noqa: E402
from flag_cost import read_rows_by_pair as read_flag_rows  # noqa: E402
from peers import read_rows  # noqa: E402

from rltriton_tune.tune.bench import format_ratio, summarize  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- performance:begin -->", "<!-- performance:end -->"
#: A cell counts as slower than rl-triton below this ratio (timing noise is ~3%).
SLOWER = 0.97
ORDER = ("gae", "vtrace", "retrace", "lambda_returns", "discounted_returns",
         "eligibility_traces", "episodic_prefix_sum")

#: What each number means, said where it first appears.
MEANING = {
    "dispatched": "dispatched: the kernel and config rltriton-tune runs for the call",
    "device": "device time: median of CUDA-graph replays over input copies rotated past "
              "the L2 cache, so no launch reads warm data",
    "speedup": "speedup: the peer's device time divided by ours on the same inputs "
               "(above 1 means we are faster)",
    "geomean": "geomean: geometric mean of the per-cell speedups",
    "worst": "worst: the lowest per-cell speedup, and its cell (N x T)",
    "slower": f"below {SLOWER}x: cells where the peer was more than 3% faster",
    "best_config": "best config: the fastest of every valid kernel config, found by an "
                   "exhaustive sweep of the search space for that cell",
    "flat": "rl-triton's config: the same Triton kernel family with rl-triton 0.1.3's "
            "fixed launch parameters (one row per program)",
    "floor": "HBM floor: the bytes a call must move (each input read once, each output "
             "written once) over the GPU's measured copy bandwidth; cells under about 60 MB "
             "partly run from L2 and can beat it",
    "host": "host time: wall time per call of back-to-back calls, synchronised at the end "
            "of each round",
}


def geomean(xs: Sequence[float]) -> float | None:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _ratio(x: float | None) -> str:
    return format_ratio(x)


# ---------------------------------------------------------------- peers.py rows


def peer_ratios(rows: list[dict[str, Any]], peer: str) -> list[tuple[float, dict[str, Any]]]:
    """(peer time / dispatched time, row) for every row where both were measured."""
    out = []
    for r in rows:
        us = r.get("device_us", {})
        if us.get(peer) and us.get("dispatched"):
            out.append((us[peer] / us["dispatched"], r))
    return out


def ratio_cells(pairs: list[tuple[float, dict[str, Any]]]) -> list[str]:
    """Table cells: geomean, worst (with its shape), count below SLOWER, cells."""
    if not pairs:
        return ["-", "-", "-", "0"]
    worst, row = min(pairs, key=lambda p: p[0])
    return [_ratio(geomean([p for p, _ in pairs])), f"{_ratio(worst)} ({row['N']}x{row['T']})",
            str(sum(p < SLOWER for p, _ in pairs)), str(len(pairs))]


def peer_summary(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| peer | geomean speedup | worst | cells below 0.97x | cells |",
             "|---|---:|---:|---:|---:|"]
    for peer, label in (("rl_triton", "rl-triton 0.1.3"), ("torch_compile", "torch.compile"),
                        ("torchrl", "TorchRL")):
        pairs = peer_ratios(rows, peer)
        if pairs:
            lines.append(f"| {label} | " + " | ".join(ratio_cells(pairs)) + " |")
    return lines


def peer_tables(rows: list[dict[str, Any]]) -> list[str]:
    """Per estimator: one line per (flags, dtype, layout) group, against each peer."""
    lines: list[str] = []
    by_alg: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_alg[r["algorithm"]].append(r)
    for alg in sorted(by_alg, key=lambda a: ORDER.index(a) if a in ORDER else 99):
        groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
        for r in by_alg[alg]:
            groups[(r["flags"], r["dtype"], r["layout"])].append(r)
        lines += [f"#### {alg}", "",
                  "| flags | dtype | layout | vs rl-triton: geomean | worst | below 0.97x "
                  "| cells | vs torch.compile | vs TorchRL |",
                  "|---|---|---|---:|---:|---:|---:|---:|---:|"]
        for (flags, dtype, layout), group in sorted(groups.items()):
            rl = ratio_cells(peer_ratios(group, "rl_triton"))
            comp = geomean([p for p, _ in peer_ratios(group, "torch_compile")])
            trl = geomean([p for p, _ in peer_ratios(group, "torchrl")])
            lines.append(f"| {flags} | {dtype} | {layout} | " + " | ".join(rl)
                         + f" | {_ratio(comp)} | {_ratio(trl)} |")
        lines.append("")
    disagree = [(r["cell"], peer) for r in rows for peer, ok in r.get("agree", {}).items()
                if ok is False]
    if disagree:
        lines += ["Peers whose outputs differed from ours (their times are still listed):", ""]
        lines += [f"- {cell}: {peer}" for cell, peer in disagree[:20]]
        lines.append("")
    return lines


#: Inputs and outputs of at least this many bytes: a time-major call should take within
#: LAYOUT_TARGET of the env-major one's device time.
LAYOUT_MIN_BYTES = 64e6
LAYOUT_TARGET = 1.10
#: From this many bytes a call should take within FLOOR_TARGET of the HBM floor.
FLOOR_MIN_BYTES = 256e6
FLOOR_TARGET = 1.30


def measured(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with a dispatched device time: a cell that failed (``peers.py`` records
    it with its error and no ``bytes``, ``source`` or times) is left out."""
    return [r for r in rows if r.get("device_us", {}).get("dispatched")]


def layout_pairs(rows: list[dict[str, Any]]) -> list[tuple[float, dict[str, Any]]]:
    """(time-major / env-major dispatched device time, time-major row) for every cell of
    at least LAYOUT_MIN_BYTES measured in both layouts (same estimator, flags, dtype, shape)."""
    rows = measured(rows)
    env = {(r["algorithm"], r["flags"], r["dtype"], r["N"], r["T"], r["A"]): r
           for r in rows if r["layout"] == "env"}
    out = []
    for r in rows:
        e = env.get((r["algorithm"], r["flags"], r["dtype"], r["N"], r["T"], r["A"]))
        if r["layout"] != "time" or e is None or r["bytes"] < LAYOUT_MIN_BYTES:
            continue
        mine, theirs = r["device_us"].get("dispatched"), e["device_us"].get("dispatched")
        if mine and theirs:
            out.append((mine / theirs, r))
    return out


def layout_lines(rows: list[dict[str, Any]], bandwidth_gbs: float | None) -> list[str]:
    """Time-major against env-major per estimator, and each layout against the HBM floor."""
    pairs = layout_pairs(rows)
    if not pairs:
        return []
    lines = [f"Dispatched device time of the time-major call over the env-major one, cells of "
             f"at least {LAYOUT_MIN_BYTES / 1e6:.0f} MB measured in both layouts (target: "
             f"within {LAYOUT_TARGET:.2f}x).", "",
             "| estimator | geomean time / env | worst | within target | cells |",
             "|---|---:|---:|---:|---:|"]
    by_alg: dict[str, list[tuple[float, dict[str, Any]]]] = defaultdict(list)
    for pair in pairs:
        by_alg[pair[1]["algorithm"]].append(pair)
    for alg in [*sorted(by_alg, key=lambda a: ORDER.index(a) if a in ORDER else 99), None]:
        group = pairs if alg is None else by_alg[alg]
        worst, row = max(group, key=lambda p: p[0])
        lines.append(f"| {alg or '**all**'} | {geomean([p for p, _ in group]):.2f}x | "
                     f"{worst:.2f}x ({row['flags']}, {row['N']}x{row['T']}) | "
                     f"{sum(p <= LAYOUT_TARGET for p, _ in group)} | {len(group)} |")
    if bandwidth_gbs:
        lines += ["", f"Dispatched device time over the HBM floor ({bandwidth_gbs:.0f} GB/s), "
                  f"cells of at least {FLOOR_MIN_BYTES / 1e6:.0f} MB (target: within "
                  f"{FLOOR_TARGET:.1f}x).", "",
                  "| layout | geomean | worst | within target | cells |",
                  "|---|---:|---:|---:|---:|"]
        for layout in ("env", "time"):
            big = [(r["device_us"]["dispatched"] / (r["bytes"] / bandwidth_gbs / 1e3), r)
                   for r in measured(rows)
                   if r["layout"] == layout and r["bytes"] >= FLOOR_MIN_BYTES]
            if big:
                worst, row = max(big, key=lambda p: p[0])
                lines.append(f"| {layout} | {geomean([p for p, _ in big]):.2f}x | {worst:.2f}x "
                             f"({row['algorithm']} {row['flags']}, {row['N']}x{row['T']}) | "
                             f"{sum(p <= FLOOR_TARGET for p, _ in big)} | {len(big)} |")
    return lines


# ---------------------------------------------------------------- bench reports


def copy_bandwidth(reports: list[dict[str, Any]]) -> float | None:
    """The device's measured copy bandwidth (GB/s) from the bench reports, if any."""
    found = sorted(r["copy_bandwidth_gbs"] for r in reports if r.get("copy_bandwidth_gbs"))
    return found[len(found) // 2] if found else None


#: The peers of ``peers.py`` rows, by their ``device_us`` name.
PEER_LABELS = (("rl_triton", "rl-triton 0.1.3"), ("torch_compile", "torch.compile"),
               ("torchrl", "TorchRL"))


def bench_reports(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((folder / "bench").glob("*.json"))]


#: The profiles the package ships: bench rows naming another were measured with an
#: earlier profile.
SHIPPED_PROFILES = Path(__file__).resolve().parents[1] / "rltriton_tune" / "tuning_db" / "profiles"


def earlier_profiles(rows: list[dict[str, Any]]) -> list[str]:
    """The profile files the rows' ``source`` names that the package no longer ships."""
    named = {m for r in rows for m in re.findall(r"[\w.\-]+\.json", str(r.get("source", "")))}
    return sorted(named - {p.name for p in SHIPPED_PROFILES.glob("*.json")})


def _config(strategy: str | None, params: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """A config as compared across rows and entries: parameters other than 0 (a switch
    added or withdrawn since a row was measured is 0 where the row does not name it);
    for ``flat``, without ``num_stages``, which it ignores (its kernel has no loop to
    pipeline: ``kernels/flat.py``)."""
    return strategy, {k: v for k, v in params.items()
                      if v != 0 and not (strategy == "flat" and k == "num_stages")}


def stale_cells(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows served at their own key in a shipped profile whose entry now holds another
    config than the one they were measured with (the profile changed after them)."""
    entries = {}
    for path in SHIPPED_PROFILES.glob("*.json"):
        for e in json.loads(path.read_text()).get("entries", []):
            entries[(path.name, e["algorithm"], e["flags"], e["dtype"], e["layout"], e["N"],
                     e["T"], e.get("A", 0))] = e
    out = []
    for r in rows:
        kind, _, name = str(r.get("source", "")).partition(":")
        entry = entries.get((name, r["algorithm"], r["flags"], r["dtype"], r["layout"], r["N"],
                             r["T"], r.get("A", 0))) if kind == "profile" else None
        if entry is not None and (_config(r.get("strategy"), r.get("params", {}))
                                  != _config(entry["strategy"], entry["params"])):
            out.append(r)
    return out


def stale_note(rows: list[dict[str, Any]]) -> list[str]:
    """A paragraph naming the rows :func:`stale_cells` finds, where there are any."""
    stale = stale_cells(rows)
    if not stale:
        return []
    shapes = sorted({(r["N"], r["T"]) for r in stale})
    return [f"{len(stale)} cells served at their own key were measured with a config that "
            "their shipped entry no longer holds (" + ", ".join(r["cell"] for r in stale[:3])
            + (", ..." if len(stale) > 3 else "") + "): their rows describe the profile of "
            "their date; `peers.py --update --shapes "
            + ",".join(f"{n}x{t}" for n, t in shapes) + "` measures them again.", ""]


def peers_timed(peers: list[dict[str, Any]]) -> list[str]:
    """The labels of the peers the rows hold a time for."""
    return [label for peer, label in PEER_LABELS
            if any(r["device_us"].get(peer) is not None for r in peers)]


def decision_sources(peers: list[dict[str, Any]]) -> str:
    """Where the dispatched choices came from: per profile file, how many cells its own
    key served and how many borrowed another key's entry (a file measured on another GPU,
    a sibling's, serves every cell by borrowing); then the built-in rules."""
    exact: Counter[str] = Counter()
    borrowed: Counter[str] = Counter()
    others: Counter[str] = Counter()
    for row in peers:
        if "source" not in row:  # a failed cell: no decision recorded
            continue
        kind, _, rest = row["source"].partition(":")
        if kind == "profile":
            exact[rest] += 1
        elif kind == "borrowed":
            borrowed[rest.rpartition("@")[2]] += 1
        else:
            others[kind] += 1
    gpu = re.sub(r"[^a-z0-9]+", "-", str(peers[0].get("device_name", "")).lower()).strip("-")
    parts = []
    for name in sorted(exact.keys() | borrowed.keys()):
        if gpu and f"-{gpu}-" not in name:
            parts.append(f"`{name}`, a sibling GPU's profile ({borrowed[name]} cells)")
        else:
            parts.append(f"`{name}` ({exact[name]} cells at their own key, {borrowed[name]} "
                         "from a nearby key)")
    parts += [f"{kind} ({count} cells)" for kind, count in sorted(others.items())]
    return "Decisions served from: " + "; ".join(parts) + "."


def peer_scope(peers: list[dict[str, Any]]) -> str:
    """What the peer rows cover, read from them: shapes, dtypes, layouts, peers timed."""
    timed = peers_timed(peers)
    dtypes = ", ".join(sorted({r["dtype"] for r in peers}))
    layouts = " and ".join(sorted({f"{r['layout']}-major" for r in peers}))
    shapes = len({(r["N"], r["T"]) for r in peers})
    return (f"Each estimator on the same inputs: {shapes} shapes, {dtypes}, {layouts}, the "
            f"flag sets training code passes; peers timed: {', '.join(timed) or 'none'}.")


def bench_lines(rows: list[dict[str, Any]]) -> list[str]:
    s = summarize(rows)
    within = s["within_5pct_of_oracle"]
    return [
        "| measure | value |", "|---|---:|",
        f"| cells | {s['cells']} |",
        f"| dispatched within 5% of the best config | "
        f"{'-' if within is None else f'{100 * within:.1f}%'} of {s['oracle_cells']} |",
        f"| worst dispatched / best config | {_ratio(s['worst_vs_oracle'])} |",
        f"| geomean speedup over rl-triton's config | {_ratio(s['geomean_speedup_flat'])} "
        f"over {s['flat_cells']} cells |",
        f"| worst cell vs rl-triton's config | {_ratio(s['min_speedup_flat'])} |",
        f"| geomean speedup over torch.compile | {_ratio(s['geomean_speedup_compile'])} "
        f"over {s['compile_cells']} cells |",
        f"| worst cell vs torch.compile | {_ratio(s['min_speedup_compile'])} |",
    ]


def bench_table(rows: list[dict[str, Any]]) -> list[str]:
    """Every cell: device times of the dispatched choice, the best config and baselines."""
    lines = ["| estimator | N x T | grid | dispatched | from | best config | rl-triton's "
             "config | torch.compile | HBM floor |",
             "|---|---|---|---:|---|---:|---:|---:|---:|"]

    def us(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    for r in sorted(rows, key=lambda r: (ORDER.index(r["algorithm"]), r.get("held_out", False),
                                         r["N"], r["T"])):
        t = r["device_us"]
        source = str(r.get("source", "")).split(":")[0]
        lines.append(f"| {r['algorithm']} | {r['N']} x {r['T']} | "
                     f"{'no' if r.get('held_out') else 'yes'} | {us(t.get('dispatched'))} | "
                     f"{source} | {us(r.get('oracle_us'))} | {us(t.get('flat_heuristic'))} | "
                     f"{us(r.get('compile_us'))} | {us(r.get('floor_us'))} |")
    return lines


# ---------------------------------------------------------------- overhead


#: The stages of a public call that ``dispatch_overhead.py`` times on its own, where a
#: report has them: (field, column).
STAGES = (("validate_us", "validation"), ("dispatch_us", "dispatch"),
          ("fast_path_us", "fast path"), ("launcher_us", "launcher"),
          ("pack_us", "launcher: packing"), ("launch_us", "launcher: launch"),
          ("bound_us", "bound launch"))
#: The public call with workload recording off and on, timed in turn, where a report has
#: them: (field, column).
RECORDING = (("unrecorded_us", "recording off"), ("recorded_us", "recording on"))
#: How a one-kernel launcher launched (``direct_launch``): Triton's compiled launcher
#: called directly, or its generic path (argument binding included).
LAUNCH_PATHS = {True: "direct", False: "generic"}


def overhead_lines(report: dict[str, Any]) -> list[str]:
    stages = [(f, name) for f, name in STAGES if any(f in r for r in report["rows"])]
    recording = [(f, name) for f, name in RECORDING if any(f in r for r in report["rows"])]
    heads = ["call", "strategy", "public call", *(n for _, n in stages), "empty Triton launch",
             "torch.add", "public - empty launch", *(n for _, n in recording)]
    lines = ["| " + " | ".join(heads) + " |", "|---|---|" + "---:|" * (len(heads) - 2)]
    for r in report["rows"]:
        path = LAUNCH_PATHS.get(r.get("direct_launch"))
        strategy = r["strategy"] + (f" ({path})" if path else "")
        case = r["case"].replace("|", "\\|")   # a key's pipes would end the cell
        lines.append(f"| `{case}` | {strategy} | {r['public_us']:.1f} | "
                     + "".join(f"{r[f]:.1f} | " if f in r else "- | " for f, _ in stages)
                     + f"{r['empty_triton_us']:.1f} | {r['torch_add_us']:.1f} | "
                     f"{r['over_floor_us']:.1f} |"
                     + "".join(f" {r[f]:.1f} |" if f in r else " - |" for f, _ in recording))
    return lines


def flag_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Per estimator and layout, apart for each strategy's default config and for the
    config dispatch chooses (``dispatched``): flag paths timed, how many are within the
    target per byte of their base at the same config, and the worst."""
    groups: dict[tuple[str, str], dict[bool, list[tuple[float, str]]]] = defaultdict(
        lambda: {False: [], True: []})
    for r in rows:
        chosen = r["strategy"] == "dispatched"
        for flags, m in r.get("flags", {}).items():
            if flags != r["base"]:
                strategy = (r.get("dispatched") or {}).get("strategy", "?") if chosen \
                    else r["strategy"]
                where = f"{flags}, {strategy}, {r['N']}x{r['T']}"
                groups[(r["algorithm"], r["layout"])][chosen].append((m["per_byte"], where))

    def cells(paths: list[tuple[float, str]]) -> str:
        if not paths:
            return "- | - | -"
        worst = max(paths)
        return (f"{len(paths)} | {sum(x <= TARGET for x, _ in paths)} | "
                f"{worst[0]:.3f} ({worst[1]})")

    lines = ["| estimator | layout | default configs: paths | within 5% per byte | worst "
             "per byte | dispatched config: paths | within 5% per byte | worst per byte |",
             "|---|---|---:|---:|---|---:|---:|---|"]
    for (algorithm, layout), by in sorted(groups.items()):
        lines.append(f"| {algorithm} | {layout} | {cells(by[False])} | {cells(by[True])} |")
    return lines


def backward_lines(report: dict[str, Any]) -> list[str]:
    """The backward/forward table of a ``backward_cost.py`` report."""
    lines = ["| estimator | N x T | flags | gradients of | forward µs | backward µs | ratio |",
             "|---|---|---|---|---:|---:|---:|"]
    for r in report["rows"]:
        lines.append(f"| {r['algorithm']} | {r['N']}x{r['T']} | {r['flags']} | "
                     f"{', '.join(r['grad_inputs'])} | {r['forward_us']:.1f} | "
                     f"{r['backward_us']:.1f} | {r['ratio']:.2f}x |")
    return lines


# ---------------------------------------------------------------- the page


def folder_header(folder: Path, rows: list[dict[str, Any]]) -> str:
    """The GPU and software of a folder's rows; every stack with its row count where a
    run resumed after an upgrade left rows of several."""
    first = rows[0] if rows else {}
    name = first.get("device_name", folder.name)
    stacks = Counter((r.get("torch"), r.get("triton")) for r in rows)
    if len(stacks) <= 1:
        return f"{name}, torch {first.get('torch')}, Triton {first.get('triton')}"
    return f"{name}, " + "; ".join(
        f"torch {torch_version}, Triton {triton_version} ({count} rows)"
        for (torch_version, triton_version), count in stacks.most_common())


def summary_rows(folder: Path) -> list[str]:
    """The one-screen summary's lines for one GPU folder."""
    name = folder.name.upper()
    out = []
    peers = read_rows(folder / "peers.jsonl")
    if peers:
        for peer, label in PEER_LABELS:
            pairs = peer_ratios(peers, peer)
            if pairs:
                geo, worst, slower, cells = ratio_cells(pairs)
                dtypes = ", ".join(sorted({r["dtype"] for r in peers
                                           if r["device_us"].get(peer) is not None}))
                out.append(f"| {name} | vs {label}, every estimator, layout and flag set "
                           f"measured ({dtypes}) | {geo} | {worst} | {slower} of {cells} |")
    rows = [r for rep in bench_reports(folder) for r in rep["rows"]]
    if rows and not peers:
        out.append(f"| {name} | vs rl-triton 0.1.3 (the package) | not measured yet: "
                   "`benchmarks/peers.py` | | |")
    if rows:
        s = summarize(rows)
        within = s["within_5pct_of_oracle"]
        earlier = " (earlier profile)" if earlier_profiles(rows) else ""
        out.append(f"| {name} | vs rl-triton's config, float32 env-major{earlier} | "
                   f"{_ratio(s['geomean_speedup_flat'])} | {_ratio(s['min_speedup_flat'])} | "
                   f"{sum(r.get('speedup', 9) < SLOWER for r in rows if r.get('speedup'))} "
                   f"of {s['flat_cells']} |")
        out.append(f"| {name} | vs torch.compile, float32 env-major{earlier} | "
                   f"{_ratio(s['geomean_speedup_compile'])} | "
                   f"{_ratio(s['min_speedup_compile'])} | "
                   f"{sum(r['speedup_compile'] < SLOWER for r in rows if r.get('speedup_compile'))}"
                   f" of {s['compile_cells']} |")
        if within is not None:
            out.append(f"| {name} | dispatched within 5% of the best config{earlier} | "
                       f"{100 * within:.0f}% of {s['oracle_cells']} cells | "
                       f"{_ratio(s['worst_vs_oracle'])} slower | |")
    return out


SUMMARY_HEAD = ["| GPU | comparison | geomean speedup | worst cell | cells below 0.97x |",
                "|---|---|---:|---:|---:|"]


def earlier_note(rows: list[dict[str, Any]]) -> list[str]:
    """A paragraph saying the rows were measured with a profile no longer shipped."""
    earlier = earlier_profiles(rows)
    if not earlier:
        return []
    names = ", ".join(f"`{n}`" for n in earlier)
    return [f"These rows were measured with an earlier profile ({names}) and the dispatcher "
            "of their dates (\"from\" names its origins); the `peers.py` tables measure the "
            "package as it ships.", ""]


def definitions() -> list[str]:
    return ["How to read these numbers:", "",
            *[f"- {MEANING[k]}." for k in ("dispatched", "device", "speedup", "geomean",
                                           "worst", "slower", "flat", "best_config", "floor",
                                           "host")], ""]


def folder_section(folder: Path, output: Path) -> list[str]:
    rel = os.path.relpath(folder, output.parent)
    peers = read_rows(folder / "peers.jsonl")
    reports = bench_reports(folder)
    lines = [f"## {folder.name.upper()}: {folder_header(folder, peers or reports)}", "",
             f"Data: [`{rel}/`]({rel}/).", ""]
    if peers:
        dates = sorted({r.get("date", "?") for r in peers})
        lines += [f"### Against {', '.join(peers_timed(peers)) or 'the peers'} (`peers.py`, "
                  f"{dates[0]}{' to ' + dates[-1] if len(dates) > 1 else ''})", "",
                  peer_scope(peers) + " rl-triton takes float32 env-major inputs only: "
                  "time-major cells hand it transposed views (it copies them), bfloat16 cells "
                  "have no rl-triton time. TorchRL has functional GAE, V-trace, TD(lambda) "
                  "and discounted returns.", "", decision_sources(peers), "",
                  *stale_note(peers),
                  *peer_summary(peers), "",
                  *peer_tables(peers)]
        layouts = layout_lines(peers, copy_bandwidth(reports))
        if layouts:
            lines += [f"### Time-major against env-major (`peers.py` rows, {dates[0]}"
                      f"{' to ' + dates[-1] if len(dates) > 1 else ''})", "", *layouts, ""]
    rows = [r for rep in reports for r in rep["rows"]]
    if rows:
        dates = sorted({d for rep in reports for d in (rep.get("first_date"), rep.get("date"))
                        if d})
        lines += [f"### Dispatch against the best config (`rltriton-tune bench --oracle`, "
                  f"{dates[0]} to {dates[-1]})", "",
                  "float32, env-major, flags none (Retrace: truncations, 8 actions). \"grid\" "
                  "cells are shapes of the tuning grid; the others are off-grid shapes served "
                  "by the nearest tuned entry or the built-in rules. \"from\" says which.", "",
                  *earlier_note(rows), *bench_lines(rows), "", *bench_table(rows), ""]
    overhead = folder / "dispatch_overhead.json"
    if overhead.exists():
        report = json.loads(overhead.read_text())
        lines += [f"### Host time per call (`dispatch_overhead.py`, {report.get('date', '?')})",
                  "", "Microseconds of host time per call (see above); the decision is "
                  "memoised, as in a training loop. Validation and dispatch are the general "
                  "path's stages; the usual call (plain contiguous tensors, float scalars, no "
                  "gradient) runs the fast path in their place (`rltriton_tune/hot_path.py`; "
                  "the \"fast path\" column where the run timed it)."
                  + (" The last columns are the public call with workload recording "
                     "(`RLTRITON_TUNE_RECORD`) off and on, in turn, for the calls whose key "
                     "missed the database (those recording counts)."
                     if any("recorded_us" in r for r in report["rows"]) else ""), "",
                  *overhead_lines(report), ""]
    flag_rows = read_flag_rows(folder / "flag_cost.jsonl")
    if flag_rows:
        dates = sorted({r.get("date", "?") for r in flag_rows})
        lines += [f"### Flag paths against their base (`flag_cost.py`, {dates[-1]})", "",
                  "Each flag set of an estimator at the strategy's default config for the "
                  "flags-none key (Retrace: truncations), for each strategy the tuner searches "
                  "at that key, and at the strategy and config dispatch chooses for that key "
                  "(what a call gets); device time over the base's, divided "
                  "by the ratio of bytes an ideal kernel moves (an [N, T] input adds a full "
                  "read, an [N] one almost nothing). The target is at most 1.05.", "",
                  *flag_lines(flag_rows), ""]
    backward = folder / "backward_cost.json"
    if backward.exists():
        report = json.loads(backward.read_text())
        lines += ["### Backward pass against forward (`backward_cost.py`)", "",
                  "Device time of one forward call and of the backward pass alone "
                  "(gradients of every floating input), CUDA-graph replay. By bytes moved, "
                  "a fused backward pass costs about one forward pass for the single-output "
                  "estimators and about 1.9 forward passes for V-trace; Retrace's takes "
                  "three phases (docs/autograd.md).", "", *backward_lines(report), ""]
    if (folder / "strategies.md").exists():
        lines += [f"Strategy sweep: [`{rel}/strategies.md`]({rel}/strategies.md).", ""]
    return lines


def benchmarks_md(folders: list[Path], output: Path) -> str:
    summary = [line for f in folders for line in summary_rows(f)]
    lines = ["# Benchmarks", "",
             "Generated by `python benchmarks/benchmarks_md.py` from `benchmarks/results/<gpu>/`"
             " (do not edit by hand). Speedups are device-time ratios: above 1x means "
             "rltriton-tune is faster.", "",
             "## Summary", "", *SUMMARY_HEAD, *summary, "", *definitions(),
             "To measure a GPU: see [benchmarks/README.md](benchmarks/README.md).", ""]
    for folder in folders:
        lines += folder_section(folder, output)
    return "\n".join(lines).rstrip("\n") + "\n"


def readme_block(folders: list[Path]) -> str:
    summary = [line for f in folders for line in summary_rows(f)]
    return "\n".join([BEGIN, "## Performance", "",
                      "Device-time speedups of the dispatched kernel (above 1x: faster). "
                      "Definitions, every table and how to measure: "
                      "[BENCHMARKS.md](BENCHMARKS.md).", "", *SUMMARY_HEAD, *summary, END])


def replace_block(text: str, block: str) -> str:
    """``text`` with its performance block replaced (appended if it has none)."""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        return head + block + rest.split(END, 1)[1]
    return text.rstrip("\n") + "\n\n" + block + "\n"


def find_folders(root: Path) -> list[Path]:
    """GPU results folders: those holding peers.jsonl, bench/, dispatch_overhead.json or
    flag_cost.jsonl."""
    return sorted(p for p in root.iterdir() if p.is_dir() and (
        (p / "peers.jsonl").exists() or (p / "bench").is_dir()
        or (p / "dispatch_overhead.json").exists() or (p / "flag_cost.jsonl").exists()))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folders", type=Path, nargs="*",
                   help="results folders (default: every one under benchmarks/results/)")
    p.add_argument("--output", type=Path, default=ROOT / "BENCHMARKS.md")
    p.add_argument("--readme", type=Path, help="README whose performance block is replaced")
    args = p.parse_args(argv)
    folders = args.folders or find_folders(ROOT / "benchmarks" / "results")
    if not folders:
        p.error("no results folders found")
    args.output.write_text(benchmarks_md(folders, args.output))
    print(args.output)
    if args.readme:
        args.readme.write_text(replace_block(args.readme.read_text(), readme_block(folders)))
        print(args.readme)
    return 0


if __name__ == "__main__":
    sys.exit(main())
