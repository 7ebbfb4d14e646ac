"""Replay dispatch offline against head-to-head probe results (no GPU).

``benchmarks/headtohead_probe.py`` times a set of configs at every key in interleaved
rounds, which is steady enough to fit a rule on (sweep tables' quick passes stray up to
~15% on few-microsecond kernels). For each key of the given ``headtohead.json`` files this
takes what dispatch would run on the H200 with the shipped profile (exact entry, nearest
within ``decide.MAX_DISTANCE``, else the built-in heuristic) and reads its time there;
``--heuristic-rev REV`` does the same with the rules as they were at git revision REV,
side by side. A choice the probe did not time counts as unmeasured, not as a miss.

    python benchmarks/h2h_replay.py benchmarks/results/session17/h2h_lbfit/headtohead.json \\
        [--heuristic-rev HEAD] [--keys]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from entries_from_bench import (  # noqa: E402
    heuristic_at,
    shipped_decision,
    shipped_h200_profile,
    shipped_view,
)
from transfer_eval import _label  # noqa: E402

from rltriton_tune.call import ProblemKey  # noqa: E402
from rltriton_tune.dispatch.registry import triton_strategies  # noqa: E402
from rltriton_tune.tuning_db.store import read_profile  # noqa: E402

WITHIN = 1.05


def choice(key: ProblemKey, profiles, usable: dict, rules=None) -> tuple[str, str]:
    """(config label, source kind) dispatch runs for ``key``; ``rules``: other heuristics."""
    found = shipped_decision(key, profiles, usable, rules)
    return _label(found.strategy, found.params), found.source.split("@")[0].split(":")[0]


def replay(paths: list[Path], rules_by_name: dict) -> list[dict]:
    """One row per probed key: each rule set's choice, its source and ratio to the best."""
    profiles = shipped_view(read_profile(shipped_h200_profile()).entries)
    usable = triton_strategies()
    rows = []
    for path in paths:
        for text, probe in json.loads(path.read_text()).items():
            key = ProblemKey.from_text(text)
            times = probe["device_us"]
            best = min(times.values())
            row = {"key": text, "algorithm": key.algorithm, "best": min(times, key=times.get)}
            for name, rules in rules_by_name.items():
                label, source = choice(key, profiles, usable, rules)
                mine = times.get(label)
                row[name] = {"choice": label, "source": source,
                             "ratio": None if mine is None else mine / best}
            rows.append(row)
    return rows


def summary(rows: list[dict], name: str) -> dict[str, tuple[int, int, int, float, float]]:
    """Per estimator: (within 5%, measured, unmeasured, geomean, worst) of rule set ``name``."""
    ratios: dict[str, list[float]] = defaultdict(list)
    missing: dict[str, int] = defaultdict(int)
    for row in rows:
        r = row[name]["ratio"]
        if r is None:
            missing[row["algorithm"]] += 1
        else:
            ratios[row["algorithm"]].append(r)
    out = {}
    for alg in sorted(set(ratios) | set(missing)):
        rs = ratios[alg]
        geo = math.exp(sum(map(math.log, rs)) / len(rs)) if rs else float("nan")
        out[alg] = (sum(r <= WITHIN for r in rs), len(rs), missing[alg], geo,
                    max(rs, default=float("nan")))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("probes", nargs="+", type=Path, help="headtohead.json files")
    ap.add_argument("--heuristic-rev", help="also replay the rules of this git revision")
    ap.add_argument("--keys", action="store_true", help="list every key's choices")
    args = ap.parse_args(argv)
    rules_by_name = {"now": None}
    if args.heuristic_rev:
        rules_by_name[args.heuristic_rev] = heuristic_at(args.heuristic_rev).candidates
    rows = replay(args.probes, rules_by_name)
    if args.keys:
        for row in rows:
            cells = [f"{n}: {row[n]['choice']} ({row[n]['source']}) "
                     + ("-" if row[n]["ratio"] is None else f"{row[n]['ratio']:.3f}")
                     for n in rules_by_name]
            print(row["key"], "|", " | ".join(cells))
    for name in rules_by_name:
        total = [0, 0, 0]
        print(f"## rules: {name}")
        for alg, (ok, n, miss, geo, worst) in summary(rows, name).items():
            total = [total[0] + ok, total[1] + n, total[2] + miss]
            print(f"{alg:22s} within 5%: {ok:3d} of {n:3d} (unmeasured {miss}), "
                  f"geomean {geo:.3f}, worst {worst:.3f}")
        print(f"{'all':22s} within 5%: {total[0]:3d} of {total[1]:3d} (unmeasured {total[2]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
