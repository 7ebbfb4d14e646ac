"""Measure the configs the built-in heuristic could pick, for the keys its rules are unsure of.

Two families, each timed next to the current dispatched choice and the rl-triton flat
config (gated against the reference, interleaved rounds):

* env-major rows of 64-256 steps at N of a few hundred to a few thousand (one row per
  program or several; the H200 bench had the multi-row rule 3-16% behind rl-triton's
  single row there);
* time-major keys with T > 32, where the rule is a one-row tiled loop
  (``tiled(1, 64, 1 warp)``), against row blocks wide enough to coalesce.

Writes ``rule_probe.json`` and ``rule_probe.md`` under ``--output``.

    python benchmarks/rule_probe.py --output DIR [--algorithms gae,...] [--max-seconds S]
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
    fresh_strategies,
    probe_key,
    rows_by_key,
    run_jobs,
    time_candidates,
)

from rltriton_tune.kernels.flat import rl_triton_params  # noqa: E402
from rltriton_tune.tune.bench import _dispatched  # noqa: E402
from rltriton_tune.tune.space import Candidate  # noqa: E402

ENV_SHAPES = [(777, 77), (1000, 200), (1200, 90), (256, 128), (1024, 64), (3000, 100),
              (600, 250), (2000, 120)]
TIME_SHAPES = [(1500, 1500), (20000, 100), (4096, 512), (600, 2500), (48, 6000),
               (12000, 160), (2500, 600), (30000, 60)]


def env_configs() -> list[tuple[str, dict]]:
    return [("flat", {"BLOCK_N": rows, "num_warps": warps})
            for rows in (1, 2, 4) for warps in (1, 2, 4)]


def time_configs() -> list[tuple[str, dict]]:
    out = [("tiled", {"BLOCK_N": rows, "BLOCK_T": bt, "num_warps": warps})
           for rows in (8, 16, 32) for bt in (64, 128) for warps in (2, 4, 8)]
    out += [("flat", {"BLOCK_N": rows, "num_warps": warps}) for rows in (4, 8, 16)
            for warps in (4, 8, 16)]
    out += [("sequential", {"BLOCK_N": 256, "num_warps": 4}),
            ("tiled", {"BLOCK_N": 1, "BLOCK_T": 64, "num_warps": 1})]
    return out


def probe(key, device: torch.device, budget_s: float, configs) -> list[dict]:
    impls = fresh_strategies()
    chosen = _dispatched(key, device)[0]
    cands = [chosen, Candidate("flat", rl_triton_params(key.t))] if chosen.strategy in impls \
        else [Candidate("flat", rl_triton_params(key.t))]
    seen = {c.label() for c in cands}
    for name, params in configs:
        try:
            cand = Candidate(name, impls[name].validate(key, params))
        except Exception:  # noqa: BLE001 - outside the strategy's limits for this key
            continue
        if cand.label() not in seen:
            seen.add(cand.label())
            cands.append(cand)
    rows = time_candidates(key, device, cands, impls, budget_s)
    roles = ["dispatched", "rl_triton"] if chosen.strategy in impls else ["rl_triton"]
    for row, role in zip(rows, roles, strict=False):
        row["role"] = role
    return rows


def report(rows: list[dict]) -> str:
    lines = ["| key | dispatched | us | rl-triton us | best | us | best / dispatched |",
             "|---|---|---:|---:|---|---:|---:|"]
    for key, rs in rows_by_key(rows).items():
        best = fastest(rs)
        if best is None:
            continue
        mine = next((r for r in rs if r.get("role") == "dispatched"), None)
        flat = next((r for r in rs if r.get("role") == "rl_triton"), None)
        mine_us = mine["device_us"] if mine and mine["device_us"] else None
        lines.append(f"| {key} | {mine['config'] if mine else '-'} | {mine_us or 0:.2f} | "
                     f"{(flat or {}).get('device_us') or 0:.2f} | {best['config']} | "
                     f"{best['device_us']:.2f} | "
                     f"{(best['device_us'] / mine_us) if mine_us else 0:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--output", type=Path, required=True)
    p.add_argument("--algorithms", default="gae,vtrace,eligibility_traces")
    p.add_argument("--budget-s", type=float, default=0.03, help="timing seconds per config")
    p.add_argument("--max-seconds", type=float, default=400.0)
    args = p.parse_args(argv)
    algorithms = args.algorithms.split(",")
    jobs = [(partial(probe, configs=env_configs()), probe_key(a, n, t, "env"))
            for a in algorithms for n, t in ENV_SHAPES]
    jobs += [(partial(probe, configs=time_configs()), probe_key(a, n, t, "time"))
             for a in algorithms for n, t in TIME_SHAPES]
    return run_jobs("rule_probe", jobs, args.output, report, args.budget_s, args.max_seconds)


if __name__ == "__main__":
    sys.exit(main())
