"""Profile entries from a bench run: tuning-grid cells where the built-in heuristic's
config measured more than 3% faster than the shipped entry's, in the same row.
With ``--probe``, also from probe files (``rule_probe.json``, ``align_probe.json``,
``strategies.py``'s ``strategies_h200.json``):
keys with a shipped entry whose config the probe timed, and some other config it
timed more than 3% faster in the same batch (``"method": "probe"``).

A bench row times the dispatched config (the exact entry, on the grid) and the
built-in heuristic's side by side, so such a row is direct evidence that the entry
is stale. Output: entries (``show --format json`` form, ``"method": "bench"``) for
``ship_entries.py``, which keeps an entry only where it measured faster. Rows from
before bench recorded the heuristic's config (``row["heuristic"]``) get it from the
heuristic module at ``--heuristic-rev`` (the commit the run was made with). With
``--oracle``, the reports are ``bench --oracle`` runs and a grid row's entry is replaced
by the oracle's config where that measured more than 3% faster in the head-to-head
re-measurement (``"method": "oracle"``).

    python benchmarks/entries_from_bench.py benchmarks/results/bench_h200/*/bench.json \
        --heuristic-rev a22ad95 --output /tmp/bench_entries.json [--probe FILE ...]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType, SimpleNamespace
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from rltriton_tune.call import ProblemKey  # noqa: E402
from rltriton_tune.dispatch.decide import (  # noqa: E402
    Decision,
    exact_or_nearest,
    heuristic_decision,
)
from rltriton_tune.kernels import strategies  # noqa: E402
from rltriton_tune.tune.bench import row_key  # noqa: E402
from rltriton_tune.tune.space import Candidate  # noqa: E402
from rltriton_tune.tuning_db import shipped_dir  # noqa: E402
from rltriton_tune.tuning_db.store import read_profile  # noqa: E402

H200_SMS = 132
MARGIN = 1.03


def shipped_view(entries: dict) -> SimpleNamespace:
    """``entries`` as the profiles object dispatch's lookups take (every source "shipped")."""
    return SimpleNamespace(entries=entries, sources={k: "shipped" for k in entries})


def shipped_decision(key: ProblemKey, profiles, usable: dict, rules=None) -> Decision:
    """What dispatch runs for ``key`` on the H200 with ``profiles``: the exact entry, else
    the nearest one, else the built-in heuristic (``rules``: another revision's
    ``candidates``, see ``heuristic_at``)."""
    extra = {} if rules is None else {"rules": rules}
    return exact_or_nearest(key, profiles, usable, H200_SMS, **extra) or \
        heuristic_decision(key, {"sm_count": H200_SMS}, usable, **extra)


def shipped_h200_profile() -> Path:
    """The H200 profile file in the package's shipped profiles folder."""
    return next(shipped_dir().glob("cuda-nvidia-h200-*.json"))


#: Modules of ``rltriton_tune.dispatch`` that the rules import (``heuristic`` hands some
#: keys to them); a revision's replay loads its own copies where it has them.
RULE_MODULES = ("many_actions",)


def _module_at(rev: str, relpath: str, name: str) -> ModuleType | None:
    """The file ``relpath`` as it was at git revision ``rev``, imported as ``name``; None
    where the revision has no such file."""
    root = Path(__file__).resolve().parents[1]
    shown = subprocess.run(["git", "show", f"{rev}:{relpath}"], cwd=root,
                           capture_output=True, text=True)
    if shown.returncode:
        return None
    path = Path(tempfile.mkdtemp()) / f"{name}.py"
    path.write_text(shown.stdout)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


def heuristic_at(rev: str) -> ModuleType:
    """The ``dispatch.heuristic`` module as it was at git revision ``rev``, with the rule
    modules it imports (RULE_MODULES) as they were there too."""
    import rltriton_tune.dispatch as package

    with ExitStack() as stack:
        for name in RULE_MODULES:
            module = _module_at(rev, f"rltriton_tune/dispatch/{name}.py", f"{name}_at_{rev}")
            if module is not None:  # `from rltriton_tune.dispatch import X` finds this copy
                stack.enter_context(mock.patch.object(package, name, module, create=True))
        heuristic = _module_at(rev, "rltriton_tune/dispatch/heuristic.py", f"heuristic_at_{rev}")
    if heuristic is None:
        raise SystemExit(f"no rltriton_tune/dispatch/heuristic.py at {rev}")
    return heuristic


def _entry(key, strategy: str, params: dict, us: float, runner_up: dict, baselines: dict,
           trials: int, date: str, method: str, fingerprint) -> dict:
    return {"algorithm": key.algorithm, "N": key.n, "T": key.t, "A": key.a,
            "dtype": key.dtype, "layout": key.layout, "flags": key.flags,
            "strategy": strategy, "params": dict(params), "device_time_us": us,
            "runner_up": runner_up, "baselines": baselines, "trials": trials, "date": date,
            "method": method, "fingerprint": fingerprint}


def config_ident(strategy: str, params: dict) -> tuple:
    """A hashable identity of one config."""
    return strategy, tuple(sorted(params.items()))


