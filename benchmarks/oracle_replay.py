"""Replay dispatch offline against oracle sweep tables (no GPU).

For each complete table in ``--dir`` (``benchmarks/oracle_sweep.py``'s output: every
searched config of one key, timed once on the H200), take what dispatch would run on
the H200 with the shipped profile (exact entry, else nearest within
``decide.MAX_DISTANCE``, else the built-in heuristic), look its quick-pass time up in the
table and compare it with the table's best. Quick-pass times stray up to ~15% on 3 us
kernels, so this finds candidate misses; ``bench --oracle`` measures them.

    python benchmarks/oracle_replay.py --dir benchmarks/results/oracle_session13/gae
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from entries_from_bench import shipped_decision, shipped_h200_profile, shipped_view  # noqa: E402
from transfer_eval import _label, _ratio, table_times  # noqa: E402

from rltriton_tune.dispatch.registry import triton_strategies  # noqa: E402
from rltriton_tune.tune.exhaustive import key_of_cache_name  # noqa: E402
from rltriton_tune.tuning_db.store import read_profile  # noqa: E402


def replay(path: Path, profile) -> dict:
    key = key_of_cache_name(path.name)
    times = table_times(json.loads(path.read_text()))
    best_label = min(times, key=times.get)
    usable = triton_strategies()
    found = shipped_decision(key, profile, usable)
    chosen = _label(found.strategy, found.params)
    mine = times.get(chosen)
    return {"key": key.as_text(), "source": found.source.split("@")[0].split(":")[0],
            "choice": chosen, "best": best_label, "best_us": times[best_label],
            "ratio": None if mine is None else mine / times[best_label]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", type=Path, required=True, action="append")
    p.add_argument("--profile", type=Path, help="profile file (default: the shipped H200 one)")
    args = p.parse_args(argv)
    entries = read_profile(args.profile or shipped_h200_profile()).entries
    profile = shipped_view(entries)
    rows = [replay(f, profile) for folder in args.dir
            for f in sorted(folder.glob("exhaustive_*_cuda.json"))]
    for r in rows:
        print(f"{r['key']:48s} {_ratio(r['ratio']):>6s} {r['best_us']:8.2f}  "
              f"{r['source']:9s} {r['choice']:45s} best {r['best']}")
    near = sum(1 for r in rows if r["ratio"] is not None and r["ratio"] <= 1.05)
    print(f"{near} of {len(rows)} keys: dispatched config within 5% of the best "
          "(quick pass; '-': not in the swept space)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
