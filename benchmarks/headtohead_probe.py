"""Head-to-head timings of the best configs of several sweep tables, at each table's key.

A built-in rule picks one config for a region of shapes, but a sweep's quick-pass
readings stray up to ~15% on few-microsecond kernels (even profile-covered grid cells
read 1.05-1.18x off their table's best there and measure within 5% head to head), too
far to choose a rule from. For each estimator, this takes the ``--top`` configs of the
table of every given shape, adds each key's dispatched config, and times that union at
every key in ``--rounds`` interleaved rounds, as ``bench --oracle`` confirms its oracle;
``--config strategy:k=v,...`` (repeat; RLTRITON_TUNE_FORCE's syntax, every parameter
given) adds a config to every estimator's contenders, for shapes without tables.
A config that is invalid for a key (a tile wider than the row, ...) fails its gate there
and shows as missing. Output: ``OUT/headtohead.json`` (per key: config label -> device
us, the dispatched label) saved after every key (a rerun skips keys already there) and
``OUT/headtohead.md``: per estimator, the configs timed at every key ranked by their
worst ratio to each key's best, and the dispatched config's ratio at each key.

    python benchmarks/headtohead_probe.py --tables bench/gae_oracle/oracle \\
        --tables bench/gae_oracle_fresh/oracle --algorithms gae,vtrace \\
        --shapes 9500x40,20000x28,32768x32,15000x36,40000x20,70000x10,100000x12 \\
        --output OUT [--top 6] [--rounds 9] [--max-seconds 500]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

import torch  # noqa: E402
from transfer_eval import _label  # noqa: E402

from rltriton_tune.call import ProblemKey  # noqa: E402
from rltriton_tune.cli import _keys, _shapes, resolve_device  # noqa: E402
from rltriton_tune.dispatch.forcing import parse_env  # noqa: E402
from rltriton_tune.tune.bench import CONFIRM_ROUNDS, _dispatched, pool_verdicts  # noqa: E402
from rltriton_tune.tune.compile_pool import compile_pool_for  # noqa: E402
from rltriton_tune.tune.evaluate import Evaluator  # noqa: E402
from rltriton_tune.tune.exhaustive import best_of, key_of_cache_name  # noqa: E402
from rltriton_tune.tune.space import Candidate  # noqa: E402
from rltriton_tune.tuning_db.store import write_atomic  # noqa: E402


def find_table(key: ProblemKey, folders: list[Path]) -> dict[str, Any] | None:
    """``key``'s sweep table in ``folders`` (complete before partial, any device)."""
    for folder in folders:
        for path in sorted(folder.glob("exhaustive_*.json")):
            if key_of_cache_name(path.name) == key:
                return json.loads(path.read_text())
    return None


def named_config(text: str) -> Candidate:
    """``strategy:k=v,...`` as a candidate (names and values checked as for forcing)."""
    forced = parse_env(text)
    return Candidate(forced.strategy, forced.params_dict())


def contenders(keys: list[ProblemKey], folders: list[Path], top: int,
               named: Sequence[Candidate] = ()) -> list[Candidate]:
    """``named`` and the union of the ``top`` configs of each key's table, in
    first-seen order."""
    seen: dict[str, Candidate] = {_label(c.strategy, c.params): c for c in named}
    for key in keys:
        table = find_table(key, folders)
        for cand in best_of(table, top) if table else []:
            seen.setdefault(_label(cand.strategy, cand.params), cand)
    return list(seen.values())


def time_key(key: ProblemKey, device: torch.device, cands: list[Candidate], pool,
             rounds: int, budget_s: float | None) -> dict[str, Any]:
    """Device time of each candidate and of the dispatched config at ``key``."""
    from rltriton_tune.dispatch.registry import all_strategies

    chosen, source = _dispatched(key, device)
    # Labels ignore the flat kernel's num_stages (no loop to pipeline: the same binary
    # for every value), so a dispatched flat config is not timed twice.
    everyone = {_label(c.strategy, c.params): c for c in [chosen, *cands]}
    listed = list(everyone.values())
    evaluator = Evaluator(key, device, all_strategies(), workers=1, rounds=rounds,
                          time_budget_s=budget_s)
    try:
        outs = evaluator.evaluate(listed, gate=False,
                                  gated=pool_verdicts(pool, key, device, listed))
    finally:
        evaluator.close()
    return {"dispatched": _label(chosen.strategy, chosen.params), "source": source,
            "device_us": {_label(o.candidate.strategy, o.candidate.params): o.timing.device_us
                          for o in outs if o.ok}}


