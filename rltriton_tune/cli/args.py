"""The command line's grammar: presets, argument types, devices and the parser."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rltriton_tune import __version__
from rltriton_tune.algorithms import ALGORITHMS, ESTIMATOR_NAMES
from rltriton_tune.tune.keys import SHIP_SHAPES, grid_keys

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


class DeviceError(RuntimeError):
    """The requested device is not available."""


class CLIError(RuntimeError):
    """A problem reported as one line on stderr with exit status 1."""


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
                   "most-called first (instead of the preset's grid), as recorded: "
                   "--algorithms narrows them; the shape, dtype, layout and flag options "
                   "do not apply")
    t.add_argument("--borrowing", action="store_true",
                   help="instead of tuning, measure how well entries' configs serve their "
                   "neighbours' keys (other flag set, dtype, layout, shape) and store the "
                   "factors dispatch borrows by in the user's profile")
    t.add_argument("--missing-only", action="store_true",
                   help="skip keys that already have an entry measured with this torch and "
                   "Triton in the user's profile (resumes a long grid run); with --refresh, "
                   "entries already refreshed on this stack")
    t.add_argument("--trials", type=_positive(int), help="trials per key (default: preset's)")
    t.add_argument("--timeout", type=_positive(float),
                   help="seconds per key for trials in this run; a key short of its trial "
                   "budget then records nothing and resumes on the next run")
    t.add_argument("--max-seconds", type=_positive(float),
                   help="stop starting trials after this many seconds in all; keys whose "
                   "budget is complete are recorded, the rest resume on the next run (grid "
                   "keys run coarse to fine, so a run cut short covers the whole grid); with "
                   "--refresh, stop starting entries (--missing-only resumes)")
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
                   "this software stack: each stored config against its runner-up, its "
                   "off-grid configs, the built-in rules' config, rl-triton's config, related "
                   "entries' configs and itself with each other setting of a switch, at the "
                   "key and at its companions (off-grid shapes, other flag sets); the one "
                   "that serves them best is recorded, with an off-grid config for each side "
                   "of the key's steps where another serves partly filled spans better")
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


def _flag_sets(text: str) -> list[str]:
    from rltriton_tune.algorithms import FLAG_NAMES, STARTS_AT

    known = set(FLAG_NAMES.values()) | {STARTS_AT, "none"}
    items = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in items if s != "common" and (
        not set(s.split("+")) <= known or ("none" in s.split("+") and s != "none"))]
    if not items or bad:
        raise argparse.ArgumentTypeError(
            f"invalid flag set {','.join(bad) or text!r}; flags are {', '.join(sorted(known))}"
            " joined by '+' ('none' alone), or 'common'")
    return items


def keys_of(args) -> list:
    """The keys a ``tune`` or ``bench`` run covers (see ``tune/keys.py``); CLIError where
    the options leave none (flag sets no estimator asked for takes)."""
    flags = list(args.flags) or [("trunc" if t == "on" else "none") for t in args.truncations]
    shapes = args.shapes or PRESETS[getattr(args, "preset", "default")]["shapes"]
    keys = grid_keys(args.algorithms, shapes, args.dtypes, args.layouts, flags, args.actions)
    if not keys:
        raise CLIError(f"no key to run: no estimator of --algorithms "
                       f"({','.join(args.algorithms)}) takes a flag set of --flags or "
                       f"--truncations ({','.join(flags)})")
    return keys
