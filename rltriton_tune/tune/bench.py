"""``rltriton-tune bench``: the dispatched choice against the baselines, per shape.

CUDA: dispatched vs the flat heuristic vs torch.compile (the faster of the
associative and doubling scans) vs the HBM floor (bytes moved over the measured
copy bandwidth), optionally vs an exhaustive sweep (the oracle); device time,
and full-call time of the public function. CPU: dispatched vs each CPU mode.
Writes ``bench.json``, ``bench.md`` and one PNG heatmap per algorithm
(speedup over N x T, and the chosen strategy per cell; held-out shapes are in
the tables, not the heatmaps).
"""

from __future__ import annotations

import json
import math
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.problems import data_bytes, random_inputs
from rltriton_tune.tune.baselines import (
    COMPILE,
    COMPILE_DOUBLING,
    FLAT,
    LOOP,
    baseline_candidates,
    best_compile,
)
from rltriton_tune.tune.compile_pool import CompilePool
from rltriton_tune.tune.evaluate import Evaluator
from rltriton_tune.tune.exhaustive import cache_name, finalists, gate_limit, sweep
from rltriton_tune.tune.measure import copy_bandwidth
from rltriton_tune.tune.space import DEFAULT_SM_COUNT, Candidate, SearchSpace, builtin_choice

CPU_MODES = ("loop", "chunked", "doubling")
DISPATCHED = "dispatched"
ORACLE = "oracle"
#: Source prefix of the alternative that is the nearest entry's config as tuned.
UNMOVED = "unmoved:"
#: The dispatcher's built-in heuristic for the key, timed when the dispatched choice
#: differs from it (on held-out shapes: is the nearest entry better than the heuristic?).
HEURISTIC = "builtin_heuristic"
#: Configs of the tuned entries near a held-out shape (moved to it), timed there.
ALTERNATIVE = "alternative"
#: Report field of a resumed run's checkpoint: the earlier run's rows for keys it has not
#: reached yet (kept for the next resume, left out of the tables and the summary).
UNREACHED = "unreached_rows"
#: Shapes off every tuning grid (no powers of two), from one environment with a
#: million steps to 50k environments with short rollouts: how nearest-entry
#: lookup generalises.
HELD_OUT_SHAPES = [(1, 1_000_000), (3, 50_000), (24, 12_000), (100, 3_000), (300, 1_000),
                   (777, 77), (1_000, 200), (1_500, 1_500), (3_000, 40), (5_000, 300),
                   (10_000, 12), (20_000, 100), (50_000, 20), (6_000, 3_000)]


def _dispatched(key: ProblemKey, device: torch.device) -> tuple[Candidate, str]:
    from rltriton_tune.dispatch import explain

    d = explain(key.algorithm, key.n, key.t, dtype=key.dtype, layout=key.layout,
                flags=key.flags, A=key.a, device=device)
    return Candidate(d.strategy, dict(d.params)), d.source


def _contenders(key: ProblemKey, device: torch.device, strategies: dict) -> dict[str, Candidate]:
    if device.type == "cuda":
        return baseline_candidates(key, device, strategies)
    out = {}
    impl = strategies["torch"]
    for mode in CPU_MODES:
        out[f"torch_{mode}"] = Candidate("torch", dict(impl.validate(key, {"mode": mode})))
    return out


def _builtin(key: ProblemKey, device: torch.device) -> Candidate | None:
    """The built-in heuristic's config for ``key`` on ``device``, ignoring profiles."""
    from rltriton_tune.dispatch.devices import device_fingerprint

    sm_count = int(device_fingerprint(device).get("sm_count") or DEFAULT_SM_COUNT)
    return builtin_choice(key, SearchSpace(key, device), sm_count)


def _alternatives(key: ProblemKey, device: torch.device) -> dict[str, Candidate]:
    """Entry key text -> config, for the entries dispatch would borrow after the one it uses."""
    from rltriton_tune.dispatch.decide import borrow_alternatives

    return {f"borrowed:{d.entry}": Candidate(d.strategy, dict(d.params))
            for d in borrow_alternatives(key, device)}


