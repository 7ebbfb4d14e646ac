"""Remove torch.compile timings that were eager runs from ``bench.json`` reports.

Before ``fallback/compiled.py`` lifted dynamo's recompile limit, every compiled
baseline in one process shared one code object, so after dynamo's default limit
of 8 graphs (4 keys x 2 scans) the baselines of every later key ran eagerly and
were timed as if compiled (the log says ``torch._dynamo hit
config.recompile_limit (8)``). This keeps the first ``--compiled-rows`` rows'
timings, moves the rest to ``errors`` with the reason, and rewrites the report
(JSON, markdown, heatmaps); the input is kept as ``bench_raw.json``.

    python benchmarks/drop_eager_compile.py benchmarks/results/bench_h200/*/bench.json \
        --compiled-rows 4
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from rltriton_tune.tune.baselines import COMPILE, COMPILE_DOUBLING  # noqa: E402
from rltriton_tune.tune.bench import add_ratios, write_report  # noqa: E402

REASON = ("torch.compile ran eagerly (dynamo recompile limit of 8 graphs hit); "
          "timing dropped")


def drop(report: dict, compiled_rows: int) -> int:
    """Null the compile baselines of rows past ``compiled_rows``; return how many rows."""
    dropped = 0
    for row in report["rows"][compiled_rows:]:
        for name in (COMPILE, COMPILE_DOUBLING):
            if row["device_us"].pop(name, None) is not None:
                row.setdefault("errors", {})[name] = REASON
        if row.get("compile_us") is not None:
            row["compile_us"] = None
            dropped += 1
        add_ratios(row, "cuda")
    return dropped


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("reports", type=Path, nargs="+", help="bench.json files")
    p.add_argument("--compiled-rows", type=int, required=True,
                   help="rows per report measured before the limit was hit")
    args = p.parse_args(argv)
    for path in args.reports:
        raw = path.with_name("bench_raw.json")
        if not raw.exists():
            shutil.copyfile(path, raw)
        report = json.loads(raw.read_text())
        n = drop(report, args.compiled_rows)
        write_report(report, path.parent)
        print(f"{path}: compile timings dropped in {n} of {len(report['rows'])} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
