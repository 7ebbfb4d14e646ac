"""Where does the single-pass ``lookback`` strategy beat the dispatched choice?

For long-sequence keys (where ``split`` serves today), every config of the
lookback space is gated against the reference and timed, next to the choice the
dispatcher makes from the shipped profile and the ``SPLIT_CONFIGS`` (the split
configs that won the session-7 oracle sweeps at 5x300000 and 12x45000), in the same
session. Writes
``lookback.json`` (rows as ``align_probe.py`` writes them, so
``entries_from_bench.py --probe`` reads it) and ``lookback.md`` (runs:
results/lookback/).

    python benchmarks/lookback_probe.py --output DIR [--algorithms gae,vtrace,retrace]
        [--shapes 1x1000000,5x300000,...]
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
    prepare_under,
    probe_key,
    rows_by_key,
    run_jobs,
    time_candidates,
)

from rltriton_tune.call import ProblemKey  # noqa: E402
from rltriton_tune.dispatch.registry import all_strategies  # noqa: E402
from rltriton_tune.kernels import lookback  # noqa: E402
from rltriton_tune.kernels.lookback import LookbackStrategy  # noqa: E402
from rltriton_tune.strategy import InvalidConfig  # noqa: E402
from rltriton_tune.tune.bench import DISPATCHED, _dispatched  # noqa: E402
from rltriton_tune.tune.compile_pool import compile_pool_for  # noqa: E402
from rltriton_tune.tune.space import Candidate, SearchSpace  # noqa: E402

SHAPES = [(16, 32768), (1, 1_000_000), (3, 50_000), (24, 12_000), (64, 8192), (256, 32768),
          (16, 131072), (4096, 512)]
#: Split configs timed beside the look-back space (they beat the look-back rule's
#: (1, 1024, 4) by 1.10-1.55x in the session-7 partial oracle sweeps).
SPLIT_CONFIGS = [
    {"BLOCK_N": 1, "BLOCK_T": 512, "CARRY_BLOCK": 64, "CHUNK_T": 2048, "num_warps": 2},
    {"BLOCK_N": 4, "BLOCK_T": 512, "CARRY_BLOCK": 16, "CHUNK_T": 512, "num_warps": 4},
]


def probe(key: ProblemKey, device: torch.device, budget_s: float, pool) -> list[dict]:
    """The dispatched choice (role ``dispatched``, with its source) and every lookback
    config, gated and timed together."""
    strategies = all_strategies()
    space = SearchSpace(key, device, strategies={"lookback": strategies["lookback"]})
    chosen, source = _dispatched(key, device)
    split = strategies["split"]
    splits = []
    for params in SPLIT_CONFIGS:
        try:
            splits.append(Candidate("split", split.validate(key, params)))
        except InvalidConfig:
            continue
    rows = time_candidates(key, device, [chosen, *space.enumerate(), *splits], strategies,
                           budget_s, pool=pool)
    rows[0].update(role=DISPATCHED, source=source.split("@")[0])
    return rows + ticket_order_rows(key, device, rows, budget_s, pool)


def ticket_order_rows(key: ProblemKey, device: torch.device, rows: list[dict],
                      budget_s: float, pool, top: int = 3) -> list[dict]:
    """The ``top`` fastest look-back configs again, in launch order (as shipped) and with
    ``TICKET_ORDER`` (a ticket before the loads), timed together: rows with role
    ``order`` and ``variant`` ``launch`` or ``ticket``."""
    timed = sorted((r for r in rows if r["device_us"] and r["config"].startswith("lookback(")),
                   key=lambda r: r["device_us"])[:top]
    configs = [Candidate.from_label(r["config"]).params for r in timed]
    if not configs:
        return []
    shipping, ticket = LookbackStrategy(), LookbackStrategy()
    prepare_under(lookback, "TICKET_ORDER", True, key, [(ticket, params) for params in configs])
    cands = [Candidate(name, params) for name in ("lookback", "lookback:ticket")
             for params in configs]
    out = time_candidates(key, device, cands, {"lookback": shipping, "lookback:ticket": ticket},
                          budget_s, pool=None)
    for row in out:
        row.update(role="order", variant="ticket" if ":ticket" in row["config"] else "launch")
    return out


def report(rows: list[dict]) -> str:
    lines = ["| key | dispatched (source) | us | lookback best | us | speedup | split best "
             "| us |", "|---|---|---:|---|---:|---:|---|---:|"]
    for key, rs in rows_by_key(rows).items():
        mine = next(r for r in rs if r.get("role") == DISPATCHED)
        others = [r for r in rs if r.get("role") not in (DISPATCHED, "order")]
        best = fastest([r for r in others if r["config"].startswith("lookback")])
        split = fastest([r for r in others if r["config"].startswith("split")])
        ratio = mine["device_us"] / best["device_us"] if best and mine["device_us"] else None
        lines.append(f"| {key} | {mine['config']} ({mine['source']}) | "
                     f"{mine['device_us'] or 0:.2f} | {best['config'] if best else '-'} | "
                     f"{best['device_us'] if best else 0:.2f} | "
                     f"{'-' if ratio is None else format(ratio, '.2f') + 'x'} | "
                     f"{split['config'] if split else '-'} | "
                     f"{split['device_us'] if split else 0:.2f} |")
    return "\n".join(lines) + "\n"


def order_report(rows: list[dict]) -> str:
    """Launch order against ticket order, per key and config (rows of role ``order``)."""
    lines = ["| key | config | launch order us | ticket order us | ticket / launch |",
             "|---|---|---:|---:|---:|"]
    for key, rs in rows_by_key([r for r in rows if r.get("role") == "order"]).items():
        launch_rows = {r["config"]: r for r in rs if r["variant"] == "launch"}
        for cfg, mine in launch_rows.items():
            other = next((r for r in rs if r["variant"] == "ticket"
                          and r["config"] == cfg.replace("lookback(", "lookback:ticket(")), None)
            a, b = mine["device_us"], other["device_us"] if other else None
            lines.append(f"| {key} | {cfg} | {a or 0:.2f} | {b or 0:.2f} | "
                         f"{format(b / a, '.2f') + 'x' if a and b else '-'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--output", type=Path, required=True)
    p.add_argument("--algorithms", default="gae,vtrace,retrace")
    p.add_argument("--budget-s", type=float, default=0.03, help="timing seconds per config")
    p.add_argument("--max-seconds", type=float, default=500.0)
    p.add_argument("--shapes", help="NxT,... instead of the built-in shapes")
    args = p.parse_args(argv)
    shapes = SHAPES if not args.shapes else [
        tuple(int(x) for x in shape.split("x")) for shape in args.shapes.split(",")]
    keys = [probe_key(alg, n, t, "env") for alg in args.algorithms.split(",") for n, t in shapes]
    with compile_pool_for(torch.device("cuda")) as pool:
        jobs = [(partial(probe, pool=pool), key) for key in keys]
        return run_jobs("lookback", jobs, args.output,
                        lambda rows: report(rows) + "\n" + order_report(rows),
                        args.budget_s, args.max_seconds)


if __name__ == "__main__":
    sys.exit(main())
