"""Host time per call of the dispatch hot path on CUDA (issue 4, item 3).

For each (algorithm, N, T) it measures, in microseconds of host wall time per
call (back-to-back calls, median of several rounds; the device queue is drained
between rounds):

* ``launcher``: the prepared launcher called directly with a pre-built Call
  (what dispatch memoises: argument packing, output allocation, kernel launch);
* ``dispatch_run``: ``dispatch.run(call)`` on a memo hit (launcher + memo lookup);
* ``public``: the public function (validation + ``Call`` + memo hit + launch);
* ``triton_generic``: ``flat_kernel[grid](*args, **meta)``, Triton's generic
  launch path, for the flat strategy with the same arguments;
* ``graph_replay``: one CUDA-graph replay of the public call, for scale.

``memo_overhead_us`` = dispatch_run - launcher (the issue's bound: <= 2 us); as that
difference of two noisy numbers can drown in launch jitter, ``memo_path_us``
measures the memo path alone: ``dispatch.run(call)`` with a no-op launcher
memoised for the call, minus calling that no-op launcher directly.
Usage: python benchmarks/dispatch_overhead.py --output results.json [--rounds 7]
(``--device cpu`` measures the first three with the torch fallback.)
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

SHAPES = [("gae", 4096, 32), ("gae", 256, 8), ("gae", 32768, 128), ("vtrace", 4096, 32),
          ("retrace", 1024, 32)]


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def host_us(fn, reps: int, rounds: int) -> float:
    """Median over ``rounds`` of the host time per call of ``reps`` back-to-back calls."""
    samples = []
    for _ in range(rounds):
        _sync()
        start = time.perf_counter()
        for _ in range(reps):
            fn()
        samples.append((time.perf_counter() - start) / reps * 1e6)
        _sync()
    return statistics.median(samples)


def measure(algorithm: str, n: int, t: int, reps: int, rounds: int,
            device: str = "cuda") -> dict[str, Any]:
    from rltriton_tune import dispatch
    from rltriton_tune.call import ProblemKey
    from rltriton_tune.dispatch import memo
    from rltriton_tune.dispatch.fingerprint import normalize_device
    from rltriton_tune.estimators import ESTIMATORS, prepare_call
    from rltriton_tune.problems import random_inputs

    key = ProblemKey(algorithm, n, t, flags="trunc" if algorithm == "retrace" else "none",
                     a=4 if algorithm == "retrace" else 0)
    kwargs = random_inputs(key, device=device, seed=0)
    fn = ESTIMATORS[algorithm]
    call = prepare_call(algorithm, **kwargs)
    for _ in range(3):
        fn(**kwargs)
    _sync()
    launcher = memo.lookup(call)
    decision = memo.decisions()[(key, normalize_device(device))]
    row: dict[str, Any] = {"algorithm": algorithm, "N": n, "T": t,
                           "strategy": decision.strategy, "params": decision.params,
                           "source": decision.source}
    row["launcher_us"] = host_us(lambda: launcher(call), reps, rounds)
    row["dispatch_run_us"] = host_us(lambda: dispatch.run(call), reps, rounds)
    row["public_us"] = host_us(lambda: fn(**kwargs), reps, rounds)
    row["memo_overhead_us"] = row["dispatch_run_us"] - row["launcher_us"]
    row["memo_path_us"] = memo_path_us(call, reps * 10, rounds)
    if device == "cpu":
        row.update(triton_generic_us=None, flat_launcher_us=None, graph_replay_us=None)
        return row
    row["triton_generic_us"] = generic_flat_us(key, call, reps, rounds)
    with dispatch.force("flat"):
        for _ in range(3):
            dispatch.run(call)
        flat_launcher = memo.lookup(call)
        row["flat_launcher_us"] = host_us(lambda: flat_launcher(call), reps, rounds)
    row["graph_replay_us"] = graph_replay_us(fn, kwargs, reps, rounds)
    return row


def memo_path_us(call, reps: int, rounds: int) -> float:
    """Cost of a memo hit alone: run() with a no-op launcher memoised, minus the no-op call."""
    from rltriton_tune import dispatch
    from rltriton_tune.dispatch import forcing, memo

    outputs = (torch.empty(0),)

    def noop(c):
        return outputs

    mk = memo.memo_key(call, forcing.current())
    saved = memo.table[mk]
    memo.table[mk] = noop
    try:
        through = min(host_us(lambda: dispatch.run(call), reps, 1) for _ in range(rounds))
        direct = min(host_us(lambda: noop(call), reps, 1) for _ in range(rounds))
    finally:
        memo.table[mk] = saved
    return through - direct


def generic_flat_us(key, call, reps: int, rounds: int) -> float | None:
    """Triton's generic launch of the flat kernel with the flat launcher's own arguments."""
    try:
        import triton

        from rltriton_tune.kernels.flat import FlatStrategy, flat_kernel
        from rltriton_tune.kernels.launch import Packer, next_pow2
    except ImportError:
        return None
    params = FlatStrategy().validate(key, FlatStrategy().default_params(key))
    bn, bt = params["BLOCK_N"], next_pow2(key.t)
    pack = Packer(key, bn * bt, params["num_warps"])
    grid = (triton.cdiv(key.n, bn),)
    meta = dict(pack.constexprs, BLOCK_N=bn, BLOCK_T=bt, num_warps=params["num_warps"],
                num_stages=params["num_stages"])
    args, _ = pack.args(call)
    flat_kernel[grid](*args, **meta)
    return host_us(lambda: flat_kernel[grid](*args, **meta), reps, rounds)


def graph_replay_us(fn, kwargs, reps: int, rounds: int) -> float:
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn(**kwargs)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn(**kwargs)
    graph.replay()
    return host_us(graph.replay, reps, rounds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--reps", type=int, default=2000, help="calls per round")
    parser.add_argument("--rounds", type=int, default=7, help="rounds (median taken)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("dispatch_overhead: no CUDA device (use --device cpu)", file=sys.stderr)
        return 2
    shapes = SHAPES if args.device == "cuda" else [("gae", 1, 1), ("gae", 64, 8)]
    rows = [measure(a, n, t, args.reps, args.rounds, args.device) for a, n, t in shapes]
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    result = {
        "device": torch.cuda.get_device_name() if args.device == "cuda" else platform.processor()
        or platform.machine(),
        "torch": torch.__version__,
        "triton": triton_version,
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "reps": args.reps,
        "rounds": args.rounds,
        "rows": rows,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=1) + "\n")
    cols = ["launcher_us", "dispatch_run_us", "memo_overhead_us", "memo_path_us", "public_us",
            "flat_launcher_us", "triton_generic_us", "graph_replay_us"]
    print(f"{'case':<22} {'strategy':<10} " + " ".join(f"{c[:-3]:>15}" for c in cols))
    for r in rows:
        cells = " ".join(f"{r[c]:>15.2f}" if r[c] is not None else f"{'-':>15}" for c in cols)
        print(f"{r['algorithm']} {r['N']}x{r['T']:<10} {r['strategy']:<10} {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
