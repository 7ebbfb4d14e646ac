"""Where does the single-pass ``lookback`` strategy beat the dispatched choice?

For long-sequence keys (where ``split`` serves today), every config of the
lookback space is gated against the reference and timed, next to the choice the
dispatcher makes from the shipped profile, in the same session. Writes
``lookback.json`` and ``lookback.md`` (session 4's run: results/lookback/).

    python benchmarks/lookback_probe.py --output DIR [--algorithms gae,vtrace,retrace]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

import torch  # noqa: E402

from rltriton_tune.call import ProblemKey  # noqa: E402
from rltriton_tune.dispatch.registry import all_strategies  # noqa: E402
from rltriton_tune.tune.bench import DISPATCHED, _dispatched  # noqa: E402
from rltriton_tune.tune.compile_pool import compile_pool_for  # noqa: E402
from rltriton_tune.tune.evaluate import Evaluator  # noqa: E402
from rltriton_tune.tune.space import SearchSpace  # noqa: E402

SHAPES = [(16, 32768), (1, 1_000_000), (3, 50_000), (24, 12_000), (64, 8192), (256, 32768),
          (16, 131072), (4096, 512)]


def probe(key: ProblemKey, device: torch.device, pool, budget_s: float) -> dict:
    strategies = all_strategies()
    space = SearchSpace(key, device, strategies={"lookback": strategies["lookback"]})
    chosen, source = _dispatched(key, device)
    cands = [chosen, *space.enumerate()]
    evaluator = Evaluator(key, device, strategies, workers=1, time_budget_s=budget_s, pool=pool)
    try:
        outs = evaluator.evaluate(cands)
    finally:
        evaluator.close()
    timed = [(o.timing.device_us, o.candidate.label()) for o in outs[1:] if o.ok]
    best_us, best = min(timed) if timed else (None, None)
    mine = outs[0].timing.device_us if outs[0].ok else None
    return {"key": key.as_text(), DISPATCHED: chosen.label(), "source": source.split("@")[0],
            "dispatched_us": mine, "lookback_best": best, "lookback_us": best_us,
            "speedup": mine / best_us if mine and best_us else None,
            "lookback_configs": len(cands) - 1,
            "failed": {o.candidate.label(): o.error for o in outs if not o.ok}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--output", type=Path, required=True)
    p.add_argument("--algorithms", default="gae,vtrace,retrace")
    p.add_argument("--budget-s", type=float, default=0.03, help="timing seconds per config")
    p.add_argument("--max-seconds", type=float, default=500.0)
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("lookback_probe: error: needs a CUDA GPU", file=sys.stderr)
        return 1
    device = torch.device("cuda")
    deadline = time.monotonic() + args.max_seconds
    args.output.mkdir(parents=True, exist_ok=True)
    rows = []
    with compile_pool_for(device) as pool:
        for alg in args.algorithms.split(","):
            for n, t in SHAPES:
                if time.monotonic() > deadline:
                    break
                key = ProblemKey(alg, n, t, a=8 if alg == "retrace" else 0,
                                 flags="trunc" if alg == "retrace" else "none")
                rows.append(probe(key, device, pool, args.budget_s))
                (args.output / "lookback.json").write_text(json.dumps(rows, indent=1))
                r = rows[-1]
                print(f"{r['key']:45s} dispatched {r['dispatched_us'] or 0:9.2f} us "
                      f"({r[DISPATCHED]}), lookback best {r['lookback_us'] or 0:9.2f} us "
                      f"({r['lookback_best']})", file=sys.stderr)
    lines = ["| key | dispatched (source) | us | lookback best | us | speedup |",
             "|---|---|---:|---|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['key']} | {r[DISPATCHED]} ({r['source']}) | "
                     f"{r['dispatched_us'] or 0:.2f} | {r['lookback_best']} | "
                     f"{r['lookback_us'] or 0:.2f} | "
                     f"{'-' if r['speedup'] is None else format(r['speedup'], '.2f') + 'x'} |")
    (args.output / "lookback.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
