"""Would a denser profile generalise better than the rules? (offline, no GPU)

Adds the oracle configs of one held-out set's ``bench --oracle`` runs (``--train``) to
the shipped H200 profile as entries, then, for each held-out cell of another set
(``--test``, with its sweep tables), compares two dispatch policies on that cell's
sweep table: the built-in heuristic, and the nearest entry within ``--radius``
(log2 N, log2 T), moved to the shape as dispatch moves it. Ratios are quick-pass
readings over the table's best, so they stray by up to ~15% on few-microsecond
kernels; the comparison between the two policies uses the same readings.

    python benchmarks/density_replay.py \\
        --train benchmarks/results/session13/call3/bench_gae_oracle/bench.json ... \\
        --test benchmarks/results/session14/call2/bench_gae_oracle_fresh/bench.json \\
        --tables benchmarks/results/oracle_session14_fresh/gae ... [--radius 1.5]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from entries_from_bench import shipped_h200_profile  # noqa: E402
from transfer_eval import _ratio, replay_key, table_times  # noqa: E402

from rltriton_tune.tune.bench import row_key  # noqa: E402
from rltriton_tune.tune.exhaustive import key_of_cache_name  # noqa: E402
from rltriton_tune.tune.space import Candidate  # noqa: E402
from rltriton_tune.tuning_db.store import read_profile  # noqa: E402


def held_out_rows(paths: list[Path]) -> list[dict]:
    return [row for path in paths for row in json.loads(path.read_text())["rows"]
            if row.get("held_out") and row.get("oracle")]


def oracle_entries(paths: list[Path]) -> dict[str, SimpleNamespace]:
    """Key text -> an entry-like record of each held-out row's oracle config."""
    found = {}
    for row in held_out_rows(paths):
        cand = Candidate.from_label(row["oracle"])
        found[row_key(row).as_text()] = SimpleNamespace(
            strategy=cand.strategy, params=dict(cand.params), device_time_us=row["oracle_us"])
    return found


def compare(train: list[Path], test: list[Path], tables: list[Path],
            radius: float) -> list[dict]:
    entries = {**read_profile(shipped_h200_profile()).entries, **oracle_entries(train)}
    times = {}
    for folder in tables:
        for path in folder.glob("exhaustive_*_cuda.json"):
            times[key_of_cache_name(path.name).as_text()] = table_times(
                json.loads(path.read_text()))
    out = []
    for row in held_out_rows(test):
        key = row_key(row)
        if key.as_text() in times:
            found = replay_key(key, times[key.as_text()], entries, radius)
            out.append({"key": found["key"], "heuristic": found["heuristic_ratio"],
                        "nearest": found["nearest_ratio"],
                        "source": "" if found["source"] == "heuristic" else found["source"]})
    return out


def _summary(values: list[float]) -> str:
    if not values:
        return "no cells"
    near = sum(1 for v in values if v <= 1.05)
    mean = math.exp(sum(map(math.log, values)) / len(values))
    return f"{near} of {len(values)} within 5%, geometric mean {mean:.3f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train", type=Path, nargs="+", required=True,
                   help="bench --oracle reports whose held-out oracle configs become entries")
    p.add_argument("--test", type=Path, nargs="+", required=True,
                   help="bench --oracle reports of the held-out cells to replay")
    p.add_argument("--tables", type=Path, nargs="+", required=True,
                   help="folders of the test cells' sweep tables")
    p.add_argument("--radius", type=float, default=1.5,
                   help="largest log2 distance at which an entry is reused")
    args = p.parse_args(argv)
    rows = compare(args.train, args.test, args.tables, args.radius)
    for r in rows:
        print(f"{r['key']:48s} heuristic {_ratio(r['heuristic']):>6s} "
              f"nearest {_ratio(r['nearest']):>6s}  {r['source']}")
    both = [r for r in rows if r["heuristic"] is not None and r["nearest"] is not None]
    print(f"cells where both policies' configs were swept: {len(both)}")
    print("  heuristic:     " + _summary([r["heuristic"] for r in both]))
    print("  nearest entry: " + _summary([r["nearest"] for r in both]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
