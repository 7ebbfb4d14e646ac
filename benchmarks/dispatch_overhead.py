"""Host time of one public call against the launch floor, measured in one process.

For each case (estimator, shape, the flags training code passes) it measures host
wall time per call, in microseconds (median over rounds of back-to-back calls; the
device queue is drained at the end of each round). A case's measurements take turns
round by round (public call, floors, validation and launcher, in a rotating order; the
dispatch stage, which stubs the memoised launcher, runs after them), so that a host
whose speed drifts over seconds (a shared machine: the same empty launch took 11 to
21 µs in consecutive H200 runs) moves them all alike and ``over_floor_us`` compares
numbers taken in the same seconds:

* ``public``: the full public function once its decision is memoised (validation,
  dispatch, output allocation, argument packing, launch);
* ``empty_triton``: launching a Triton kernel that does nothing (the launch floor);
* ``torch_add``: ``torch.add`` of two small tensors (PyTorch's own dispatch floor);
* ``graph_replay`` (CUDA): replaying a CUDA graph holding one public call;
* ``recorded`` and ``unrecorded``: the public call with workload recording on
  (``RLTRITON_TUNE_RECORD``, to a temporary file) and off, round by round in turn (each
  switch resets dispatch and memoises the decision again): what recording costs a call
  whose key missed the database; timed only for cases whose decision is not their own
  profile entry or forced (those are never recorded).

and, to show where the public call's time goes, its stages alone (each also per call):

* ``validate``: validation and normalisation of the arguments into a ``Call``
  (``rltriton_tune.estimators._build``, what the public function runs before
  dispatching), on arguments gathered once;
* ``dispatch``: ``rltriton_tune.dispatch.run`` on that ``Call`` with its memoised
  launcher replaced by a stub that returns preallocated outputs (the memo key and
  lookup; the launcher is put back afterwards);
* ``launcher``: the memoised launcher alone on that ``Call`` (output allocation,
  argument packing, the launch itself);
* ``fast_path``: what the public call runs instead of validation and dispatch when its
  arguments are the usual kind (``rltriton_tune.hot_path``: the checks, the memo
  lookup), with the memoised launcher and its bound launch stubbed as for
  ``dispatch``; absent where the call takes the general path;

and, for a launcher of one kernel (flat, tiled, sequential), its parts:

* ``pack``: ``Packer.args`` (output allocation and the argument list);
* ``launch``: the kernel's ``FastLaunch`` on arguments packed once (pointer reads, the
  direct call of Triton's compiled launcher or its generic path);
* ``bound``: the launcher's bound launch (``FastLaunch.bind``), what the usual call runs
  after its checks instead of ``launcher``: output allocation, pointer reads and the
  direct call in one function; absent where the launcher has none;
* ``direct_launch``: whether that ``FastLaunch`` is on its direct path after the runs
  (false means every launch went through Triton's generic path, binding included).

The public call also pays the function's argument binding and the autograd check: it
is a little more than ``fast_path`` and ``bound`` together (the usual call of a
one-kernel launcher), ``fast_path`` and ``launcher`` with a ``Call`` made (the usual
call of any other), or the validation, dispatch and launcher stages (every other
call).

``over_floor_us`` = public - empty_triton; the target is at most 3 µs.

    python benchmarks/dispatch_overhead.py            # CUDA; writes dispatch_overhead.json
    python benchmarks/dispatch_overhead.py --smoke --output /tmp/o   # CPU check, seconds

On CPU the estimators run their torch fallback and the empty kernel runs under the
Triton interpreter, so the numbers only check the code path.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

#: (algorithm, N, T, flags): the calls PPO and IMPALA make, small enough that host time
#: dominates.
CASES = [("gae", 4096, 32, "last_value"), ("gae", 4096, 128, "last_value"),
         ("gae", 77, 24, "last_value"), ("vtrace", 4096, 32, "last_value"),
         ("vtrace", 4096, 128, "last_value"), ("retrace", 1024, 32, "trunc"),
         ("eligibility_traces", 4096, 32, "seed"), ("gae", 4096, 32, "none")]
SMOKE_CASES = [("gae", 16, 8, "last_value"), ("retrace", 4, 8, "trunc")]
#: A smoke case forced onto a Triton kernel (interpreted), so that the launcher's parts
#: are timed too.
SMOKE_FORCED = (("gae", 2, 8, "none"), ("flat", {"BLOCK_N": 1, "num_warps": 1,
                                                   "num_stages": 1}))
#: The target of ``over_floor_us``.
BUDGET_OVER_FLOOR_US = 3.0


def host_us(fn: Callable[[], object], device: torch.device, reps: int, rounds: int) -> float:
    """Median over ``rounds`` of the host time per call of ``reps`` back-to-back calls."""
    return interleaved({"fn": fn}, device, reps, rounds)["fn"]


def interleaved(fns: dict[str, Callable[[], object]], device: torch.device, reps: int,
                rounds: int) -> dict[str, float]:
    """For each of ``fns``: the median over ``rounds`` of the host time per call of
    ``reps`` back-to-back calls, the functions taking turns within each round (the
    order rotating from round to round)."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda *_: None)
    names = list(fns)
    for fn in fns.values():
        fn()
    sync(device)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            fn = fns[name]
            start = time.perf_counter()
            for _ in range(reps):
                fn()
            sync(device)
            samples[name].append((time.perf_counter() - start) / reps * 1e6)
    return {name: statistics.median(values) for name, values in samples.items()}


