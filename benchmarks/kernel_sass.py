"""A strategy's machine code beside rl-triton's, for Hopper, without a GPU.

Small env-major cells of the backward estimators trail rl-triton by a few percent at
rl-triton's own launch config (``benchmarks/switches.py`` measures it on a GPU). This
tool looks at why without one: it captures the Triton launch each library makes for a
cell (the call runs on CPU tensors up to the launch, which is intercepted), compiles
both kernels for sm_90 with this machine's Triton and disassembles them, and counts
what each thread executes: instructions, global loads and stores, shuffles, barriers,
selects, and how many instructions run before the first global load (the prologue on
every program's critical path), and the registers and stack bytes (spilled registers)
the assembler gave each thread, and the thread layouts Triton chose for the tiles
(``sizePerThread`` and ``threadsPerWarp``, slowest axis last: whether a thread holds
whole rows or columns or the scan crosses lanes). The counts are static: a difference
here is a place to look and to A/B on a GPU, not a timing.

    python benchmarks/kernel_sass.py                       # the default cells
    python benchmarks/kernel_sass.py --cells "gae|none|float32|env|N=333|T=150" \\
        --descend 0 --dump /tmp/sass                       # write both SASS listings
    python benchmarks/kernel_sass.py --cells "gae|bootstrap+trunc|float32|time|N=4096|T=512" \\
        --params BLOCK_N=16,num_warps=4,num_stages=1    # does this config spill?
    python benchmarks/kernel_sass.py --cells "gae|none|float32|time|N=4745|T=1047" \
        --strategy columns --params BLOCK_N=32,BLOCK_T=32,num_warps=1   # odd N time-major
    python benchmarks/kernel_sass.py --smoke --output /tmp/k   # CPU check, seconds

Ours runs the flat kernel at rl-triton's config (one row a program, its warps for
next_pow2(T)), or at ``--params`` where given, with ``DESCEND`` as asked (1, rl-triton's
tile order, by default where the key offers it); with ``--strategy``, that strategy's
kernel at ``--params`` (its default config where not given). A strategy of several
launches is shown by its first.
rl-triton 0.1.3 is optional: without it, ours alone is compiled. The Triton
interpreter must be off (``TRITON_INTERPRET`` unset): it replaces the kernels.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from peer_adapters import rl_triton_version, swap_time  # noqa: E402
from peers import as_users_pass  # noqa: E402

from rltriton_tune.call import ProblemKey  # noqa: E402
from rltriton_tune.estimators import prepare_call  # noqa: E402
from rltriton_tune.kernels import strategies as kernel_strategies  # noqa: E402
from rltriton_tune.kernels.flat import rl_triton_params  # noqa: E402
from rltriton_tune.kernels.launch import tile_order_space  # noqa: E402
from rltriton_tune.problems import random_inputs  # noqa: E402

CELLS = ("gae|none|float32|env|N=333|T=150", "gae|last_value|float32|env|N=450|T=60",
         "gae|none|float32|env|N=2500|T=333", "discounted_returns|none|float32|env|N=333|T=150",
         "eligibility_traces|none|float32|env|N=333|T=150")
SMOKE_CELLS = ("gae|none|float32|env|N=5|T=6",)
#: Opcodes counted apart (the rest count in ``instructions`` only).
COUNTED = ("LDG", "STG", "SHFL", "BAR", "FSEL", "ISETP")
#: Per-thread resources of the binary (``cuobjdump -res-usage``): STACK holds spilled
#: registers (the scan cores use no stack otherwise).
RESOURCES = ("registers", "stack_bytes")
POINTER_TYPES = {torch.float32: "*fp32", torch.float16: "*fp16", torch.bfloat16: "*bf16",
                 torch.float64: "*fp64", torch.bool: "*i1", torch.uint8: "*u8",
                 torch.int8: "*i8", torch.int32: "*i32", torch.int64: "*i64"}


@dataclass
class Launch:
    """One captured ``kernel[grid](*args, **kwargs)``."""

    kernel: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


class _Captured(Exception):
    pass


def capture(run: Any) -> Launch:
    """The first Triton launch ``run()`` makes, intercepted before anything is launched.
    Our launchers' launches take Triton's generic path meanwhile (``FastLaunch``'s direct
    one reads the current CUDA device first)."""
    from triton.runtime.jit import JITFunction

    from rltriton_tune.kernels.launch import FastLaunch

    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        raise RuntimeError("unset TRITON_INTERPRET: the interpreter replaces the kernels")
    seen: list[Launch] = []
    original, direct = JITFunction.run, FastLaunch.__call__

    def intercept(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> None:
        seen.append(Launch(self, args, kwargs))
        raise _Captured

    JITFunction.run = intercept
    FastLaunch.__call__ = FastLaunch.generic
    try:
        run()
    except _Captured:
        pass
    finally:
        JITFunction.run, FastLaunch.__call__ = original, direct
    if not seen:
        raise RuntimeError("the call launched no Triton kernel")
    return seen[0]


def _runtime_type(value: Any) -> tuple[str, bool]:
    """(Triton signature type, whether it is 16-divisible) of a runtime argument."""
    if isinstance(value, torch.Tensor):
        return POINTER_TYPES[value.dtype], value.data_ptr() % 16 == 0
    if isinstance(value, bool):
        return "i1", False
    if isinstance(value, int):
        return ("i32" if -2**31 <= value < 2**31 else "i64"), value % 16 == 0
    return "fp32", False


def compile_launch(launch: Launch, arch: int) -> Any:
    """``launch``'s kernel compiled for ``sm_<arch>`` with the specialisation Triton gives
    these arguments (None and integers equal to 1 as constants, 16-divisible pointers and
    integers marked so)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    kernel = launch.kernel
    options = {k: launch.kwargs[k] for k in ("num_warps", "num_stages", "maxnreg")
               if k in launch.kwargs}
    values = dict(zip(kernel.arg_names, launch.args, strict=False))
    values.update({k: v for k, v in launch.kwargs.items() if k not in options})
    signature: dict[str, str] = {}
    constants: dict[str, Any] = {}
    attrs: dict[tuple[int, ...], list[list[Any]]] = {}
    for i, param in enumerate(kernel.params):
        value = values.get(param.name, param.default)
        if param.is_constexpr or value is None or (type(value) is int and value == 1):
            signature[param.name] = "constexpr"
            constants[param.name] = value
            continue
        signature[param.name], aligned = _runtime_type(value)
        if aligned:
            attrs[(i,)] = [["tt.divisibility", 16]]
    source = ASTSource(fn=kernel, signature=signature, constexprs=constants, attrs=attrs)
    return triton.compile(source, target=GPUTarget("cuda", arch, 32), options=options)


