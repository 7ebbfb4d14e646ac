"""Bring a `bench --oracle` report up to date with cells measured again after a rule change.

Each row of ``BASE`` whose problem key (``row_key``) was measured
again in one of the ``--newer`` reports with a complete oracle is replaced by that row
(later reports win); every other row stays as measured. The merged report lists the
replaced cells under ``remeasured`` (cell, source report, date), so a reader of
BENCHMARKS.md can tell the two apart, and is written as ``bench`` writes its own
(``OUT/bench.json``, ``bench.md``, heatmaps). ``--exclude`` leaves named cells as
``BASE`` measured them; ``--fold-unreached`` first puts back the rows a resumed run kept
from its earlier run but did not reach. No GPU needed.

    python benchmarks/merge_bench.py BASE/bench.json --newer NEW1/bench.json NEW2/bench.json \\
        --output OUT
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from rltriton_tune.tune.bench import UNREACHED, row_key, write_report  # noqa: E402


def fold_unreached(report: dict[str, Any]) -> dict[str, Any]:
    """A resumed run's checkpoint with the earlier run's rows it did not reach
    (``UNREACHED``: measured before, under the same software) back among its rows."""
    earlier = report.get(UNREACHED, [])
    done = {row_key(r).as_text() for r in report.get("rows", [])}
    rows = [*report.get("rows", []), *(r for r in earlier if row_key(r).as_text() not in done)]
    return {k: v for k, v in report.items() if k != UNREACHED} | {"rows": rows}


def merge(base: dict[str, Any], newer: list[tuple[str, dict[str, Any]]],
          exclude: frozenset[str] = frozenset()) -> dict[str, Any]:
    """``base`` with its rows replaced by the complete-oracle rows of ``newer`` reports
    ((name, report) pairs, later ones winning) for the same cells, except the cells in
    ``exclude`` (key texts: e.g. a measurement of a config a later rule withdrew)."""
    replacement: dict[str, tuple[str, str, dict[str, Any]]] = {}
    for name, report in newer:
        for row in report.get("rows", []):
            cell = row_key(row).as_text()
            if row.get("oracle_complete") and cell not in exclude:
                replacement[cell] = (name, report.get("date", "?"), row)
    rows, remeasured = [], []
    for row in base.get("rows", []):
        key = row_key(row).as_text()
        found = replacement.get(key)
        if found is None:
            rows.append(row)
            continue
        name, date, new_row = found
        rows.append(new_row)
        remeasured.append({"cell": key, "from": name, "date": date})
    return {**base, "rows": rows, "remeasured": base.get("remeasured", []) + remeasured}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("base", type=Path, help="the bench.json to bring up to date")
    p.add_argument("--newer", type=Path, nargs="*", default=[],
                   help="bench.json files measured later, oldest first")
    p.add_argument("--exclude", nargs="*", default=[], metavar="KEY",
                   help="cells (problem key texts) not to take from the newer reports")
    p.add_argument("--fold-unreached", action="store_true",
                   help="put the rows a resumed run kept from its earlier run (and did not "
                        "reach) back among BASE's rows")
    p.add_argument("--output", type=Path, required=True, help="folder for the merged report")
    args = p.parse_args(argv)
    newer = [(str(path.parent), json.loads(path.read_text())) for path in args.newer]
    base = json.loads(args.base.read_text())
    merged = merge(fold_unreached(base) if args.fold_unreached else base, newer,
                   frozenset(args.exclude))
    write_report(merged, args.output)
    print(f"{args.output}: {len(merged['remeasured'])} cells re-measured", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