def empty_kernel_launch(device: torch.device) -> Callable[[], object]:
    """A launch of a Triton kernel with one pointer argument and an empty body."""
    import triton
    import triton.language as tl

    globals()["tl"] = tl  # Triton resolves the annotation in the module's globals

    @triton.jit
    def empty(x_ptr, n, BLOCK: tl.constexpr):  # the body is empty on purpose
        pass

    x = torch.empty(1, device=device)
    return lambda: empty[(1,)](x, 1, BLOCK=16)


def graph_replay(fn: Callable[[], object], device: torch.device) -> Callable[[], object]:
    """Replay of a CUDA graph captured around one call of ``fn``."""
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream(device).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def recording_cost(function: Callable[..., Any], kwargs: dict[str, Any], device: torch.device,
                   reps: int, rounds: int) -> dict[str, float]:
    """``recorded_us`` and ``unrecorded_us``: the public call's host time with workload
    recording on (to a temporary file) and off, medians over ``rounds`` in which the two
    take turns; dispatch is reset at each switch and the environment restored after."""
    import tempfile

    from rltriton_tune import dispatch
    from rltriton_tune.settings import ENV_RECORD

    saved = os.environ.get(ENV_RECORD)
    samples: dict[str, list[float]] = {"recorded_us": [], "unrecorded_us": []}
    with tempfile.TemporaryDirectory() as folder:
        try:
            for r in range(rounds):
                for name in (("recorded_us", "unrecorded_us") if r % 2 == 0
                             else ("unrecorded_us", "recorded_us")):
                    if name == "recorded_us":
                        os.environ[ENV_RECORD] = os.path.join(folder, "calls.json")
                    else:
                        os.environ.pop(ENV_RECORD, None)
                    dispatch.reset()
                    samples[name].append(host_us(lambda: function(**kwargs), device, reps, 1))
        finally:
            if saved is None:
                os.environ.pop(ENV_RECORD, None)
            else:
                os.environ[ENV_RECORD] = saved
            dispatch.reset()  # flushes the recorder into the folder before it goes
    return {name: statistics.median(values) for name, values in samples.items()}


def stages(algorithm: str, kwargs: dict[str, Any], device: torch.device, reps: int,
           rounds: int, together: dict[str, Callable[[], object]] | None = None
           ) -> dict[str, float]:
    """``validate_us``, ``dispatch_us`` and ``launcher_us`` of one call whose decision
    is memoised already (see the module doc); ``together``: more functions timed in
    turn with validation and the launcher (their times are returned too)."""
    from rltriton_tune import dispatch, estimators
    from rltriton_tune.dispatch import forcing, memo
    from rltriton_tune.state import STATE

    arguments = estimators.call_arguments(algorithm, **kwargs)

    def validate() -> object:
        return estimators._build(*arguments)

    call = validate()
    launcher = memo.lookup(call)
    if launcher is None:
        raise RuntimeError(f"{algorithm}: no memoised launcher after a public call")
    outputs = launcher(call)
    mk = memo.memo_key(call, forcing.current())
    fns = {**(together or {}), "validate_us": validate, "launcher_us": lambda: launcher(call)}
    pack, kernel = launcher_parts(launcher)
    plan, values, scalars, time_major, starts_at = arguments
    if pack is not None:
        args, _ = pack.args(call)
        fns["pack_us"] = lambda: pack.args(call)
        fns["launch_us"] = lambda: kernel(args)
        given = [x for x in values if x is not None]
        # The fast path hands the bound launch the dtypes it read, all but the first
        # float input's (``hot_path``): so does this stage, to time what it runs.
        dtypes = [x.dtype for i, x in enumerate(values)
                  if x is not None and i != plan.first_float]
        bound = STATE.bound.get(mk)
        if bound and bound(*given, *scalars, *dtypes) is not None:
            fns["bound_us"] = lambda: bound(*given, *scalars, *dtypes)
    row = interleaved(fns, device, reps, rounds)
    if kernel is not None:
        row["direct_launch"] = kernel.direct and kernel.binaries > 0
    # The dispatch and fast-path stages need the memo's launcher and bound launch
    # stubbed, which the public call must not see: they are timed on their own.
    bound = STATE.bound.get(mk)
    STATE.table[mk] = lambda _: outputs
    STATE.bound[mk] = (lambda *_: outputs) if bound else False
    try:
        row["dispatch_us"] = host_us(lambda: dispatch.run(call), device, reps, rounds)
        if plan.hot(values, scalars, time_major, starts_at) is not None:
            row["fast_path_us"] = host_us(
                lambda: plan.hot(values, scalars, time_major, starts_at), device, reps, rounds)
    finally:
        STATE.table[mk] = launcher
        if bound is None:
            STATE.bound.pop(mk, None)
        else:
            STATE.bound[mk] = bound
    return row


