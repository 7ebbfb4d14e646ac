"""Score today's dispatch on a bench run's held-out rows, using only that run's timings.

A held-out bench row times the dispatched config, the built-in heuristic's, the flat
baseline's and the nearest entry's config as tuned (``unmoved:``). This script asks the
current dispatcher (shipped profile, no GPU) what it would run on each held-out key
and, where that config is one the row timed, takes its time from the row: a rule
change can be scored without new device time, on exactly the configs it picks. Cells
whose new choice was not timed are counted and left out.

    python benchmarks/transfer_replay.py devcarry/bench/*_bench/bench.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from rltriton_tune.call import ProblemKey  # noqa: E402
from rltriton_tune.dispatch import decide  # noqa: E402
from rltriton_tune.dispatch.registry import triton_strategies  # noqa: E402
from rltriton_tune.kernels.flat import rl_triton_params  # noqa: E402
from rltriton_tune.tuning_db import shipped_dir  # noqa: E402
from rltriton_tune.tuning_db.store import read_profile  # noqa: E402

H200_SMS = 132


def _config(strategy: str, params: dict) -> tuple:
    if strategy == "flat":
        params = {**params, "num_stages": 1}  # no loop: stages change nothing
    return strategy, tuple(sorted(params.items()))


def timed_configs(row: dict, profiles, usable) -> dict[tuple, float]:
    """Config -> device time of every config the row measured that can be named."""
    key = ProblemKey(row["algorithm"], row["N"], row["T"], a=row["A"], dtype=row["dtype"],
                     layout=row["layout"], flags=row["flags"])
    times = row["device_us"]
    found = {_config(row["strategy"], row["params"]): times["dispatched"]}
    if times.get("flat_heuristic"):
        found[_config("flat", {"BLOCK_N": 1, **rl_triton_params(row["T"])})] = \
            times["flat_heuristic"]
    heuristic = decide.heuristic_decision(key, {"sm_count": H200_SMS}, usable)
    if heuristic is not None and row.get("heuristic_us"):
        found[_config(heuristic.strategy, heuristic.params)] = row["heuristic_us"]
    unmoved = next(decide.nearest_decisions(key, profiles, usable, decide.SURVEY_DISTANCE,
                                            adapt=False), None)
    for source, t in (row.get("alternatives") or {}).items():
        if source.startswith("unmoved:") and t and unmoved is not None:
            found[_config(unmoved.strategy, unmoved.params)] = t
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("reports", type=Path, nargs="+", help="bench.json files")
    args = p.parse_args(argv)
    profile = read_profile(next(shipped_dir().glob("cuda-nvidia-h200-*.json")))
    profiles = SimpleNamespace(entries=profile.entries,
                               sources={k: "shipped" for k in profile.entries})
    usable = triton_strategies()
    then, now, untimed, changed = [], [], [], 0
    for path in args.reports:
        for row in json.loads(path.read_text())["rows"]:
            flat = row["device_us"].get("flat_heuristic")
            if not row.get("held_out") or not flat:
                continue
            key = ProblemKey(row["algorithm"], row["N"], row["T"], a=row["A"],
                             dtype=row["dtype"], layout=row["layout"], flags=row["flags"])
            d = next(decide.nearest_decisions(key, profiles, usable), None) or \
                decide.heuristic_decision(key, {"sm_count": H200_SMS}, usable)
            t = timed_configs(row, profiles, usable).get(_config(d.strategy, d.params))
            if t is None:
                untimed.append(f"{key.as_text()}: {d.strategy} {d.params}")
                continue
            changed += _config(d.strategy, d.params) != _config(row["strategy"], row["params"])
            then.append(flat / row["device_us"]["dispatched"])
            now.append(flat / t)

    def line(name: str, xs: list[float]) -> str:
        g = math.exp(sum(map(math.log, xs)) / len(xs))
        return (f"{name}: geomean {g:.3f}x over flat, worst {min(xs):.3f}x, "
                f"{sum(x < 0.97 for x in xs)} of {len(xs)} cells below 0.97x")

    print(line("as measured", then))
    print(line("current dispatch", now) + f" ({changed} choices changed)")
    print(f"{len(untimed)} held-out cells whose current choice was not timed in the run:")
    for u in untimed:
        print("  " + u)
    return 0


if __name__ == "__main__":
    sys.exit(main())
