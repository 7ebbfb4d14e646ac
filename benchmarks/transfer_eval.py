"""How well does a tuned entry transfer to a shape it was not tuned on? (offline)

For each exhaustive table in ``search_quality/`` (every config of one key timed on
the H200), drop that key's own entry from the shipped profile and take the
nearest entry within ``decide.SURVEY_DISTANCE`` (moved to the key's shape, as
dispatch moves it), or the built-in heuristic when none is that near. The chosen config's time
is looked up in the table and compared with the table's best, next to the
built-in heuristic's choice. The flat kernel's ``num_stages`` is a no-op (no
loop; NOTES.md), so flat configs are looked up at ``num_stages=1``. A config
outside the swept space (valid, but never timed) shows as "-". No GPU needed.

    python benchmarks/transfer_eval.py [--tables benchmarks/results/search_quality]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from entries_from_bench import H200_SMS, shipped_h200_profile, shipped_view  # noqa: E402

from rltriton_tune.call import ProblemKey  # noqa: E402
from rltriton_tune.dispatch import decide  # noqa: E402
from rltriton_tune.dispatch.registry import triton_strategies  # noqa: E402
from rltriton_tune.tune.space import Candidate  # noqa: E402
from rltriton_tune.tuning_db.store import read_profile  # noqa: E402


def _label(strategy: str, params: dict) -> str:
    if strategy == "flat":
        params = {**params, "num_stages": 1}
    return Candidate(strategy, dict(params)).label()


def table_times(table: dict) -> dict[str, float]:
    """Label -> time of each timed config of an exhaustive table (the fastest reading where
    labels coincide, as flat's no-op ``num_stages`` makes them)."""
    times: dict[str, float] = {}
    for v in table.values():
        if v.get("device_us") is not None:
            label = _label(v["strategy"], v["params"])
            times[label] = min(times.get(label, v["device_us"]), v["device_us"])
    return times


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def replay_key(key: ProblemKey, times: dict[str, float], entries: dict,
               radius: float, reuse_moved: bool = False) -> dict:
    """What dispatch would run for ``key`` without its own entry in ``entries``: the
    nearest other entry within ``radius`` (entries tuned for another regime skipped, as
    dispatch does, unless ``reuse_moved``: then moved to ``key``'s shape; and as tuned),
    else the built-in heuristic, each as its time in ``times`` over the table's best."""
    best = min(times.values())
    others = {k: e for k, e in entries.items() if k != key.as_text()}
    profiles = shipped_view(others)
    usable = triton_strategies()
    heuristic = decide.heuristic_decision(key, {"sm_count": H200_SMS}, usable)
    nearest = next(decide.nearest_decisions(key, profiles, usable, radius,
                                            reuse_moved=reuse_moved), None)
    raw = next(decide.nearest_decisions(key, profiles, usable, radius, adapt=False,
                                        reuse_moved=True), None)
    found = nearest or heuristic

    def ratio(d) -> float | None:
        mine = None if d is None else times.get(_label(d.strategy, d.params))
        return None if mine is None else mine / best

    return {"key": key.as_text(), "source": found.source.split("@")[0],
            "choice": _label(found.strategy, found.params), "best_us": best,
            "ratio": ratio(found), "unmoved_ratio": ratio(raw or heuristic),
            "heuristic_ratio": ratio(heuristic), "nearest_ratio": ratio(nearest)}


def evaluate(table_path: Path, profile) -> dict:
    stem = table_path.stem.removeprefix("exhaustive_").removesuffix("_cuda")
    algorithm, shape = stem.rsplit("_", 1)
    n, t = (int(x) for x in shape.split("x"))
    times = table_times(json.loads(table_path.read_text()))
    # The entry's transfer, even where dispatch would not reuse it.
    return replay_key(ProblemKey(algorithm, n, t), times, profile.entries,
                      decide.SURVEY_DISTANCE, reuse_moved=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tables", type=Path,
                   default=Path(__file__).parent / "results" / "search_quality")
    p.add_argument("--profile", type=Path, help="profile file (default: the shipped H200 one)")
    args = p.parse_args(argv)
    path = args.profile or shipped_h200_profile()
    profile = read_profile(path)
    rows = [evaluate(f, profile) for f in sorted(args.tables.glob("exhaustive_*_cuda.json"))]
    print(f"{'key':40s} {'chosen/best':>11s} {'unmoved/best':>12s} {'heuristic/best':>14s}"
          "  source, choice")
    for r in rows:
        print(f"{r['key']:40s} {_ratio(r['ratio']):>11s} {_ratio(r['unmoved_ratio']):>12s} "
              f"{_ratio(r['heuristic_ratio']):>14s}  {r['source']}, {r['choice']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