def sass_of(compiled: Any) -> str:
    from triton.tools.disasm import get_sass

    return get_sass(compiled.asm["cubin"])


def resources(cubin: bytes) -> dict[str, int]:
    """Registers and stack bytes per thread of the one kernel in ``cubin``."""
    import subprocess
    import tempfile

    from triton.tools.disasm import path_to_cuobjdump

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kernel.cubin"
        path.write_bytes(cubin)
        text = subprocess.run([path_to_cuobjdump(), "-res-usage", str(path)], check=True,
                              capture_output=True, text=True).stdout
    return parse_resources(text)


def parse_resources(text: str) -> dict[str, int]:
    """``cuobjdump -res-usage`` output of one kernel to :data:`RESOURCES`."""
    found = re.search(r"REG:(\d+) STACK:(\d+)", text)
    if found is None:
        raise RuntimeError(f"no resource usage in cuobjdump's output: {text[:200]!r}")
    return {"registers": int(found.group(1)), "stack_bytes": int(found.group(2))}


def counts(sass: str) -> dict[str, int]:
    """Instructions of a SASS listing, per counted opcode, and before the first load."""
    opcodes = []
    for line in sass.splitlines():
        # ``triton.tools.disasm``'s listing: a control field, a tab, the instruction
        if "\t" not in line or not line.rstrip().endswith(";"):
            continue
        text = re.sub(r"^@!?U?P[T0-9]+\s+", "", line.split("\t", 1)[1].strip())
        opcodes.append(text.split()[0].rstrip(";").split(".")[0])
    by_op = collections.Counter(opcodes)
    first = next((i for i, op in enumerate(opcodes) if op == "LDG"), len(opcodes))
    return {"instructions": len(opcodes), "before_first_load": first,
            **{op: by_op.get(op, 0) for op in COUNTED}}


def parse_params(text: str) -> dict[str, int]:
    """``BLOCK_N=16,num_warps=4`` to a parameter dict."""
    params = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--params: expected NAME=INT items, got {item!r}")
        try:
            params[name.strip()] = int(value)
        except ValueError:
            raise ValueError(f"--params: {name.strip()} must be an integer, "
                             f"got {value!r}") from None
    return params


def ours(key: ProblemKey, kwargs: dict[str, Any], descend: int,
         params: dict[str, int] | None = None, strategy: str = "flat") -> tuple[Launch, dict]:
    impl = kernel_strategies()[strategy]
    if strategy == "flat":
        params = dict(rl_triton_params(key.t, key.algorithm) if params is None else params)
        if tile_order_space(key) and "DESCEND" not in params:
            params["DESCEND"] = descend
    params = impl.validate(key, {**impl.default_params(key), **(params or {})})
    call = prepare_call(key.algorithm, **kwargs)
    launcher = impl._launcher(key, params)  # a fresh one: no binary kept, nothing cached
    return capture(lambda: launcher(call)), params


#: A tile layout in Triton's GPU dialect, e.g. ``#ttg.blocked<{sizePerThread = [4, 1],
#: threadsPerWarp = [2, 16], ...}>``.
_BLOCKED = re.compile(r"#ttg\.blocked<\{sizePerThread = \[([\d, ]+)\], "
                      r"threadsPerWarp = \[([\d, ]+)\]")


