"""How should a backward scan be written for 16-bit inputs? (issue 3's bfloat16 target)

Triton lowers ``tl.associative_scan(..., reverse=True)`` with lane-reversing shuffles on
every input and output element (benchmarks/NOTES.md, session 7), and the backward
estimators miss "bfloat16 1.6x faster than float32" while the forward ones reach it.
This probe times one tile loop of the discounted-returns recurrence
``y[t] = r[t] + gamma * (1 - d[t]) * y[t+1]`` over env-major [N, T] inputs, the kernels
differing only in how a tile is scanned:

* ``builtin``: ``tl.associative_scan(reverse=True)``, what the package ships;
* ``flip2``: each thread's contiguous run flipped (free in registers) and scanned
  forward, then a reverse scan of the per-run aggregates across threads;
* ``forward``: the tile scanned forward, the same bytes with no reversal: the bound
  the other two aim at (a different recurrence, so it is timed, not checked).

``builtin`` and ``flip2`` are checked against a float64 loop first. Writes
``reverse_scan_probe.json`` and ``.md`` under ``--output``.

    python benchmarks/reverse_scan_probe.py --output DIR
    TRITON_INTERPRET=1 python benchmarks/reverse_scan_probe.py --device cpu --quick --output DIR
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from rltriton_tune.kernels.scan import combine, combine_next, edges, take  # noqa: E402

GAMMA = 0.99
SHAPES = [(32768, 2048), (4096, 8192)]
#: (BLOCK_N, BLOCK_T, num_warps): the bfloat16 winners of the session-7 strategy run and
#: tiles whose time axis is short enough to sit in one or two threads.
CONFIGS = [(1, 256, 1), (1, 1024, 4), (1, 2048, 8), (2, 256, 4), (32, 64, 8), (16, 16, 1),
           (64, 8, 2)]
VARIANTS = ("builtin", "flip2", "forward")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@triton.jit
def _flip2_scan(a, b, BLOCK_N: tl.constexpr, BLOCK_T: tl.constexpr, V: tl.constexpr):
    """Backward scan of [BLOCK_N, BLOCK_T] tiles as V-step runs: (y, product of b)."""
    G: tl.constexpr = BLOCK_T // V
    a3 = tl.flip(tl.reshape(a, [BLOCK_N, G, V]), 2)
    b3 = tl.flip(tl.reshape(b, [BLOCK_N, G, V]), 2)
    ya, yb = tl.associative_scan((a3, b3), 2, combine)          # each run, last step first
    last = (tl.arange(0, V) == V - 1)[None, None, :]
    run_a = tl.sum(tl.where(last, ya, 0.0), axis=2)
    run_b = tl.sum(tl.where(last, yb, 0.0), axis=2)
    zero = tl.zeros_like(run_a)
    if G == 1:  # one run per row: nothing enters it within the tile
        xa, xb = zero, zero + 1.0
    else:
        _, _, xa, xb = tl.associative_scan((run_a, run_b, zero, zero + 1.0), 1, combine_next,
                                           reverse=True)      # what enters each run
    y = tl.reshape(tl.flip(ya + yb * xa[:, :, None], 2), [BLOCK_N, BLOCK_T])
    p = tl.reshape(tl.flip(yb * xb[:, :, None], 2), [BLOCK_N, BLOCK_T])
    return y, p


@triton.jit
def probe_kernel(R, D, Y, N, T, gamma, VARIANT: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_T: tl.constexpr, V: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)[:, None]
    reverse: tl.constexpr = VARIANT != 2
    feed, out = edges(BLOCK_T, reverse)
    carry = tl.zeros([BLOCK_N], tl.float32)
    n_tiles = tl.cdiv(T, BLOCK_T)
    for i in range(0, n_tiles):
        if reverse:
            t0 = (n_tiles - 1 - i) * BLOCK_T
        else:
            t0 = i * BLOCK_T
        ts = t0 + tl.arange(0, BLOCK_T)[None, :]
        m = (rows < N) & (ts < T)
        r = tl.load(R + rows * T + ts, mask=m, other=0).to(tl.float32)
        d = tl.load(D + rows * T + ts, mask=m, other=0).to(tl.float32)
        a = tl.where(feed, r + gamma * (1.0 - d) * carry[:, None], r)
        b = gamma * (1.0 - d)
        if VARIANT == 1:
            y, _ = _flip2_scan(a, b, BLOCK_N, BLOCK_T, V)
        else:
            y, _ = tl.associative_scan((a, b), 1, combine, reverse=reverse)
        tl.store(Y + rows * T + ts, y.to(Y.dtype.element_ty), mask=m)
        carry = take(y, out)


def run_length(block_t: int, dtype: torch.dtype) -> int:
    """Steps per thread-contiguous run in ``flip2``: one 16-byte vector of inputs."""
    return min(block_t, 16 // torch.empty(0, dtype=dtype).element_size())


def launcher(variant: str, config: tuple[int, int, int], dtype: torch.dtype):
    bn, bt, warps = config
    v = run_length(bt, dtype)

    def run(r: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(r)
        n, t = r.shape
        probe_kernel[(triton.cdiv(n, bn),)](r, d, y, n, t, GAMMA, VARIANT=VARIANTS.index(variant),
                                            BLOCK_N=bn, BLOCK_T=bt, V=v, num_warps=warps)
        return y
    return run


def reference(r: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    r, d = r.double().cpu(), d.double().cpu()
    y = torch.zeros_like(r)
    nxt = torch.zeros(r.shape[0], dtype=torch.float64)
    for t in range(r.shape[1] - 1, -1, -1):
        nxt = r[:, t] + GAMMA * (1.0 - d[:, t]) * nxt
        y[:, t] = nxt
    return y


def inputs(n: int, t: int, dtype: torch.dtype, device: str, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    r = torch.randn(n, t, generator=gen).to(dtype).to(device)
    d = (torch.rand(n, t, generator=gen) < 0.05).to(dtype).to(device)
    return r, d


def check(device: str, configs: list[tuple[int, int, int]]) -> list[str]:
    """Failures of builtin and flip2 against the float64 loop on odd small shapes."""
    failures = []
    for dtype_name, dtype in DTYPES.items():
        tol = 2e-5 if dtype == torch.float32 else 3e-2
        for config in configs:
            for n, t in ((3, 37), (config[0] + 1, 2 * config[1] + 3)):
                r, d = inputs(n, t, dtype, device, seed=n * t)
                want = reference(r, d)
                for variant in ("builtin", "flip2"):
                    got = launcher(variant, config, dtype)(r, d).double().cpu()
                    scale = 1.0 + want.abs().max().item()
                    if not torch.allclose(got, want, rtol=tol, atol=tol * scale):
                        failures.append(f"{variant} {config} {dtype_name} {n}x{t}: max error "
                                        f"{(got - want).abs().max().item():.3g}")
    return failures


def timed_rows(shapes: list[tuple[int, int]], configs: list[tuple[int, int, int]]) -> list[dict]:
    from rltriton_tune.tune.measure import copy_bandwidth, time_cuda

    device = torch.device("cuda")
    bandwidth = copy_bandwidth(device)
    rows = []
    for n, t in shapes:
        for dtype_name, dtype in DTYPES.items():
            pairs = [inputs(n, t, dtype, "cuda", seed=k) for k in range(2)]
            floor_us = 3 * n * t * pairs[0][0].element_size() / bandwidth * 1e6
            for config in configs:
                for variant in VARIANTS:
                    run = launcher(variant, config, dtype)
                    timing = time_cuda(lambda call, run=run: run(*call), pairs, device)
                    rows.append({"N": n, "T": t, "dtype": dtype_name, "variant": variant,
                                 "BLOCK_N": config[0], "BLOCK_T": config[1],
                                 "num_warps": config[2], "device_us": timing.device_us,
                                 "floor_us": floor_us})
                    print(f"{n}x{t} {dtype_name} {config} {variant}: "
                          f"{timing.device_us:.2f} us", flush=True)
    return rows


def ptx_counts(variant: str, config: tuple[int, int, int], dtype: torch.dtype,
               arch: int = 90) -> dict[str, int]:
    """Instructions and shuffles in the kernel's PTX for ``arch`` (no GPU needed)."""
    import re

    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    bn, bt, warps = config
    ptr = {torch.float32: "*fp32", torch.bfloat16: "*bf16"}[dtype]
    consts = {"VARIANT": VARIANTS.index(variant), "BLOCK_N": bn, "BLOCK_T": bt,
              "V": run_length(bt, dtype)}
    sig = {"R": ptr, "D": ptr, "Y": ptr, "N": "i32", "T": "i32", "gamma": "fp32",
           **{k: "constexpr" for k in consts}}
    aligned = {(i,): [["tt.divisibility", 16]] for i in range(5)}
    ptx = triton.compile(ASTSource(probe_kernel, sig, consts, aligned),
                         target=GPUTarget("cuda", arch, 32), options={"num_warps": warps}
                         ).asm["ptx"]
    ops = re.findall(r"^\s+([a-z][\w.]*)", ptx, re.M)
    return {"instructions": sum(1 for op in ops if not op.startswith(("mov", "ld.param", "ret"))),
            "shuffles": sum(1 for op in ops if op.startswith("shfl"))}