def launcher_parts(launcher: Callable[..., Any]) -> tuple[Any, Any]:
    """The ``Packer`` and the ``FastLaunch`` a one-kernel launcher closes over (flat,
    tiled, sequential), or ``(None, None)`` for any other launcher."""
    from rltriton_tune.kernels.launch import FastLaunch, Packer

    pack, kernel = getattr(launcher, "pack", None), getattr(launcher, "kernel", None)
    if isinstance(pack, Packer) and isinstance(kernel, FastLaunch):
        return pack, kernel
    return None, None


def measure(case: tuple[str, int, int, str], device: torch.device, reps: int,
            rounds: int, floors: dict[str, Callable[[], object]]) -> dict[str, Any]:
    from peer_adapters import portable_source

    from rltriton_tune import explain
    from rltriton_tune.call import ProblemKey
    from rltriton_tune.estimators import ESTIMATORS
    from rltriton_tune.problems import random_inputs

    algorithm, n, t, flags = case
    key = ProblemKey(algorithm, n, t, flags=flags, a=8 if algorithm == "retrace" else 0)
    kwargs = random_inputs(key, device, seed=0)
    function = ESTIMATORS[algorithm]
    decision = explain(algorithm, n, t, flags=flags, A=key.a, device=device)
    row: dict[str, Any] = {"case": key.as_text(), "strategy": decision.strategy,
                           "params": dict(decision.params), "origin": decision.origin,
                           "source": portable_source(decision.source)}
    function(**kwargs)  # memoises the decision the stages look up
    together = {"public_us": lambda: function(**kwargs), **floors}
    if device.type == "cuda":
        together["graph_replay_us"] = graph_replay(lambda: function(**kwargs), device)
    row.update(stages(algorithm, kwargs, device, reps, rounds, together))
    row["over_floor_us"] = row["public_us"] - row["empty_triton_us"]
    if decision.origin not in ("profile", "forced"):  # a miss: recording counts it
        row.update(recording_cost(function, kwargs, device, reps, rounds))
    row["within_budget"] = row["over_floor_us"] <= BUDGET_OVER_FLOOR_US
    return row


def run(cases: list[tuple[str, int, int, str]], device: torch.device, reps: int,
        rounds: int, forced: tuple[tuple[str, int, int, str], tuple[str, dict[str, int]]]
        | None = None) -> dict[str, Any]:
    """Every case's row, each with the two floors measured in turn with its call;
    ``forced``: one more case, run under ``rltriton_tune.force(strategy, **params)``."""
    from rltriton_tune import force

    a, b = torch.ones(16, device=device), torch.ones(16, device=device)
    floors = {"empty_triton_us": empty_kernel_launch(device),
              "torch_add_us": lambda: torch.add(a, b)}
    from peers import software

    rows = [measure(c, device, reps, rounds, floors) for c in cases]
    if forced is not None:
        case, (strategy, params) = forced
        with force(strategy, **params):
            rows.append(measure(case, device, reps, rounds, floors))
    return {**software(device), "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "reps": reps, "rounds": rounds, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path,
                        help="results folder (default: benchmarks/results/<gpu>/)")
    parser.add_argument("--reps", type=int, default=2000, help="calls per round")
    parser.add_argument("--rounds", type=int, default=7, help="rounds (median taken)")
    parser.add_argument("--smoke", action="store_true",
                        help="CPU check of the code path (Triton interpreted), seconds")
    args = parser.parse_args(argv)
    forced = None
    if args.smoke:
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before Triton is imported
        device, cases, args.reps, args.rounds = torch.device("cpu"), SMOKE_CASES, 5, 3
        forced = SMOKE_FORCED
    elif not torch.cuda.is_available():
        parser.error("no CUDA device (use --smoke for a CPU check)")
    else:
        device, cases = torch.device("cuda"), CASES
    from peers import results_folder

    output = args.output or results_folder(device)
    result = run(cases, device, args.reps, args.rounds, forced)
    output.mkdir(parents=True, exist_ok=True)
    (output / "dispatch_overhead.json").write_text(json.dumps(result, indent=1) + "\n")
    cols = ("public_us", "validate_us", "dispatch_us", "fast_path_us", "launcher_us", "pack_us",
            "launch_us", "bound_us", "empty_triton_us", "torch_add_us", "graph_replay_us",
            "over_floor_us", "recorded_us", "unrecorded_us")
    print(f"{'case':<44}" + "".join(f"{c[:-3]:>14}" for c in cols))
    for r in result["rows"]:
        print(f"{r['case']:<44}" + "".join(
            f"{r[c]:>14.2f}" if r.get(c) is not None else f"{'-':>14}" for c in cols)
            + f"  {r['strategy']}{' direct' if r.get('direct_launch') else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
