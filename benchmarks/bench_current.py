"""Do committed bench reports still show what dispatch ships? (offline, no GPU)

For every row of the given ``bench.json`` files, replay dispatch on the H200 with the
shipped profile (exact entry, else nearest, else the built-in heuristic) and compare its
config with the one the row measured (flat's no-op ``num_stages`` ignored). A row that
differs was measured with older rules or profile and should be measured again before
BENCHMARKS.md quotes it. Exit status 1 if any row differs.

    python benchmarks/bench_current.py benchmarks/results/session16/merged/*/bench.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from entries_from_bench import shipped_decision, shipped_h200_profile, shipped_view  # noqa: E402
from transfer_eval import _label  # noqa: E402

from rltriton_tune.dispatch.registry import triton_strategies  # noqa: E402
from rltriton_tune.tune.bench import row_key  # noqa: E402
from rltriton_tune.tuning_db.store import read_profile  # noqa: E402


def stale_rows(report: dict, profiles, usable) -> list[str]:
    """One line per row of ``report`` whose config dispatch would no longer choose."""
    lines = []
    for row in report.get("rows", []):
        key = row_key(row)
        now = shipped_decision(key, profiles, usable)
        measured = _label(row["strategy"], row["params"])
        if now is None or _label(now.strategy, now.params) != measured:
            shipped = "nothing" if now is None else \
                f"{_label(now.strategy, now.params)} ({now.source.split('@')[0]})"
            lines.append(f"{key.as_text()}: measured {measured}, ships {shipped}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("reports", type=Path, nargs="+", help="bench.json files")
    p.add_argument("--profile", type=Path, help="profile file (default: the shipped H200 one)")
    args = p.parse_args(argv)
    profile = read_profile(args.profile or shipped_h200_profile())
    profiles = shipped_view(profile.entries)
    usable = triton_strategies()
    rows = stale = 0
    for path in args.reports:
        report = json.loads(path.read_text())
        rows += len(report.get("rows", []))
        for line in stale_rows(report, profiles, usable):
            stale += 1
            print(f"{path}: {line}")
    print(f"{stale} of {rows} rows measured a config dispatch no longer ships", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