def time_public(key: ProblemKey, device: torch.device, seed: int = 0,
                budget_s: float = 0.1) -> float:
    """Full-call time: microseconds per call of the public function, back to back
    (validation, dispatch, launch; synchronised once at the end of each round)."""
    from rltriton_tune.estimators import ESTIMATORS

    function = ESTIMATORS[key.algorithm]
    kwargs = random_inputs(key, device, seed)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda *_: None)
    for _ in range(3):
        function(**kwargs)
    sync(device)
    rounds: list[float] = []
    deadline = time.perf_counter() + budget_s
    while len(rounds) < 3 or (len(rounds) < 50 and time.perf_counter() < deadline):
        reps = 20
        start = time.perf_counter()
        for _ in range(reps):
            function(**kwargs)
        sync(device)
        rounds.append((time.perf_counter() - start) * 1e6 / reps)
    return statistics.median(rounds)


def row_key(row: dict[str, Any]) -> ProblemKey:
    """The problem key a report row measured."""
    return ProblemKey(row["algorithm"], row["N"], row["T"], row["dtype"], row["layout"],
                      row["flags"], row["A"])


def reusable_rows(previous: dict[str, Any] | None, device: torch.device,
                  oracle: bool) -> dict[ProblemKey, dict[str, Any]]:
    """Rows of an earlier report that a resumed run can keep: same device name and
    software, and with a finished oracle measurement when this run wants one (where
    another config than the dispatched one won, re-measured head to head: see
    :func:`confirm_oracle`)."""
    if not previous or not same_software(previous, device):
        return {}
    return {row_key(r): r for r in [*previous.get(UNREACHED, []), *previous.get("rows", [])]
            if not oracle or _oracle_settled(r)}


def _oracle_settled(row: dict[str, Any]) -> bool:
    if "oracle_us" not in row or not row.get("oracle_complete", True):
        return False
    dispatched = Candidate(row["strategy"], row["params"]).label()
    return row.get("oracle") in (None, dispatched) or "oracle_dispatched_us" in row


def same_software(report: dict[str, Any] | None, device: torch.device) -> bool:
    """Whether ``report`` was measured on this kind of device with this torch and Triton."""
    return bool(report) and report.get("device_name") == _device_name(device) and \
        report.get("torch") == torch.__version__ and report.get("triton") == _triton_version()


def compile_baselines(reports: Sequence[dict[str, Any]], device: torch.device
                      ) -> dict[ProblemKey, dict[str, float | None]]:
    """The torch.compile baselines of earlier reports from this device and software, per
    key. They depend on torch, Triton and the GPU only, and compiling them takes seconds
    a key, so a rerun after a kernel change can take them over."""
    found: dict[ProblemKey, dict[str, float | None]] = {}
    for report in reports:
        if not same_software(report, device):
            continue
        for row in report.get("rows", []):
            times = {n: row["device_us"][n] for n in (COMPILE, COMPILE_DOUBLING)
                     if n in row.get("device_us", {})}
            if times:
                found[row_key(row)] = times
    return found


