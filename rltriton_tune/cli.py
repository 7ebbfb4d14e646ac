"""The ``rltriton-tune`` command: doctor, tune, show, bench, export, import, clear.

Argument errors print usage and exit 2 (argparse); any other problem (a device
that is not there, a storage or folder that cannot be used, results that could
not be saved) prints one line on stderr and exits 1. No verb ends in a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rltriton_tune import __version__
from rltriton_tune.algorithms import ALGORITHMS, ESTIMATOR_NAMES
from rltriton_tune.tune.baselines import COMPILE, COMPILE_DOUBLING, best_compile
from rltriton_tune.tune.keys import SHIP_SHAPES, coverage_order, grid_keys

PROG = "rltriton-tune"

#: Shape grids and trial budgets: quick runs in CI on a CPU; default finishes all
#: seven algorithms in under 15 minutes on an H200; full is the big sweep.
PRESETS: dict[str, dict[str, Any]] = {
    "quick": {"shapes": [(64, 32), (256, 128)], "trials": 6},
    "default": {"shapes": [(256, 128), (4096, 8), (4096, 512), (32768, 32), (32768, 2048),
                           (16, 32768)], "trials": 16},
    "full": {"shapes": [(n, t) for n in (16, 64, 256, 1024, 4096, 16384, 32768, 131072)
                        for t in (8, 32, 128, 512, 2048, 8192) if n * t <= 1 << 28]
             + [(1, 1 << 20), (16, 32768)], "trials": 60},
    # The shipped-profile grid (see tune/keys.py); run with --flags common, both dtypes and
    # layouts, --missing-only and --max-seconds to build it in resumable pieces.
    "ship": {"shapes": SHIP_SHAPES, "trials": 16},
}
DEFAULT_ACTIONS = 8


#: Longest text printed in one table cell; longer values end in an ellipsis.
CELL_WIDTH = 40
#: Longest text of the choice column (strategy and parameters).
CHOICE_WIDTH = 64


class DeviceError(RuntimeError):
    """The requested device is not available."""


class CLIError(RuntimeError):
    """A problem reported as one line on stderr with exit status 1."""


# ---------------------------------------------------------------- argument types

def _csv(choices: Sequence[str], name: str, allow_all: bool = False):
    def parse(text: str) -> list[str]:
        items = [s.strip() for s in text.split(",") if s.strip()]
        if allow_all and items == ["all"]:
            return list(choices)
        bad = [s for s in items if s not in choices]
        if not items or bad:
            raise argparse.ArgumentTypeError(
                f"invalid {name} {','.join(bad) or text!r}; choose from {', '.join(choices)}"
                + (" or 'all'" if allow_all else ""))
        return list(dict.fromkeys(items))
    return parse


def _shapes(text: str) -> list[tuple[int, int]]:
    out = []
    for item in text.split(","):
        parts = item.strip().lower().split("x")
        try:
            n, t = (int(p) for p in parts)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"invalid shape {item.strip()!r}: expected NxT, e.g. 4096x128") from None
        if n < 1 or t < 1:
            raise argparse.ArgumentTypeError(f"invalid shape {item.strip()!r}: N, T must be >= 1")
        out.append((n, t))
    return out


def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
        return value
    return parse


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def _device_list(text: str) -> list[str]:
    items = [s.strip() for s in text.split(",") if s.strip()]
    if not items:
        raise argparse.ArgumentTypeError("expected GPU indices, e.g. 0,1")
    out = []
    for s in items:
        s = s.removeprefix("cuda:")
        if not s.isdigit():
            raise argparse.ArgumentTypeError(f"invalid GPU index {s!r}; expected e.g. 0,1")
        out.append(f"cuda:{int(s)}")
    return out


def resolve_device(text: str | None):
    """The torch device for ``--device`` (default: CUDA if present, else CPU)."""
    import torch

    if text is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise DeviceError(f"invalid --device {text!r}; expected cpu, cuda or cuda:N") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError(f"--device {text}: no CUDA GPU is available on this machine")
        index = device.index or 0
        if index >= torch.cuda.device_count():
            raise DeviceError(f"--device {text}: only {torch.cuda.device_count()} CUDA GPU(s)")
        return torch.device("cuda", index)
    if device.type != "cpu":
        raise DeviceError(f"--device {text}: only cpu and cuda devices can be tuned")
    return device


# ---------------------------------------------------------------- parser

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="Tune, inspect and ship rltriton-tune "
                                "kernel choices for this machine.")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    algos = list(ALGORITHMS)

    sub.add_parser("doctor", help="versions, device, fingerprint, profiles, sample decisions",
                   description="Show versions, the device fingerprint, the profile files found "
                   "(used or not, and why), and what each estimator dispatches to.")

    t = sub.add_parser("tune", help="search the best kernel config per problem key",
                       description="Run (or resume) an Optuna study per problem key and write "
                       "the winners to the user's profile.")
    t.add_argument("--algorithms", type=_csv(algos, "algorithm", allow_all=True),
                   default=list(algos), help="comma list or 'all' (default: all)")
    t.add_argument("--preset", choices=sorted(PRESETS), default="default",
                   help="shape grid and trial budget (default: default)")
    t.add_argument("--shapes", type=_shapes, help="NxT list overriding the preset's grid")
    _add_key_options(t)
    t.add_argument("--from-record", type=Path, metavar="FILE",
                   help="tune the keys a run recorded with RLTRITON_TUNE_RECORD=FILE, "
                   "most-called first (instead of the preset's grid)")
    t.add_argument("--borrowing", action="store_true",
                   help="instead of tuning, measure how well entries' configs serve their "
                   "neighbours' keys (other flag set, dtype, layout, shape) and store the "
                   "factors dispatch borrows by in the user's profile")
    t.add_argument("--missing-only", action="store_true",
                   help="skip keys that already have an entry measured with this torch and "
                   "Triton in the user's profile (resumes a long grid run); with --refresh, "
                   "entries already refreshed on this stack")
    t.add_argument("--trials", type=_positive(int), help="trials per key (default: preset's)")
    t.add_argument("--timeout", type=_positive(float), help="seconds per key for trials")
    t.add_argument("--max-seconds", type=_positive(float),
                   help="stop starting trials after this many seconds in all; keys whose "
                   "budget is complete are recorded, the rest resume on the next run (grid "
                   "keys run coarse to fine, so a run cut short covers the whole grid)")
    t.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda if present)")
    t.add_argument("--devices", type=_device_list, help="GPU indices: one worker per GPU")
    t.add_argument("--storage", help="Optuna storage URL (default: journal file beside the "
                   "profiles), e.g. postgresql://user@host/db")
    t.add_argument("--isolate", action="store_true",
                   help="evaluate candidates in a child process (survives GPU faults)")
    t.add_argument("--compile-workers", type=_non_negative_int, metavar="N",
                   help="processes compiling candidates in parallel on a GPU (default: one per "
                   "CPU core up to 16, shared among --devices; 0: threads in this process)")
    t.add_argument("--refresh", action="store_true",
                   help="re-time the entries this device uses (of --algorithms; with "
                   "--shapes, only those shapes in the --dtypes and --layouts asked for) on "
                   "this software stack: each stored config against its runner-up, the "
                   "built-in rules' config, rl-triton's config and itself with each other "
                   "setting of a switch (Retrace's REDUCE_A), at the key and at an off-grid "
                   "neighbour; the one that serves both best is recorded")
    t.add_argument("--seed", type=int, default=0, help="sampler seed (default 0)")
    t.add_argument("--no-compile-baseline", action="store_true",
                   help="skip measuring torch.compile (seconds of compilation per key)")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")

    s = sub.add_parser("show", help="list tuned entries", description="List the tuned entries "
                       "this device uses (or those of every known device).")
    s.add_argument("--algorithms", "--algorithm", dest="algorithms",
                   type=_csv(algos, "algorithm", allow_all=True), default=None,
                   help="comma list or 'all' (default: all)")
    s.add_argument("--device", help="whose entries: cpu, cuda or cuda:N (default: cuda if "
                   "present)")
    s.add_argument("--all-devices", action="store_true",
                   help="list the entries of every known device profile")
    s.add_argument("--format", choices=("table", "json"), default="table")

    e = sub.add_parser("export", help="write all profiles to a file",
                       description="Write the merged entries (shipped + user) to FILE, or "
                       "to standard output when FILE is - (no question asked; the count goes "
                       "to standard error).")
    e.add_argument("file", metavar="FILE", help="a file name, or - for standard output")
    e.add_argument("--force", action="store_true", help="replace FILE if it exists")
    i = sub.add_parser("import", help="validate and merge a profile file",
                       description="Validate FILE and add its entries to the user's profiles "
                       "(keys that already have an entry keep it). FILE - reads standard "
                       "input.")
    i.add_argument("file", metavar="FILE",
                   help="a profile file or export bundle, or - for standard input")
    c = sub.add_parser("clear", help="delete this device's profile and studies",
                       description="Delete the profile files this package wrote for this "
                       "device (or the named fingerprints, or all devices), their lock files "
                       "and their studies in the default journal. Asks first unless --yes.")
    c.add_argument("--fingerprint", action="append", metavar="ID",
                   help="a fingerprint id (the profile's file name without .json); repeatable")
    c.add_argument("--all-devices", action="store_true",
                   help="every device's profile, and the whole default study journal")
    c.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda if present)")
    c.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")

    b = sub.add_parser("bench", help="dispatched vs baselines; md/json/png report",
                       description="Measure the dispatched choice against the baselines and "
                       "write markdown, JSON and PNG heatmaps.")
    estimators = list(ESTIMATOR_NAMES)  # bench times the public functions
    b.add_argument("--algorithms", type=_csv(estimators, "algorithm", allow_all=True),
                   default=estimators, help="comma list or 'all' (default: all)")
    b.add_argument("--shapes", type=_shapes, help="NxT list (default: the default preset grid)")
    _add_key_options(b)
    b.add_argument("--held-out", nargs="?", const=True, default=None, type=_shapes,
                   metavar="NxT,...", help="also measure shapes off every tuning grid "
                   "(default: a built-in list of 14 non-powers of two; or the shapes given)")
    b.add_argument("--oracle", action="store_true",
                   help="sweep each key's whole search space (slow; cached in OUTPUT/oracle)")
    b.add_argument("--oracle-seconds", type=_positive(float), metavar="S",
                   help="stop each key's oracle sweep after S seconds (the row is marked "
                   "incomplete; a later --oracle run resumes the sweep)")
    b.add_argument("--compile-workers", type=_non_negative_int, metavar="N",
                   help="processes compiling the oracle sweep (default: one per CPU core)")
    b.add_argument("--resume", action="store_true",
                   help="keep the rows of OUTPUT/bench.json measured on this device with "
                   "this software (the report is saved after every row)")
    b.add_argument("--compile-from", type=Path, nargs="+", default=[], metavar="JSON",
                   help="take the torch.compile baselines of these earlier bench.json files "
                   "(same GPU, torch and Triton) instead of compiling them again")
    b.add_argument("--budget", type=_positive(float), help="seconds of timing per config")
    b.add_argument("--device", help="cpu, cuda or cuda:N")
    b.add_argument("--output", type=Path, default=Path("bench-results"),
                   help="output folder (default: bench-results)")
    return p


def _add_key_options(p: argparse.ArgumentParser) -> None:
    """--dtypes, --layouts, --truncations, --actions: which variants of each shape."""
    p.add_argument("--dtypes", type=_csv(("float32", "float16", "bfloat16", "float64"), "dtype"),
                   default=["float32"], help="default: float32")
    p.add_argument("--layouts", type=_csv(("env", "time"), "layout"), default=["env"],
                   help="env (env-major [N, T]) and/or time (time-major); default: env")
    p.add_argument("--truncations", type=_csv(("off", "on"), "truncations value"),
                   default=["off"], help="keys without and/or with truncation flags")
    p.add_argument("--flags", type=_flag_sets, default=[],
                   help="flag sets, comma-separated, each '+'-joined (e.g. "
                   "none,last_value,bootstrap+trunc,seed), or 'common': the sets real calls "
                   "carry; a set an estimator does not take is skipped for it")
    p.add_argument("--actions", type=_positive(int), default=DEFAULT_ACTIONS,
                   help=f"action count A for retrace keys (default {DEFAULT_ACTIONS})")


# ---------------------------------------------------------------- helpers

def _flag_sets(text: str) -> list[str]:
    from rltriton_tune.algorithms import FLAG_NAMES, STARTS_AT

    known = set(FLAG_NAMES.values()) | {STARTS_AT, "none"}
    items = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in items if s != "common" and not set(s.split("+")) <= known]
    if not items or bad:
        raise argparse.ArgumentTypeError(
            f"invalid flag set {','.join(bad) or text!r}; flags are {', '.join(sorted(known))}"
            " joined by '+', or 'common'")
    return items


def _keys(args) -> list:
    """The keys a ``tune`` or ``bench`` run covers (see ``tune/keys.py``)."""
    flags = list(args.flags) or [("trunc" if t == "on" else "none") for t in args.truncations]
    shapes = args.shapes or PRESETS[getattr(args, "preset", "default")]["shapes"]
    return grid_keys(args.algorithms, shapes, args.dtypes, args.layouts, flags, args.actions)


def _missing(keys: list, device: Any) -> list:
    """``keys`` without an entry measured with this torch and Triton in the user's profile."""
    from rltriton_tune.dispatch.devices import device_fingerprint
    from rltriton_tune.tuning_db import load_profiles, user_dir
    from rltriton_tune.tuning_db.fingerprint import software_versions

    profiles = load_profiles(device_fingerprint(device))
    here = software_versions()
    done = {text for text, entry in profiles.entries.items()
            if entry.software == here and _inside(profiles.sources.get(text), user_dir())}
    return [k for k in keys if k.as_text() not in done]


