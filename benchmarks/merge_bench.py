"""Bring a `bench --oracle` report up to date with cells measured again after a rule change.

Each row of ``BASE`` whose problem key (``row_key``) was measured
again in one of the ``--newer`` reports with a complete oracle is replaced by that row
(later reports win); every other row stays as measured. The merged report lists the
replaced cells under ``remeasured`` (cell, source report, date), so a reader of
BENCHMARKS.md can tell the two apart, and is written as ``bench`` writes its own
(``OUT/bench.json``, ``bench.md``, heatmaps). No GPU needed.

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

from rltriton_tune.tune.bench import row_key, write_report  # noqa: E402


def merge(base: dict[str, Any], newer: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """``base`` with its rows replaced by the complete-oracle rows of ``newer`` reports
    ((name, report) pairs, later ones winning) for the same cells."""
    replacement: dict[str, tuple[str, str, dict[str, Any]]] = {}
    for name, report in newer:
        for row in report.get("rows", []):
            if row.get("oracle_complete"):
                replacement[row_key(row).as_text()] = (name, report.get("date", "?"), row)
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
    p.add_argument("--newer", type=Path, nargs="+", required=True,
                   help="bench.json files measured later, oldest first")
    p.add_argument("--output", type=Path, required=True, help="folder for the merged report")
    args = p.parse_args(argv)
    newer = [(str(path.parent), json.loads(path.read_text())) for path in args.newer]
    merged = merge(json.loads(args.base.read_text()), newer)
    write_report(merged, args.output)
    print(f"{args.output}: {len(merged['remeasured'])} cells re-measured", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