def run_bench(keys: Sequence[ProblemKey], device: torch.device | str, *,
              budget_s: float | None = None, held_out: Sequence[ProblemKey] = (),
              oracle_dir: Path | None = None, pool: CompilePool | None = None,
              progress: Callable[[ProblemKey], None] | None = None,
              previous: dict[str, Any] | None = None,
              checkpoint: Callable[[dict[str, Any]], None] | None = None,
              oracle_seconds: float | None = None,
              compile_from: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """Measure every key (and each ``held_out`` key, marked so); return the JSON-able report.

    With ``oracle_dir``, each key's whole search space is swept (cached there) and
    its best configs (``exhaustive.finalists``) are re-measured next to the dispatched
    one: the oracle is the fastest of those. Rows of a ``previous`` report from the same device and
    software, for the same dispatched choice, are kept instead of re-measured
    (resuming a run cut short); ``oracle_seconds`` caps each key's sweep (the row then
    says ``oracle_complete: false`` and the summary leaves it out);
    ``checkpoint`` receives the report so far after every row. Keys with a torch.compile
    baseline in one of the ``compile_from`` reports (same device and software) take it
    from there instead of compiling (the row says ``compile_reused: true``).
    """
    from rltriton_tune.dispatch.registry import all_strategies

    device = torch.device(device)
    strategies = all_strategies()
    bandwidth = copy_bandwidth(device)
    rows: list[dict[str, Any]] = []
    held = set(held_out)
    kept = reusable_rows(previous, device, oracle_dir is not None)
    earlier_compile = compile_baselines(compile_from, device)
    reached: set[ProblemKey] = set()

    def report() -> dict[str, Any]:
        rep = {"device": str(device), "device_name": _device_name(device),
               "copy_bandwidth_gbs": bandwidth / 1e9, "torch": torch.__version__,
               "triton": _triton_version(), "python": platform.python_version(),
               "date": time.strftime("%Y-%m-%d", time.gmtime()), "rows": rows}
        waiting = [row for key, row in kept.items() if key not in reached]
        if waiting:  # a checkpoint of a resumed run: the next resume still weighs these
            rep[UNREACHED] = waiting
        return rep

    for key in [*keys, *(k for k in held_out if k not in keys)]:
        reached.add(key)
        chosen, source = _dispatched(key, device)
        old = kept.get(key)
        if old is not None and old.get("held_out", False) == (key in held) and \
                (old["strategy"], old["params"]) == (chosen.strategy, chosen.params):
            rows.append(old)  # same choice measured before: keep it
            if progress is not None:
                progress(key)
            continue
        cands = {DISPATCHED: chosen, **_contenders(key, device, strategies)}
        reused = earlier_compile.get(key, {})
        for name in reused:
            cands.pop(name, None)
        builtin = _builtin(key, device) if device.type == "cuda" else None
        if builtin is not None and builtin.label() != chosen.label():
            cands[HEURISTIC] = builtin  # what the profile's choice is worth over the heuristic
        alternatives = _alternatives(key, device) if key in held else {}
        for i, cand in enumerate(alternatives.values()):
            cands[f"{ALTERNATIVE}_{i}"] = cand
        if oracle_dir is not None:
            cache = Path(oracle_dir) / cache_name(key, device)
            table = sweep(key, device, cache, pool, log=False, max_seconds=oracle_seconds)
            for i, cand in enumerate(finalists(table)):
                cands[f"{ORACLE}_{i}"] = cand
        evaluator = Evaluator(key, device, strategies, workers=1, time_budget_s=budget_s)
        try:
            verdicts = pool_verdicts(pool, key, device, list(cands.values()))
            outs = dict(zip(cands, evaluator.evaluate(list(cands.values()), gate=False,
                                                      gated=verdicts), strict=True))
        finally:
            evaluator.close()
        times = {name: (o.timing.device_us if o.ok else None) for name, o in outs.items()}
        times.update(reused)
        row: dict[str, Any] = {
            "algorithm": key.algorithm, "N": key.n, "T": key.t, "A": key.a, "dtype": key.dtype,
            "layout": key.layout, "flags": key.flags, "strategy": chosen.strategy,
            "params": chosen.params, "source": source, "held_out": key in held,
            "device_us": {n: t for n, t in times.items()
                          if not n.startswith((ORACLE, ALTERNATIVE))},
            "host_us": outs[DISPATCHED].timing.host_us if outs[DISPATCHED].ok else None,
            "full_call_us": time_public(key, device),
            "errors": {n: o.error for n, o in outs.items() if not o.ok},
        }
        if reused:
            row["compile_reused"] = True
        if builtin is not None:
            row["heuristic_us"] = times.get(HEURISTIC, times[DISPATCHED])
            row["heuristic"] = {"strategy": builtin.strategy, "params": dict(builtin.params)}
        if alternatives:  # nearby entries' configs: other transfer choices, measured
            row["alternatives"] = {source: times.get(f"{ALTERNATIVE}_{i}")
                                   for i, source in enumerate(alternatives)}
            row["alternative_configs"] = {
                source: {"strategy": cand.strategy, "params": dict(cand.params)}
                for source, cand in alternatives.items()}
        if oracle_dir is not None:
            found = [(t, n) for n, t in times.items() if t is not None
                     and (n.startswith(ORACLE) or n == DISPATCHED)]
            best_t, best_n = min(found) if found else (None, None)
            row["oracle_us"] = best_t
            row["oracle"] = None if best_n is None else cands[best_n].label()
            row["oracle_complete"] = cache.exists()
            row["oracle_configs"] = len(table)
            if best_n not in (None, DISPATCHED) and times.get(DISPATCHED) is not None:
                row.update(confirm_oracle(key, device, strategies, cands[DISPATCHED],
                                          cands[best_n], budget_s, best_t))
        if device.type == "cuda":
            row["floor_us"] = data_bytes(key) / bandwidth * 1e6
            row["compile_us"] = best_compile(row["device_us"])
        add_ratios(row, device.type)
        rows.append(row)
        if checkpoint is not None:
            checkpoint(report())
        if progress is not None:
            progress(key)
    return report()


#: Interleaved rounds, and multiple of the bench's time budget, of the head-to-head
#: re-measurement of the dispatched config and the oracle's (``confirm_oracle``).
CONFIRM_ROUNDS = 9
CONFIRM_BUDGET = 4


def confirm_oracle(key: ProblemKey, device: torch.device, strategies: dict[str, Any],
                   dispatched: Candidate, best: Candidate, budget_s: float | None,
                   selection_us: float) -> dict[str, Any]:
    """Re-measure the dispatched config beside the oracle's, head to head.

    The oracle is the fastest of 10-40 finalists timed once each, so its reading is the
    luckiest of many and biased low (a config's reading moves by a few percent from one
    batch to the next on few-microsecond kernels): the readings that pick the best config
    cannot also say how far the dispatched one is from it. The two are timed again in
    :data:`CONFIRM_ROUNDS` interleaved rounds; ``oracle_us`` and ``vs_oracle`` come from
    this measurement (``oracle_selection_us`` keeps the first reading).
    """
    evaluator = Evaluator(key, device, strategies, workers=1, rounds=CONFIRM_ROUNDS,
                          time_budget_s=budget_s)
    try:
        mine, theirs = evaluator.evaluate([dispatched, best], gate=False,
                                          budget_s=CONFIRM_BUDGET * evaluator.time_budget_s)
    finally:
        evaluator.close()
    if not (mine.ok and theirs.ok):
        return {}
    return {"oracle_selection_us": selection_us,
            "oracle_dispatched_us": mine.timing.device_us,
            "oracle_us": min(mine.timing.device_us, theirs.timing.device_us)}


def pool_verdicts(pool: CompilePool | None, key: ProblemKey, device: torch.device,
                  candidates: Sequence[Candidate]) -> list[str | None] | None:
    """With a pool: its workers compile (and gate) a row's Triton candidates in parallel,
    so the timing process loads binaries instead of compiling a row's 10-40 configs one
    after another (most of an oracle bench's time); ``None`` (passed) for the others,
    which time as before. Without a pool: ``None``, nothing is gated."""
    if pool is None:
        return None
    from rltriton_tune.kernels import STRATEGY_NAMES

    triton = [i for i, c in enumerate(candidates) if c.strategy in STRATEGY_NAMES]
    verdicts: list[str | None] = [None] * len(candidates)
    if triton:
        found = pool.check(key, device, [candidates[i] for i in triton],
                           gate_limit(key, device, pool.workers))
        for i, verdict in zip(triton, found, strict=True):
            verdicts[i] = verdict
    return verdicts


def add_ratios(row: dict[str, Any], device_type: str) -> None:
    """Speedups of the dispatched time over each baseline, and its ratio to the oracle."""
    mine = row["device_us"].get(DISPATCHED)
    base = row["device_us"].get(FLAT if device_type == "cuda" else LOOP)
    row["speedup"] = base / mine if base and mine else None
    comp = row.get("compile_us")
    row["speedup_compile"] = comp / mine if comp and mine else None
    oracle = row.get("oracle_us")
    # Beside the oracle, the dispatched time of the head-to-head re-measurement.
    against = row.get("oracle_dispatched_us", mine)
    row["vs_oracle"] = against / oracle if oracle and against else None


def _triton_version() -> str | None:
    try:
        import triton
    except ImportError:
        return None
    return triton.__version__


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    from rltriton_tune.dispatch.devices import device_fingerprint

    return str(device_fingerprint(device).get("name", device.type))


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}" if x < 10 else f"{x:.1f}"


