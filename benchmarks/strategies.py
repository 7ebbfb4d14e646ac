"""Strategy sweep: every Triton strategy at its best config from a small sweep, against
rl-triton's flat kernel config, torch.compile baselines and the HBM floor, for the seven
estimators over an N x T grid.

Run on a CUDA machine from the repository root (about 5 minutes on one H200):

    python3 benchmarks/strategies.py --output benchmarks/results/h200

CPU smoke run of the code path (seconds; meaningless timings, kernels interpreted):

    TRITON_INTERPRET=1 python3 benchmarks/strategies.py --smoke --output /tmp/s

Phases: (1) plan every cell and its candidates; (2) warm Triton's on-disk cache
(and inductor's, for the compile baselines) in a pool of worker processes so the
timing process only loads compiled kernels; (3) per cell: build inputs once,
check every candidate against the torch fallback on the same inputs (wrong ones
are recorded, not timed), time the rest with ``tune.measure.time_cuda`` (CUDA-
graph replays over input copies rotated past L2); (4) write
``strategies.json`` and ``strategies.md`` (``strategies_report``).
``--max-seconds`` stops between cells and still writes what was measured.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import math
import multiprocessing as mp
import os
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from strategies_report import SLOW_FACTOR, SLOW_FLOOR_US  # noqa: E402

from rltriton_tune.algorithms import ALGORITHMS  # noqa: E402
from rltriton_tune.call import DTYPES_BY_NAME, Call, ProblemKey, flags_string  # noqa: E402
from rltriton_tune.problems import data_bytes, random_inputs  # noqa: E402
from rltriton_tune.strategy import InvalidConfig, Params  # noqa: E402
from rltriton_tune.tune.measure import sleep_cycles  # noqa: E402

GRID_N = (16, 256, 4096, 32768)
GRID_T = (8, 32, 128, 512, 2048, 8192, 32768)
QUICK_N = (16,)
QUICK_T = (8, 32)
#: Cells whose data exceeds this are skipped.
MAX_CELL_BYTES = 8 * 10**9
#: Cells above this get the bfloat16 pass and the 1.3x-floor target.
BIG_BYTES = 256 * 2**20
RETRACE_A = 8
#: Rows generated on the host per input; wider problems repeat them on the device.
BASE_ROWS = 256
#: GAE cells of the time-major pass and of the default compile baselines.
TIME_MAJOR_CELLS = ((32768, 8), (4096, 128), (32768, 512), (256, 2048), (16, 8192))
GAE_BASELINE_CELLS = ((32768, 8), (16, 32768), (32768, 2048), (4096, 128), (256, 2048),
                      (16, 512))
OTHER_BASELINE_CELLS = ((32768, 8), (4096, 512))
#: Compile baselines only on cells up to this size (they allocate several temporaries).
BASELINE_MAX_BYTES = 2 * 2**30
#: Seconds the probe keeps the device busy before its start event (longer than the host
#: needs to enqueue the launch).
PROBE_SLEEP_S = 1e-3
#: Input copies of a slow candidate's graph are capped so one replay lasts about this long.
REPLAY_TARGET_S = 0.004
SWEEP_ORDER = ("tiled", "flat", "split", "sequential", "lookback")
#: Below this T a look-back scan has one chunk per row: a tiled kernel with extra steps.
LOOKBACK_MIN_T = 512


@dataclass
class Candidate:
    """One thing to time in one cell: a Triton strategy config or a compile baseline."""

    strategy: str
    params: Params
    role: str = "sweep"  # "sweep", "rl_triton" (also swept), "dispatched" or "compile"
    #: The config ``decide`` picks for the cell's key on this machine (shipped profile,
    #: nearest entry or built-in heuristic); also set on a swept config that equals it.
    dispatched: bool = False


@dataclass
class Cell:
    key: ProblemKey
    purpose: str  # "grid", "bf16" or "time_major"
    candidates: list[Candidate] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)


# ---------------------------------------------------------------- inputs


def cell_bytes(key: ProblemKey) -> int:
    """Bytes an ideal kernel moves for the cell, whose 0/1 flags are in the key's dtype."""
    return data_bytes(key, flag_itemsize=DTYPES_BY_NAME[key.dtype].itemsize)


