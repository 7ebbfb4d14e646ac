"""Compile time of Retrace launches for sm_90 without a GPU, per strategy.

Session 18's device A/B of ``session17/retrace_shift/shift_only.patch`` never left its
warm-up. This compiles single launches of the bfloat16 256x32768 cell with the installed
Triton (TRITON_INTERPRET unset), one per process so a slow one can be cut by ``timeout``:

    timeout 300 python benchmarks/results/session18/retrace_shift/compile_time.py 0
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "tests" / "kernels"))
sys.path.insert(0, str(ROOT))

from gpu_compile import compiled_launches  # noqa: E402

from rltriton_tune.call import ProblemKey  # noqa: E402

KEY = "retrace|trunc|bfloat16|env|N=256|T=32768|A=8"
CELLS = [("flat", {"BLOCK_N": 1}),
         ("tiled", {"BLOCK_N": 1, "BLOCK_T": 1024, "num_warps": 8}),
         ("lookback", {"BLOCK_N": 2, "BLOCK_T": 256, "num_warps": 2})]

if __name__ == "__main__":
    name, params = CELLS[int(sys.argv[1])]
    start = time.perf_counter()
    launches = compiled_launches(name, ProblemKey.from_text(KEY), params)
    print(f"{name} {params}: {len(launches)} launch(es) compiled in "
          f"{time.perf_counter() - start:.1f} s", flush=True)