def format_ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def to_markdown(report: dict[str, Any]) -> str:
    """The report as markdown tables (device times in microseconds), grid then held-out."""
    rows = report["rows"]
    cuda = report["device"].startswith("cuda")
    oracle = any("oracle_us" in r for r in rows)
    builtin = any("heuristic_us" in r for r in rows)
    if cuda:
        cols = ["algorithm", "N x T", "chosen", "dispatched", "flat heuristic"]
        cols += ["built-in heuristic"] if builtin else []
        cols += ["torch.compile"]
        cols += ["oracle"] if oracle else []
        cols += ["HBM floor", "vs flat", "vs compile"] + (["/ oracle"] if oracle else [])
    else:
        cols = ["algorithm", "N x T", "chosen", "dispatched", *(f"torch_{m}" for m in CPU_MODES),
                "vs loop"]
    cols.append("full call")
    lines = [f"# rltriton-tune bench: {report['device_name']} ({report['device']})", "",
             f"torch {report['torch']}, Triton {report.get('triton') or '-'}, "
             f"{report.get('date', '')}. Copy bandwidth {report['copy_bandwidth_gbs']:.0f} GB/s. "
             + ("Device time in us (CUDA-graph replays, inputs rotated past L2); " if cuda else
                "Time in us: host wall time per call, median of repeats after a warm-up; ")
             + "full call: host wall time per back-to-back call of the public function.", ""]
    for title, part in (("Tuning grid", [r for r in rows if not r.get("held_out")]),
                        ("Held-out shapes", [r for r in rows if r.get("held_out")])):
        if not part:
            continue
        lines += [f"## {title}", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for r in part:
            params = ", ".join(f"{k}={v}" for k, v in sorted(r["params"].items()))
            t = r["device_us"]
            cells = [r["algorithm"], f"{r['N']} x {r['T']}", f"{r['strategy']}({params})",
                     _fmt(t.get(DISPATCHED))]
            if cuda:
                cells += [_fmt(t.get(FLAT))]
                cells += [_fmt(r.get("heuristic_us"))] if builtin else []
                cells += [_fmt(r.get("compile_us"))]
                partial = " (partial)" if r.get("oracle_complete") is False else ""
                cells += [_fmt(r.get("oracle_us")) + partial] if oracle else []
                cells += [_fmt(r.get("floor_us")), format_ratio(r["speedup"]),
                          format_ratio(r.get("speedup_compile"))]
                cells += [format_ratio(r.get("vs_oracle"))] if oracle else []
            else:
                cells += [_fmt(t.get(f"torch_{m}")) for m in CPU_MODES]
                cells.append(format_ratio(r["speedup"]))
            cells.append(_fmt(r.get("full_call_us")))
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def _short(row: dict[str, Any]) -> str:
    """Strategy name, with the torch mode when there is one (``torch:doubling``)."""
    mode = row["params"].get("mode")
    return f"{row['strategy']}:{mode}" if mode else row["strategy"]


def _group(row: dict[str, Any]) -> tuple[str, str, str, str]:
    return row["algorithm"], row["dtype"], row["layout"], row["flags"]


def _variant(group: tuple[str, str, str, str]) -> str:
    """``bfloat16_time_trunc``-style suffix naming what differs from float32 env-major."""
    _, dtype, layout, flags = group
    parts = [dtype if dtype != "float32" else "", "time" if layout == "time" else "",
             flags if flags != "none" else ""]
    return "_".join(p for p in parts if p).replace("+", "-")


def heatmaps(report: dict[str, Any], output: Path) -> list[Path]:
    """One PNG per algorithm: speedup over N x T and the chosen strategy per cell."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    base = "flat heuristic" if report["device"].startswith("cuda") else "torch loop"
    grid_rows = [r for r in report["rows"] if not r.get("held_out")]
    for group in sorted({_group(r) for r in grid_rows}):
        algorithm, variant = group[0], _variant(group)
        rows = [r for r in grid_rows if _group(r) == group]
        ns = sorted({r["N"] for r in rows})
        ts = sorted({r["T"] for r in rows})
        grid = [[float("nan")] * len(ts) for _ in ns]
        names = sorted({_short(r) for r in rows})
        strat = [[float("nan")] * len(ts) for _ in ns]
        labels = [[""] * len(ts) for _ in ns]
        for r in rows:
            i, j = ns.index(r["N"]), ts.index(r["T"])
            grid[i][j] = r["speedup"] if r["speedup"] is not None else float("nan")
            strat[i][j] = names.index(_short(r))
            labels[i][j] = _short(r)
        fig, axes = plt.subplots(1, 2, figsize=(4 + 1.4 * len(ts), 1.5 + 0.7 * len(ns)))
        for ax, data, title, cmap in ((axes[0], grid, f"speedup over {base}", "RdYlGn"),
                                      (axes[1], strat, "chosen strategy", "tab10")):
            im = ax.imshow(data, cmap=cmap, aspect="auto")
            ax.set_xticks(range(len(ts)), [str(t) for t in ts])
            ax.set_yticks(range(len(ns)), [str(n) for n in ns])
            ax.set_xlabel("T")
            ax.set_ylabel("N")
            ax.set_title(f"{algorithm}{' ' + variant if variant else ''}: {title}")
            for i in range(len(ns)):
                for j in range(len(ts)):
                    text = (f"{grid[i][j]:.2f}x" if data is grid and grid[i][j] == grid[i][j]
                            else labels[i][j] if data is strat else "")
                    ax.text(j, i, text, ha="center", va="center", fontsize=8)
            if data is grid:
                fig.colorbar(im, ax=ax)
        fig.tight_layout()
        path = output / f"bench_{algorithm}{'_' + variant if variant else ''}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written


def write_report(report: dict[str, Any], output: Path) -> list[Path]:
    """Write JSON, markdown and heatmaps under ``output``; return the paths."""
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    js = output / "bench.json"
    js.write_text(json.dumps(report, indent=1) + "\n")
    md = output / "bench.md"
    md.write_text(to_markdown(report))
    return [js, md, *heatmaps(report, output)]


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The report's headline numbers over ``rows``.

    ``within_5pct_of_oracle``: share of rows with an oracle whose dispatched time
    is at most 5% above it; speedups are geometric means of dispatched over the
    flat heuristic and over torch.compile, with the worst cells; ``heuristic_better_cells``:
    rows where the built-in heuristic measured more than 3% faster than the dispatched choice;
    ``alternative_better_cells``: the same for the best config of the tuned entries near
    the key (moved to its shape; held-out keys only);
    ``unmoved_better_cells``: the same for the nearest entry's config as tuned (where
    dispatch moved it to the query's shape). Only complete oracle sweeps count.
    """
    def geomean(xs: list[float]) -> float | None:
        return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None

    flat = [r["speedup"] for r in rows if r.get("speedup")]
    comp = [r["speedup_compile"] for r in rows if r.get("speedup_compile")]
    oracle = [r["vs_oracle"] for r in rows
              if r.get("vs_oracle") and r.get("oracle_complete", True)]
    heur = [(r["device_us"][DISPATCHED], r["heuristic_us"]) for r in rows
            if r.get("heuristic_us") and r["device_us"].get(DISPATCHED)]
    def others(r: dict[str, Any], unmoved: bool) -> list[float]:
        return [t for s, t in (r.get("alternatives") or {}).items()
                if t and s.startswith(UNMOVED) == unmoved]

    alt = [(r["device_us"][DISPATCHED], min(ts)) for r in rows
           if r["device_us"].get(DISPATCHED) and (ts := others(r, False))]
    unmoved = [(r["device_us"][DISPATCHED], min(ts)) for r in rows
               if r["device_us"].get(DISPATCHED) and (ts := others(r, True))]
    return {
        "cells": len(rows),
        "held_out_cells": sum(1 for r in rows if r.get("held_out")),
        "oracle_cells": len(oracle),
        "within_5pct_of_oracle": (sum(x <= 1.05 for x in oracle) / len(oracle)
                                  if oracle else None),
        "worst_vs_oracle": max(oracle) if oracle else None,
        "geomean_speedup_flat": geomean(flat),
        "min_speedup_flat": min(flat) if flat else None,
        "flat_cells": len(flat),
        "geomean_speedup_compile": geomean(comp),
        "min_speedup_compile": min(comp) if comp else None,
        "compile_cells": len(comp),
        "heuristic_cells": len(heur),
        "heuristic_better_cells": sum(h < d / 1.03 for d, h in heur),
        "alternative_cells": len(alt),
        "alternative_better_cells": sum(a < d / 1.03 for d, a in alt),
        "unmoved_cells": len(unmoved),
        "unmoved_better_cells": sum(a < d / 1.03 for d, a in unmoved),
        "unmoved_worse_cells": sum(a > d * 1.03 for d, a in unmoved),
        "oracle_incomplete_cells": sum(1 for r in rows if r.get("oracle_complete") is False),
    }
