"""Turn a strategy-sweep measurement (benchmarks/strategies.py JSON) into a profile.

Each measured cell becomes one entry: the fastest correct, CUDA-graph-timed
config that the current kernels still accept (``strategy.validate``), the
runner-up, the rl-triton flat baseline, and how many configs were measured.
Entries carry ``"method": "sweep"`` so they are told apart from Optuna-tuned
ones; a later ``rltriton-tune tune`` of the same key replaces them (newer date).

Usage: python benchmarks/profile_from_sweep.py RESULTS.json [--output DIR]
(default DIR: the package's shipped profiles folder).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from rltriton_tune.call import ProblemKey  # noqa: E402
from rltriton_tune.kernels import strategies  # noqa: E402
from rltriton_tune.kernels.abi import KERNEL_ABI  # noqa: E402
from rltriton_tune.strategy import InvalidConfig  # noqa: E402
from rltriton_tune.tuning_db import Entry, record, shipped_dir  # noqa: E402


def fingerprint(meta: dict[str, Any]) -> dict[str, Any]:
    """The CUDA fingerprint of the machine that produced the sweep."""
    major, minor = meta["triton"].split(".")[:2]
    return {"kind": "cuda", "name": meta["device"], "capability": meta.get("capability", "9.0"),
            "sm_count": meta.get("sm_count", 132), "triton": f"{major}.{minor}",
            "abi": KERNEL_ABI}


def entries_from(data: dict[str, Any], date: str) -> list[Entry]:
    cells: dict[ProblemKey, list[dict[str, Any]]] = defaultdict(list)
    for rec in data["records"]:
        key = ProblemKey(rec["algorithm"], rec["N"], rec["T"], rec["dtype"], rec["layout"],
                         rec["flags"], rec.get("A", 0))
        cells[key].append(rec)
    impls = strategies()
    out = []
    for key, recs in sorted(cells.items(), key=lambda kv: kv[0].as_text()):
        timed = []
        for rec in recs:
            if not rec.get("correct") or rec.get("device_us") is None \
                    or rec.get("timing") != "cuda-graph":
                continue
            try:
                params = impls[rec["strategy"]].validate(key, rec["params"])
            except InvalidConfig:
                continue
            timed.append((rec["device_us"], rec["strategy"], params))
        if not timed:
            continue
        timed.sort(key=lambda item: item[0])
        best_us, best_strategy, best_params = timed[0]
        runner = next(((us, s, p) for us, s, p in timed[1:]
                       if (s, p) != (best_strategy, best_params)), None)
        flat = [r["device_us"] for r in recs if r.get("role") == "rl_triton"
                and r.get("device_us") is not None and r.get("correct")]
        out.append(Entry(
            key=key, strategy=best_strategy, params=best_params, device_time_us=best_us,
            runner_up=None if runner is None else
            {"strategy": runner[1], "params": runner[2], "device_time_us": runner[0]},
            baselines={"flat_heuristic": min(flat)} if flat else {},
            trials=len(recs), date=date, extra={"method": "sweep"}))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="strategies_h200.json")
    parser.add_argument("--output", type=Path, default=None, help="profile folder")
    parser.add_argument("--date", default=None, help="entry date (default: the file's mtime)")
    args = parser.parse_args(argv)
    data = json.loads(args.results.read_text())
    date = args.date or data["meta"].get("date") or "2026-11-30T01:36:00Z"
    entries = entries_from(data, date)
    path = record(fingerprint(data["meta"]), entries, directory=args.output or shipped_dir())
    print(f"{len(entries)} entries -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
