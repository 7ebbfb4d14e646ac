"""How much margin should a nearby tuned entry need to be reused? (offline, no GPU)

A tuned entry that beat the flat heuristic at its own key by a few percent carries little
evidence for the shapes around it (session 20: Retrace 4096x128's tiled (1, 64, 1 warp),
4% ahead where it was tuned, ran 1.06-1.17x off the best at four nearby shapes), so
dispatch reuses one only past ``decide.NEAREST_MIN_MARGIN``. For each margin this replays
dispatch over head-to-head probes with that margin instead, prints how many keys land
within 5% of the best against no margin at all, which keys change, and which committed
bench rows would then need measuring again (``bench_current.stale_rows``). Nothing
shipped changes.

    python benchmarks/nearest_margin_replay.py --margins 0.03 0.05 0.1 \\
        --probes benchmarks/results/session*/h2h_*/headtohead.json \\
        --reports benchmarks/results/session21/merged/*/bench.json
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import AbstractContextManager
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

import h2h_replay  # noqa: E402
from bench_current import stale_rows  # noqa: E402
from entries_from_bench import shipped_h200_profile, shipped_view  # noqa: E402

from rltriton_tune.dispatch import decide  # noqa: E402
from rltriton_tune.dispatch.registry import triton_strategies  # noqa: E402
from rltriton_tune.tuning_db.store import read_profile  # noqa: E402


def nearest_margin(margin: float) -> AbstractContextManager:
    """Dispatch with ``margin`` as ``decide.NEAREST_MIN_MARGIN`` inside the block."""
    return mock.patch.object(decide, "NEAREST_MIN_MARGIN", margin)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--margins", type=float, nargs="+", default=[0.03, 0.05, 0.1])
    p.add_argument("--probes", type=Path, nargs="+", required=True, help="headtohead.json files")
    p.add_argument("--reports", type=Path, nargs="*", default=[], help="bench.json files")
    args = p.parse_args(argv)
    with nearest_margin(0.0):
        unguarded = h2h_replay.replay(args.probes, {"now": None})
    unguarded_within = sum(c[0] for c in h2h_replay.summary(unguarded, "now").values())
    profiles = shipped_view(read_profile(shipped_h200_profile()).entries)
    usable = triton_strategies()
    reports = [(path, json.loads(path.read_text())) for path in args.reports]
    for margin in args.margins:
        with nearest_margin(margin):
            rows = h2h_replay.replay(args.probes, {"now": None})
            stale = [f"{path}: {line}" for path, report in reports
                     for line in stale_rows(report, profiles, usable)]
        counts = h2h_replay.summary(rows, "now").values()
        print(f"margin {margin:.2f}: {sum(c[0] for c in counts)} of {sum(c[1] for c in counts)} "
              f"probed keys within 5% of the best (no margin: {unguarded_within}; dispatch "
              f"ships {decide.NEAREST_MIN_MARGIN:.2f})")
        for before, after in zip(unguarded, rows, strict=True):
            if before["now"]["choice"] != after["now"]["choice"]:
                ratios = [r["now"]["ratio"] for r in (before, after)]
                shown = " -> ".join("unmeasured" if r is None else f"{r:.3f}" for r in ratios)
                print(f"  {before['key']}: {shown}")
        for line in stale:
            print(f"  bench row to measure again: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
