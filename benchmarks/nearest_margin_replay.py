"""What if dispatch reused a nearby tuned entry only where it had a margin? (offline, no GPU)

A tuned entry that beat the flat heuristic at its own key by a few percent carries little
evidence for the shapes around it (session 20: Retrace 4096x128's tiled (1, 64, 1 warp),
4% ahead where it was tuned, ran 1.06-1.17x off the best at four nearby shapes). For
each margin this replays dispatch over head-to-head probes with such entries skipped by
the nearest-entry lookup (``decide.nearest_decisions``), prints how many keys land within
5% of the best, which keys change, and which committed bench rows would then need
measuring again (``bench_current.stale_rows``). Nothing shipped changes.

    python benchmarks/nearest_margin_replay.py --margins 0.03 0.05 0.1 \\
        --probes benchmarks/results/session*/h2h_*/headtohead.json \\
        --reports benchmarks/results/session20/merged/*/bench.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

import h2h_replay  # noqa: E402
from bench_current import stale_rows  # noqa: E402
from entries_from_bench import shipped_h200_profile, shipped_view  # noqa: E402

from rltriton_tune.dispatch import decide  # noqa: E402
from rltriton_tune.dispatch.registry import triton_strategies  # noqa: E402
from rltriton_tune.tuning_db.store import read_profile  # noqa: E402

NEAREST = decide.nearest_decisions


def with_margin(margin: float):
    """``nearest_decisions`` that skips entries less than ``margin`` ahead of their own
    ``flat_heuristic`` baseline (entries without one are kept)."""
    def nearest(key, profiles, usable, *args: Any, **kwargs: Any) -> Iterator[decide.Decision]:
        for found in NEAREST(key, profiles, usable, *args, **kwargs):
            entry = profiles.entries.get(found.source.split("@")[0].removeprefix("nearest:"))
            baseline = entry.baselines.get("flat_heuristic") if entry is not None else None
            if baseline and entry.device_time_us * (1 + margin) > baseline:
                continue
            yield found
    return nearest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--margins", type=float, nargs="+", default=[0.03, 0.05, 0.1])
    p.add_argument("--probes", type=Path, nargs="+", required=True, help="headtohead.json files")
    p.add_argument("--reports", type=Path, nargs="*", default=[], help="bench.json files")
    args = p.parse_args(argv)
    shipped = h2h_replay.replay(args.probes, {"now": None})
    shipped_within = sum(c[0] for c in h2h_replay.summary(shipped, "now").values())
    profiles = shipped_view(read_profile(shipped_h200_profile()).entries)
    usable = triton_strategies()
    reports = [(path, json.loads(path.read_text())) for path in args.reports]
    for margin in args.margins:
        decide.nearest_decisions = with_margin(margin)
        try:
            rows = h2h_replay.replay(args.probes, {"now": None})
            stale = [f"{path}: {line}" for path, report in reports
                     for line in stale_rows(report, profiles, usable)]
        finally:
            decide.nearest_decisions = NEAREST
        counts = h2h_replay.summary(rows, "now").values()
        print(f"margin {margin:.2f}: {sum(c[0] for c in counts)} of {sum(c[1] for c in counts)} "
              f"probed keys within 5% of the best (shipped: {shipped_within})")
        for before, after in zip(shipped, rows, strict=True):
            if before["now"]["choice"] != after["now"]["choice"]:
                ratios = [r["now"]["ratio"] for r in (before, after)]
                shown = " -> ".join("unmeasured" if r is None else f"{r:.3f}" for r in ratios)
                print(f"  {before['key']}: {shown}")
        for line in stale:
            print(f"  bench row to measure again: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
