"""Peer comparison: the dispatched choice of every estimator beside rl-triton 0.1.3,
torch.compile of the torch fallback and TorchRL's functional estimator, on the same
inputs.

Cells: every estimator x shapes (a grid of 8-32768 environments x 8-32768 steps plus
off-grid shapes such as 77x24 and 24000x300) x dtypes x layouts x the flag sets real
calls pass (none; GAE/V-trace with ``last_value``; traces/prefix sums with
``seed_values``; truncations with bootstrap values; Retrace always with truncations).

Per cell and peer: device time in microseconds (CUDA: median CUDA-graph replay of
launches over input copies rotated past the L2 cache, ``tune.measure.time_cuda``) and
host time of back-to-back full calls; on CPU both are the median wall time. Where the
dispatched call and rl-triton come within 15% of each other, both are timed a second
time in the other order and each gets the mean of its two rounds (``device_us_rounds``
keeps them). Each peer's
outputs are checked against the dispatched call's once per cell (``agree``).

Rows are appended to ``peers.jsonl`` in the output folder as cells finish, so a run
that stops loses at most one cell; ``--resume`` skips cells already measured with this
device and software, ``--shard i/k`` or ``--estimators`` split the work into shorter runs,
``--max-seconds`` stops cleanly between cells. ``--update`` measures the
cells asked for again (after a profile changed, say) and keeps the rest: a cell's newest
row is the one every reader takes (:func:`read_rows`). ``peers.csv`` is rewritten from
the rows at the end of each run. On the H200:

    pip install /path/to/rl_triton-0.1.3-py3-none-any.whl   # optional peer, MIT
    # float32 (rl-triton takes nothing else): ~1600 cells, in four shards
    python benchmarks/peers.py --dtypes float32 --shard 0/4 --resume --max-seconds 600
    python benchmarks/peers.py --dtypes bfloat16 --peers torchrl --shard 0/4 --resume ...
    # after tuning time-major 32768x128: those cells again, the others kept
    python benchmarks/peers.py --update --layouts time --shapes 32768x128 --peers rl_triton
    python benchmarks/benchmarks_md.py --readme README.md

CPU smoke run (seconds; meaningless timings): ``python benchmarks/peers.py --smoke
--output /tmp/peers``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import platform
import random
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from peer_adapters import (  # noqa: E402
    Adapter,
    PeerUnavailable,
    compile_adapter,
    portable_source,
    rl_triton_adapter,
    rl_triton_version,
    torchrl_adapter,
)

from rltriton_tune import explain  # noqa: E402
from rltriton_tune.algorithms import ESTIMATOR_NAMES  # noqa: E402
from rltriton_tune.call import ProblemKey  # noqa: E402
from rltriton_tune.estimators import ESTIMATORS  # noqa: E402
from rltriton_tune.problems import data_bytes, random_inputs  # noqa: E402
from rltriton_tune.tune.measure import copies_needed, time_cpu, time_cuda  # noqa: E402

GRID_N = (8, 64, 256, 1024, 4096, 32768)
GRID_T = (8, 32, 128, 512, 2048, 8192, 32768)
#: Shapes off every tuning grid: odd sizes of real rollouts.
OFF_GRID = ((77, 24), (24000, 300), (8, 1000), (300, 2800), (1000, 200), (3000, 40),
            (6000, 180), (100, 3000), (9, 20000), (1500, 1500), (20000, 100), (777, 77))
SMOKE_SHAPES = ((77, 24),)
DTYPES = ("float32", "bfloat16")
LAYOUTS = ("env", "time")
#: Flag sets per estimator (key flag text): what training code passes.
FLAG_SETS: dict[str, tuple[str, ...]] = {
    "gae": ("none", "last_value", "bootstrap+trunc"),
    "vtrace": ("none", "last_value", "bootstrap+trunc"),
    "lambda_returns": ("none", "bootstrap+trunc"),
    "discounted_returns": ("none", "bootstrap+trunc"),
    "eligibility_traces": ("none", "seed"),
    "episodic_prefix_sum": ("none", "seed"),
    "retrace": ("trunc",),
}
RETRACE_A = 8
#: Cells moving more than this are skipped (input copies and peers' temporaries).
MAX_CELL_BYTES = 4 * 2**30
PEERS = ("rl_triton", "torch_compile", "torchrl")
#: Peers timed unless --peers says otherwise (torch.compile compiles each shape anew:
#: seconds a cell).
DEFAULT_PEERS = ("rl_triton", "torchrl")
#: TorchRL's V-trace loops over T in Python and its GAE convolves over T: longer cells
#: would take minutes each.
TORCHRL_MAX_T = 2048
#: A slow peer's graph holds enough input copies to last about this long (a call that
#: slow gains nothing from a warm L2); others rotate as many copies as ours.
GRAPH_TARGET_S = 0.02
#: Peers whose one call takes longer than this get fewer copies (above).
SLOW_CALL_S = 1e-3
DISPATCHED = "dispatched"
#: Output agreement tolerance per dtype (relative to the output's scale).
TOLERANCE = {"float32": 1e-3, "bfloat16": 5e-2}


# ---------------------------------------------------------------- cells


#: Cells whose first-round ratio to rl-triton lies within this of 1 are timed twice
#: (``settle_close``): on the H200, two timings of one kernel in one process differ by up
#: to a few percent, and by up to 10% between processes.
CLOSE = 0.15


def cells(estimators: tuple[str, ...], shapes: tuple[tuple[int, int], ...],
          dtypes: tuple[str, ...], layouts: tuple[str, ...],
          min_bytes: int = 0) -> list[ProblemKey]:
    """Every key to measure, in a fixed order (shards split this list); with
    ``min_bytes``, only those whose data (``problems.data_bytes``) is at least that."""
    out = []
    for algorithm in estimators:
        a = RETRACE_A if algorithm == "retrace" else 0
        for flags in FLAG_SETS[algorithm]:
            for dtype in dtypes:
                for layout in layouts:
                    for n, t in shapes:
                        key = ProblemKey(algorithm, n, t, dtype, layout, flags, a)
                        if min_bytes <= data_bytes(key) <= MAX_CELL_BYTES:
                            out.append(key)
    return out


def shard(keys: list[ProblemKey], spec: str | None) -> list[ProblemKey]:
    """The ``i``-th of ``k`` interleaved parts of ``keys`` for ``spec = "i/k"``."""
    if not spec:
        return keys
    try:
        i, k = (int(x) for x in spec.split("/"))
    except ValueError:
        raise SystemExit(f"--shard must look like 0/4, got {spec!r}") from None
    if not 0 <= i < k:
        raise SystemExit(f"--shard {spec}: need 0 <= i < k")
    return keys[i::k]


# ---------------------------------------------------------------- measuring


def software(device: torch.device) -> dict[str, Any]:
    """What a row's numbers depend on besides the cell."""
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    name = (torch.cuda.get_device_name(device) if device.type == "cuda"
            else platform.processor() or platform.machine())
    return {"device_name": name, "torch": torch.__version__, "triton": triton_version,
            "rl_triton": rl_triton_version()}


