"""Time every torch mode on this device over an (N, T) grid: the data behind
:func:`rltriton_tune.fallback.torch_strategy.default_mode`.

    python -m rltriton_tune.tune.cpu_modes [--algorithm gae] [--layout env]
        [--threads 1] [--compile] [--json out.json]

Prints one line per (N, T) with the best-of-3 whole-call time of each mode in
milliseconds (CUDA: synchronised host time). ``--compile`` adds the
torch.compile baselines (CUDA: associative scan and doubling scan).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.estimators import prepare_call
from rltriton_tune.fallback.compiled import compiled_launcher
from rltriton_tune.fallback.torch_strategy import CPU_MODES, default_mode, launch
from rltriton_tune.problems import random_inputs

GRID = ((1, 1024), (1, 16384), (1, 10**6), (16, 512), (16, 8192), (256, 8), (256, 128),
        (256, 2048), (4096, 8), (4096, 32), (4096, 512), (32768, 8), (32768, 128),
        (100_000, 64))


def _time_ms(fn: Callable[[], object], device: torch.device, reps: int = 3) -> float:
    fn()
    best = float("inf")
    for _ in range(reps):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def measure(algorithm: str, layout: str, device: torch.device, with_compile: bool,
            grid: tuple[tuple[int, int], ...] = GRID) -> list[dict]:
    rows = []
    for n, t in grid:
        key = ProblemKey(algorithm, n, t, layout=layout, flags="trunc",
                         a=4 if algorithm == "retrace" else 0)
        call = prepare_call(algorithm, **random_inputs(key, device))
        times = {}
        for mode in CPU_MODES:
            if mode == "loop" and t > 20_000:
                continue  # minutes of Python steps; never the right choice there
            times[mode] = _time_ms(lambda m=mode, c=call: launch(c, m), device)
        if with_compile:
            for scan in ("associative", "doubling"):
                launcher = compiled_launcher(key, scan)
                times[f"compile-{scan}"] = _time_ms(lambda f=launcher, c=call: f(c), device)
        rows.append({"n": n, "t": t, "times_ms": times, "default": default_mode(n, t)})
        cells = " ".join(f"{m}={v:9.3f}" for m, v in times.items())
        print(f"N={n:6d} T={t:7d} {cells}  default={rows[-1]['default']}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithm", default="gae")
    parser.add_argument("--layout", default="env", choices=["env", "time"])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: keep)")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = measure(args.algorithm, args.layout, torch.device(args.device), args.compile)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"algorithm": args.algorithm, "layout": args.layout,
                       "device": args.device, "torch": torch.__version__, "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
