"""PTX instruction counts of Retrace's issue-3 cells, compiled for sm_90 without a GPU.

Counts global loads by kind, shuffles, shared-memory traffic, barriers and all
instructions of each launch, with the installed Triton (this session: 3.9 here, 3.6 on
the H200). Run from the repository root, on the tree as it is or with one of the patches
beside this file applied, TRITON_INTERPRET unset:

    python benchmarks/results/session17/retrace_shift/ptx_counts.py
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "tests" / "kernels"))
sys.path.insert(0, str(ROOT))

from gpu_compile import compiled_launches  # noqa: E402

from rltriton_tune.call import ProblemKey  # noqa: E402

CELLS = [
    ("lookback", "retrace|trunc|bfloat16|env|N=256|T=32768|A=8",
     {"BLOCK_N": 2, "BLOCK_T": 256, "num_warps": 2}),
    ("lookback", "retrace|trunc|bfloat16|env|N=256|T=32768|A=8",
     {"BLOCK_N": 1, "BLOCK_T": 512, "num_warps": 4}),
    ("flat", "retrace|trunc|bfloat16|env|N=32768|T=128|A=8",
     {"BLOCK_N": 1, "num_warps": 2, "num_stages": 1}),
]
KINDS = ("ld.global", "st.global", "shfl", "ld.shared", "st.shared", "bar.sync")


def counts(ptx: str) -> dict[str, int]:
    """Instruction counts of one kernel's PTX (global loads also by width)."""
    found: Counter[str] = Counter()
    for line in ptx.splitlines():
        line = line.strip()
        if ";" not in line or line.startswith((".", "//", "{", "}", "$")):
            continue
        words = line.split()
        op = words[1] if words[0].startswith("@") else words[0]
        found["total"] += 1
        found.update(kind for kind in KINDS if op.startswith(kind))
        width = re.match(r"ld\.global[\w.]*", op)
        if width:
            found[width.group(0)] += 1
    return dict(sorted(found.items()))


def main() -> int:
    for strategy, key, params in CELLS:
        for compiled in compiled_launches(strategy, ProblemKey.from_text(key), params):
            print(strategy, key, params, counts(compiled.asm["ptx"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
