"""GPU smoke test of the Triton kernels: compile, check and time every strategy x estimator.

Run on a CUDA machine from the repository root:

    python3 benchmarks/gpu_smoke_kernels.py            # table on stdout
    OUT=/some/dir python3 benchmarks/gpu_smoke_kernels.py   # + $OUT/gpu_smoke_kernels.json

For each estimator, strategy and size (env-major float32 with truncations and
time-major bfloat16), runs the strategy's default config, compares with the
float64 reference (max abs error relative to the output scale) and times it with
``triton.testing.do_bench`` (device time, median, L2 not flushed: a smoke
number, not a benchmark). Exits non-zero if any check fails.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rltriton_tune.algorithms import ALGORITHMS  # noqa: E402
from rltriton_tune.call import ProblemKey  # noqa: E402
from rltriton_tune.estimators import prepare_call  # noqa: E402
from rltriton_tune.kernels import STRATEGY_NAMES, strategies  # noqa: E402
from rltriton_tune.problems import random_inputs  # noqa: E402
from rltriton_tune.reference import reference  # noqa: E402
from rltriton_tune.strategy import InvalidConfig  # noqa: E402

SIZES = [(32768, 8), (4096, 128), (256, 2048), (16, 32768)]
VARIANTS = [("float32", "env"), ("bfloat16", "time")]
TOL = {"float32": 1e-4, "bfloat16": 2e-2}


def flags_for(algorithm: str) -> str:
    spec = ALGORITHMS[algorithm]
    if "truncateds" in spec.tensors:
        return "trunc"
    return "seed" if "seed_values" in spec.tensors else "none"


def main() -> int:
    import triton.testing

    assert torch.cuda.is_available(), "needs a CUDA device"
    rows, failures = [], 0
    for algorithm in ALGORITHMS:
        for n, t in SIZES:
            for dtype, layout in VARIANTS:
                key = ProblemKey(algorithm, n, t, dtype, layout, flags_for(algorithm),
                                 a=6 if algorithm == "retrace" else 0)
                kwargs = random_inputs(key, device="cuda", seed=1)
                call = prepare_call(algorithm, **kwargs)
                want = reference(algorithm, **{k: v.cpu() if isinstance(v, torch.Tensor)
                                               else v for k, v in kwargs.items()})
                want = want if isinstance(want, tuple) else (want,)
                for name in STRATEGY_NAMES:
                    impl = strategies()[name]
                    row = {"algorithm": algorithm, "N": n, "T": t, "dtype": dtype,
                           "layout": layout, "strategy": name}
                    try:
                        params = impl.validate(key, {})
                    except InvalidConfig as exc:
                        rows.append({**row, "status": f"invalid: {exc}"})
                        continue
                    row["params"] = params
                    try:
                        start = time.perf_counter()
                        launcher = impl.prepare(key, params)
                        outs = launcher(call)
                        torch.cuda.synchronize()
                        row["first_call_s"] = round(time.perf_counter() - start, 3)
                        err = 0.0
                        for out, ref in zip(outs, want, strict=True):
                            scale = 1.0 + ref.abs().max().item()
                            err = max(err, (out.double().cpu() - ref).abs().max().item() / scale)
                        row["rel_err"] = err
                        row["status"] = "ok" if err <= TOL[dtype] else "WRONG"
                        bench = triton.testing.do_bench(lambda f=launcher, c=call: f(c))
                        row["us"] = round(1000 * bench, 2)
                    except Exception as exc:  # report every failure, keep going
                        row["status"] = f"ERROR {type(exc).__name__}: {exc}"[:300]
                    failures += row["status"] not in ("ok",)
                    rows.append(row)
                    print(f"{algorithm:20s} {n:6d} x {t:6d} {dtype:9s} {layout:4s} {name:10s} "
                          f"{row.get('us', float('nan')):10.2f} us  err {row.get('rel_err', 0):.1e}"
                          f"  {row['status'][:60]}", flush=True)
    out = os.environ.get("OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        Path(out, "gpu_smoke_kernels.json").write_text(json.dumps(
            {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
             "triton": __import__("triton").__version__, "rows": rows}, indent=1))
    print(f"\n{len(rows)} cells, {failures} failures "
          f"({sum(r['status'].startswith('invalid') for r in rows)} invalid configs skipped)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
