"""Score today's dispatch on a bench run's rows, using only that run's timings.

A bench row times the dispatched config, the built-in heuristic's, the flat baseline's
and, on held-out shapes, nearby entries' configs. This script asks the current
dispatcher (shipped profile, no GPU) what it would run on each key and, where that
config is one the row timed, takes its time from the row: a rule or profile change
can be scored without new device time, on exactly the configs it picks. A cell whose
new choice the row did not time takes its speedup from ``--probe`` files
(``rule_probe.json``, ``align_probe.json``: the choice and the rl-triton config timed
side by side in one process) where they have both; otherwise it is counted and left
out. Grid and held-out cells are scored apart.

    python benchmarks/transfer_replay.py benchmarks/results/bench_h200/*/bench.json \
        --heuristic-rev a22ad95 [--probe rule_probe.json ...]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from entries_from_bench import (  # noqa: E402
    H200_SMS,
    config_ident,
    heuristic_at,
    probe_timings,
    shipped_decision,
    shipped_h200_profile,
    shipped_view,
)

from rltriton_tune.call import ProblemKey  # noqa: E402
from rltriton_tune.dispatch import decide, heuristic  # noqa: E402
from rltriton_tune.dispatch.registry import triton_strategies  # noqa: E402
from rltriton_tune.kernels.flat import rl_triton_params  # noqa: E402
from rltriton_tune.tune.bench import row_key  # noqa: E402
from rltriton_tune.tuning_db.store import read_profile  # noqa: E402


def _config(strategy: str, params: dict) -> tuple:
    if strategy == "flat":
        params = {**params, "num_stages": 1}  # no loop: stages change nothing
    return config_ident(strategy, params)


def _as_dict(decision) -> dict | None:
    if decision is None:
        return None
    return {"strategy": decision.strategy, "params": dict(decision.params)}


def timed_configs(key, row: dict, profiles, usable, heuristic_then=None) -> dict[tuple, float]:
    """Config -> device time of every config the row measured that can be named.

    ``heuristic_then``: the heuristic module of the run's revision, for rows that do not
    record the heuristic's config (without it, today's heuristic is assumed unchanged).
    """
    times = row["device_us"]
    found = {_config(row["strategy"], row["params"]): times["dispatched"]}
    for source, config in (row.get("alternative_configs") or {}).items():
        t = (row.get("alternatives") or {}).get(source)
        if t:
            found[_config(config["strategy"], config["params"])] = t
    if times.get("flat_heuristic"):
        found[_config("flat", {"BLOCK_N": 1, **rl_triton_params(row["T"])})] = \
            times["flat_heuristic"]
    rules = (heuristic_then or heuristic).candidates
    builtin = row.get("heuristic") or _as_dict(
        decide.heuristic_decision(key, {"sm_count": H200_SMS}, usable, rules))
    if builtin is not None and row.get("heuristic_us"):
        found[_config(builtin["strategy"], builtin["params"])] = row["heuristic_us"]
    unmoved = next(decide.nearest_decisions(key, profiles, usable, decide.SURVEY_DISTANCE,
                                            adapt=False, reuse_moved=True), None)
    for source, t in (row.get("alternatives") or {}).items():
        if source.startswith("unmoved:") and t and unmoved is not None:
            found[_config(unmoved.strategy, unmoved.params)] = t
    return found


def probe_speedups(paths: list[Path]) -> dict[tuple[str, tuple], float]:
    """(key text, config) -> rl-triton flat time / config time, from probe files."""
    times: dict[str, dict[tuple, float]] = {}
    for path in paths:
        for key_text, configs in probe_timings(path).items():
            times.setdefault(key_text, {}).update(
                {_config(name, params): us for name, params, us in configs})
    out = {}
    for key_text, found in times.items():
        t = ProblemKey.from_text(key_text).t
        flat = found.get(_config("flat", {"BLOCK_N": 1, **rl_triton_params(t)}))
        if flat:
            out.update({(key_text, config): flat / t for config, t in found.items()})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("reports", type=Path, nargs="+", help="bench.json files")
    p.add_argument("--heuristic-rev", help="git revision the run was made with (rows "
                   "without a recorded heuristic config are read with its heuristic)")
    p.add_argument("--probe", type=Path, nargs="*", default=[],
                   help="probe JSON files with same-process timings of other configs")
    args = p.parse_args(argv)
    probed = probe_speedups(args.probe)
    from_probe = 0
    then_module = heuristic_at(args.heuristic_rev) if args.heuristic_rev else None
    profile = read_profile(shipped_h200_profile())
    profiles = shipped_view(profile.entries)
    usable = triton_strategies()
    scores: dict[bool, tuple[list[float], list[float]]] = {False: ([], []), True: ([], [])}
    untimed, changed = [], 0
    for path in args.reports:
        for row in json.loads(path.read_text())["rows"]:
            flat = row["device_us"].get("flat_heuristic")
            if not flat:
                continue
            key = row_key(row)
            d = shipped_decision(key, profiles, usable)
            config = _config(d.strategy, d.params)
            t = timed_configs(key, row, profiles, usable, then_module).get(config)
            speedup = flat / t if t else probed.get((key.as_text(), config))
            if speedup is None:
                untimed.append(f"{key.as_text()}: {d.strategy} {d.params}")
                continue
            from_probe += t is None
            changed += config != _config(row["strategy"], row["params"])
            then, now = scores[bool(row.get("held_out"))]
            then.append(flat / row["device_us"]["dispatched"])
            now.append(speedup)

    def line(name: str, xs: list[float]) -> str:
        g = math.exp(sum(map(math.log, xs)) / len(xs))
        return (f"{name}: geomean {g:.3f}x over flat, worst {min(xs):.3f}x, "
                f"{sum(x < 0.97 for x in xs)} of {len(xs)} cells below 0.97x")

    for held_out, (then, now) in scores.items():
        if then:
            group = "held-out" if held_out else "grid"
            print(line(f"{group}, as measured", then))
            print(line(f"{group}, current dispatch", now))
    print(f"{changed} choices changed ({from_probe} scored from probe timings); "
          f"{len(untimed)} cells whose current choice was not timed in the run:")
    for u in untimed:
        print("  " + u)
    return 0


if __name__ == "__main__":
    sys.exit(main())
