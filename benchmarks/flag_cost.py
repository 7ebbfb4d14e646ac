"""What each flag path costs: every flag set of an estimator at the base key's config.

The optional inputs (``last_value``, seed values, truncations, bootstrap values,
``next_values``, the ``starts_at`` boundary) change the kernel's code path. For each cell
(estimator, shape, layout) and each Triton strategy that serves it, one config is
fixed: the strategy's default for the base key (flags none; Retrace: truncations, which
it always takes), and for the pseudo-strategy ``dispatched`` the strategy and config
dispatch chooses for the base key on this device (recorded in the row's
``dispatched``). Every flag set the estimator accepts is then timed with that strategy
and config on its own inputs, rounds taking turns with the base, and compared with it:

* ``ratio``: the flag set's device time over the base's;
* ``bytes_ratio``: the bytes an ideal kernel moves for it over the base's (an ``[N, T]``
  input such as ``truncateds`` adds a full read; an ``[N]`` one such as ``last_value``
  almost nothing);
* ``per_byte``: ``ratio / bytes_ratio``, the cost of the flag path beyond its bytes.
  The target is at most 1.05.

A strategy the tuner does not search for the base key (its ``skip_reason``: ``columns``
and ``sequential`` on env-major rows, whose loads are uncoalesced there, for one) never
serves that key: the pair is recorded with the reason in ``not_searched``, not timed.
A config the flag set's key refuses is recorded in ``errors``; a flag set the estimator
refuses (SPEC: ``last_value`` with truncations, for one) in ``refused``. Rows are
appended to ``flag_cost.jsonl`` as each (cell, strategy) is done, so a run split by
``--max-seconds`` picks up with ``--resume``. On a GPU the kernels of every pair to
measure are compiled first in worker processes (``--workers``), as ``strategies.py``
does, so that the timing process loads them from Triton's cache.

    python benchmarks/flag_cost.py --output benchmarks/results/h200          # CUDA
    python benchmarks/flag_cost.py --smoke --output /tmp/flags                # CPU check
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import functools
import itertools
import json
import math
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from peers import read_rows, results_folder, software  # noqa: E402

from rltriton_tune.algorithms import ALGORITHMS, ESTIMATOR_NAMES  # noqa: E402
from rltriton_tune.call import ProblemKey, flags_string  # noqa: E402
from rltriton_tune.dispatch.decide import decide  # noqa: E402
from rltriton_tune.kernels import strategies as kernel_strategies  # noqa: E402
from rltriton_tune.problems import data_bytes  # noqa: E402
from rltriton_tune.strategy import InvalidConfig  # noqa: E402
from rltriton_tune.tune.measure import Bench, make_call  # noqa: E402
from rltriton_tune.tune.space import SearchSpace, device_sm_count  # noqa: E402

#: (N, T, layout) of the default cells: a PPO-sized rollout, the issue's 24000x300, a
#: time-major buffer.
SHAPES = ((4096, 128, "env"), (24000, 300, "env"), (4096, 512, "time"))
SMOKE_SHAPES = ((3, 6, "env"),)
SMOKE_ESTIMATORS = ("gae", "episodic_prefix_sum")
SMOKE_STRATEGIES = ("flat",)
#: Actions of Retrace cells.
ACTIONS = 8
#: The pseudo-strategy of the config dispatch chooses for the base key (the call users make).
DISPATCHED = "dispatched"
#: A flag path within this of its base per byte moved meets the target.
TARGET = 1.05
#: (cell, strategy) pairs compiled ahead and measured per batch: a run cut by
#: ``--max-seconds`` compiles little it does not measure.
CHUNK = 6


def flag_sets(algorithm: str) -> list[str]:
    """Every flag set of ``algorithm`` that holds its required flags, the base first."""
    spec = ALGORITHMS[algorithm]
    optional = sorted(spec.possible_flags - spec.required_flags)
    return [flags_string(spec.required_flags | set(extra))
            for size in range(len(optional) + 1)
            for extra in itertools.combinations(optional, size)]


def config_for(strategy: str, key: ProblemKey, device: torch.device
               ) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """(strategy object, validated config, what the row records about it) of ``strategy``
    for the base ``key``: its default config, or for :data:`DISPATCHED` the strategy and
    config dispatch chooses for ``key`` on ``device`` (the call a user makes). Raises
    :class:`InvalidConfig` where there is none to time."""
    if strategy != DISPATCHED:
        impl = kernel_strategies()[strategy]
        return impl, impl.validate(key, impl.default_params(key)), {}
    decision = decide(key, device)
    impl = kernel_strategies().get(decision.strategy)
    if impl is None:
        raise InvalidConfig(f"dispatch chose {decision.strategy} ({decision.source}), "
                            "not a Triton kernel")
    return (impl, impl.validate(key, decision.params),
            {"dispatched": {"strategy": decision.strategy, "source": decision.source}})


@functools.cache
def _searched(key: ProblemKey, device: torch.device) -> tuple[tuple[str, ...], int | None]:
    """The strategies the tuner searches for ``key`` on ``device`` and the SM count its
    skip rules used: once per base key (warming and measuring both ask, per strategy)."""
    space = SearchSpace(key, device, strategies=kernel_strategies(),
                        sm_count=device_sm_count(device) if device.type == "cuda" else None)
    return tuple(space.names()), space.sm_count


def not_searched(strategy: str, key: ProblemKey, device: torch.device) -> str | None:
    """Why the tuner never searches ``strategy`` for ``key`` on ``device`` (None: it does;
    ``tune.space.SearchSpace.names``), where no config of it passes its skip rules."""
    if strategy == DISPATCHED:  # what dispatch chose serves the key by definition
        return None
    names, sm_count = _searched(key, device)
    if strategy in names:
        return None
    impl = kernel_strategies()[strategy]
    try:
        reason = impl.skip_reason(key, impl.validate(key, impl.default_params(key)),
                                  sm_count)
    except InvalidConfig:
        reason = None
    return reason or "no config of it is searched for this key"


def warm_tasks(pairs: list[tuple[str, int, int, str, str]], device: torch.device
               ) -> list[tuple]:
    """Compile tasks (``strategies.py``'s) for the kernel of every flag set of each
    (estimator, N, T, layout, strategy) pair that SPEC and the strategy accept, each on
    a narrow key of the same specialisation."""
    from strategies import warm_key

    tasks: dict[tuple[str, str, str], tuple] = {}
    for algorithm, n, t, layout, strategy in pairs:
        sets = flag_sets(algorithm)
        base = _key(algorithm, n, t, layout, sets[0])
        try:
            impl, params, _ = config_for(strategy, base, device)
        except InvalidConfig:
            continue
        if not_searched(strategy, base, device):
            continue
        for flags in sets:
            key = _key(algorithm, n, t, layout, flags)
            try:
                make_call(_key(algorithm, 2, 3, layout, flags), "cpu")
                checked = impl.validate(key, params)
            except (ValueError, InvalidConfig):  # refused by SPEC or by the strategy
                continue
            text = warm_key(key).as_text()
            # keyed by config too: a default and a dispatched config of one strategy
            tasks[(text, impl.name, json.dumps(checked, sort_keys=True))] = (
                "triton", text, impl.name, checked, str(device))
    return list(tasks.values())


def warm(pool: cf.Executor, tasks: list[tuple]) -> int:
    """Run ``tasks`` in ``pool`` (each compiles a kernel by launching it once, filling
    Triton's on-disk cache); how many failed (measuring reports them again)."""
    from strategies import _warm as compile_once

    return sum(bool(error) for error, _ in pool.map(compile_once, tasks, chunksize=1))


def _key(algorithm: str, n: int, t: int, layout: str, flags: str) -> ProblemKey:
    return ProblemKey(algorithm, n, t, "float32", layout, flags,
                      a=ACTIONS if ALGORITHMS[algorithm].per_action else 0)


def measure(algorithm: str, n: int, t: int, layout: str, strategy: str,
            device: torch.device, rounds: int, budget_s: float) -> dict[str, Any]:
    """One row: every flag set of the cell at ``strategy``'s config for the base (its
    default; for :data:`DISPATCHED`, dispatch's choice)."""
    sets = flag_sets(algorithm)
    base_key = _key(algorithm, n, t, layout, sets[0])
    row: dict[str, Any] = {"cell": base_key.as_text(), "algorithm": algorithm, "N": n, "T": t,
                           "layout": layout, "strategy": strategy, "base": sets[0],
                           "params": None, "flags": {}, "errors": {}, "refused": []}
    try:
        impl, params, chosen = config_for(strategy, base_key, device)
    except InvalidConfig as exc:
        row["errors"][sets[0]] = f"strategy refuses the base key: {exc}"
        return row
    row.update(params=params, **chosen)
    reason = not_searched(strategy, base_key, device)
    if reason:
        row["not_searched"] = reason
        return row
    timed: dict[str, tuple[Any, Bench]] = {}
    for flags in sets:
        key = _key(algorithm, n, t, layout, flags)
        try:
            bench = Bench(key, device, quick=True)
        except ValueError:  # a combination SPEC refuses (last_value with truncations)
            row["refused"].append(flags)
            continue
        try:
            launcher = impl.prepare(key, impl.validate(key, params))
            launcher(bench.calls[0])
        except Exception as exc:  # noqa: BLE001 - a config a flag set refuses is a result
            row["errors"][flags] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            continue
        timed[flags] = (launcher, bench)
    if sets[0] not in timed:
        return row

    samples: dict[str, list[float]] = {flags: [] for flags in timed}
    order = list(timed)
    for r in range(rounds):
        for flags in order[r % len(order):] + order[:r % len(order)]:
            launcher, bench = timed[flags]
            samples[flags].append(bench.time(launcher, budget_s, host=False).device_us)
    base_us = statistics.median(samples[sets[0]])
    base_bytes = data_bytes(base_key)
    for flags, values in samples.items():
        us = statistics.median(values)
        ratio = us / base_us
        bytes_ratio = data_bytes(_key(algorithm, n, t, layout, flags)) / base_bytes
        row["flags"][flags] = {"device_us": us, "ratio": ratio, "bytes_ratio": bytes_ratio,
                               "per_byte": ratio / bytes_ratio}
    return row


def strategies_for(names: tuple[str, ...] | None, device: torch.device) -> list[str]:
    """The Triton strategies to time: those named (by default all available here, and
    :data:`DISPATCHED`); each refuses the keys it does not serve (a recorded result)."""
    found = kernel_strategies()
    return [name for name in (names or (*found, DISPATCHED))
            if name == DISPATCHED
            or (name in found and name != "torch" and found[name].available(device))]


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Flag paths measured, how many are within the target per byte, and the worst."""
    paths = [(r, flags, m) for r in rows for flags, m in r.get("flags", {}).items()
             if flags != r["base"]]
    worst = max(paths, key=lambda p: p[2]["per_byte"], default=None)
    return {"paths": len(paths),
            "within": sum(m["per_byte"] <= TARGET for _, _, m in paths),
            "worst": None if worst is None else
            {"cell": worst[0]["cell"], "strategy": worst[0]["strategy"], "flags": worst[1],
             "per_byte": worst[2]["per_byte"]}}


def report(rows: list[dict[str, Any]]) -> str:
    """A Markdown table: per cell and strategy, each flag set's ratio per byte to the base."""
    lines = ["| cell | strategy | flag set | µs | x base | x bytes | per byte |",
             "|---|---|---|---:|---:|---:|---:|"]
    for r in rows:
        cell = r["cell"].replace("|", "\\|")   # a key's pipes would end the table cell
        for flags, m in r.get("flags", {}).items():
            mark = " (over)" if m["per_byte"] > TARGET else ""
            lines.append(f"| `{cell}` | {r['strategy']} | {flags} | {m['device_us']:.2f} | "
                         f"{m['ratio']:.3f} | {m['bytes_ratio']:.3f} | "
                         f"{m['per_byte']:.3f}{mark} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--output", type=Path, help="results folder (default: benchmarks/results/"
                   "<gpu>/)")
    p.add_argument("--estimators", nargs="+", choices=sorted(ESTIMATOR_NAMES))
    p.add_argument("--strategies", nargs="+", help="Triton strategies, and 'dispatched' for "
                   "dispatch's choice for the base key (default: all of them)")
    p.add_argument("--shapes", help="comma list of NxT:layout, e.g. 4096x128:env,"
                   "4096x512:time (default: the built-in cells)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--budget", type=float, default=0.05, help="timing seconds per measurement")
    p.add_argument("--resume", action="store_true",
                   help="skip (cell, strategy) pairs the file has from this software")
    p.add_argument("--max-seconds", type=float, default=math.inf)
    p.add_argument("--workers", type=int, default=min(16, os.cpu_count() or 1),
                   help="processes compiling the kernels first on a GPU (0: compile while "
                   "measuring)")
    p.add_argument("--smoke", action="store_true", help="CPU check of the code path, seconds")
    args = p.parse_args(argv)
    device = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    if args.shapes:
        shapes = tuple((int(s.split("x")[0]), int(s.split("x")[1].split(":")[0]),
                        s.split(":")[1] if ":" in s else "env")
                       for s in args.shapes.split(","))
    else:
        shapes = SMOKE_SHAPES if args.smoke else SHAPES
    estimators = args.estimators or (SMOKE_ESTIMATORS if args.smoke else ESTIMATOR_NAMES)
    names = tuple(args.strategies) if args.strategies else (
        SMOKE_STRATEGIES if args.smoke else None)
    rounds, budget = (1, 0.01) if args.smoke else (args.rounds, args.budget)
    output = args.output or results_folder(device)
    output.mkdir(parents=True, exist_ok=True)
    jsonl = output / "flag_cost.jsonl"
    context = {**software(device), "date": time.strftime("%Y-%m-%d", time.gmtime())}
    same = ("device_name", "torch", "triton")
    done = {(r["cell"], r["strategy"]) for r in read_rows_by_pair(jsonl)
            if all(r.get(k) == context[k] for k in same)} if args.resume else set()
    if not args.resume and jsonl.exists():
        jsonl.unlink()  # a fresh run replaces the file this script wrote
    deadline = time.monotonic() + args.max_seconds
    # Retrace is left out: its truncations are required, it has no flag path to compare.
    pairs = [(algorithm, n, t, layout, strategy)
             for algorithm in estimators if len(flag_sets(algorithm)) > 1
             for n, t, layout in shapes for strategy in strategies_for(names, device)
             if (_key(algorithm, n, t, layout, flag_sets(algorithm)[0]).as_text(), strategy)
             not in done]
    pool = (cf.ProcessPoolExecutor(args.workers, mp_context=mp.get_context("spawn"))
            if device.type == "cuda" and args.workers > 0 else None)
    try:
        for start in range(0, len(pairs), CHUNK):
            chunk = pairs[start:start + CHUNK]
            if time.monotonic() > deadline:
                break
            if pool is not None:
                tasks = warm_tasks(chunk, device)
                print(f"flag_cost: compiling {len(tasks)} kernels in {args.workers} "
                      f"processes ({warm(pool, tasks)} failed)", flush=True)
            for algorithm, n, t, layout, strategy in chunk:
                if time.monotonic() > deadline:
                    break
                cell = _key(algorithm, n, t, layout, flag_sets(algorithm)[0]).as_text()
                row = {**context, **measure(algorithm, n, t, layout, strategy, device,
                                            rounds, budget)}
                with jsonl.open("a") as f:
                    f.write(json.dumps(row) + "\n")
                if row.get("not_searched"):
                    print(f"{cell} {strategy}: not searched ({row['not_searched']})",
                          flush=True)
                    continue
                worst = max((m["per_byte"] for m in row["flags"].values()), default=None)
                print(f"{cell} {strategy}: {len(row['flags'])} flag sets timed, worst per "
                      f"byte {worst if worst is None else round(worst, 3)}, "
                      f"{len(row['errors'])} config errors", flush=True)
    finally:
        if pool is not None:
            pool.shutdown()
    if time.monotonic() > deadline:
        print("flag_cost: --max-seconds reached; rerun with --resume", file=sys.stderr)
    rows = read_rows_by_pair(jsonl)
    print(report(rows))
    print(json.dumps(summary(rows)))
    return 0


def read_rows_by_pair(path: Path) -> list[dict[str, Any]]:
    """Rows of ``flag_cost.jsonl``, the newest per (cell, strategy); a torn last line from
    a killed run is skipped."""
    return read_rows(path, key=lambda row: (row.get("cell"), row.get("strategy")))


if __name__ == "__main__":
    raise SystemExit(main())