def _inside(path: Any, folder: Path) -> bool:
    try:
        return path is not None and Path(path).resolve().parent == folder.resolve()
    except OSError:
        return False


def _params_text(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(params.items()))


def _cell(text: str, limit: int = CELL_WIDTH) -> str:
    """``text`` on one line and at most ``limit`` characters (an ellipsis marks a cut);
    control characters (a terminal escape read from a profile, say) shown escaped."""
    text = " ".join(str(text).split())
    if not text.isprintable():
        text = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    rows = [[_cell(c, CHOICE_WIDTH if h == "choice" else CELL_WIDTH)
             for h, c in zip(headers, r, strict=True)] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out)


def _speedup(entry_us: float, base: float | None) -> str:
    return "-" if not base else f"{base / entry_us:.2f}x"


def _time_header(device: Any) -> str:
    """What an entry's time is on ``device``: GPU time of the kernels, or host wall time."""
    return "device us" if device.type == "cuda" else "host us"


def _ask(question: str, flag: str) -> bool:
    """Ask a yes/no question on the terminal; without one, raise :class:`CLIError`
    naming ``flag``, the option that answers yes."""
    if not sys.stdin or not sys.stdin.isatty():
        raise CLIError(f"not confirmed: no terminal to ask {question!r} on; pass {flag} "
                       "to go ahead")
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def _writable_db() -> Path:
    """The user's profile folder, created if missing; :class:`CLIError` (before any
    work) when it is a file or cannot be written."""
    from rltriton_tune.tuning_db import DB_ENV, user_dir

    folder = user_dir()
    hint = f"set {DB_ENV} to a writable folder"
    if folder.exists() and not folder.is_dir():
        raise CLIError(f"profile folder {folder} is not a folder; {hint}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise CLIError(f"profile folder {folder} cannot be written "
                       f"({exc.strerror or exc}); {hint}") from None
    return folder