def probe_timings(path: Path) -> dict[str, list[tuple[str, dict, float]]]:
    """Key text -> (strategy, params, device us) of every config a probe file timed,
    leaving out failed configs and kernel variants (``flat:no-hints(...)``). A
    ``strategies.py`` result file counts as a probe too: its CUDA-graph-timed, correct
    Triton configs (the dispatched one among them)."""
    data = json.loads(path.read_text())
    out: dict[str, list[tuple[str, dict, float]]] = {}
    if "records" in data:
        for rec in data["records"]:
            if rec.get("timing") != "cuda-graph" or not rec.get("correct") or \
                    rec["role"] == "compile" or not rec.get("device_us"):
                continue
            out.setdefault(row_key(rec).as_text(), []).append(
                (rec["strategy"], dict(rec["params"]), rec["device_us"]))
        return out
    for row in data["rows"]:
        cand = Candidate.from_label(row["config"])
        if not row.get("device_us") or ":" in cand.strategy:
            continue
        out.setdefault(row["key"], []).append((cand.strategy, cand.params, row["device_us"]))
    return out


def probe_entries(path: Path, shipped: dict, fingerprint) -> list[dict]:
    """Entries from a probe file: where the shipped entry's config was timed and beaten."""
    from rltriton_tune.call import ProblemKey
    from rltriton_tune.kernels.flat import rl_triton_params

    data = json.loads(path.read_text())
    date = data.get("date") or data.get("meta", {}).get("date") or \
        datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    out = []
    for key_text, configs in probe_timings(path).items():
        key = ProblemKey.from_text(key_text)
        entry = shipped.get(key_text)
        if entry is None:
            continue
        timed = {config_ident(name, params): (us, params) for name, params, us in configs}
        mine = timed.get(config_ident(entry.strategy, entry.params))
        (best_name, _), (best_us, best_params) = min(timed.items(), key=lambda kv: kv[1][0])
        if mine is None or best_us * MARGIN >= mine[0]:
            continue
        flat = timed.get(config_ident("flat", {"BLOCK_N": 1, **rl_triton_params(key.t)}))
        out.append(_entry(key, best_name, best_params, best_us,
                          {"strategy": entry.strategy, "params": dict(entry.params),
                           "device_time_us": mine[0]},
                          {"flat_heuristic": flat[0]} if flat else {}, len(timed),
                          date, "probe", fingerprint))
        print(f"{key_text}: {best_name} {best_params} {best_us:.2f} us "
              f"(entry's config {mine[0]:.2f} us)")
    return out


def oracle_entries(report: dict, fingerprint) -> list[dict]:
    """Entries from an ``--oracle`` bench report: grid rows dispatched from the profile whose
    oracle config measured more than MARGIN faster head to head (``oracle_dispatched_us``,
    see ``bench.confirm_oracle``) take that config (``"method": "oracle"``)."""
    out = []
    for row in report["rows"]:
        mine, best = row.get("oracle_dispatched_us"), row.get("oracle_us")
        if row.get("held_out") or not row["source"].startswith("profile:") or \
                not row.get("oracle_complete", True) or not mine or not best or \
                best * MARGIN >= mine:
            continue
        key, cand = row_key(row), Candidate.from_label(row["oracle"])
        out.append(_entry(key, cand.strategy, cand.params, best,
                          {"strategy": row["strategy"], "params": row["params"],
                           "device_time_us": mine},
                          {name: t for name, t in row["device_us"].items()
                           if name == "flat_heuristic" and t},
                          row.get("oracle_configs", 0), report.get("date", ""), "oracle",
                          fingerprint))
        print(f"{key.as_text()}: {cand.label()} {best:.2f} us (entry's config {mine:.2f} us)")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("reports", type=Path, nargs="*", help="bench.json files")
    p.add_argument("--heuristic-rev", help="git revision the run was made with (for rows "
                   "without a recorded heuristic config)")
    p.add_argument("--output", type=Path, required=True)
    p.add_argument("--probe", type=Path, nargs="*", default=[],
                   help="rule_probe.json / align_probe.json files")
    p.add_argument("--oracle", action="store_true",
                   help="the reports are --oracle runs: take each grid row's oracle config "
                   "where it beat the entry's head to head (instead of the heuristic's)")
    args = p.parse_args(argv)
    impls = strategies()
    old = heuristic_at(args.heuristic_rev) if args.heuristic_rev else None
    profile = read_profile(shipped_h200_profile())
    fingerprint = profile.fingerprint
    out = []
    for path in args.probe:
        out += probe_entries(path, profile.entries, fingerprint)
    for path in args.reports:
        report = json.loads(path.read_text())
        if args.oracle:
            out += oracle_entries(report, fingerprint)
            continue
        for row in report["rows"]:
            mine, theirs = row["device_us"].get("dispatched"), row.get("heuristic_us")
            if row.get("held_out") or not row["source"].startswith("profile:") or \
                    not mine or not theirs or theirs * MARGIN >= mine:
                continue
            key = row_key(row)
            config = row.get("heuristic")
            if config is None and old is not None:
                then = heuristic_decision(key, {"sm_count": H200_SMS}, impls, old.candidates)
                config = None if then is None else {"strategy": then.strategy,
                                                    "params": then.params}
            choice = None if config is None else (config["strategy"], config["params"])
            if choice is None:
                print(f"{key.as_text()}: heuristic config unknown, skipped", file=sys.stderr)
                continue
            out.append(_entry(key, choice[0], choice[1], theirs,
                              {"strategy": row["strategy"], "params": row["params"],
                               "device_time_us": mine},
                              {name: t for name, t in row["device_us"].items()
                               if name == "flat_heuristic" and t},
                              2, report.get("date", ""), "bench", fingerprint))
            print(f"{key.as_text()}: {choice[0]} {choice[1]} {theirs:.2f} us "
                  f"(entry's config {mine:.2f} us)")
    args.output.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
