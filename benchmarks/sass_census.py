"""Static instruction census of the Triton kernels, compiled for a GPU this machine need not have.

Each case (estimator, shape, dtype, strategy, config) goes through its strategy's own
launcher, whose launches are recorded and compiled for sm_90 (the H200) by
``tests/kernels/gpu_compile.py``, specialised as a launch on aligned tensors is; Triton's
bundled ``ptxas`` and ``cuobjdump`` do the rest, so no GPU is needed. For every case
and every kernel variant of ``align_probe.VARIANTS`` asked for, it records the SASS
instructions by opcode, the registers, and the PTX global loads and stores by width.

A static count is not a timing: loops count once and the look-back's polls not at all.
It says where a dtype's per-element cost goes (bfloat16 needs a PRMT and an IMAD per
value to widen, float32 none) and what a kernel change removes, before a device call
measures what that is worth.

    python benchmarks/sass_census.py --output DIR [--cases CASE ...] [--variants no-hints]

CASE is ``ALGORITHM:NxT:DTYPE:STRATEGY:k=v,...`` (Retrace with 8 actions and
truncations, as the bench uses; other estimators without flags).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

os.environ.pop("TRITON_INTERPRET", None)  # real JIT functions: compiled, not interpreted

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests" / "kernels"))  # gpu_compile.py: the offline compiler
sys.path.insert(0, str(ROOT))  # run from a checkout

import torch  # noqa: E402
import triton  # noqa: E402
from align_probe import VARIANTS  # noqa: E402
from gpu_compile import compiled_launches  # noqa: E402

from rltriton_tune.call import ProblemKey  # noqa: E402
from rltriton_tune.kernels import launch  # noqa: E402

#: Issue 3's two failing bfloat16 cells (Retrace 256x32768 and 32768x128) at the configs
#: the profile ships for them, and the lighter estimators' long-row kernels beside them.
DEFAULT_CASES = [
    "retrace:256x32768:{dtype}:lookback:BLOCK_N=1,BLOCK_T=512,num_warps=4",
    "retrace:256x32768:{dtype}:tiled:BLOCK_N=1,BLOCK_T=1024,num_warps=8,num_stages=1",
    "retrace:32768x128:{dtype}:flat:BLOCK_N=1,num_warps=2",
    "vtrace:256x32768:{dtype}:tiled:BLOCK_N=1,BLOCK_T=1024,num_warps=8,num_stages=1",
    "gae:4096x2048:{dtype}:flat:BLOCK_N=1,num_warps=8",
]
SASS_LINE = re.compile(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)")
PTX_GLOBAL = re.compile(r"\b(ld|st)\.global((?:\.[a-zA-Z0-9:_]+)*)")
REGISTERS = re.compile(r"\bREG:(\d+)")


def parse_case(text: str) -> tuple[ProblemKey, str, dict[str, int]]:
    algorithm, shape, dtype, strategy, params = text.split(":")
    n, t = (int(x) for x in shape.split("x"))
    retrace = algorithm == "retrace"
    key = ProblemKey(algorithm, n, t, dtype, "env", "trunc" if retrace else "none",
                     8 if retrace else 0)
    return key, strategy, {k: int(v) for k, v in (kv.split("=") for kv in params.split(","))}


def census(kernel: Any, tools: Path) -> dict[str, Any]:
    """Opcode counts and registers of ``kernel``'s SASS, its PTX global accesses by width."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"])
        f.flush()
        sass, usage = (subprocess.run([str(tools / "cuobjdump"), flag, f.name], check=True,
                                      capture_output=True, text=True).stdout
                       for flag in ("-sass", "-res-usage"))
    ops = collections.Counter(m.group(1) for m in map(SASS_LINE.match, sass.splitlines()) if m)
    access = collections.Counter()
    for m in PTX_GLOBAL.finditer(kernel.asm["ptx"]):
        width = [p for p in m.group(2).split(".") if re.fullmatch(r"v\d|[bfsu]\d+", p)]
        access[".".join([m.group(1), *width])] += 1
    registers = REGISTERS.search(usage)
    return {"kernel": kernel.name, "instructions": sum(ops.values()),
            "registers": int(registers.group(1)) if registers else None,
            "opcodes": dict(ops.most_common()), "global_access": dict(sorted(access.items()))}


def run_case(text: str, variant: str, tools: Path, arch: int) -> list[dict]:
    """The census of each kernel ``text``'s launcher runs, compiled under ``variant``."""
    key, strategy, params = parse_case(text)
    switch = (mock.patch.object(launch, *VARIANTS[variant]) if variant != "shipping"
              else contextlib.nullcontext())
    with switch:
        kernels = compiled_launches(strategy, key, params, arch)
    return [{"case": text, "variant": variant, **census(k, tools)} for k in kernels]


def report(rows: list[dict]) -> str:
    lines = ["| case | variant | kernel | SASS instructions | registers | "
             "PTX global accesses | top opcodes |", "|---|---|---|---:|---:|---|---|"]
    for r in rows:
        loads = ", ".join(f"{k} {v}" for k, v in r["global_access"].items())
        top = ", ".join(f"{k} {v}" for k, v in list(r["opcodes"].items())[:6])
        lines.append(f"| {r['case']} | {r['variant']} | {r['kernel']} | {r['instructions']} "
                     f"| {r['registers']} | {loads} | {top} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--output", type=Path, required=True)
    p.add_argument("--cases", nargs="*", default=None,
                   help="ALGORITHM:NxT:DTYPE:STRATEGY:k=v,... (default: issue 3's cells)")
    p.add_argument("--dtypes", default="float32,bfloat16",
                   help="dtypes the default cases are compiled for")
    p.add_argument("--variants", default="no-hints",
                   help=f"kernel variants besides the shipping one ({', '.join(VARIANTS)})")
    p.add_argument("--arch", type=int, default=90, help="CUDA compute capability x 10")
    args = p.parse_args(argv)
    tools = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    cases = args.cases or [c.format(dtype=d) for c in DEFAULT_CASES
                           for d in args.dtypes.split(",")]
    variants = ["shipping", *[v for v in args.variants.split(",") if v]]
    rows = []
    for case in cases:
        for variant in variants:
            rows += run_case(case, variant, tools, args.arch)
            print(f"{case} [{variant}]: {rows[-1]['instructions']} instructions",
                  file=sys.stderr)
    args.output.mkdir(parents=True, exist_ok=True)
    meta = {"arch": f"sm_{args.arch}", "triton": triton.__version__, "torch": torch.__version__}
    (args.output / "sass_census.json").write_text(json.dumps({**meta, "rows": rows}, indent=1))
    (args.output / "sass_census.md").write_text(
        f"sm_{args.arch}, Triton {triton.__version__}, compiled without a GPU.\n\n"
        + report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