def cell_inputs(key: ProblemKey, device: torch.device, seed: int = 0) -> dict[str, Any]:
    """``random_inputs(key)`` built fast: at most BASE_ROWS rows are drawn on the host and
    repeated across N on the device (values repeat; timing and checks do not care).

    Every float input, the 0/1 flags included, has the key's dtype: a bfloat16 cell
    is a rollout stored in bfloat16, so it moves half the bytes of its float32 twin."""
    base_n = min(key.n, BASE_ROWS)
    kwargs = random_inputs(replace(key, n=base_n), "cpu", seed,
                           flag_dtype=DTYPES_BY_NAME[key.dtype])
    reps = math.ceil(key.n / base_n)
    spec = key.spec
    out: dict[str, Any] = {}
    for name, value in kwargs.items():
        if not isinstance(value, torch.Tensor):
            out[name] = value
            continue
        value = value.to(device)
        if reps > 1:
            dim = 0 if name in spec.per_env or not key.time_major else 1
            shape = [1] * value.dim()
            shape[dim] = reps
            value = value.repeat(*shape).narrow(dim, 0, key.n).contiguous()
        out[name] = value
    return out


def cell_call(key: ProblemKey, device: torch.device, seed: int = 0) -> Call:
    from rltriton_tune.estimators import prepare_call

    call = prepare_call(key.algorithm, **cell_inputs(key, device, seed))
    assert call is not None and call.key == key, (call and call.key, key)
    return call


# ---------------------------------------------------------------- planning


def pow2_floor(x: int) -> int:
    return 1 << (max(int(x), 1).bit_length() - 1)


def clamp(x: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, x))


#: (BLOCK_N, BLOCK_T, num_warps) of tiled configs that won cells of a 29-config H200 sweep.
DESIGN_TILED = ((16, 16, 1), (4, 16, 4), (4, 16, 1), (1, 64, 1), (1, 256, 4), (1, 256, 1),
                (1, 1024, 4), (1, 1024, 8))


def hand_picked(name: str, key: ProblemKey) -> list[Params]:
    """A handful of sensible configs of strategy ``name`` for ``key`` (before validation).
    Retrace keys get each also with the action pre-pass (``REDUCE_A=1``); time-major ones
    the pipelined whole-column tiles of the other estimators too, which the scan's
    ``[N, T]`` loads then suit."""
    out = _hand_picked(name, key)
    if not key.a:
        return out
    reduced = [{**p, "REDUCE_A": 1} for p in out]
    if name == "tiled" and key.time_major:
        reduced += [{**p, "REDUCE_A": 1}
                    for p in _time_major_tiles(replace(key, a=0))]
    return out + reduced


def _time_major_tiles(key: ProblemKey) -> list[Params]:
    """The widest whole-column blocks, then narrow ones, which give few-column keys more
    programs (see ``shapes.time_major_columns``)."""
    from rltriton_tune.kernels.shapes import time_major_columns

    return [time_major_columns(key),
            {"BLOCK_N": 32, "BLOCK_T": 32, "num_warps": 1, "num_stages": 3},
            {"BLOCK_N": 16, "BLOCK_T": 32, "num_warps": 1, "num_stages": 3},
            {"BLOCK_N": 16, "BLOCK_T": 32, "num_warps": 1, "num_stages": 5},
            {"BLOCK_N": 8, "BLOCK_T": 64, "num_warps": 1, "num_stages": 3}]