def _time(adapter: Adapter, args: list[Any], device: torch.device,
          budget_s: float) -> tuple[float, float]:
    run = adapter.run
    if device.type == "cuda":
        timing = time_cuda(run, args, device, budget_s)  # rotated copies, graph replays
    else:
        timing = time_cpu(run, args[0], budget_s)
    return timing.device_us, timing.host_us


def _call_seconds(adapter: Adapter, args: Any, device: torch.device) -> float:
    """Wall time of one call, device work included."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda *_: None)
    sync(device)
    start = time.perf_counter()
    adapter.run(args)
    sync(device)
    return time.perf_counter() - start


def _agree(ours: tuple[torch.Tensor, ...], theirs: tuple[torch.Tensor, ...],
           dtype: str) -> bool:
    if len(ours) != len(theirs):
        return False
    for x, y in zip(ours, theirs, strict=True):
        x, y = x.float(), y.float()
        if x.shape != y.shape:
            return False
        if not x.numel():
            continue
        # NaN compares false with everything, so a plain "difference above tolerance"
        # test passed NaN outputs: NaN and infinities must sit in the same places, and the
        # scale is read from the finite values alone.
        special = ~torch.isfinite(x) | ~torch.isfinite(y)
        xs, ys = x[special], y[special]
        nan = xs.isnan()
        if not torch.equal(nan, ys.isnan()) or not torch.equal(xs[~nan], ys[~nan]):
            return False
        finite = ~special
        if finite.any():
            scale = max(1.0, x[finite].abs().max().item())
            if (x[finite] - y[finite]).abs().max().item() > TOLERANCE[dtype] * scale:
                return False
    return True


def peer_adapters(key: ProblemKey, device: torch.device, peers: tuple[str, ...],
                  compile_on_cpu: bool) -> tuple[dict[str, Adapter], dict[str, str]]:
    """The adapters that can run ``key`` here, and why the others cannot."""
    found: dict[str, Adapter] = {}
    errors: dict[str, str] = {}
    for peer in peers:
        try:
            if peer == "rl_triton":
                found[peer] = rl_triton_adapter(key.algorithm, device, key.dtype,
                                                key.time_major)
            elif peer == "torchrl":
                if key.t > TORCHRL_MAX_T:
                    raise PeerUnavailable(f"skipped above T = {TORCHRL_MAX_T} (TorchRL loops "
                                          "or convolves over time)")
                found[peer] = torchrl_adapter(key.algorithm, key.time_major)
            elif peer == "torch_compile":
                if device.type != "cuda" and not compile_on_cpu:
                    raise PeerUnavailable("timed on CUDA only (inductor's CPU build is slow)")
                for scan in ("associative", "doubling"):
                    found[f"{peer}_{scan}"] = compile_adapter(key, scan)
        except PeerUnavailable as exc:
            errors[peer] = str(exc)
    return found, errors


def settle_close(device_us: dict[str, float], pair: tuple[str, str],
                 time_again: Any, close: float = CLOSE) -> dict[str, list[float]]:
    """Time the two of ``pair`` a second time, in ``pair``'s order (the reverse of the
    first round's), where the first round's ratio lies within ``close`` of 1 (a verdict
    that noise between timings could flip); each then gets the mean of its two rounds in
    ``device_us``. Returns the rounds of each (empty when the first round was clear)."""
    first = {name: device_us.get(name) for name in pair}
    if not all(first.values()) or abs(math.log(first[pair[0]] / first[pair[1]])) > \
            math.log1p(close):
        return {}
    rounds = {name: [first[name], time_again(name)] for name in pair}
    for name, values in rounds.items():
        device_us[name] = sum(values) / len(values)
    return rounds


def as_users_pass(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` made valid for every peer, as real rollouts are: a step is terminated or
    truncated, not both, and bootstrap values are zero except at truncated steps and the
    last step (rl-triton adds them to the next value everywhere). Timing is unchanged."""
    trunc = kwargs.get("truncateds")
    if trunc is None:
        return kwargs
    out = dict(kwargs)
    cut = trunc != 0
    if "terminateds" in out:
        out["terminateds"] = torch.where(cut, torch.zeros_like(out["terminateds"]),
                                         out["terminateds"])
    if out.get("bootstrap_values") is not None:
        keep = cut.clone()
        if out.get("time_major"):
            keep[-1, :] = True
        else:
            keep[:, -1] = True
        boot = out["bootstrap_values"]
        out["bootstrap_values"] = torch.where(keep, boot, torch.zeros_like(boot))
    return out


