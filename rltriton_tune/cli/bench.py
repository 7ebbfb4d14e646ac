"""``rltriton-tune bench``: the dispatched choice against the baselines, as a report."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rltriton_tune.cli.args import PROG, CLIError, keys_of, resolve_device


def cmd_bench(args) -> int:
    from tqdm import tqdm

    from rltriton_tune.tune.bench import HELD_OUT_SHAPES, run_bench, write_report
    from rltriton_tune.tune.compile_pool import compile_pool_for
    from rltriton_tune.tuning_db.store import write_atomic

    device = resolve_device(args.device)
    keys = keys_of(args)
    extra = HELD_OUT_SHAPES if args.held_out is True else args.held_out or []
    held_out = keys_of(argparse.Namespace(**{**vars(args), "shapes": extra})) if extra else []
    if args.output.exists() and not args.output.is_dir():
        raise CLIError(f"bench --output {args.output} is a file; give a folder")
    saved = args.output / "bench.json"
    previous = None
    if args.resume and saved.exists():
        try:
            previous = _bench_report(saved)
        except (OSError, ValueError) as exc:
            print(f"{PROG}: warning: cannot resume from {saved} ({exc}); measuring every row",
                  file=sys.stderr)
    earlier = []
    for path in args.compile_from:
        try:
            earlier.append(_bench_report(path))
        except (OSError, ValueError) as exc:
            print(f"{PROG}: warning: --compile-from {path}: {exc}; compiling those baselines",
                  file=sys.stderr)
    try:
        args.output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CLIError(f"bench --output {args.output}: {exc.strerror or exc}") from None
    bar = tqdm(total=len(keys) + len(held_out), desc="bench", unit="key", file=sys.stderr)
    with compile_pool_for(device, args.compile_workers) as pool:
        report = run_bench(keys, device, held_out=held_out, budget_s=args.budget, pool=pool,
                           oracle_dir=args.output / "oracle" if args.oracle else None,
                           oracle_seconds=args.oracle_seconds,
                           progress=lambda _k: bar.update(1), previous=previous,
                           compile_from=earlier,
                           checkpoint=lambda partial: write_atomic(
                               saved, json.dumps(partial, indent=1) + "\n"))
    bar.close()
    for path in write_report(report, args.output):
        print(path)
    return 0


def _bench_report(path: Path) -> dict[str, Any]:
    """An earlier ``bench.json``: a JSON object (ValueError for anything else)."""
    report = json.loads(path.read_text())
    if not isinstance(report, dict):
        raise ValueError(f"not a bench report (a JSON {type(report).__name__}, not an object)")
    return report
