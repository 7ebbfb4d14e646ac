"""``rltriton-tune bench``: the dispatched choice against the baselines, per shape.

CUDA: dispatched vs flat heuristic vs torch.compile vs the HBM floor (bytes
moved over the measured copy bandwidth). CPU: dispatched vs each CPU mode.
Writes ``bench.json``, ``bench.md`` and one PNG heatmap per algorithm
(speedup over N x T, and the chosen strategy per cell).
"""

from __future__ import annotations

import json
import platform
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.problems import data_bytes
from rltriton_tune.tune.baselines import baseline_candidates
from rltriton_tune.tune.evaluate import Evaluator
from rltriton_tune.tune.measure import copy_bandwidth
from rltriton_tune.tune.space import Candidate

CPU_MODES = ("loop", "chunked", "doubling")


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


def run_bench(keys: Sequence[ProblemKey], device: torch.device | str, *,
              budget_s: float | None = None,
              progress: Callable[[ProblemKey], None] | None = None) -> dict[str, Any]:
    """Measure every key; return the JSON-able report."""
    from rltriton_tune.dispatch.registry import all_strategies

    device = torch.device(device)
    strategies = all_strategies()
    bandwidth = copy_bandwidth(device)
    rows = []
    for key in keys:
        chosen, source = _dispatched(key, device)
        others = _contenders(key, device, strategies)
        evaluator = Evaluator(key, device, strategies, workers=1, time_budget_s=budget_s)
        try:
            outs = evaluator.evaluate([chosen, *others.values()], gate=False)
        finally:
            evaluator.close()
        times = {name: (o.timing.device_us if o.ok else None)
                 for name, o in zip(["dispatched", *others], outs, strict=True)}
        row: dict[str, Any] = {
            "algorithm": key.algorithm, "N": key.n, "T": key.t, "A": key.a, "dtype": key.dtype,
            "layout": key.layout, "flags": key.flags, "strategy": chosen.strategy,
            "params": chosen.params, "source": source, "device_us": times,
            "host_us": outs[0].timing.host_us if outs[0].ok else None,
            "errors": {n: o.error for n, o in zip(["dispatched", *others], outs, strict=True)
                       if not o.ok},
        }
        if device.type == "cuda":
            row["floor_us"] = data_bytes(key) / bandwidth * 1e6
        base = times.get("flat_heuristic" if device.type == "cuda" else "torch_loop")
        row["speedup"] = base / times["dispatched"] if base and times["dispatched"] else None
        rows.append(row)
        if progress is not None:
            progress(key)
    return {"device": str(device), "device_name": _device_name(device),
            "copy_bandwidth_gbs": bandwidth / 1e9, "torch": torch.__version__,
            "python": platform.python_version(), "rows": rows}


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    from rltriton_tune.dispatch.fingerprint import device_fingerprint

    return str(device_fingerprint(device).get("name", device.type))


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def to_markdown(report: dict[str, Any]) -> str:
    """The report as a markdown table (device times in microseconds)."""
    rows = report["rows"]
    names = sorted({n for r in rows for n in r["device_us"] if n != "dispatched"})
    cols = ["algorithm", "N x T", "chosen", "dispatched", *names]
    if rows and "floor_us" in rows[0]:
        cols.append("HBM floor")
    cols.append("speedup")
    lines = [f"# rltriton-tune bench: {report['device_name']} ({report['device']})", "",
             f"Copy bandwidth {report['copy_bandwidth_gbs']:.0f} GB/s; device time in us.", "",
             "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        params = ", ".join(f"{k}={v}" for k, v in sorted(r["params"].items()))
        cells = [r["algorithm"], f"{r['N']} x {r['T']}", f"{r['strategy']}({params})",
                 _fmt(r["device_us"].get("dispatched")), *(_fmt(r["device_us"].get(n))
                                                          for n in names)]
        if "floor_us" in r:
            cells.append(f"{r['floor_us']:.2f}")
        cells.append("-" if r["speedup"] is None else f"{r['speedup']:.2f}x")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _short(row: dict[str, Any]) -> str:
    """Strategy name, with the torch mode when there is one (``torch:doubling``)."""
    mode = row["params"].get("mode")
    return f"{row['strategy']}:{mode}" if mode else row["strategy"]


def heatmaps(report: dict[str, Any], output: Path) -> list[Path]:
    """One PNG per algorithm: speedup over N x T and the chosen strategy per cell."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    base = "flat heuristic" if report["device"].startswith("cuda") else "torch loop"
    for algorithm in sorted({r["algorithm"] for r in report["rows"]}):
        rows = [r for r in report["rows"] if r["algorithm"] == algorithm]
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
            ax.set_title(f"{algorithm}: {title}")
            for i in range(len(ns)):
                for j in range(len(ts)):
                    text = (f"{grid[i][j]:.2f}x" if data is grid and grid[i][j] == grid[i][j]
                            else labels[i][j] if data is strat else "")
                    ax.text(j, i, text, ha="center", va="center", fontsize=8)
            if data is grid:
                fig.colorbar(im, ax=ax)
        fig.tight_layout()
        path = output / f"bench_{algorithm}.png"
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