def _save_unsaved(device: Any) -> str | None:
    """Entries of this run that only live in memory (their folder refused the write):
    write them to a new file in the temporary folder and return the line telling the
    user where they are and how to keep them (None when everything was saved)."""
    from rltriton_tune.dispatch.devices import device_fingerprint
    from rltriton_tune.tuning_db import DB_ENV, Profile, load_profiles
    from rltriton_tune.tuning_db.schema import dumps

    fp = device_fingerprint(device)
    loaded = load_profiles(fp)
    if not loaded.in_memory:
        return None
    entries = {t: loaded.entries[t] for t in loaded.in_memory}
    where = next(iter({loaded.sources[t] for t in entries}))
    fd, name = tempfile.mkstemp(prefix="rltriton-tune-unsaved-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(dumps(Profile(fp, entries).to_json()))
    return (f"could not save {len(entries)} tuned entries to {where}; they are in {name}: "
            f"set {DB_ENV} to a writable folder and run `{PROG} import {name}`")


def _add_row(rows: list[list[str]], errors: list[str], key: Any, entry: Any, trials: int,
             failed: int, error: str | None = None, kept: bool = False) -> None:
    """One line of tune's closing table, or the reason the key has none."""
    if error is not None:
        errors.append(f"{key.as_text()}: {error}")
        return
    if entry is None:
        errors.append(f"{key.as_text()}: no candidate passed ({failed} of {trials} trials failed)")
        return
    base = entry.baselines
    rows.append([key.as_text(), f"{entry.strategy}({_params_text(entry.params)})"
                 + (" (stored, kept)" if kept else ""),
                 f"{entry.device_time_us:.2f}",
                 _speedup(entry.device_time_us, base.get("flat_heuristic")),
                 _speedup(entry.device_time_us, best_compile(base)),
                 _speedup(entry.device_time_us, base.get("torch_loop")),
                 f"{trials - failed}/{trials}"])


# ---------------------------------------------------------------- verbs

def cmd_doctor(args) -> int:
    import torch

    from rltriton_tune.dispatch import explain
    from rltriton_tune.dispatch.registry import triton_ok
    from rltriton_tune.tuning_db import fingerprint_id, load_profiles, user_dir

    device = resolve_device(None)
    from rltriton_tune.dispatch.devices import device_fingerprint

    fp = device_fingerprint(device)
    try:
        import triton

        triton_text = triton.__version__
    except Exception as exc:  # noqa: BLE001
        triton_text = f"not importable ({type(exc).__name__})"
    print(f"python        {platform.python_version()}")
    print(f"torch         {torch.__version__}")
    if not triton_ok():
        kernels = "kernels not usable"
    elif device.type == "cuda":
        kernels = "kernels usable"
    else:
        kernels = "kernels need a CUDA GPU; none here, so the torch fallback runs"
    print(f"triton        {triton_text} ({kernels})")
    print(f"device        {device}")
    if device.type == "cuda":
        cap = torch.cuda.get_device_capability(device)
        print(f"gpu           {torch.cuda.get_device_name(device)}, capability {cap[0]}.{cap[1]}")
    print(f"fingerprint   {fingerprint_id(fp)}")
    print(f"              {json.dumps(fp, sort_keys=True)}")
    print(f"user profiles {user_dir()}")
    profiles = load_profiles(fp)
    print(f"profile files ({len(profiles.reports)}):")
    for report in profiles.reports:
        print(f"  [{'used' if report.used else 'not used'}] {_cell(str(report.path), 300)}: "
              f"{_cell(report.reason, 300)}")
    if not profiles.reports:
        print("  none")
    print(f"entries for this device: {len(profiles.entries)}")
    for line in _software_report(profiles):
        print(line)
    print("sample decisions (N=4096, T=128, float32, env-major; GAE also with last_value):")
    samples = [(alg, None) for alg in ESTIMATOR_NAMES] + [("gae", "last_value")]
    for alg, flags in samples:
        d = explain(alg, 4096, 128, A=DEFAULT_ACTIONS if alg == "retrace" else 0, flags=flags,
                    device=device)
        name = alg if flags is None else f"{alg}+{flags}"
        print(f"  {name:20s} {d.strategy}({_cell(_params_text(d.params), 160)})  {d.origin}: "
              f"{_cell(d.detail, 160)}")
    return 0


def _software_report(profiles: Any) -> list[str]:
    """Which torch/Triton versions the entries were measured with, against this process's."""
    from collections import Counter

    from rltriton_tune.tuning_db.fingerprint import software_versions

    here = software_versions()
    counts = Counter(tuple(sorted(e.software.items())) for e in profiles.entries.values())
    lines = [f"software      torch {here['torch']}, triton {here['triton']} in this process"]
    for versions, n in sorted(counts.items(), key=lambda item: -item[1]):
        measured = dict(versions)
        text = ", ".join(f"{k} {v}" for k, v in versions) or "versions not recorded"
        differs = [k for k, v in measured.items() if here.get(k) != v]
        note = (f"; differs in {', '.join(differs)}: used as measured, "
                "`rltriton-tune tune --refresh` re-times them here") if differs else ""
        lines.append(f"              {n} entries measured with {text}{note}")
    return lines


def cmd_tune(args) -> int:
    from tqdm import tqdm

    from rltriton_tune.tune.compile_pool import compile_pool_for
    from rltriton_tune.tune.space import SearchSpace
    from rltriton_tune.tune.storage import StorageError, open_storage
    from rltriton_tune.tune.study import (
        finalize,
        finished_trials,
        open_study,
        run_trials,
        tightest,
    )
    from rltriton_tune.tuning_db import Entry

    deadline = None if args.max_seconds is None else time.monotonic() + args.max_seconds
    preset = PRESETS[args.preset]
    trials = args.trials or preset["trials"]
    devices = [resolve_device(d) for d in args.devices] if args.devices else None
    device = devices[0] if devices else resolve_device(args.device)
    _writable_db()  # before any work: results that cannot be saved are not worth measuring
    if args.refresh:
        return _refresh(args, devices or [device])
    if args.borrowing:
        return _measure_borrowing(device, args.algorithms)
    if args.from_record is not None:
        from rltriton_tune.dispatch.devices import device_fingerprint
        from rltriton_tune.tune.keys import record_keys

        try:
            keys = record_keys(args.from_record, device_fingerprint(device))
        except (OSError, ValueError) as exc:
            print(f"{PROG}: --from-record: {exc}", file=sys.stderr)
            return 1
        if not keys:
            print(f"{PROG}: {args.from_record} records no key for this device; nothing to tune")
            return 0
    else:
        keys = coverage_order(_keys(args))
    if args.missing_only:
        keys = _missing(keys, device)
    where = "--storage" if args.storage is not None else "study journal"

    def open_key(key: Any) -> tuple[Any, Any]:
        """The key's search space and study, opened when its turn comes: opening every
        study up front costs time that grows with the square of the key count in a
        journal, and a run cut short by --max-seconds never needs the rest."""
        space = SearchSpace(key, device)
        try:
            return space, open_study(key, device, args.storage, trials=trials,
                                     seed=args.seed, space=space)
        except StorageError as exc:
            raise CLIError(f"{where}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - e.g. a database that refuses the study
            text = str(exc).strip().splitlines()
            hint = ("; a damaged journal can be moved aside (studies start afresh)"
                    if isinstance(exc, ValueError) else "")
            raise CLIError(f"{where}: cannot open the studies ({type(exc).__name__}: "
                           f"{text[0][:300] if text else ''}){hint}") from None

    try:
        open_storage(args.storage)  # checked before anything is written to it
    except StorageError as exc:
        raise CLIError(f"{where}: {exc}") from None
    parallel = bool(devices and len(devices) > 1)
    # Workers share the studies: each is created and seeded once, here, before they start
    # (with --seed, whichever worker reaches a key first). One device opens each study
    # when its key's turn comes, the first one here: a storage that refuses studies fails
    # before any work.
    for key in keys if parallel else keys[:1]:
        open_key(key)
    bar = tqdm(total=len(keys) * trials, desc="tuning", unit="trial", disable=args.no_progress,
               file=sys.stderr)
    errors: list[str] = []
    incomplete: list[str] = []  # stopped by --max-seconds: the next run resumes them
    rows: list[list[str]] = []
    skip = (COMPILE, COMPILE_DOUBLING) if args.no_compile_baseline else ()
    if parallel:
        from rltriton_tune.tune.parallel import run_workers

        summaries: dict[str, dict[str, Any]] = {}

        def on_event(kind: str, payload: Any) -> None:
            bar.update(kind == "trial")
            if kind == "finalized":
                summaries[payload["key"]] = payload

        errors += run_workers(keys, [str(d) for d in devices], trials=trials,
                              timeout_s=args.timeout, storage=args.storage,
                              isolate=args.isolate, seed=args.seed,
                              compile_workers=args.compile_workers, skip=skip,
                              max_seconds=args.max_seconds, on_event=on_event)
        bar.close()
        for key in keys:
            summary = summaries.get(key.as_text(), {"error": "no worker finalized it"})
            if summary.get("incomplete"):
                incomplete.append(f"{key.as_text()}: {summary['incomplete']}")
                continue
            entry = Entry.from_json(summary["entry"]) if summary.get("entry") else None
            _add_row(rows, errors, key, entry, summary.get("trials", 0),
                     summary.get("failed", 0), summary.get("error"))
    else:
        with compile_pool_for(device, args.compile_workers, args.isolate) as pool:
            for key in keys:
                bar.set_postfix_str(key.as_text())
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    incomplete.append(f"{key.as_text()}: not started")
                    continue
                try:
                    space, study = open_key(key)
                except CLIError as exc:  # e.g. a database gone mid-run: the other keys go on
                    _add_row(rows, errors, key, None, 0, 0, str(exc))
                    continue
                try:
                    run_trials(key, device, trials=trials, timeout_s=tightest(args.timeout, left),
                               study=study, isolate=args.isolate, seed=args.seed,
                               space=space, pool=pool, on_trial=lambda _t: bar.update(1))
                    done = len(finished_trials(study))
                    if done < trials:
                        incomplete.append(f"{key.as_text()}: {done} of {trials} trials")
                        continue
                    result = finalize(study, key, device, space=space,
                                      isolate=args.isolate, seed=args.seed, skip=skip)
                except Exception as exc:  # noqa: BLE001 - one bad key must not stop the rest
                    _add_row(rows, errors, key, None, 0, 0, f"{type(exc).__name__}: {exc}")
                    continue
                _add_row(rows, errors, key, result.entry, result.trials, result.failed,
                         kept=result.kept_stored)
        bar.close()
    print(_table(["key", "choice", _time_header(device), "vs flat", "vs compile", "vs loop",
                  "ok trials"], rows))
    for err in errors:
        print(f"{PROG}: warning: {err}", file=sys.stderr)
    if incomplete:
        print(f"{PROG}: --max-seconds reached; {len(incomplete)} key(s) resume on the next run "
              "with the same arguments:", file=sys.stderr)
        for line in incomplete:
            print(f"  {line}", file=sys.stderr)
    lost = [line for d in (devices or [device]) if (line := _save_unsaved(d))]
    if lost:
        raise CLIError("; ".join(lost))
    return 0 if rows or (incomplete and not errors) else 1


def _measure_borrowing(device: Any, algorithms: list[str]) -> int:
    from rltriton_tune.dispatch.decide import load_profiles, usable_strategies
    from rltriton_tune.dispatch.devices import device_fingerprint
    from rltriton_tune.tune.borrowing import factors, measure
    from rltriton_tune.tuning_db import fingerprint_id, user_dir
    from rltriton_tune.tuning_db.store import record_borrowing

    fp = device_fingerprint(device)
    profiles = load_profiles(fp)
    usable, reason = usable_strategies(device)
    if profiles is None or reason is not None:
        print(f"{PROG}: no usable profile on {device} ({reason or 'none loaded'})",
              file=sys.stderr)
        return 1
    subset = dataclasses.replace(profiles, index={}, entries={
        t: e for t, e in profiles.entries.items() if e.key.algorithm in algorithms})
    rows = measure(subset, device, usable)
    if not rows:
        print(f"{PROG}: no pair of entries to compare on {device}", file=sys.stderr)
        return 1
    found = factors(rows)
    evidence = user_dir() / f"borrowing-{fingerprint_id(fp)}.jsonl"
    evidence.parent.mkdir(parents=True, exist_ok=True)
    evidence.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(_table(["dimension", "pairs", "mean slowdown"],
                 [[d, str(sum(r["dimension"] == d for r in rows)), f"{f:.3f}x"]
                  for d, f in found.items()]))
    path = record_borrowing(fp, found)
    print(f"stored in {path}; the pairs measured are in {evidence}")
    return 0


def _refresh_progress(done: Any) -> None:
    """One line on stderr per entry refreshed (a run cut short still shows its work)."""
    what = "no config works" if done.new is None else (
        "replaced" if done.replaced else "kept")
    print(f"refreshed {done.key.as_text()}: {what}", file=sys.stderr, flush=True)


def _refresh(args, devices: list[Any]) -> int:
    """``tune --refresh``: re-time the stored entries of each device on this stack."""
    from rltriton_tune.tune.refresh import refresh
    from rltriton_tune.tuning_db.fingerprint import software_versions

    rows: list[list[str]] = []
    errors: list[str] = []
    shapes, dtypes, layouts = set(args.shapes or ()), set(args.dtypes), set(args.layouts)
    here = software_versions()

    def wanted(entry: Any) -> bool:
        """--shapes (with --dtypes, --layouts) picks entries; --missing-only skips those
        already refreshed on this software stack."""
        key = entry.key
        if shapes and not ((key.n, key.t) in shapes and key.dtype in dtypes
                           and key.layout in layouts):
            return False
        return not (args.missing_only and entry.software == here
                    and entry.extra.get("refreshed"))
    for device in devices:
        for done in refresh(device, args.algorithms, isolate=args.isolate, seed=args.seed,
                            wanted=wanted, on_entry=_refresh_progress):
            if done.new is None:
                errors.append(f"{done.key.as_text()}: kept as stored: {done.error}")
                continue
            rows.append([done.key.as_text(),
                         f"{done.old.strategy}({_params_text(done.old.params)})",
                         f"{done.old.device_time_us:.2f}",
                         f"{done.new.strategy}({_params_text(done.new.params)})",
                         f"{done.new.device_time_us:.2f}",
                         "replaced" if done.replaced else "kept"])
        lost = _save_unsaved(device)
        if lost:
            raise CLIError(lost)
    if rows:
        unit = _time_header(devices[0])
        print(_table(["key", "stored", f"stored {unit}", "choice", f"now {unit}", "result"],
                     rows))
    else:
        print("no stored entries to refresh")
    for err in errors:
        print(f"{PROG}: warning: {err}", file=sys.stderr)
    return 0 if rows or not errors else 1


def _all_entries(algorithms: list[str] | None,
                 fingerprints: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from rltriton_tune.tuning_db import load_profiles

    out = []
    for fp in fingerprints:
        for entry in load_profiles(fp).entries.values():
            if algorithms and entry.key.algorithm not in algorithms:
                continue
            row = entry.to_json()
            row["device"] = _cell(str(fp.get("name") or fp.get("kind")), 80)
            # A hostile profile can hold huge fingerprint values: bound what is printed.
            row["fingerprint"] = {k: _cell(v, 200) if isinstance(v, str) else v
                                  for k, v in fp.items()}
            out.append(row)
    out.sort(key=lambda r: (r["device"], r["algorithm"], r["dtype"], r["layout"], r["flags"],
                            r["N"], r["T"]))
    return out


def cmd_show(args) -> int:
    from rltriton_tune.dispatch.devices import device_fingerprint
    from rltriton_tune.tuning_db import known_fingerprints

    if args.all_devices:
        fingerprints = known_fingerprints()
    else:
        fingerprints = [device_fingerprint(resolve_device(args.device))]
    entries = _all_entries(args.algorithms, fingerprints)
    if args.format == "json":
        print(json.dumps(entries, indent=1))
        return 0
    if not entries:
        print("no tuned entries" + ("" if args.all_devices else
                                    " for this device (--all-devices lists the others)"))
        return 0
    rows = [[r["device"], r["algorithm"], f"{r['N']}x{r['T']}" + (f"x{r['A']}" if r["A"] else ""),
             r["dtype"], r["layout"], r["flags"],
             f"{r['strategy']}({_params_text(r['params'])})", f"{r['device_time_us']:.2f}",
             str(r.get("trials", "")), r.get("date", "")] for r in entries]
    print(_table(["device", "algorithm", "shape", "dtype", "layout", "flags", "choice",
                  "time us", "trials", "date"], rows))
    if not args.all_devices:
        kind = fingerprints[0].get("kind")
        print(f"(time us: {'GPU kernel time' if kind == 'cuda' else 'host wall time'}; "
              "--all-devices lists other devices' entries)")
    return 0


def cmd_export(args) -> int:
    from rltriton_tune.tuning_db import (
        ExportError,
        check_export_destination,
        export_profiles,
        export_text,
    )

    if args.file == "-":
        text, count = export_text()
        sys.stdout.flush()
        sys.stdout.buffer.write(text.encode("utf-8"))  # UTF-8 whatever the locale, as a file
        sys.stdout.flush()
        print(f"exported {count} entries to standard output", file=sys.stderr)
        return 0
    try:
        check_export_destination(args.file, overwrite=True)
        if os.path.lexists(args.file) and not args.force \
                and not _ask(f"{args.file} exists; replace it?", "--force"):
            print(f"{PROG}: export: {args.file} left as it was", file=sys.stderr)
            return 1
        count = export_profiles(args.file, overwrite=True)
    except (ExportError, OSError) as exc:
        raise CLIError(f"export: {exc.strerror or exc}" if not isinstance(exc, ExportError)
                       else f"export: {exc}") from None
    print(f"exported {count} entries to {args.file}")
    return 0


def cmd_import(args) -> int:
    from rltriton_tune.tuning_db import DB_ENV, ProfileError, WriteError, merge_profiles
    from rltriton_tune.tuning_db.schema import MAX_PROFILE_BYTES, profiles_from_text
    from rltriton_tune.tuning_db.store import read_profiles

    stdin = args.file == "-"
    source = "standard input" if stdin else args.file
    try:
        if stdin:
            profiles = profiles_from_text(sys.stdin.buffer.read(MAX_PROFILE_BYTES + 1), source)
        else:
            profiles = read_profiles(Path(args.file))
    except ProfileError as exc:
        where = source if stdin else f"FILE {source}"
        raise CLIError(f"import {where}: {exc.reason}") from None
    total = sum(len(p.entries) for p in profiles)
    _writable_db()
    try:
        count = merge_profiles(profiles)
    except WriteError as exc:
        raise CLIError(f"import: {exc}; nothing was kept: set {DB_ENV} to a writable folder "
                       "and import again") from None
    print(f"imported {count} entries from {source}")
    if total > count:
        print(f"kept the stored entry of {total - count} key(s) that already had one "
              f"(`{PROG} tune --refresh` re-times stored entries)")
    return 0


def cmd_clear(args) -> int:
    from rltriton_tune.dispatch.devices import device_fingerprint
    from rltriton_tune.tune.storage import (
        LOCK_SUFFIX,
        StorageError,
        check_journal,
        default_journal,
        delete_studies,
    )
    from rltriton_tune.tuning_db import fingerprint_id, owned_profiles, remove_profile, user_dir

    if args.all_devices:
        ids = None
    elif args.fingerprint:
        ids = set(args.fingerprint)
    else:
        ids = {fingerprint_id(device_fingerprint(resolve_device(args.device)))}
    targets = [path for path, fp in owned_profiles(user_dir())
               if ids is None or fingerprint_id(fp) in ids]
    journal = default_journal()
    try:
        has_journal = journal.is_file() and check_journal(journal) is not None
    except StorageError:
        has_journal = False  # not ours: left alone
    plan = [str(p) for p in targets]
    if has_journal:
        plan.append(str(journal) if ids is None else
                    f"the studies of {', '.join(sorted(ids))} in {journal}")
    if not plan:
        print("nothing to clear" + ("" if ids is None else
                                    f" for {', '.join(sorted(_cell(i) for i in ids))}"))
        return 0
    print("will delete:")
    for line in plan:
        print(f"  {line}")
    if not args.yes and not _ask(f"Delete {'these' if len(plan) > 1 else 'this'}?", "--yes"):
        print("nothing deleted")
        return 1
    removed: list[Path] = []
    try:
        for path in targets:
            removed += remove_profile(path)
        if has_journal and ids is None:
            for path in (journal, Path(f"{journal}{LOCK_SUFFIX}"), Path(f"{journal}.lock")):
                if path.exists():
                    path.unlink()
                    removed.append(path)
        elif has_journal:
            deleted = delete_studies(journal, ids)
            print(f"deleted {deleted} stud{'y' if deleted == 1 else 'ies'} from {journal}")
    except (OSError, StorageError) as exc:
        raise CLIError(f"clear: {getattr(exc, 'strerror', None) or exc}") from None
    finally:
        from rltriton_tune.tuning_db import invalidate_cache

        invalidate_cache()
    print(f"removed {len(removed)} file(s)")
    for path in removed:
        print(f"  {path}")
    return 0


def cmd_bench(args) -> int:
    from tqdm import tqdm

    from rltriton_tune.tune.bench import HELD_OUT_SHAPES, run_bench, write_report
    from rltriton_tune.tune.compile_pool import compile_pool_for
    from rltriton_tune.tuning_db.store import write_atomic

    device = resolve_device(args.device)
    keys = _keys(args)
    extra = HELD_OUT_SHAPES if args.held_out is True else args.held_out or []
    held_out = _keys(argparse.Namespace(**{**vars(args), "shapes": extra})) if extra else []
    if args.output.exists() and not args.output.is_dir():
        raise CLIError(f"bench --output {args.output} is a file; give a folder")
    saved = args.output / "bench.json"
    previous = None
    if args.resume and saved.exists():
        try:
            previous = _bench_report(saved)
        except (OSError, ValueError) as exc:
            print(f"{PROG}: warning: cannot resume from {saved} ({exc}); measuring every row",
                  file=sys.stderr)
    earlier = []
    for path in args.compile_from:
        try:
            earlier.append(_bench_report(path))
        except (OSError, ValueError) as exc:
            print(f"{PROG}: warning: --compile-from {path}: {exc}; compiling those baselines",
                  file=sys.stderr)
    try:
        args.output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CLIError(f"bench --output {args.output}: {exc.strerror or exc}") from None
    bar = tqdm(total=len(keys) + len(held_out), desc="bench", unit="key", file=sys.stderr)
    with compile_pool_for(device, args.compile_workers) as pool:
        report = run_bench(keys, device, held_out=held_out, budget_s=args.budget, pool=pool,
                           oracle_dir=args.output / "oracle" if args.oracle else None,
                           oracle_seconds=args.oracle_seconds,
                           progress=lambda _k: bar.update(1), previous=previous,
                           compile_from=earlier,
                           checkpoint=lambda partial: write_atomic(
                               saved, json.dumps(partial, indent=1) + "\n"))
    bar.close()
    for path in write_report(report, args.output):
        print(path)
    return 0


VERBS = {"doctor": cmd_doctor, "tune": cmd_tune, "show": cmd_show, "export": cmd_export,
         "import": cmd_import, "clear": cmd_clear, "bench": cmd_bench}


def _bench_report(path: Path) -> dict[str, Any]:
    """An earlier ``bench.json``: a JSON object (ValueError for anything else)."""
    report = json.loads(path.read_text())
    if not isinstance(report, dict):
        raise ValueError(f"not a bench report (a JSON {type(report).__name__}, not an object)")
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rltriton-tune`` console script."""
    args = build_parser().parse_args(argv)
    try:
        from rltriton_tune import dispatch

        dispatch.reset()  # a run reads the environment as it is when the run starts
        return VERBS[args.verb](args)
    except ValueError as exc:  # the environment cannot be read (e.g. a junk boolean)
        if not str(exc).startswith("RLTRITON_TUNE_"):
            raise
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except (DeviceError, CLIError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted (studies resume on the next run)", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (``show --format json | head``): stop quietly. Point stdout
        # at /dev/null so the interpreter's final flush cannot fail again.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 1


if __name__ == "__main__":
    sys.exit(main())
