"""Where does the single-pass ``lookback`` strategy beat the dispatched choice?

For long-sequence keys (where ``split`` serves today), every config of the
lookback space is gated against the reference and timed, next to the choice the
dispatcher makes from the shipped profile, in the same session. Writes
``lookback.json`` (rows as ``align_probe.py`` writes them, so
``entries_from_bench.py --probe`` reads it) and ``lookback.md`` (runs:
results/lookback/).

    python benchmarks/lookback_probe.py --output DIR [--algorithms gae,vtrace,retrace]
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

import torch  # noqa: E402
from align_probe import (  # noqa: E402
    fastest,
    probe_key,
    rows_by_key,
    run_jobs,
    time_candidates,
)

from rltriton_tune.call import ProblemKey  # noqa: E402
from rltriton_tune.dispatch.registry import all_strategies  # noqa: E402
from rltriton_tune.tune.bench import DISPATCHED, _dispatched  # noqa: E402
from rltriton_tune.tune.compile_pool import compile_pool_for  # noqa: E402
from rltriton_tune.tune.space import SearchSpace  # noqa: E402

SHAPES = [(16, 32768), (1, 1_000_000), (3, 50_000), (24, 12_000), (64, 8192), (256, 32768),
          (16, 131072), (4096, 512)]


def probe(key: ProblemKey, device: torch.device, budget_s: float, pool) -> list[dict]:
    """The dispatched choice (role ``dispatched``, with its source) and every lookback
    config, gated and timed together."""
    strategies = all_strategies()
    space = SearchSpace(key, device, strategies={"lookback": strategies["lookback"]})
    chosen, source = _dispatched(key, device)
    rows = time_candidates(key, device, [chosen, *space.enumerate()], strategies, budget_s,
                           pool=pool)
    rows[0].update(role=DISPATCHED, source=source.split("@")[0])
    return rows


def report(rows: list[dict]) -> str:
    lines = ["| key | dispatched (source) | us | lookback best | us | speedup |",
             "|---|---|---:|---|---:|---:|"]
    for key, rs in rows_by_key(rows).items():
        mine = next(r for r in rs if r.get("role") == DISPATCHED)
        best = fastest([r for r in rs if r.get("role") != DISPATCHED])
        ratio = mine["device_us"] / best["device_us"] if best and mine["device_us"] else None
        lines.append(f"| {key} | {mine['config']} ({mine['source']}) | "
                     f"{mine['device_us'] or 0:.2f} | {best['config'] if best else '-'} | "
                     f"{best['device_us'] if best else 0:.2f} | "
                     f"{'-' if ratio is None else format(ratio, '.2f') + 'x'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--output", type=Path, required=True)
    p.add_argument("--algorithms", default="gae,vtrace,retrace")
    p.add_argument("--budget-s", type=float, default=0.03, help="timing seconds per config")
    p.add_argument("--max-seconds", type=float, default=500.0)
    args = p.parse_args(argv)
    keys = [probe_key(alg, n, t, "env") for alg in args.algorithms.split(",") for n, t in SHAPES]
    with compile_pool_for(torch.device("cuda")) as pool:
        jobs = [(partial(probe, pool=pool), key) for key in keys]
        return run_jobs("lookback", jobs, args.output, report, args.budget_s, args.max_seconds)


if __name__ == "__main__":
    sys.exit(main())