def tile_layouts(ttgir: str) -> list[str]:
    """The two-dimensional blocked layouts of a kernel's Triton GPU IR, each as
    ``sizePerThread/threadsPerWarp`` (``4x1/2x16``: a thread holds 4 rows of one step,
    2 lanes span the rows and 16 the steps), sorted; one-dimensional ones (vectors of
    carries, look-back words) are left out."""
    found = set()
    for per_thread, lanes in _BLOCKED.findall(ttgir):
        if per_thread.count(",") == 1:
            found.add("x".join(per_thread.replace(" ", "").split(",")) + "/"
                      + "x".join(lanes.replace(" ", "").split(",")))
    return sorted(found)


class _LooksCuda(torch.Tensor):
    """A CPU tensor rl-triton's device asserts accept; the launch never runs."""

    @property
    def is_cuda(self) -> bool:
        return True


def theirs(key: ProblemKey, kwargs: dict[str, Any]) -> Launch | None:
    """rl-triton's launch for the same inputs, or None where it is not installed."""
    if rl_triton_version() is None:
        return None
    import rl_triton

    function = getattr(rl_triton, f"compute_{key.algorithm}")
    args = {}
    for name, value in kwargs.items():
        if name == "time_major":
            continue
        # rl-triton takes [N, T]: a time-major buffer goes in as its transposed view, as
        # the peer adapter hands it over
        value = swap_time(value, key.time_major)
        args[name] = value.as_subclass(_LooksCuda) if isinstance(value, torch.Tensor) else value
    return capture(lambda: function(**args))


def measure(text: str, arch: int, descend: int, dump: Path | None,
            params: dict[str, int] | None = None, strategy: str = "flat") -> dict[str, Any]:
    key = ProblemKey.from_text(text)
    kwargs = as_users_pass(random_inputs(key, "cpu", seed=0))
    row: dict[str, Any] = {"cell": text, "arch": f"sm_{arch}", "strategy": strategy}
    launch, row["params"] = ours(key, kwargs, descend, params, strategy)
    sides = {"ours": launch, "rl_triton": theirs(key, kwargs)}
    for side, captured in sides.items():
        if captured is None:
            row[side] = None
            continue
        compiled = compile_launch(captured, arch)
        sass = sass_of(compiled)
        row[side] = {**counts(sass), **resources(compiled.asm["cubin"]),
                     "layouts": tile_layouts(compiled.asm["ttgir"])}
        if dump is not None:
            dump.mkdir(parents=True, exist_ok=True)
            name = re.sub(r"[^A-Za-z0-9]+", "_", text)
            (dump / f"{name}.{side}.sass").write_text(sass)
    return row


def report(rows: list[dict[str, Any]]) -> str:
    """A markdown table: ours / rl-triton per count, and the tile layouts."""
    columns = ("instructions", "before_first_load", *COUNTED, *RESOURCES, "layouts")
    head = ["cell", "config", *(f"{c} ours / rl" for c in columns)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def shown(side: dict[str, Any], column: str) -> str:
        value = side[column]
        return " ".join(value) if isinstance(value, list) else str(value)

    for row in rows:
        mine, peer = row["ours"], row["rl_triton"]
        cells = [shown(mine, c) + (f" / {shown(peer, c)}" if peer else "") for c in columns]
        config = " ".join([row["strategy"], *(f"{k}={v}" for k, v in row["params"].items())])
        lines.append("| " + " | ".join([row["cell"].replace("|", "\\|"), config, *cells])
                     + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cells", nargs="+", default=list(CELLS))
    p.add_argument("--arch", type=int, default=90, help="compute capability, e.g. 90")
    p.add_argument("--descend", type=int, choices=(0, 1), default=1,
                   help="our DESCEND where the key offers it (default 1, rl-triton's order)")
    p.add_argument("--strategy", default="flat",
                   help="our strategy (default flat): flat, tiled, split, sequential, "
                        "lookback or columns")
    p.add_argument("--params", type=parse_params,
                   help="our config, e.g. BLOCK_N=16,num_warps=4,num_stages=1 (default: "
                        "rl-triton's for flat, the strategy's default config otherwise; a "
                        "DESCEND here wins over --descend); rl-triton keeps its own")
    p.add_argument("--dump", type=Path, help="write each SASS listing here")
    p.add_argument("--output", type=Path, help="write kernel_sass.json here")
    p.add_argument("--smoke", action="store_true", help="one tiny cell (CPU check)")
    args = p.parse_args(argv)
    cells = SMOKE_CELLS if args.smoke else tuple(args.cells)
    known = kernel_strategies()
    if args.strategy not in known:
        p.error(f"--strategy: expected one of {', '.join(known)}, got {args.strategy!r}")
    rows = [measure(text, args.arch, args.descend, args.dump, args.params, args.strategy)
            for text in cells]
    print(report(rows))
    if args.output is not None:
        args.output.mkdir(parents=True, exist_ok=True)
        import triton

        (args.output / "kernel_sass.json").write_text(json.dumps(
            {"triton": triton.__version__, "rl_triton": rl_triton_version(), "rows": rows},
            indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