def _hand_picked(name: str, key: ProblemKey) -> list[Params]:
    from rltriton_tune.kernels.launch import next_pow2

    n, t = key.n, key.t
    bt_all = next_pow2(t)
    if name == "flat":
        from rltriton_tune.kernels.flat import rl_triton_params

        out = [rl_triton_params(t, key.algorithm)]
        for elems in (1024, 4096):
            bn = clamp(elems // bt_all, 1, min(64, next_pow2(n)))
            out.append({"BLOCK_N": bn, "num_warps": clamp(bn * bt_all // 256, 1, 16),
                        "num_stages": 1})
        return out
    if name == "tiled":
        # The winners of a 29-config H200 tiled sweep, then size-scaled picks.
        out = [{"BLOCK_N": bn, "BLOCK_T": min(bt, max(8, bt_all)), "num_warps": w,
                "num_stages": 1} for bn, bt, w in DESIGN_TILED]
        for bt, elems in ((64, 2048), (128, 4096), (1024, 4096)):
            bt = min(bt, max(8, bt_all))
            bn = clamp(elems // bt, 1, min(64, next_pow2(n)))
            out.append({"BLOCK_N": bn, "BLOCK_T": bt, "num_warps": clamp(bn * bt // 256, 1, 8),
                        "num_stages": 1})
        if key.time_major and not key.a:  # whole columns a thread, pipelined
            out += _time_major_tiles(key)
        return out
    if name == "split":
        if t < 512:
            return []
        out = []
        if n <= 256 and t >= 8192:  # few rows, long T: the split core's home ground
            out += [{"CHUNK_T": chunk, "BLOCK_N": bn, "BLOCK_T": min(bt, chunk),
                     "num_warps": w, "CARRY_BLOCK": 64}
                    for chunk in (256, 512) for bn, bt, w in ((1, 256, 2), (2, 256, 4),
                                                             (16, 128, 8))]
        for parts, bn in ((256, 1), (64, 4)):
            chunk = max(256, pow2_floor(bt_all // parts))
            bt = min(1024, chunk) if bn == 1 else min(256, chunk)
            out.append({"CHUNK_T": chunk, "BLOCK_N": bn, "BLOCK_T": bt,
                        "num_warps": clamp(bn * bt // 128, 1, 8), "CARRY_BLOCK": 64})
        return out
    if name == "sequential":
        return [{"BLOCK_N": bn, "num_warps": w, "num_stages": s}
                for bn, w in ((64, 1), (256, 4)) for s in (1, 8)]
    if name == "lookback":
        return [{"BLOCK_N": bn, "BLOCK_T": min(bt, bt_all), "num_warps": w}
                for bn, bt, w in ((1, 256, 2), (1, 1024, 8), (4, 256, 4), (16, 128, 8),
                                  (1, 1024, 1), (1, 2048, 1), (4, 512, 4))]
    raise ValueError(f"unknown strategy {name!r}")


def sweep(key: ProblemKey, strategies: dict[str, Any]) -> tuple[list[Candidate], list[dict]]:
    """Validated, de-duplicated candidates of every strategy for ``key`` (and the rejects)."""
    from rltriton_tune.kernels.flat import rl_triton_params

    found: list[Candidate] = []
    rejected: list[dict] = []
    seen: set[tuple] = set()
    for name in SWEEP_ORDER:
        impl = strategies.get(name)
        if impl is None or (name == "lookback" and key.t < LOOKBACK_MIN_T):
            continue
        wanted = [impl.default_params(key), *hand_picked(name, key)]
        if key.layout == "time" and name == "sequential":
            wanted.append({"BLOCK_N": 1024, "num_warps": 8})
        for raw in wanted:
            try:
                params = impl.validate(key, dict(raw))
            except InvalidConfig as exc:
                rejected.append({"strategy": name, "params": raw, "error": str(exc)[:200]})
                continue
            ident = (name, tuple(sorted(params.items())))
            if ident in seen:
                continue
            seen.add(ident)
            found.append(Candidate(name, params))
    _add_dispatched(key, strategies, found, seen)
    if "flat" in strategies:
        try:
            base = strategies["flat"].validate(key, dict(rl_triton_params(key.t, key.algorithm)))
        except InvalidConfig:
            base = None
        for cand in found:
            if cand.strategy == "flat" and cand.params == base:
                cand.role = "rl_triton"
    return found, rejected


def _add_dispatched(key: ProblemKey, strategies: dict[str, Any], found: list[Candidate],
                    seen: set[tuple]) -> None:
    """Mark (or add) the config that dispatch picks for ``key`` on this machine, so every
    cell also times what the product runs."""
    from rltriton_tune.dispatch.decide import decide

    if not torch.cuda.is_available():
        return
    chosen = decide(key, torch.device("cuda"))
    if chosen.strategy not in strategies:
        return
    ident = (chosen.strategy, tuple(sorted(chosen.params.items())))
    for cand in found:
        if (cand.strategy, tuple(sorted(cand.params.items()))) == ident:
            cand.dispatched = True
            return
    seen.add(ident)
    found.append(Candidate(chosen.strategy, dict(chosen.params), "dispatched", True))


def required_flags(algorithm: str) -> str:
    """The flags an estimator always has (Retrace's truncations are not optional)."""
    return flags_string(ALGORITHMS[algorithm].required_flags)


def plan(args: argparse.Namespace, strategies: dict[str, Any]) -> list[Cell]:
    """Every cell to measure, in the order measured (grid, time-major, bf16)."""
    cells: list[Cell] = []
    for algorithm in args.algorithms:
        a = RETRACE_A if algorithm == "retrace" else 0
        flags = required_flags(algorithm)
        for layout in args.layouts:
            for n in args.n:
                for t in args.t:
                    key = ProblemKey(algorithm, n, t, "float32", layout, flags, a)
                    if cell_bytes(key) > MAX_CELL_BYTES:
                        continue
                    cells.append(Cell(key, "grid"))
    # The time-major pass (GAE, sequential against tiled), where the grid is env-major alone.
    tm = set() if "time" in args.layouts else \
        {(n, t) for n, t in TIME_MAJOR_CELLS if n in args.n and t in args.t} if not args.quick \
        else {(args.n[0], args.t[0])} if not args.smoke else set()
    for n, t in sorted(tm):
        if "gae" in args.algorithms:
            cells.append(Cell(ProblemKey("gae", n, t, "float32", "time"), "time_major"))
    for cell in [c for c in cells if c.purpose == "grid"]:
        if cell_bytes(cell.key) > args.big_bytes:
            cells.append(Cell(replace(cell.key, dtype="bfloat16"), "bf16"))
    for cell in cells:
        cell.candidates, cell.rejected = sweep(cell.key, strategies)
        if cell.purpose == "time_major":  # the time-major pass is about sequential vs tiled
            cell.candidates = [c for c in cell.candidates if c.strategy in ("sequential", "tiled")
                               or c.role == "rl_triton" or c.dispatched]
        if args.smoke:
            cell.candidates = cell.candidates[:2]
    return cells


def baseline_cells(args: argparse.Namespace, cells: list[Cell]) -> list[Cell]:
    """Cells (own copies) that also get the torch.compile baselines."""
    if args.baselines == "none":
        return []
    grid = [c for c in cells if c.purpose == "grid"]
    if args.baselines == "all":
        chosen = grid
    elif args.baselines == "gae-grid":
        chosen = [c for c in grid if c.key.algorithm == "gae" or (c.key.n, c.key.t) in (
            (32768, 8), (4096, 128), (256, 2048), (16, 32768))]
    else:
        picks = {"gae": GAE_BASELINE_CELLS}
        chosen = [c for c in grid if (c.key.n, c.key.t) in picks.get(c.key.algorithm,
                                                                      OTHER_BASELINE_CELLS)]
        if args.quick:
            chosen = grid[:1]
    out = []
    for c in chosen:
        if cell_bytes(c.key) <= BASELINE_MAX_BYTES:
            out.append(Cell(c.key, "compile", [Candidate("torch.compile", {"scan": s}, "compile")
                                              for s in ("associative", "doubling")]))
    return out


# ---------------------------------------------------------------- warm-up workers


def warm_key(key: ProblemKey) -> ProblemKey:
    """A narrower key with the same Triton specialisation (N % 16 class, strides, BIG flag)
    so compiling it fills the cache entry the full-size key will look up."""
    from rltriton_tune.kernels.launch import INT32_LIMIT

    if key.n % 16 or key.n * key.t * max(key.a, 1) >= INT32_LIMIT:
        return key
    return replace(key, n=16)


def _warm(task: tuple) -> tuple[str, float]:
    """Worker: compile one variant by running it once (fills the on-disk caches)."""
    start = time.perf_counter()
    kind, key_text, strategy, params, device_name = task
    device = torch.device(device_name)
    key = ProblemKey.from_text(key_text)
    try:
        if kind == "triton":
            from rltriton_tune.kernels import strategies

            launcher = strategies()[strategy].prepare(key, params)
        else:
            from rltriton_tune.fallback import compiled_launcher

            launcher = compiled_launcher(key, params["scan"])
        launcher(cell_call(key, device))
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        error = ""
    except Exception as exc:  # noqa: BLE001 - reported again (with context) when measured
        error = f"{type(exc).__name__}: {str(exc)[:200]}"
    return error, time.perf_counter() - start


def warm_all(cells: list[Cell], compile_cells: list[Cell], device: torch.device, workers: int,
             log) -> None:
    """Compile every distinct Triton variant (and compile baseline) in worker processes."""
    tasks: dict[tuple, tuple] = {}
    for cell in cells:
        wkey = warm_key(cell.key)
        for cand in cell.candidates:
            ident = ("triton", wkey.as_text(), cand.strategy, tuple(sorted(cand.params.items())))
            tasks.setdefault(ident, ("triton", wkey.as_text(), cand.strategy, cand.params,
                                     str(device)))
    for cell in compile_cells:
        for cand in cell.candidates:
            ident = ("compile", cell.key.as_text(), cand.params["scan"])
            tasks.setdefault(ident, ("compile", cell.key.as_text(), "", cand.params, str(device)))
    if workers <= 0 or not tasks:
        return
    log(f"warming {len(tasks)} variants in {workers} worker processes")
    ordered = sorted(tasks.values(), key=lambda t: t[0] != "compile")  # slow ones first
    failures = 0
    with cf.ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as pool:
        for i, (error, _) in enumerate(pool.map(_warm, ordered, chunksize=1)):
            failures += bool(error)
            if (i + 1) % 100 == 0:
                log(f"  warmed {i + 1}/{len(ordered)}")
    log(f"warm-up done ({failures} variants failed; they are reported when measured)")


# ---------------------------------------------------------------- measuring


class Runner:
    """Measures cells in this process, appending one record per candidate."""

    def __init__(self, args: argparse.Namespace, device: torch.device, bandwidth: float,
                 log) -> None:
        from rltriton_tune.kernels import strategies

        self.args = args
        self.device = device
        self.bandwidth = bandwidth
        self.strategies = strategies()
        self.log = log
        self.records: list[dict[str, Any]] = []

    def _launcher(self, cand: Candidate, key: ProblemKey):
        if cand.strategy == "torch.compile":
            from rltriton_tune.fallback import compiled_launcher

            return compiled_launcher(key, cand.params["scan"])
        return self.strategies[cand.strategy].prepare(key, cand.params)

    def _probe_us(self, launcher, call: Call) -> float:
        """Device time of one launch. The GPU is kept busy (``torch.cuda._sleep``) while
        the host records the start event and enqueues the launch, so the events
        bracket the kernel and not the host's launch overhead (100-330 us on the H200
        machine, which made every config look slow in the first sweep)."""
        if self.device.type != "cuda":
            return 0.0
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(sleep_cycles(PROBE_SLEEP_S))
        start.record()
        launcher(call)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e3

    def measure(self, cell: Cell) -> None:
        from rltriton_tune.fallback import STRATEGIES
        from rltriton_tune.tune.gate import TRUSTED_SLACK, GateFailure, compare
        from rltriton_tune.tune.measure import clone_call, copies_needed, time_cpu, time_cuda

        key = cell.key
        floor_us = cell_bytes(key) / self.bandwidth * 1e6
        base = {"algorithm": key.algorithm, "N": key.n, "T": key.t, "A": key.a,
                "dtype": key.dtype, "layout": key.layout, "flags": key.flags,
                "purpose": cell.purpose, "data_bytes": cell_bytes(key),
                "floor_us": round(floor_us, 3)}
        for rej in cell.rejected:
            self.records.append({**base, "strategy": rej["strategy"], "params": rej["params"],
                                 "role": "sweep", "device_us": None, "correct": None,
                                 "error": f"invalid: {rej['error']}"})
        call = cell_call(key, self.device)
        torch_impl = STRATEGIES["torch"]
        expected = tuple(o.clone() for o in torch_impl.prepare(key, {"mode": "doubling"})(call))
        want = copies_needed(key, self.device)
        calls = [call] + [clone_call(call) for _ in range(want - 1)]
        best = math.inf
        for cand in cell.candidates:
            rec = {**base, "strategy": cand.strategy, "params": cand.params, "role": cand.role,
                   "dispatched": cand.dispatched, "device_us": None, "correct": None,
                   "error": None}
            self.records.append(rec)
            try:
                launcher = self._launcher(cand, key)
                out = launcher(call)
                compare(tuple(out), expected, key.dtype, "vs torch fallback", TRUSTED_SLACK)
                rec["correct"] = True
            except GateFailure as exc:
                rec["correct"], rec["error"] = False, str(exc)[:300]
                continue
            except Exception as exc:  # noqa: BLE001 - a failing candidate is reported
                rec["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                continue
            try:
                probe = self._probe_us(launcher, call)
                rec["probe_us"] = round(probe, 3)
                if probe > SLOW_FLOOR_US and probe > SLOW_FACTOR * best:
                    rec["device_us"], rec["timing"] = round(probe, 3), "probe (too slow)"
                    continue
                copies = want if probe <= 50 else clamp(
                    math.ceil(REPLAY_TARGET_S * 1e6 / probe), 2, want)
                if self.device.type == "cuda":
                    timing = time_cuda(launcher, calls[:copies], self.device,
                                       self.args.budget_s)
                else:
                    timing = time_cpu(launcher, call, self.args.budget_s)
                rec.update(device_us=round(timing.device_us, 3), host_us=round(timing.host_us, 3),
                           timing="cuda-graph" if self.device.type == "cuda" else "cpu-wall",
                           copies=copies)
                best = min(best, timing.device_us)
            except Exception as exc:  # noqa: BLE001
                rec["error"] = f"timing failed: {type(exc).__name__}: {str(exc)[:300]}"
        del calls, call, expected


# ---------------------------------------------------------------- driver


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--output", type=Path, required=True, help="folder for the JSON + markdown")
    p.add_argument("--algorithms", default="all",
                   help=f"comma-separated subset of {','.join(ALGORITHMS)} (default all)")
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu (interpreter smoke)")
    p.add_argument("--quick", action="store_true", help="tiny grid: code-path check")
    p.add_argument("--smoke", action="store_true",
                   help="CPU check of the code path in seconds: GAE at 4x8, two flat configs "
                        "(needs TRITON_INTERPRET=1)")
    p.add_argument("--n", default=None, help="comma-separated N values (default the grid)")
    p.add_argument("--t", default=None, help="comma-separated T values (default the grid)")
    p.add_argument("--layouts", default="env",
                   help="comma-separated layouts of the grid's cells, env and/or time "
                        "(default env; time replaces the GAE time-major pass)")
    p.add_argument("--baselines", default="representative",
                   choices=("none", "representative", "gae-grid", "all"),
                   help="cells that get the torch.compile baselines")
    p.add_argument("--all-baselines", action="store_true", help="same as --baselines all")
    p.add_argument("--max-seconds", type=float, default=330.0,
                   help="stop measuring new cells after this many seconds (results still written)")
    p.add_argument("--workers", type=int, default=None,
                   help="warm-up processes (default: CPU count on CUDA, 0 on CPU)")
    p.add_argument("--budget-s", type=float, default=0.03, help="timing budget per candidate")
    p.add_argument("--strategies", default=None,
                   help="comma-separated strategies to sweep (default every one): leaves out "
                        "one whose compile is too slow in a patched copy")
    p.add_argument("--big-bytes", type=int, default=None,
                   help=f"cells above this get the bf16 pass (default {BIG_BYTES}; 0 in --quick)")
    args = p.parse_args(argv)
    names = list(ALGORITHMS) if args.algorithms == "all" else args.algorithms.split(",")
    unknown = [a for a in names if a not in ALGORITHMS]
    if unknown:
        p.error(f"--algorithms: unknown estimator(s) {unknown}; expected {list(ALGORITHMS)}")
    args.algorithms = names
    args.layouts = list(dict.fromkeys(args.layouts.split(",")))
    if not args.layouts or any(x not in ("env", "time") for x in args.layouts):
        p.error(f"--layouts: expected env and/or time, got {','.join(args.layouts)!r}")
    if args.smoke:
        args.quick, args.device, args.algorithms, args.n, args.t = True, "cpu", ["gae"], "4", "8"
        args.strategies, args.baselines, args.big_bytes = "flat", "none", MAX_CELL_BYTES

    def ints(text: str | None, default: tuple[int, ...], flag: str) -> list[int]:
        if text is None:
            return list(default)
        try:
            values = [int(v) for v in text.split(",")]
        except ValueError:
            p.error(f"{flag}: expected comma-separated integers, got {text!r}")
        if any(v < 1 for v in values):
            p.error(f"{flag}: values must be >= 1, got {text!r}")
        return values

    args.n = ints(args.n, QUICK_N if args.quick else GRID_N, "--n")
    args.t = ints(args.t, QUICK_T if args.quick else GRID_T, "--t")
    if args.all_baselines:
        args.baselines = "all"
    if args.big_bytes is None:
        args.big_bytes = 0 if args.quick else BIG_BYTES
    if args.device not in ("cuda", "cpu"):
        p.error(f"--device must be cuda or cpu, got {args.device!r}")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device here (use --device cpu with TRITON_INTERPRET=1)")
    if args.workers is None:
        args.workers = min(16, os.cpu_count() or 1) if args.device == "cuda" else 0
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t0 = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - t0:7.1f}s] {msg}", flush=True)

    from strategies_report import shipped_entries, write_report

    from rltriton_tune.kernels import strategies
    from rltriton_tune.tune.measure import copy_bandwidth

    device = torch.device(args.device)
    if not strategies():
        print("Triton is not importable here: nothing to benchmark", file=sys.stderr)
        return 1
    if device.type == "cpu" and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        print("--device cpu needs TRITON_INTERPRET=1", file=sys.stderr)
        return 2
    from rltriton_tune.fallback import compile_usable

    usable = strategies()
    if args.strategies:
        wanted = args.strategies.split(",")
        unknown = [name for name in wanted if name not in usable]
        if unknown:
            print(f"--strategies: unknown {unknown}; expected some of {sorted(usable)}",
                  file=sys.stderr)
            return 2
        usable = {name: usable[name] for name in wanted}
    cells = plan(args, usable)
    compile_cells = baseline_cells(args, cells) if compile_usable() else []
    n_cand = sum(len(c.candidates) for c in cells)
    log(f"{len(cells)} cells, {n_cand} Triton candidates, {len(compile_cells)} compile-baseline "
        f"cells on {device}")
    warm_all(cells, compile_cells, device, args.workers, log)
    bandwidth = copy_bandwidth(device)
    log(f"copy bandwidth {bandwidth / 1e9:.0f} GB/s (read + write)")
    runner = Runner(args, device, bandwidth, log)
    args.output.mkdir(parents=True, exist_ok=True)
    stopped = None
    todo = cells + compile_cells
    for i, cell in enumerate(todo):
        if time.perf_counter() - t0 > args.max_seconds:
            stopped = (f"stopped by --max-seconds {args.max_seconds:g} "
                       f"before cell {i + 1}/{len(todo)}")
            log(stopped)
            break
        start, first = time.perf_counter(), len(runner.records)
        try:
            runner.measure(cell)
        except Exception as exc:  # noqa: BLE001 - keep the rest of the run
            runner.records.append({"algorithm": cell.key.algorithm, "N": cell.key.n,
                                   "T": cell.key.t, "dtype": cell.key.dtype,
                                   "layout": cell.key.layout, "purpose": cell.purpose,
                                   "strategy": None, "error": f"cell failed: {exc!r}"[:300]})
        mine = [r for r in runner.records[first:] if r.get("device_us") and r.get("correct")]
        fastest = min(mine, key=lambda r: r["device_us"]) if mine else None
        log(f"{i + 1}/{len(todo)} {cell.purpose:10s} {cell.key.as_text():48s} "
            + (f"best {fastest['strategy']} {fastest['device_us']:.2f} us" if fastest else "none")
            + f" ({time.perf_counter() - start:.1f} s)")
    meta = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "torch": torch.__version__, "triton": __import__("triton").__version__,
            "copy_bandwidth_Bps": bandwidth, "args": {k: (str(v) if isinstance(v, Path) else v)
                                                      for k, v in vars(args).items()},
            "stopped": stopped, "elapsed_s": round(time.perf_counter() - t0, 1),
            "big_bytes": args.big_bytes, "plan": [asdict(c) | {"key": c.key.as_text()}
                                                  for c in todo]}
    for entry in meta["plan"]:
        entry.pop("rejected", None)
    json_path = args.output / "strategies.json"
    json_path.write_text(json.dumps({"meta": meta, "records": runner.records}, indent=1,
                                    default=str))
    md = write_report(json_path, args.output / "strategies.md", shipped_entries(meta["device"]))
    log(f"wrote {json_path} and {md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
