"""The CPU fallback next to a busy neighbour: whole-call times with and without a
process that keeps one core busy (an RL learner sharing cores with env workers).

    python benchmarks/cpu_busy.py [--algorithm gae] [--flags last_value]
        [--shapes 16x8192,256x2048,4096x512] [--neighbours 1] [--reps 15]
        [--modes] [--no-thread-rule] [--json out.json]

For each shape it times the public function (what dispatch picks on this CPU)
and, with ``--modes``, each eager torch mode with the caller at 1 thread and at
torch's default thread count (the fallback's own rule, ``fallback/threads.py``,
still runs small phases on one thread; ``--no-thread-rule`` turns it off to show
what it saves), first quiet, then with ``--neighbours`` busy-loop processes
running (``python -c 'while True: pass'``, started and stopped here). Each cell
is the median of ``--reps`` calls after one warm-up call; the table shows both
conditions and their ratio. On a machine shared with other work "quiet" means
"no neighbour of ours": run it where nothing else runs for clean numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

# Time the CPU path, not the Triton interpreter that the test suite turns on.
os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from rltriton_tune.call import ProblemKey  # noqa: E402
from rltriton_tune.estimators import ESTIMATORS, prepare_call  # noqa: E402
from rltriton_tune.fallback import CPU_MODES, launch  # noqa: E402
from rltriton_tune.fallback import threads as thread_rule  # noqa: E402
from rltriton_tune.problems import random_inputs  # noqa: E402

BUSY_LOOP = "while True: pass"


@contextmanager
def neighbours(count: int) -> Iterator[list[subprocess.Popen]]:
    """``count`` busy-loop processes for the duration of the block (stopped by handle)."""
    procs = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(count)]
    try:
        time.sleep(0.3 if count else 0.0)  # let the scheduler see them
        yield procs
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def median_ms(fn: Callable[[], object], reps: int) -> float:
    fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


@contextmanager
def threads(count: int) -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def cells(algorithm: str, flags: str, n: int, t: int, modes: bool
          ) -> dict[str, Callable[[], object]]:
    """Name -> zero-argument function to time, for one shape."""
    key = ProblemKey(algorithm, n, t, flags=flags, a=4 if algorithm == "retrace" else 0)
    kwargs = random_inputs(key)
    function = ESTIMATORS[algorithm]
    found: dict[str, Callable[[], object]] = {"public": lambda: function(**kwargs)}
    if modes:
        call = prepare_call(algorithm, **kwargs)
        default = torch.get_num_threads()
        for mode in CPU_MODES:
            if mode == "loop" and t > 20_000:
                continue
            for count in sorted({1, default}):
                def run(mode: str = mode, count: int = count) -> object:
                    with threads(count):
                        return launch(call, mode)

                found[f"{mode}@{count}t"] = run
    return found


def measure(args: argparse.Namespace) -> list[dict]:
    shapes = [tuple(int(x) for x in text.split("x")) for text in args.shapes.split(",")]
    rows: list[dict] = []
    for n, t in shapes:
        todo = cells(args.algorithm, args.flags, n, t, args.modes)
        quiet = {name: median_ms(fn, args.reps) for name, fn in todo.items()}
        with neighbours(args.neighbours):
            busy = {name: median_ms(fn, args.reps) for name, fn in todo.items()}
        for name in todo:
            row = {"n": n, "t": t, "cell": name, "quiet_ms": quiet[name], "busy_ms": busy[name],
                   "ratio": busy[name] / quiet[name] if quiet[name] > 0 else float("nan")}
            rows.append(row)
            print(f"N={n:6d} T={t:7d} {name:14s} quiet {row['quiet_ms']:9.3f} ms  "
                  f"busy {row['busy_ms']:9.3f} ms  x{row['ratio']:.2f}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithm", default="gae", choices=sorted(ESTIMATORS))
    parser.add_argument("--flags", default="last_value",
                        help="problem-key flags of the inputs (default: last_value)")
    parser.add_argument("--shapes", default="16x8192,256x2048,4096x512,1x100000",
                        help="comma-separated NxT")
    parser.add_argument("--neighbours", type=int, default=1,
                        help="busy-loop processes in the busy condition")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--modes", action="store_true",
                        help="also time each torch mode at 1 and the default thread count")
    parser.add_argument("--no-thread-rule", action="store_true",
                        help="keep torch's thread count in every phase (the behaviour "
                             "before fallback/threads.py)")
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args(argv)
    if args.no_thread_rule:
        thread_rule.PARALLEL_MIN_ELEMENTS = 0
    rows = measure(args)
    if args.json:
        Path(args.json).write_text(json.dumps({
            "algorithm": args.algorithm, "flags": args.flags, "neighbours": args.neighbours,
            "thread_rule": not args.no_thread_rule,
            "threads": torch.get_num_threads(), "cpus": os.cpu_count(),
            "torch": torch.__version__, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
