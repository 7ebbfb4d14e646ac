"""Compile every strategy's kernels for a GPU target on a machine without a GPU.

The interpreter suite checks what the kernels compute, not that Triton's GPU
compiler accepts them (a non-constexpr global, for one, is fine in the
interpreter and a compile error on the GPU). This runs each strategy's real
launcher with FastLaunch swapped for a recorder, then compiles every recorded
launch (kernel, argument types, constexprs, options) to a cubin for sm_90 with
the installed Triton and its bundled ptxas. Run with TRITON_INTERPRET unset:

    python tests/kernels/gpu_compile.py [--arch 90] [--algorithms gae,...]

Exit status 0 when everything compiled; one line per failure otherwise.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # cases.py beside this file

import torch  # noqa: E402

TYPES = {torch.float32: "*fp32", torch.float16: "*fp16", torch.bfloat16: "*bf16",
         torch.float64: "*fp64", torch.bool: "*i1", torch.uint8: "*u8", torch.int8: "*i8",
         torch.int32: "*i32", torch.int64: "*i64"}
#: Launch options among the recorded constexprs (the rest are kernel parameters).
OPTIONS = ("num_warps", "num_stages", "maxnreg")


def _signature(kernel: Any, args: list[Any], consts: dict[str, Any]) -> dict[str, str]:
    values = iter(args)
    sig = {}
    for name in kernel.arg_names:
        if name in consts:
            sig[name] = "constexpr"
            continue
        value = next(values)
        if value is None:  # Triton compiles a None argument as a constexpr
            sig[name] = "constexpr"
        elif isinstance(value, torch.Tensor):
            sig[name] = TYPES[value.dtype]
        elif isinstance(value, bool):
            sig[name] = "i1"
        elif isinstance(value, int):
            sig[name] = "i32" if -2**31 <= value < 2**31 else "i64"
        elif isinstance(value, float):
            sig[name] = "fp32"
        else:
            raise TypeError(f"argument {name}: unexpected {type(value).__name__}")
    return sig


def recorded_launches(strategy: str, key: Any, params: dict[str, Any]) -> list[tuple]:
    """(kernel, args, consts) of every launch ``strategy`` makes for ``key`` (none run)."""
    from rltriton_tune.estimators import prepare_call
    from rltriton_tune.kernels import launch, strategies
    from rltriton_tune.problems import random_inputs

    launches: list[tuple] = []

    class Recorder:
        def __init__(self, kernel, grid, consts, pointers=None, slots=None, **kwargs):
            self.kernel, self.consts = kernel, consts

        def __call__(self, args):
            launches.append((self.kernel, list(args), dict(self.consts)))

        def bind(self, *args, **kwargs):  # the fast path's bound launch: none here
            return None

    impl = strategies()[strategy]
    module = sys.modules[type(impl)._launcher.__module__]  # where the launcher is defined
    saved = module.FastLaunch, launch.FastLaunch
    module.FastLaunch = launch.FastLaunch = Recorder
    try:
        call = prepare_call(key.algorithm, **random_inputs(key, "cpu", 0))
        type(impl)()._launcher(key, impl.validate(key, params))(call)
    finally:
        module.FastLaunch, launch.FastLaunch = saved
    return launches


def _specialize(kernel: Any, args: list[Any], consts: dict[str, Any]
                ) -> tuple[dict[str, str], dict[str, Any], dict[tuple[int], list]]:
    """Signature, constexprs and attributes as Triton's launcher specialises them: None
    and integer 1 become constants, integers that are multiples of 16 and 16-byte
    aligned tensors are marked divisible by 16."""
    sig = _signature(kernel, args, consts)
    consts = dict(consts)
    attrs = {}
    values = iter(args)
    for i, name in enumerate(kernel.arg_names):
        if name in consts and sig[name] == "constexpr":
            continue
        value = next(values)
        if value is None:
            consts[name] = None
        elif isinstance(value, torch.Tensor):
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(value, int) and not isinstance(value, bool):
            if value == 1:
                sig[name] = "constexpr"
                consts[name] = 1
            elif value % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
    return sig, consts, attrs


def compiled_launches(strategy: str, key: Any, params: dict[str, Any], arch: int = 90
                      ) -> list[Any]:
    """Triton's compiled kernel for each launch of ``strategy`` on ``key`` (a ProblemKey),
    specialised the way a launch on 16-byte aligned tensors is (see ``_specialize``)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    out = []
    for kernel, args, consts in recorded_launches(strategy, key, params):
        options = {k: consts.pop(k) for k in OPTIONS if k in consts}
        sig, consts, attrs = _specialize(kernel, args, consts)
        out.append(triton.compile(ASTSource(kernel, sig, consts, attrs),
                                  target=GPUTarget("cuda", arch, 32), options=options))
    return out