def ranking(rows: dict[str, dict[str, Any]]) -> list[tuple[str, float, float]]:
    """(label, worst ratio, geometric-mean ratio) of each config timed at every key of
    ``rows``, ratios to each key's fastest reading, best worst case first."""
    best = {k: min(r["device_us"].values()) for k, r in rows.items()}
    common = set.intersection(*(set(r["device_us"]) for r in rows.values()))
    ranked = []
    for label in common:
        ratios = [rows[k]["device_us"][label] / best[k] for k in rows]
        ranked.append((label, max(ratios),
                       math.exp(sum(map(math.log, ratios)) / len(ratios))))
    return sorted(ranked, key=lambda r: (r[1], r[2]))


def report(results: dict[str, dict[str, Any]], shown: int = 10) -> str:
    lines = ["# Head-to-head probe", ""]
    for algorithm in sorted({ProblemKey.from_text(k).algorithm for k in results}):
        rows = {k: r for k, r in results.items()
                if ProblemKey.from_text(k).algorithm == algorithm and r["device_us"]}
        lines += [f"## {algorithm} ({len(rows)} keys)", "",
                  "| config | worst ratio | geomean ratio |", "|---|---:|---:|"]
        lines += [f"| {label} | {worst:.3f} | {mean:.3f} |"
                  for label, worst, mean in ranking(rows)[:shown]]
        lines += ["", "| key | best | dispatched (source) | dispatched / best |",
                  "|---|---|---|---:|"]
        for k, r in rows.items():
            times = r["device_us"]
            fastest = min(times, key=times.get)
            mine = times.get(r["dispatched"])
            ratio = "-" if mine is None else f"{mine / times[fastest]:.3f}"
            cell = k.replace("|", "\\|")  # a key's bars would split the cell
            lines.append(f"| {cell} | {fastest} {times[fastest]:.2f} us | {r['dispatched']} "
                         f"({r['source']}) | {ratio} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tables", type=Path, action="append", default=[],
                   help="folder of sweep tables (repeat)")
    p.add_argument("--config", type=named_config, action="append", default=[],
                   metavar="STRATEGY:K=V,...", help="a config timed at every key (repeat)")
    p.add_argument("--algorithms", required=True, help="comma list")
    p.add_argument("--shapes", type=_shapes, required=True, help="NxT,...")
    p.add_argument("--output", type=Path, required=True)
    p.add_argument("--top", type=int, default=6, help="configs taken from each table")
    p.add_argument("--rounds", type=int, default=CONFIRM_ROUNDS)
    p.add_argument("--budget", type=float, default=None, help="seconds of timing per config")
    p.add_argument("--max-seconds", type=float, default=None)
    p.add_argument("--workers", type=int, default=None, help="compile processes")
    p.add_argument("--actions", type=int, default=8)
    p.add_argument("--device", default=None, help="cpu, cuda or cuda:N")
    args = p.parse_args(argv)

    device = resolve_device(args.device)
    args.output.mkdir(parents=True, exist_ok=True)
    saved = args.output / "headtohead.json"
    results: dict[str, dict[str, Any]] = json.loads(saved.read_text()) if saved.exists() else {}
    deadline = None if args.max_seconds is None else time.monotonic() + args.max_seconds
    with compile_pool_for(device, args.workers) as pool:
        for algorithm in args.algorithms.split(","):
            keys = _keys([algorithm], args.shapes, ["float32"], ["env"], ["off"], args.actions)
            cands = contenders(keys, args.tables, args.top, args.config)
            for key in keys:
                if key.as_text() in results:
                    continue
                if deadline is not None and time.monotonic() > deadline:
                    print(f"out of time before {key.as_text()}", file=sys.stderr)
                    break
                start = time.monotonic()
                results[key.as_text()] = time_key(key, device, cands, pool, args.rounds,
                                                  args.budget)
                write_atomic(saved, json.dumps(results, indent=1) + "\n")
                print(f"{key.as_text()}: {len(cands)} configs in "
                      f"{time.monotonic() - start:.1f} s", file=sys.stderr)
    (args.output / "headtohead.md").write_text(report(results) + "\n")
    print(args.output / "headtohead.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
