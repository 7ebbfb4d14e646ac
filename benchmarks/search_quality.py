"""How good is the Optuna search? Exhaustive sweep vs TPE vs random search.

For each (estimator, shape): every valid config of the tuner's search space is
gated and timed (the ground truth). Then TPE, configured exactly as the tuner
configures it (seeded, the heuristic's choice and diverse configs enqueued),
and random search replay the search against those measured times, with budgets
up to 25% of the exhaustive count, over several seeds; best-so-far curves go to
JSON and a PNG. Replaying on measured times compares the samplers without
timing noise; one live run of the real tuner per key (trials + top-k
re-measure) is reported next to it.

    python benchmarks/search_quality.py --output DIR [--quick] [--device cuda:0]
    python benchmarks/search_quality.py --output DIR --smoke   # CPU check, seconds

Exhaustive results are cached per key in DIR, so an interrupted run resumes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import optuna
import torch
from optuna.trial import TrialState

from rltriton_tune.call import ProblemKey
from rltriton_tune.strategy import InvalidConfig
from rltriton_tune.tune.compile_pool import CompilePool, compile_pool_for
from rltriton_tune.tune.exhaustive import sweep
from rltriton_tune.tune.space import SearchSpace, builtin_choice
from rltriton_tune.tune.study import finalize, make_sampler, run_trials

SHAPES = [(256, 128), (4096, 8), (4096, 512), (32768, 32), (32768, 2048), (64, 8192),
          (16, 32768)]
QUICK_SHAPES = [(4096, 32), (256, 2048)]
WITHIN = 0.03
#: Replayed searches and their plot colours.
SAMPLERS = {"tpe": "tab:blue", "tpe_unseeded": "tab:green", "random": "tab:orange"}

optuna.logging.set_verbosity(optuna.logging.WARNING)


def replay(key: ProblemKey, device: torch.device, table: dict[str, dict], budget: int,
           sampler_name: str, seed: int) -> list[float]:
    """Best-so-far device time after each trial of one search replayed on ``table``.

    ``tpe`` is seeded as the tuner seeds it on a machine without tuned entries (the
    built-in heuristic's choice, each strategy's default, three random configs);
    ``tpe_unseeded`` leaves the heuristic out, to show what the search itself adds.
    """
    space = SearchSpace(key, device)
    if sampler_name.startswith("tpe"):
        sampler = make_sampler(budget, seed)
        study = optuna.create_study(sampler=sampler, direction="minimize")
        heuristic = builtin_choice(key, space) if sampler_name == "tpe" else None
        for point in space.starting_points(heuristic, seed=seed):
            study.enqueue_trial(space.trial_params(point), skip_if_exists=True)
    else:
        study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed),
                                    direction="minimize")
    best, curve = math.inf, []
    for _ in range(budget):
        trial = study.ask()
        try:
            label = space.suggest(trial).label()
        except InvalidConfig:
            study.tell(trial, state=TrialState.PRUNED)
            curve.append(best)
            continue
        value = table.get(label, {}).get("device_us")
        if value is None:
            study.tell(trial, state=TrialState.FAIL)
        else:
            study.tell(trial, value)
            best = min(best, value)
        curve.append(best)
    return curve


def live(key: ProblemKey, device: torch.device, budget: int, pool: CompilePool | None) -> dict:
    """One real tuner run (in-memory study): trials, then top-k re-measure."""
    from rltriton_tune.tune.study import open_study

    space = SearchSpace(key, device)
    study = open_study(key, device, ":memory:", trials=budget, space=space)
    start = time.perf_counter()
    run_trials(key, device, trials=budget, study=study, space=space, pool=pool)
    result = finalize(study, key, device, space=space, record=False)
    best = result.best
    return {"seconds": time.perf_counter() - start, "trials": result.trials,
            "best": None if best is None else best.candidate.label(),
            "device_us": None if best is None else best.timing.device_us}


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(4, len(results))
    rows = math.ceil(len(results) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
    for ax, res in zip(axes.flat, results, strict=False):
        best = res["exhaustive_best_us"]
        for name, color in SAMPLERS.items():
            curves = res["curves"][name]
            med = [statistics.median(c[i] for c in curves) / best for i in range(len(curves[0]))]
            ax.plot(range(1, len(med) + 1), med, color=color, label=f"{name} (median)")
        ax.axhline(1 + WITHIN, color="gray", ls="--", lw=0.8, label="+3%")
        ax.set_ylim(0.98, min(2.0, ax.get_ylim()[1]))
        ax.set_title(f"{res['key']}\n{res['configs']} configs", fontsize=8)
        ax.set_xlabel("trials")
        ax.set_ylabel("best / exhaustive best")
    axes.flat[0].legend(fontsize=7)
    for ax in list(axes.flat)[len(results):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--output", type=Path, required=True)
    p.add_argument("--quick", action="store_true", help="2 shapes, 1 estimator, 3 seeds")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--algorithms", default="gae,vtrace")
    p.add_argument("--shapes", help="NxT list overriding the default shapes (split long runs)")
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--fraction", type=float, default=0.25, help="budget / exhaustive count")
    p.add_argument("--no-live", action="store_true", help="skip the live tuner runs")
    p.add_argument("--compile-workers", type=int, help="compile processes (default: one per core)")
    p.add_argument("--exhaustive-only", action="store_true",
                   help="only measure (or resume) the exhaustive tables")
    p.add_argument("--replay-only", action="store_true",
                   help="replay searches on tables measured before (no GPU needed; no live runs)")
    p.add_argument("--smoke", action="store_true",
                   help="CPU check of the code path (the torch modes' space at 8x16), seconds")
    args = p.parse_args(argv)
    if args.smoke:
        args.device, args.quick, args.shapes, args.seeds, args.compile_workers = (
            "cpu", True, "8x16", 2, 0)
    # No tuned entries: a study seeded with the answer from a profile would flatter the search.
    scratch = Path(tempfile.mkdtemp(prefix="search-quality-"))
    os.environ["RLTRITON_TUNE_DB"] = str(scratch / "db")
    os.environ["RLTRITON_TUNE_SHIPPED_DB"] = str(scratch / "shipped")
    device = torch.device(args.device)
    args.no_live |= args.replay_only
    meta_path = args.output / "meta.json"
    if args.replay_only:
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    elif device.type == "cuda" and not torch.cuda.is_available():
        print("search_quality: error: --device cuda but no CUDA GPU", file=sys.stderr)
        return 1
    algorithms = args.algorithms.split(",")[:1] if args.quick else args.algorithms.split(",")
    shapes = QUICK_SHAPES if args.quick else SHAPES
    if args.shapes:
        shapes = [tuple(int(x) for x in s.lower().split("x")) for s in args.shapes.split(",")]
    seeds = min(args.seeds, 3) if args.quick else args.seeds
    args.output.mkdir(parents=True, exist_ok=True)
    if not args.replay_only:
        import triton

        meta = {"device_name": torch.cuda.get_device_name(device) if device.type == "cuda"
                else "cpu", "torch": torch.__version__, "triton": triton.__version__}
        meta_path.write_text(json.dumps(meta))
    results = []
    with compile_pool_for(device if not args.replay_only else torch.device("cpu"),
                          args.compile_workers) as pool:
        for alg in algorithms:
            for n, t in shapes:
                key = ProblemKey(alg, n, t)
                cache = args.output / f"exhaustive_{alg}_{n}x{t}_{device.type}.json"
                if args.replay_only and not cache.exists():
                    print(f"{key.as_text()}: no exhaustive table, skipped", file=sys.stderr)
                    continue
                table = sweep(key, device, cache, pool)
                if args.exhaustive_only:
                    continue
                # Only configs of the current space count (a table may predate a change to it).
                space_labels = {c.label() for c in SearchSpace(key, device).enumerate()}
                table = {k: v for k, v in table.items() if k in space_labels}
                times = {k: v["device_us"] for k, v in table.items() if v["device_us"] is not None}
                if not times:
                    print(f"{key.as_text()}: no config passed", file=sys.stderr)
                    continue
                best_label = min(times, key=times.get)
                budget = max(1, math.floor(args.fraction * len(table)))
                curves = {name: [replay(key, device, table, budget, name, s) for s in range(seeds)]
                          for name in SAMPLERS}
                best = times[best_label]
                res = {
                    "key": key.as_text(), "configs": len(table), "valid": len(times),
                    "budget": budget, "exhaustive_best": best_label, "exhaustive_best_us": best,
                    "curves": curves,
                    **{f"{name}_within_3pct": [c[-1] <= best * (1 + WITHIN) for c in curves[name]]
                       for name in SAMPLERS},
                    "trials_to_3pct_tpe": [next((i + 1 for i, v in enumerate(c)
                                                 if v <= best * (1 + WITHIN)), None)
                                           for c in curves["tpe"]],
                }
                if not args.no_live:
                    res["live"] = live(key, device, budget, pool)
                    if res["live"]["device_us"]:
                        res["live"]["ratio_to_exhaustive"] = res["live"]["device_us"] / best
                results.append(res)
                print(f"{key.as_text()}: {len(table)} configs, budget {budget}, within 3% in "
                      + ", ".join(f"{name} {sum(res[name + '_within_3pct'])}/{seeds}"
                                  for name in SAMPLERS), file=sys.stderr)
    if args.exhaustive_only:
        return 0
    summary = {
        "device": str(device),
        **meta,
        "fraction": args.fraction, "seeds": seeds, "within": WITHIN, "results": results,
        **{f"{name}_success_rate": statistics.mean(x for r in results
                                                   for x in r[f"{name}_within_3pct"])
           if results else None for name in SAMPLERS},
    }
    (args.output / "search_quality.json").write_text(json.dumps(summary, indent=1))
    if results:
        plot(results, args.output / "search_quality.png")
    print(f"{'key':45s} {'configs':>7s} {'budget':>6s} {'best us':>9s} {'TPE ok':>7s} "
          f"{'unseeded':>8s} {'rand ok':>7s} {'live/best':>9s}")
    for r in results:
        ratio = r.get("live", {}).get("ratio_to_exhaustive")
        print(f"{r['key']:45s} {r['configs']:7d} {r['budget']:6d} {r['exhaustive_best_us']:9.2f} "
              f"{sum(r['tpe_within_3pct']):3d}/{seeds:<3d} "
              f"{sum(r['tpe_unseeded_within_3pct']):4d}/{seeds:<3d} "
              f"{sum(r['random_within_3pct']):3d}/{seeds:<3d} "
              f"{'-' if ratio is None else f'{ratio:.3f}':>9s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
