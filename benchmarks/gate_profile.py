"""Where a sweep's gate time goes: compile, load, run-and-compare, and pool scaling.

An exhaustive sweep waits on its compile pool most of the time, and a config compiles
several times slower on the device's CPUs than on a fast workstation. This probe takes
``--configs`` random configs of one key and, in this process, times each phase
separately:

* ``compile_s``: ``triton.compile`` of the config's launches for this GPU (the same call
  ``tests/kernels/gpu_compile.py`` makes, so it compares with a machine without a GPU);
* ``prepare_s``: the strategy's ``prepare`` (the launcher; nothing compiles yet);
* ``gate_s``: the gate's check: the first launches (the binary found in Triton's cache,
  which ``compile_s`` filled, or compiled again where the launch specialises otherwise),
  runs at the small and the full size, compared on the GPU;

then gates ``--pool-configs`` other configs through a :class:`CompilePool` of 1 and of
``--workers`` processes (configs/s each: does the pool scale with its processes?), and
writes a cProfile of one more pass over fresh configs (top functions by cumulative
time). Results: ``gate_profile.json`` and ``gate_profile_cprofile.txt`` in ``--output``.

    python benchmarks/gate_profile.py --key "retrace|trunc|float32|env|N=900|T=400|A=8" \\
        --output /tmp/gateprof [--configs 12] [--pool-configs 48] [--workers 16]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "kernels"))
# A private, empty Triton cache (set before Triton loads; the pool's workers inherit it):
# every compile is a real one, as in a fresh sweep.
os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="gateprof_cache_")

import torch  # noqa: E402

from rltriton_tune.call import ProblemKey  # noqa: E402
from rltriton_tune.tune.compile_pool import CompilePool  # noqa: E402
from rltriton_tune.tune.evaluate import Evaluator  # noqa: E402
from rltriton_tune.tune.space import Candidate, SearchSpace  # noqa: E402
from rltriton_tune.tune.study import all_strategies_for  # noqa: E402


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def python_loop_s() -> float:
    """Seconds of a fixed pure-Python loop: single-core speed, comparable across machines."""
    start = time.perf_counter()
    total = 0
    for i in range(3_000_000):
        total += i % 7
    return time.perf_counter() - start


def compile_s(strategy: str, key: ProblemKey, params: dict, arch: int) -> float:
    """Seconds to compile the config's launches with ``triton.compile`` (no cache)."""
    from gpu_compile import compiled_launches

    start = time.perf_counter()
    compiled_launches(strategy, key, params, arch)
    return time.perf_counter() - start


def phases(evaluator: Evaluator, cand: Candidate, arch: int) -> dict:
    """One config's phases in this process (a fresh Triton cache: nothing is reused)."""
    key = evaluator.key
    row: dict = {"config": cand.label()}
    try:
        row["compile_s"] = compile_s(cand.strategy, key, cand.params, arch)
        start = time.perf_counter()
        evaluator.strategies[cand.strategy].prepare(key, cand.params)
        torch.cuda.synchronize()
        row["prepare_s"] = time.perf_counter() - start
        start = time.perf_counter()
        evaluator.check(cand)
        row["gate_s"] = time.perf_counter() - start
    except Exception as exc:  # noqa: BLE001 - a failing config is reported, not fatal
        row["error"] = f"{type(exc).__name__}: {exc}"[:300]
    return row


def pool_rate(key: ProblemKey, device: torch.device, cands: list[Candidate],
              workers: int) -> dict:
    """Configs/s through a fresh pool of ``workers`` processes (start-up left out)."""
    with CompilePool(workers) as pool:
        pool.check(key, device, cands[:workers])  # start the workers, build their gates
        rest = cands[workers:]
        start = time.perf_counter()
        verdicts = pool.check(key, device, rest)
        took = time.perf_counter() - start
    return {"workers": workers, "configs": len(rest), "seconds": round(took, 2),
            "configs_per_s": round(len(rest) / took, 2) if took > 0 else None,
            "failed": sum(v is not None for v in verdicts)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--key", required=True, help="problem key text (ProblemKey.as_text)")
    p.add_argument("--output", type=Path, required=True)
    p.add_argument("--configs", type=int, default=12)
    p.add_argument("--pool-configs", type=int, default=48)
    p.add_argument("--workers", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    if not torch.cuda.is_available():
        p.error("needs a CUDA device")
    device = torch.device("cuda")
    key = ProblemKey.from_text(args.key)
    space = SearchSpace(key, device)
    todo = space.enumerate()
    random.Random(args.seed).shuffle(todo)
    n, m = args.configs, args.pool_configs
    single, profiled = todo[:n], todo[n:2 * n]
    pooled = todo[2 * n:2 * n + args.workers + m]
    arch = 10 * torch.cuda.get_device_capability(device)[0] + \
        torch.cuda.get_device_capability(device)[1]

    evaluator = Evaluator(key, device, all_strategies_for(device, space), workers=1)
    # The first config pays one-time costs (Triton and CUDA start-up, the gate's reference
    # cases): reported on its own, left out of the means.
    rows = [phases(evaluator, c, arch) for c in single]

    prof = cProfile.Profile()
    prof.enable()
    for cand in profiled:
        try:
            evaluator.check(cand)
        except Exception:  # noqa: BLE001, S112 - failures are part of what a gate costs
            continue
    prof.disable()
    evaluator.close()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(40)

    rates = [pool_rate(key, device, pooled[:1 + m // 4], 1),
             pool_rate(key, device, pooled, args.workers)]
    ok = [r for r in rows[1:] if "error" not in r]
    mean = {k: round(sum(r[k] for r in ok) / len(ok), 3) if ok else None
            for k in ("compile_s", "prepare_s", "gate_s")}
    report = {"key": key.as_text(), "cpu": cpu_model(), "cores": os.cpu_count(),
              "python_loop_s": round(python_loop_s(), 3), "first_config": rows[0],
              "mean": mean, "configs": rows, "pool": rates,
              "torch": torch.__version__, "device": torch.cuda.get_device_name(device)}
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "gate_profile.json").write_text(json.dumps(report, indent=1))
    (args.output / "gate_profile_cprofile.txt").write_text(text.getvalue())
    print(json.dumps({k: report[k] for k in ("key", "cpu", "python_loop_s", "first_config",
                                             "mean", "pool")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
