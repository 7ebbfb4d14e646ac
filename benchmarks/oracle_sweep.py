"""Exhaustive sweeps of the bench's keys ahead of ``rltriton-tune bench --oracle``.

The oracle of issue 6 is the fastest config of each key's whole search space.
Sweeping 150k configs takes longer than one device call, so this runs only the
sweeps, key after key, until ``--max-seconds`` and leaves each key's table in
``DIR`` (complete, or ``.partial.json`` to resume). ``bench --oracle --output X``
with ``DIR = X/oracle`` then re-measures each key's best configs next to the
dispatched one. One compile pool serves every key, so a config compiled for one
key is loaded from Triton's cache for the next key that specialises it the same way.

    python benchmarks/oracle_sweep.py --algorithms gae --held-out 5x300000,... \\
        --dir bench/gae_oracle/oracle --max-seconds 500 [--workers 16]
    python benchmarks/oracle_sweep.py --algorithms retrace --dtypes bfloat16 \\
        --shapes 256x32768,32768x128 --dir bench/retrace_bf16  # any keys, same tables
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

import torch  # noqa: E402

from rltriton_tune.cli import PRESETS, _keys, _shapes  # noqa: E402
from rltriton_tune.tune.bench import HELD_OUT_SHAPES  # noqa: E402
from rltriton_tune.tune.compile_pool import compile_pool_for  # noqa: E402
from rltriton_tune.tune.exhaustive import cache_name, sweep  # noqa: E402
from rltriton_tune.tune.space import SearchSpace  # noqa: E402


def drop_strategies(folder: Path, names: set[str]) -> None:
    """Remove ``names``' entries from every table in ``folder``; complete tables that lose
    entries become partial ones, which the next sweep resumes."""
    for path in sorted(folder.glob("exhaustive_*.json")):
        table = json.loads(path.read_text())
        kept = {label: row for label, row in table.items() if row["strategy"] not in names}
        if len(kept) == len(table):
            continue
        partial = path if path.name.endswith(".partial.json") else \
            path.with_suffix(".partial.json")
        partial.write_text(json.dumps(kept))
        if partial != path:
            path.unlink()
        print(f"{path.name}: dropped {len(table) - len(kept)} entries", file=sys.stderr)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--algorithms", required=True, help="comma list")
    p.add_argument("--held-out", type=_shapes, default=None,
                   help="NxT,... (default: the bench's built-in held-out shapes)")
    p.add_argument("--dir", type=Path, required=True, help="folder of the sweep tables")
    p.add_argument("--max-seconds", type=float, default=None)
    p.add_argument("--workers", type=int, default=None, help="compile processes")
    p.add_argument("--actions", type=int, default=8)
    p.add_argument("--dtypes", default="float32", help="comma list (default float32)")
    p.add_argument("--shapes", type=_shapes, default=None,
                   help="NxT,...: sweep only these shapes (default: the bench's grid and "
                   "held-out shapes)")
    p.add_argument("--drop", default="", metavar="STRATEGY,...",
                   help="first forget these strategies' entries in the tables of DIR (after a "
                   "kernel change), so the sweeps measure them again")
    args = p.parse_args()

    device = torch.device("cuda")
    algorithms = args.algorithms.split(",")
    variants = (args.dtypes.split(","), ["env"], ["off"], args.actions)
    if args.shapes:
        keys = _keys(algorithms, args.shapes, *variants)
    else:
        keys = _keys(algorithms, PRESETS["default"]["shapes"], *variants)
        keys += [k for k in _keys(algorithms, args.held_out or HELD_OUT_SHAPES, *variants)
                 if k not in keys]
    args.dir.mkdir(parents=True, exist_ok=True)
    if args.drop:
        drop_strategies(args.dir, set(args.drop.split(",")))
    deadline = None if args.max_seconds is None else time.time() + args.max_seconds
    with compile_pool_for(device, args.workers) as pool:
        for key in keys:
            cache = args.dir / cache_name(key, device)
            if cache.exists():
                continue
            size = len(SearchSpace(key, device).enumerate())
            left = None if deadline is None else deadline - time.time()
            if left is not None and left < 5:
                break
            start = time.time()
            spent: dict[str, float] = {}
            table = sweep(key, device, cache, pool, log=False, max_seconds=left, stats=spent)
            took = time.time() - start
            entry = {"key": key.as_text(), "configs": size, "done": len(table),
                     "complete": cache.exists(), "seconds": round(took, 1), **spent}
            print(json.dumps(entry), flush=True)
            with open(args.dir / "sweep_log.jsonl", "a") as f:  # kept if the job is killed
                f.write(json.dumps(entry) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