def markdown(rows: list[dict]) -> str:
    lines = ["# Reverse-scan probe", "", "Device time in µs (CUDA-graph replays); floor = 3 "
             "arrays x N x T x itemsize / copy bandwidth.", "",
             "| N x T | dtype | BLOCK_N, BLOCK_T, warps | builtin | flip2 | forward | floor |",
             "|---|---|---|---:|---:|---:|---:|"]
    cells: dict[tuple, dict[str, float]] = {}
    for row in rows:
        cell = (row["N"], row["T"], row["dtype"], row["BLOCK_N"], row["BLOCK_T"],
                row["num_warps"], row["floor_us"])
        cells.setdefault(cell, {})[row["variant"]] = row["device_us"]
    for (n, t, dtype, bn, bt, w, floor), by in cells.items():
        lines.append(f"| {n} x {t} | {dtype} | {bn}, {bt}, {w} | "
                     + " | ".join(f"{by.get(v, float('nan')):.1f}" for v in VARIANTS)
                     + f" | {floor:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--output", type=Path, required=True)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--quick", action="store_true", help="check two configs, time nothing")
    p.add_argument("--ptx", action="store_true", help="print each kernel's sm_90 PTX "
                   "instruction and shuffle counts (run without TRITON_INTERPRET)")
    args = p.parse_args(argv)
    if args.ptx:
        for dtype_name, dtype in DTYPES.items():
            for config in CONFIGS:
                counts = {v: ptx_counts(v, config, dtype) for v in VARIANTS}
                print(dtype_name, config, "  ".join(
                    f"{v} {c['instructions']} ({c['shuffles']} shfl)" for v, c in counts.items()))
        return 0
    configs = CONFIGS[-2:] if args.quick else CONFIGS
    failures = check(args.device, configs)
    for line in failures:
        print("WRONG", line)
    rows = [] if args.device == "cpu" or args.quick else timed_rows(SHAPES, configs)
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "reverse_scan_probe.json").write_text(
        json.dumps({"failures": failures, "rows": rows}, indent=1))
    (args.output / "reverse_scan_probe.md").write_text(markdown(rows))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