def global_accesses(strategy: str, key_text: str, params: dict[str, Any], arch: int = 90
                    ) -> list[dict[str, int]]:
    """For each launch of ``strategy`` on ``key_text``: how many global load and store
    instructions of each kind (``ld.global.v4.b32``...) its PTX holds, compiled the way a
    launch on 16-byte aligned tensors specialises it."""
    import re
    from collections import Counter

    from rltriton_tune.call import ProblemKey

    return [dict(Counter(re.findall(r"(?:ld|st)\.global[\w.]*", compiled.asm["ptx"])))
            for compiled in compiled_launches(strategy, ProblemKey.from_text(key_text),
                                              params, arch)]


def compile_one(strategy: str, key_text: str, params: dict[str, Any], arch: int,
                big: bool = False) -> list[str]:
    """Compile ``strategy``'s launches for ``key_text`` (with 64-bit offsets when ``big``);
    the error lines (empty: all compiled)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from rltriton_tune.call import ProblemKey
    from rltriton_tune.kernels import launch

    key = ProblemKey.from_text(key_text)
    errors = []
    limit = launch.INT32_LIMIT
    launch.INT32_LIMIT = 0 if big else limit  # 0: the launcher picks 64-bit offsets
    try:
        launches = recorded_launches(strategy, key, params)
    finally:
        launch.INT32_LIMIT = limit
    for kernel, args, consts in launches:
        options = {k: consts.pop(k) for k in OPTIONS if k in consts}
        try:
            src = ASTSource(fn=kernel, signature=_signature(kernel, args, consts),
                            constexprs=consts)
            triton.compile(src, target=GPUTarget("cuda", arch, 32), options=options)
        except Exception as exc:  # noqa: BLE001 - report every failure, then fail
            first = str(exc).strip().splitlines()[-1] if str(exc).strip() else repr(exc)
            errors.append(f"{strategy} {key_text}{' (int64 offsets)' if big else ''} "
                          f"{kernel.__name__}: {type(exc).__name__}: {first[:400]}")
    return errors


def cases(algorithms: list[str]) -> list[tuple[str, str, dict[str, Any], bool]]:
    """Each strategy at its default config for every estimator (its richest flag set,
    float32 env-major, and time-major with 64-bit offsets), plus bfloat16 time-major for
    the first estimator; and ``flat`` with every other flag set, env-major, where absent
    inputs leave their pointer slots None (compiled as constexprs)."""
    from cases import FLAG_SETS, GRAD_FLAG_SETS

    from rltriton_tune.call import ProblemKey
    from rltriton_tune.kernels import STRATEGY_NAMES, strategies

    richest = {alg: flags[-1] for alg, flags in {**FLAG_SETS, **GRAD_FLAG_SETS}.items()}
    out = []
    for i, alg in enumerate(algorithms):
        a = 5 if alg == "retrace" else 0
        keys = [(ProblemKey(alg, 48, 300, "float32", "env", richest[alg], a), False),
                (ProblemKey(alg, 48, 300, "float32", "time", richest[alg], a), True)]
        if i == 0:
            keys.append((ProblemKey(alg, 48, 300, "bfloat16", "time", richest[alg], a),
                         False))
        for key, big in keys:
            for name in STRATEGY_NAMES:
                params = dict(strategies()[name].default_params(key))
                out.append((name, key.as_text(), params, big))
                if key.a:   # Retrace with the action pre-pass too
                    out.append((name, key.as_text(), {**params, "REDUCE_A": 1}, big))
        for flags in {**FLAG_SETS, **GRAD_FLAG_SETS}[alg][:-1]:
            key = ProblemKey(alg, 48, 300, "float32", "env", flags, a)
            out.append(("flat", key.as_text(), dict(strategies()["flat"].default_params(key)),
                        False))
    return out


def main(argv: list[str] | None = None) -> int:
    from rltriton_tune.algorithms import ALGORITHMS

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", type=int, default=90, help="CUDA compute capability x 10")
    p.add_argument("--algorithms", default=",".join(ALGORITHMS))
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = p.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("gpu_compile: unset TRITON_INTERPRET (kernels must be JIT functions)",
              file=sys.stderr)
        return 2
    todo = cases(args.algorithms.split(","))
    with cf.ProcessPoolExecutor(args.workers) as pool:
        names, keys, params, bigs = zip(*todo, strict=True)
        results = list(pool.map(compile_one, names, keys, params, [args.arch] * len(todo),
                                bigs))
    errors = [line for lines in results for line in lines]
    for line in errors:
        print(line)
    print(f"gpu_compile: {len(todo) - sum(1 for r in results if r)} of {len(todo)} "
          f"(strategy, key) cases compiled for sm_{args.arch}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
