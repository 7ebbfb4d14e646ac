"""Forward and backward cost of each estimator: device time of the backward pass over the forward.

For each estimator and shape it measures, with the default dispatch decisions:

* ``forward_us``: one call without autograd;
* ``backward_us``: ``torch.autograd.grad`` of the outputs with respect to every floating
  data input, on a graph recorded once (``retain_graph``), i.e. the backward pass alone:
  one call of the estimator's grad algorithm (boundary gradients included), or for
  Retrace the two pointwise phases and the adjoint scan;
* ``ratio`` = backward_us / forward_us.

On CUDA both are device times: the median of CUDA-graph replays (no host overhead;
problems under the 60 MB L2 run partly from cache) and, as ``*_flushed_us``,
``triton.testing.do_bench`` with L2 flushed between runs (includes host gaps between a
pass's kernels). Autograd runs each backward kernel on the stream its forward ran on, so
the recorded forward, the warm-up and the capture all use one side stream (a graph
captured on another stream than the forward's would be invalidated). On CPU they are
host wall times (median of rounds). Inputs: ``rltriton_tune.problems.random_inputs``
with float32 flags, the flag set with every optional input the estimator takes.

Usage: python benchmarks/backward_cost.py [--shapes 4096x128,32768x2048]
       [--algorithms gae,vtrace] [--dtype float32] [--device cuda|cpu] [--output out.json]
Prints a table last; writes JSON with --output.
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

from rltriton_tune.algorithms import ESTIMATOR_NAMES  # noqa: E402
from rltriton_tune.autograd import differentiable  # noqa: E402
from rltriton_tune.call import ProblemKey  # noqa: E402
from rltriton_tune.estimators import ESTIMATORS  # noqa: E402
from rltriton_tune.problems import random_inputs  # noqa: E402

#: The flag set with every optional input each estimator can take at once.
RICHEST = {"gae": "bootstrap+trunc", "vtrace": "bootstrap+trunc", "retrace": "trunc",
           "lambda_returns": "bootstrap+trunc", "discounted_returns": "bootstrap+trunc",
           "eligibility_traces": "seed", "episodic_prefix_sum": "seed+starts_at"}
#: Retrace's action count.
ACTIONS = 8


def _outputs(result: Any) -> tuple[torch.Tensor, ...]:
    return result if isinstance(result, tuple) else (result,)


def host_us(fn, rounds: int, reps: int) -> float:
    """Median over ``rounds`` of the host wall time per call of ``reps`` calls."""
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(reps):
            fn()
        samples.append((time.perf_counter() - start) / reps * 1e6)
    return statistics.median(samples)


def graph_us(fn, stream: torch.cuda.Stream, rounds: int, per_graph: int = 10) -> float:
    """Device time of one ``fn()``: the median over ``rounds`` replays of a CUDA graph
    holding ``per_graph`` calls, captured on ``stream`` (where ``fn`` was warmed up)."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for _ in range(per_graph):
            fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(max(rounds, 3) * 4):
        start.record(stream)
        graph.replay()
        end.record(stream)
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / per_graph)
    return statistics.median(samples)


def measure(algorithm: str, n: int, t: int, dtype: str, device: str, rounds: int
            ) -> dict[str, Any]:
    if device == "cpu":
        return _measure(algorithm, n, t, dtype, device, rounds, None)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        return _measure(algorithm, n, t, dtype, device, rounds, stream)


def _measure(algorithm: str, n: int, t: int, dtype: str, device: str, rounds: int,
             stream: torch.cuda.Stream | None) -> dict[str, Any]:
    key = ProblemKey(algorithm, n, t, dtype, "env", RICHEST[algorithm],
                     ACTIONS if algorithm == "retrace" else 0)
    kwargs = random_inputs(key, device=device, seed=0, on_device=device != "cpu")
    function = ESTIMATORS[algorithm]
    names = [name for name in differentiable(algorithm) if kwargs.get(name) is not None]
    leaves = {name: kwargs[name].detach().clone().requires_grad_() for name in names}
    recorded = _outputs(function(**{**kwargs, **leaves}))
    grads = tuple(torch.randn_like(o) for o in recorded)
    inputs = tuple(leaves.values())

    def forward() -> None:
        function(**kwargs)

    def backward() -> None:
        torch.autograd.grad(recorded, inputs, grads, retain_graph=True)

    for fn in (forward, backward):   # decisions, kernel and phase compilation
        fn()
        fn()
    row: dict[str, Any] = {"algorithm": algorithm, "N": n, "T": t, "dtype": dtype,
                           "flags": RICHEST[algorithm], "device": device,
                           "grad_inputs": names}
    if stream is None:
        reps = max(1, min(50, 2_000_000 // max(1, n * t)))
        row["forward_us"] = host_us(forward, rounds, reps)
        row["backward_us"] = host_us(backward, rounds, reps)
    else:
        from triton.testing import do_bench

        torch.cuda.synchronize()
        row["forward_us"] = graph_us(forward, stream, rounds)
        row["backward_us"] = graph_us(backward, stream, rounds)
        row["forward_flushed_us"] = do_bench(forward, rep=100) * 1e3
        row["backward_flushed_us"] = do_bench(backward, rep=100) * 1e3
    row["ratio"] = row["backward_us"] / row["forward_us"]
    return row


def _shape(text: str) -> tuple[int, int]:
    n, _, t = text.lower().partition("x")
    return int(n), int(t)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--shapes", default=None,
                   help="comma-separated NxT (default 4096x128,32768x2048 on CUDA, 64x32 on CPU)")
    p.add_argument("--algorithms", default=",".join(ESTIMATOR_NAMES))
    p.add_argument("--dtype", default="float32")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--output", type=Path, default=None)
    args = p.parse_args(argv)
    shapes_text = args.shapes or ("64x32" if args.device == "cpu" else "4096x128,32768x2048")
    shapes = [_shape(s) for s in shapes_text.split(",") if s]
    algorithms = [a for a in args.algorithms.split(",") if a]
    unknown = sorted(set(algorithms) - set(ESTIMATOR_NAMES))
    if unknown:
        p.error(f"unknown algorithm(s) {unknown}; expected some of {list(ESTIMATOR_NAMES)}")
    rows = [measure(a, n, t, args.dtype, args.device, args.rounds)
            for n, t in shapes for a in algorithms]
    if args.output is not None:
        meta = {"torch": torch.__version__, "python": platform.python_version(),
                "device_name": (torch.cuda.get_device_name() if args.device != "cpu"
                                else platform.processor() or "cpu")}
        args.output.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    unit = "host us" if args.device == "cpu" else "device us (CUDA-graph replay)"
    print(f"backward / forward, {args.dtype}, {unit}")
    print(f"{'algorithm':20s} {'N x T':>12s} {'forward':>10s} {'backward':>10s} {'ratio':>6s}")
    for r in rows:
        print(f"{r['algorithm']:20s} {r['N']:>5d}x{r['T']:<6d} {r['forward_us']:10.1f} "
              f"{r['backward_us']:10.1f} {r['ratio']:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