def measure(key: ProblemKey, device: torch.device, peers: tuple[str, ...],
            budget_s: float, compile_on_cpu: bool = False) -> dict[str, Any]:
    """One row: the dispatched choice and every peer on the same rotated inputs."""
    copies = copies_needed(key, device)
    base = as_users_pass(random_inputs(key, device, seed=0, on_device=device.type == "cuda"))
    inputs = [base] + [{k: v.clone() if isinstance(v, torch.Tensor) else v
                        for k, v in base.items()} for _ in range(copies - 1)]
    function = ESTIMATORS[key.algorithm]
    decision = explain(key.algorithm, key.n, key.t, dtype=key.dtype, layout=key.layout,
                       flags=key.flags, A=key.a, device=device)
    ours = function(**base)
    ours = ours if isinstance(ours, tuple) else (ours,)
    row: dict[str, Any] = {
        "cell": key.as_text(), "algorithm": key.algorithm, "N": key.n, "T": key.t,
        "A": key.a, "dtype": key.dtype, "layout": key.layout, "flags": key.flags,
        "grid": key.n in GRID_N and key.t in GRID_T, "bytes": data_bytes(key),
        "copies": copies, "strategy": decision.strategy, "params": dict(decision.params),
        "source": portable_source(decision.source), "device_us": {}, "host_us": {}, "agree": {},
        "errors": {}, "peer_copies": {}}
    dispatched = Adapter(lambda kw: kw, lambda kw: function(**kw))
    row["device_us"][DISPATCHED], row["host_us"][DISPATCHED] = _time(
        dispatched, inputs, device, budget_s)
    adapters, row["errors"] = peer_adapters(key, device, peers, compile_on_cpu)
    timed: dict[str, tuple[Adapter, list[Any]]] = {DISPATCHED: (dispatched, inputs)}
    for name, adapter in adapters.items():
        try:
            first = adapter.prepare(inputs[0])
            row["agree"][name] = _agree(ours, adapter.finish(adapter.run(first)), key.dtype)
            once = _call_seconds(adapter, first, device)  # after the warm-up above
            count = len(inputs) if once < SLOW_CALL_S else max(
                2, min(len(inputs), math.ceil(GRAPH_TARGET_S / once)))
            args = [first] + [adapter.prepare(kw) for kw in inputs[1:count]]
            row["device_us"][name], row["host_us"][name] = _time(adapter, args, device,
                                                                 budget_s)
            row["peer_copies"][name] = len(args)
            if name == "rl_triton":  # kept for a second round (settle_close); others freed
                timed[name] = (adapter, args)
        except Exception as exc:  # noqa: BLE001 - a peer's failure is a recorded result
            row["errors"][name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        finally:
            if device.type == "cuda":
                torch.cuda.empty_cache()
    if "rl_triton" in timed:
        try:
            rounds = settle_close(row["device_us"], ("rl_triton", DISPATCHED),
                                  lambda name: _time(*timed[name], device, budget_s)[0])
        except Exception as exc:  # noqa: BLE001 - the first round stands
            row["errors"]["second_round"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            rounds = {}
        if rounds:
            row["device_us_rounds"] = rounds
        del timed["rl_triton"]
    _best_compile(row)
    us = row["device_us"]
    row["speedup_rl_triton"] = (us["rl_triton"] / us[DISPATCHED]
                                if us.get("rl_triton") and us.get(DISPATCHED) else None)
    return row


def _best_compile(row: dict[str, Any]) -> None:
    """torch.compile's time is the faster of its two scans (which one is recorded)."""
    names = [n for n in ("torch_compile_associative", "torch_compile_doubling")
             if row["device_us"].get(n) is not None]
    if names:
        best = min(names, key=lambda n: row["device_us"][n])
        row["device_us"]["torch_compile"] = row["device_us"][best]
        row["host_us"]["torch_compile"] = row["host_us"][best]
        row["agree"]["torch_compile"] = row["agree"].get(best)
        row["torch_compile_scan"] = best.rsplit("_", 1)[1]


# ---------------------------------------------------------------- files


def read_rows(path: Path, key: Callable[[dict[str, Any]], Any] | None = None
              ) -> list[dict[str, Any]]:
    """Rows of a ``peers.jsonl`` file, one per cell (per ``key(row)`` where given): a cell
    measured again (``--update``) gives its newest row, in the place of its first. A torn
    last line from a killed run is skipped."""
    if not path.exists():
        return []
    rows: dict[Any, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        rows[row.get("cell", f"#{len(rows)}") if key is None else key(row)] = row
    return list(rows.values())


CSV_FIELDS = ("cell", "algorithm", "N", "T", "A", "dtype", "layout", "flags", "grid",
              "strategy", "source", "speedup_rl_triton")


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    """One line per cell: its key, the dispatched choice, each peer's device and host µs."""
    names = sorted({n for r in rows for n in r.get("device_us", {})})
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([*CSV_FIELDS, *(f"device_us_{n}" for n in names),
                         *(f"host_us_{n}" for n in names)])
        for r in rows:
            writer.writerow([r.get(k) for k in CSV_FIELDS]
                            + [r["device_us"].get(n) for n in names]
                            + [r["host_us"].get(n) for n in names])


def _done_cells(rows: list[dict[str, Any]], context: dict[str, Any]) -> set[str]:
    """Cells whose row (:func:`read_rows` gives each cell's newest) was measured with this
    device and software and records no failure (out of memory, say): ``--resume``
    measures the others again."""
    same = ("device_name", "torch", "triton", "rl_triton")
    return {r["cell"] for r in rows if all(r.get(k) == context[k] for k in same)
            and "cell" not in r.get("errors", {})}


def results_folder(device: torch.device) -> Path:
    """``benchmarks/results/<gpu>/``, e.g. ``h200`` for an NVIDIA H200."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    slug = name.lower().replace("nvidia", "").strip().split()[0] if name else "gpu"
    return Path(__file__).resolve().parent / "results" / slug


def run(keys: list[ProblemKey], device: torch.device, output: Path, peers: tuple[str, ...],
        resume: bool, max_seconds: float, budget_s: float,
        compile_on_cpu: bool = False, update: bool = False) -> Iterator[dict[str, Any]]:
    """Measure ``keys`` (less those done, with ``resume``), appending rows to the file;
    with ``update`` the file's other cells are kept, otherwise a run without ``resume``
    starts the file afresh."""
    output.mkdir(parents=True, exist_ok=True)
    jsonl = output / "peers.jsonl"
    context = {**software(device), "date": time.strftime("%Y-%m-%d", time.gmtime())}
    done = _done_cells(read_rows(jsonl), context) if resume else set()
    if not resume and not update and jsonl.exists():
        jsonl.unlink()  # a fresh run replaces the file this script wrote
    deadline = time.monotonic() + max_seconds
    for key in keys:
        if key.as_text() in done:
            continue
        if time.monotonic() > deadline:
            print("peers: --max-seconds reached; rerun with --resume to continue",
                  file=sys.stderr)
            break
        try:
            row = {**context, **measure(key, device, peers, budget_s, compile_on_cpu)}
        except Exception as exc:  # noqa: BLE001 - one failed cell must not end the run
            row = {**context, "cell": key.as_text(), "algorithm": key.algorithm, "N": key.n,
                   "T": key.t, "A": key.a, "dtype": key.dtype, "layout": key.layout,
                   "flags": key.flags, "device_us": {}, "host_us": {}, "agree": {},
                   "errors": {"cell": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"[:300]}}
            if device.type == "cuda":
                torch.cuda.empty_cache()
        with jsonl.open("a") as f:
            f.write(json.dumps(row) + "\n")
        yield row
    write_csv(read_rows(jsonl), output / "peers.csv")


def _line(row: dict[str, Any]) -> str:
    us = row["device_us"]
    if "cell" in row["errors"]:
        return f"{row['cell']:<58} failed: {row['errors']['cell']}"
    cells = " ".join(f"{n}={us[n]:.2f}" for n in (DISPATCHED, *PEERS) if us.get(n) is not None)
    ratio = row.get("speedup_rl_triton")
    return (f"{row['cell']:<58} {cells}"
            + (f"  x{ratio:.2f} vs rl-triton" if ratio else ""))


#: Bounds of ``--shapes random:K:SEED`` (log-uniform), and its size cap in elements.
RANDOM_N, RANDOM_T, RANDOM_MAX_ELEMS = (8, 32768), (8, 8192), 1 << 26


def random_shapes(count: int, seed: int) -> tuple[tuple[int, int], ...]:
    """``count`` shapes no tuning run has seen: environments and steps drawn log-uniform
    from :data:`RANDOM_N` and :data:`RANDOM_T` with ``seed``, both made odd (every grid
    and every profile entry has even sizes), at most :data:`RANDOM_MAX_ELEMS` elements
    (the steps shrink to fit). The same seed gives the same shapes."""
    rng = random.Random(seed)
    out: list[tuple[int, int]] = []
    while len(out) < count:
        n, t = (int(math.exp(rng.uniform(math.log(lo), math.log(hi)))) | 1
                for lo, hi in (RANDOM_N, RANDOM_T))
        most = RANDOM_MAX_ELEMS // n
        t = min(t, most if most & 1 else most - 1)
        if (n, t) not in out:
            out.append((n, t))
    return tuple(out)


def shape_set(text: str) -> str | tuple[tuple[int, int], ...]:
    """``--shapes``: a named set, ``random:K:SEED`` (see :func:`random_shapes`), or
    explicit ``NxT`` shapes (re-measuring single cells)."""
    if text in ("grid", "off-grid", "all"):
        return text
    if text.startswith("random:"):
        try:
            count, seed = (int(x) for x in text.split(":")[1:])
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"--shapes: expected random:COUNT:SEED, got {text!r}") from None
        if count < 1:
            raise argparse.ArgumentTypeError(f"--shapes: COUNT must be positive, got {text!r}")
        return random_shapes(count, seed)
    try:
        shapes = tuple((int(n), int(t)) for n, t in (part.lower().split("x")
                                                     for part in text.split(",")))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--shapes: expected grid, off-grid, all or NxT[,NxT...], got {text!r}") from None
    if any(n < 1 or t < 1 for n, t in shapes):
        raise argparse.ArgumentTypeError(f"--shapes: sizes must be positive, got {text!r}")
    return shapes


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--output", type=Path, help="results folder (default: benchmarks/results/"
                   "<gpu>/); rows go to peers.jsonl and peers.csv there")
    p.add_argument("--estimators", nargs="+", choices=sorted(ESTIMATOR_NAMES),
                   default=sorted(ESTIMATOR_NAMES))
    p.add_argument("--shapes", type=shape_set, default="all",
                   help="grid, off-grid, all, random:COUNT:SEED (shapes no tuning run has "
                        "seen: odd sizes drawn log-uniform, the same for the same seed), or a "
                        "comma list of NxT (e.g. 32768x128,777x77)")
    p.add_argument("--dtypes", nargs="+", choices=DTYPES, default=list(DTYPES))
    p.add_argument("--layouts", nargs="+", choices=LAYOUTS, default=list(LAYOUTS))
    p.add_argument("--peers", nargs="+", choices=PEERS, default=list(DEFAULT_PEERS),
                   help="peers to time (default: rl_triton torchrl; torch_compile compiles "
                        "every shape, seconds a cell)")
    p.add_argument("--min-mb", type=float, default=0.0,
                   help="only cells moving at least this many MiB (bandwidth-bound cells, "
                        "e.g. 64 for the time-major against env-major comparison)")
    p.add_argument("--shard", help="i/k: measure every k-th cell from the i-th")
    keep = p.add_mutually_exclusive_group()
    keep.add_argument("--resume", action="store_true",
                      help="keep peers.jsonl and skip cells it holds for this device/software")
    keep.add_argument("--update", action="store_true",
                      help="keep peers.jsonl and measure the cells asked for again: their new "
                           "rows replace the old ones in every report")
    p.add_argument("--max-seconds", type=float, default=math.inf,
                   help="stop between cells after this long (then --resume)")
    p.add_argument("--budget", type=float, default=0.1, help="timing seconds per peer")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--smoke", action="store_true",
                   help="CPU check of the code path: 77x24, float32, seconds")
    args = p.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        p.error("no CUDA device (use --device cpu or --smoke)")
    grid = tuple((n, t) for n in GRID_N for t in GRID_T)
    named = {"grid": grid, "off-grid": OFF_GRID, "all": grid + OFF_GRID}
    shapes = named[args.shapes] if isinstance(args.shapes, str) else args.shapes
    dtypes = tuple(args.dtypes)
    if args.smoke:
        device, shapes, dtypes, args.budget = torch.device("cpu"), SMOKE_SHAPES, ("float32",), 0.01
    output = args.output or results_folder(device)
    keys = shard(cells(tuple(args.estimators), shapes, dtypes, tuple(args.layouts),
                       int(args.min_mb * 2**20)), args.shard)
    print(f"peers: {len(keys)} cells on {device} -> {output}/peers.jsonl", file=sys.stderr)
    for row in run(keys, device, output, tuple(args.peers), args.resume, args.max_seconds,
                   args.budget, update=args.update):
        print(_line(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
