"""Host side shared by the Triton strategies: argument packing and the strategy base class.

The argument list every scan core takes (in this order) is

    P0..P9, O0..O3, N, T, A, sn, st, se, san, sat, saa, osn, ost, S0..S3

followed by the core's own runtime arguments, then the constexprs of
:meth:`Packer.constexprs` and the core's block sizes. Everything that depends
only on the problem key is computed once in ``prepare``; the launcher only reads
pointers and strides and allocates outputs (no device sync, CUDA-graph safe).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from triton.runtime import driver

from rltriton_tune.algorithms import AlgorithmSpec
from rltriton_tune.call import DTYPES_BY_NAME, Call, ProblemKey
from rltriton_tune.codegen import generated_function
from rltriton_tune.kernels.actions import ActionPass
from rltriton_tune.kernels.builders import BUILDERS, Builder
from rltriton_tune.kernels.native_launch import NativeLaunch, native_launch
from rltriton_tune.kernels.shapes import vector_elems
from rltriton_tune.pow2 import next_pow2, pow2_divisor
from rltriton_tune.strategy import InvalidConfig, Launcher, Params

#: Offsets are computed in int64 when the largest input may reach this many elements.
INT32_LIMIT = 2**31 - 2**24

#: Elements a program may hold in one tile (BLOCK_N x BLOCK_T): a register budget.
TILE_BUDGET = 2**16

#: Most tile elements one thread may hold (tile / (32 * num_warps)): larger tiles spill
#: registers and take minutes to compile without ever being fastest (the H200 sweep's
#: winners hold 4-16; rl-triton's flat table reaches 64 at T = 32768).
MAX_ELEMS_PER_THREAD = 64

#: Elements of the [BLOCK_N, BLOCK_T, BLOCK_A] tile Retrace's expectation uses.
ACTION_TILE_BUDGET = 2**12

#: Most rows per program in the flat and tiled search spaces.
MAX_BLOCK_N = 64
#: Programs a config moved to a shorter row keeps at least (about two waves of an H200's
#: 132 SMs): more rows per program must not starve the GPU of programs.
MIN_PROGRAMS = 256
#: Warps a moved config grows to at most. On the H200 held-out bench (2026-11-30), flat
#: configs moved from 16 to 32 warps ran > 3% slower than at 16 in 10 of 15 cells (up to
#: 1.8x, at 100x3000, 6000x3000, 24x12000) and > 3% faster in 4 (V-trace, Retrace; up to
#: 1.27x).
MAX_MOVED_WARPS = 16
SUPPORTED_DTYPES = ("float32", "float16", "bfloat16")
SLOTS = 10
SCALARS = 4
#: Output pointer arguments of every core, O0..O3: the outputs in order, and a grad
#: algorithm's boundary gradient in O2, or in O3 after three outputs
#: (:attr:`rltriton_tune.algorithms.AlgorithmSpec.boundary_grads`).
OUTPUT_SLOTS = 4
#: Leading tensor arguments of every core: P0..P9, O0..O3.
POINTER_ARGS = SLOTS + OUTPUT_SLOTS


def pow2_range(lo: int, hi: int) -> list[int]:
    """Powers of two in [lo, hi]."""
    out, p = [], 1
    while p <= hi:
        if p >= lo:
            out.append(p)
        p *= 2
    return out


def rescale_tile(params: Params, span_from: int, span_to: int, target: ProblemKey) -> Params:
    """``params`` (with ``BLOCK_N`` rows and ``num_warps``) whose tile spans ``span_from``
    steps per row, moved to a tile of ``span_to`` steps per row of ``target``.

    Tuned configs are mostly a tile size and a thread count for it, so the tile's element
    count is kept: a shorter span takes more rows (within the row and tile bounds of the
    flat and tiled spaces), as long as ``target`` still gets
    :data:`MIN_PROGRAMS` programs (or the source's rows); a longer one takes fewer rows
    and, once a row outgrows the tile, keeps the elements per thread (more warps, up to
    :data:`MAX_MOVED_WARPS`).
    """
    max_rows = min(MAX_BLOCK_N, next_pow2(target.n), TILE_BUDGET // span_to)
    tile = params["BLOCK_N"] * span_from
    if span_to <= span_from:
        spread = max(params["BLOCK_N"], next_pow2(target.n) // MIN_PROGRAMS)
        return {**params, "BLOCK_N": max(1, min(max_rows, tile // span_to, spread))}
    per_thread = max(1, tile // (32 * params["num_warps"]))
    rows = max(1, min(max_rows, tile // span_to))
    warps = next_pow2(max(1, rows * span_to // (32 * per_thread)))
    return {**params, "BLOCK_N": rows,
            "num_warps": max(params["num_warps"], min(MAX_MOVED_WARPS, warps))}


#: From this span (next_pow2(T)) on, a config of several rows a program moved to
#: env-major rows of odd length takes one row a program. This is observed, not derived:
#: at odd lengths no row but the tensor's first is vector aligned, one row a program or
#: several. On an H100 (float32, against rl-triton 0.1.3, which runs one row a program;
#: ``benchmarks/results/h100/peers.jsonl``), several rows a program moved from even
#: lengths ran 9 of 10 cells of spans 512 and 4096 below 0.97x (V-trace 30019x275 at
#: 0.41-0.56x from 32768x512; eligibility traces and episodic prefix sums 27665x2425 at
#: 0.60-0.74x from 32768x8192; GAE 30019x275 at 0.87-1.41x), against 2 of 69 cells of
#: spans 32 to 128 (geomean 1.03-1.25x per span; V-trace 2415x91 0.80x); one row a
#: program at odd lengths of span 512 ran 38 cells at 0.97x or better. No such cell of
#: span 256 was measured: the threshold lies between the spans that were. Retrace's
#: action tile grows as its rows shrink, and no Retrace cell was measured: it keeps its
#: rows.
ONE_ODD_ROW_SPAN = 256


def one_row_at_odd_length(params: Params, source: ProblemKey, target: ProblemKey) -> Params:
    """``params`` of a whole-row tile (``BLOCK_N`` rows, ``num_warps``) moved from
    ``source`` to ``target``: one row a program on ``num_warps / BLOCK_N`` warps (at least
    one; the same elements per thread where there were at least as many warps as rows)
    where several rows a program go from rows of even length to env-major rows of odd
    length of at least :data:`ONE_ODD_ROW_SPAN` steps' span, for estimators without an
    action axis; else ``params`` unchanged. An entry tuned at an odd length keeps its
    rows."""
    rows = params["BLOCK_N"]
    if (rows > 1 and not target.time_major and not target.a and target.t % 2 == 1
            and source.t % 2 == 0 and next_pow2(target.t) >= ONE_ODD_ROW_SPAN):
        return {**params, "BLOCK_N": 1, "num_warps": max(1, params["num_warps"] // rows)}
    return params


#: Whether packers pass alignment hints (``scan.true_sizes``). Off, sizes that are not
#: multiples of 16 compile to scalar accesses: benchmarks/switches.py measures the gap
#: and the tests run both ways.
ALIGN_HINTS = True
#: Whether backward scans of env-major rows run forward within each thread's flipped
#: runs (``scan.scan_pairs``); off, Triton's reverse scan (A/B and tests run both).
FLIP_RUNS = True
#: The same for per-action estimators (Retrace), whose coefficients come out of sums
#: over the action axis, in another register layout than their loads.
FLIP_ACTION_RUNS = True
#: Whether every backward scan's tiles descend (rl-triton's load order), instead of
#: where :func:`descend_tiles` finds it free; for A/B (benchmarks/switches.py) and tests.
#: A config asks for the same with its ``DESCEND`` parameter (:func:`tile_order_space`).
DESCEND_ALWAYS = False


def tile_order_space(key: ProblemKey) -> dict[str, list[int]]:
    """The ``DESCEND`` choices of a key: ``[0, 1]`` for backward scans of env-major rows,
    none otherwise. 1 holds every tile last to first, as rl-triton does (a forward scan
    over the tile, its loads scalar); 0 does so only where :func:`descend_tiles` finds it
    free, and elsewhere loads vectors and scans flipped runs, whose reverse scan across
    lanes adds butterfly shuffles to the critical path (sm_90, GAE 333x150 at
    rl-triton's config: 25 shuffles against 20). Which wins is measured per config."""
    if BUILDERS[key.algorithm].reverse and not key.time_major:
        return {"DESCEND": [0, 1]}
    return {}


def tile_order_default(key: ProblemKey) -> dict[str, int]:
    """``DESCEND`` off where a key offers it: the tile order of :func:`descend_tiles`."""
    return {"DESCEND": 0} if tile_order_space(key) else {}


#: 32-bit registers of one multiprocessor (every NVIDIA GPU since compute capability 5.0,
#: Hopper and Blackwell included), and the unit a warp's registers are allocated in.
REGISTER_FILE = 65536
REGISTER_UNIT = 8


def two_blocks_space(key: ProblemKey) -> dict[str, list[int]]:
    """The ``TWO_BLOCKS`` choices of a one-tile (flat) config: 1 caps the registers of a
    thread (Triton's ``maxnreg``, :func:`register_cap`) at what two programs of its warps
    can share on one multiprocessor (where the compiler's allocation fits two already,
    the cap can still make it spill); 0 leaves them to the compiler. Compiled for sm_90
    with Triton 3.6, V-trace at 11077x2799 on rl-triton's config (one row of 4096 steps
    a program, 16 warps) takes 106 registers a thread, one program of 512 threads an SM,
    where rl-triton's kernel takes 90; capped at 64, the same config took 500 µs on the
    H100 against 829 uncapped (rl-triton: 502). Which wins is measured per config. The
    cap is an option of Triton's CUDA backend: on ROCm the parameter launches uncapped."""
    return {"TWO_BLOCKS": [0, 1]}


def register_cap(num_warps: int) -> int | None:
    """Triton's ``maxnreg`` for ``TWO_BLOCKS=1`` at ``num_warps``: the most registers a
    thread can hold with two programs on one multiprocessor; None where that is no cap
    (fewer than 8 warps: Triton allocates at most 255 a thread)."""
    cap = REGISTER_FILE // (2 * 32 * num_warps) // REGISTER_UNIT * REGISTER_UNIT
    return cap if cap < 255 else None


def descend_tiles(key: ProblemKey, tile_elems: int, num_warps: int,
                  always: bool = False) -> bool:
    """Whether a backward scan's tiles hold their steps last to first, so that the cores
    scan them forward (``scan.time_block``): where that costs the loads nothing, for
    time-major keys (steps not contiguous in memory), for tiles of fewer than two
    elements a thread (no vector to lose; ``scan_run`` finds no run to flip there) and
    for env-major rows of an odd length (every row but the first starts off a vector
    boundary, so every access is scalar whatever the order). Descending tiles need no
    flipped runs: flat GAE 777x77 on 64 threads a row went from 7 barriers and 50
    shuffles to rl-triton's 1 and 24, and on the H200 the 777x77 cells of the rl-triton
    comparison from 0.66-0.89x to 0.96-1.00x (with entries refreshed for their
    neighbourhood). Even lengths that are not a multiple of a whole vector still load
    narrower vectors and keep the runs (unmeasured either way). ``always``: a config's
    ``DESCEND`` (every backward tile descends)."""
    return BUILDERS[key.algorithm].reverse and (
        always or DESCEND_ALWAYS or key.time_major or tile_elems < 2 * 32 * num_warps
        or key.t % 2 == 1)


def is_pow2(x: int) -> bool:
    return x >= 1 and x & (x - 1) == 0


def scan_run(key: ProblemKey, tile_elems: int, num_warps: int) -> int:
    """Steps per thread-contiguous run for a backward scan (``scan.scan_pairs``): one
    16-byte vector of the inputs along env-major rows, or the thread's whole share of
    the tile if smaller (a run must not span threads). 1 (Triton's reverse scan) for
    forward scans, time-major inputs (steps not contiguous) and, unless
    ``FLIP_ACTION_RUNS``, per-action estimators."""
    if key.time_major or not BUILDERS[key.algorithm].reverse or not FLIP_RUNS or (
            key.a and not FLIP_ACTION_RUNS):
        return 1
    return max(1, min(vector_elems(key), tile_elems // (32 * num_warps)))


def _env_flag(spec: AlgorithmSpec, flags: frozenset[str], boundary: str | None) -> bool | int:
    """``F_ENV``: whether a per-env value (``last_value``, a seed) enters the scan, or GAE's
    and V-trace's ``next_values`` rides in the bootstrap slot. The cores load a per-env
    value in the first tile in scan order only (T-1 backward, 0 forward), except for 2:
    V-trace's grad algorithm reads ``last_value`` at T-1 of a forward scan, so every tile
    may. A grad algorithm's per-env boundary input only asks for its gradient: no per-env
    value enters its scan, unless it reads its boundary input (V-trace's)."""
    if "next" in flags:
        return True
    if not ({"last_value", "seed"} & flags):
        return False
    if boundary in spec.per_env and not spec.reads_boundary:
        return False
    return 2 if spec.reads_boundary else True


class Packer:
    """Precomputed argument plan for one problem key."""

    def __init__(self, key: ProblemKey, tile_elems: int, num_warps: int,
                 reduce_actions: int = 0, descend: int = 0,
                 builder: Builder | None = None) -> None:
        """``reduce_actions``: a strategy's ``REDUCE_A`` (Retrace keys): run the action
        pre-pass (:mod:`rltriton_tune.kernels.actions`) before the scan. ``descend``: a
        config's ``DESCEND`` (:func:`tile_order_space`). ``builder``: the key's
        (``BUILDERS``) unless given (its ``exact`` variant)."""
        spec = key.spec
        self.key = key
        self.builder = builder or BUILDERS[key.algorithm]
        self.names = spec.tensors
        self.ref = next(n for n in spec.tensors if n not in spec.optional
                        and n not in spec.per_action and n not in spec.per_env)
        self.per_action = spec.per_action[0] if spec.per_action else None
        self.per_env = next((n for n in spec.per_env), None)
        self.scalars = spec.scalars
        # Unused scalar and pointer slots get None, which Triton compiles as a constexpr:
        # no kernel parameter. Parameters can cost device time even unread: on the H200,
        # rl-triton's GAE kernel given 20 unused parameters more (116 bytes) took 1-5%
        # longer at 77x24 to 4096x32 (2.35 against 2.41 µs at 333x150).
        self.scalar_padding = (None,) * (SCALARS - len(spec.scalars))
        # Every pointer slot, by the input it holds; None for absent optional inputs and
        # unused slots.
        # GAE's and V-trace's next_values has no slot of its own: it excludes
        # bootstrap_values and takes its slot (``builders._next_given``).
        flags = key.flag_set
        names = tuple(n for n in spec.tensors if n != "next_values" or n not in spec.optional)
        if "next" in flags:
            names = tuple("next_values" if n == "bootstrap_values" else n for n in names)
        if spec.reads_boundary:
            # V-trace's grad algorithm reads all three boundary inputs, which exclude each
            # other: last_value takes bootstrap_values's slot too (read as [N] by ``se``).
            names = tuple(n for n in names if n != "last_value")
            if "last_value" in flags:
                names = tuple("last_value" if n == "bootstrap_values" else n for n in names)
        if len(names) > SLOTS:
            raise ValueError(f"{spec.name}: {len(names)} tensors for {SLOTS} pointer slots")
        self.slots: tuple[str | None, ...] = names + (None,) * (SLOTS - len(names))
        # The key's flags say which optional inputs a call passes, so each slot's tensor is
        # known by name here (``args`` reads each by name).
        passed = set(key.passed_tensors)
        self.slot_inputs = tuple(n if n in passed else None for n in self.slots)
        present = tuple(n for n in self.slot_inputs if n is not None)
        self._per_env_passed = self.per_env if self.per_env in passed else None
        n, t = key.n, key.t
        self.out_shape = (t, n) if key.time_major else (n, t)
        # The contiguous axis's size divides every [N, T] stride that is not 1: the kernels
        # get size and strides divided by its power-of-two part (``scan.true_sizes``).
        hint = ALIGN_HINTS
        self.align_n = pow2_divisor(n) if key.time_major and hint else 1
        self.align_t = pow2_divisor(t) if hint and not key.time_major else 1
        self.sizes = (n // self.align_n, t // self.align_t)
        # Per-action inputs are contiguous in A: A divides both of their other strides.
        self.align_a = pow2_divisor(key.a) if hint and spec.per_action else 1
        self._sizes_and_a = (*self.sizes, key.a // self.align_a)
        # Strides, the same for every call of the key: a Call's inputs are contiguous in
        # its layout (see :class:`~rltriton_tune.call.Call`). A stride of a dimension of
        # size 1 may differ, but only index 0 is read along it.
        if key.time_major:
            sn, st = 1, n // self.align_n
            san, sat = key.a // self.align_a, n * key.a // self.align_a
        else:
            sn, st = t // self.align_t, 1
            san, sat = t * key.a // self.align_a, key.a // self.align_a
        if self.per_action is None or reduce_actions:
            san = sat = saa = 0
        else:
            saa = 1
        self._strides = (sn, st, 0 if self._per_env_passed is None else 1, san, sat, saa)
        self.out_strides = (sn, st)  # fresh outputs: contiguous, like the [N, T] inputs
        self.n_outputs = len(spec.outputs)
        # A grad algorithm given a boundary input writes that input's gradient after its
        # outputs: ``[N]`` for a per-env input, else shaped like the outputs.
        boundary = next((n for n in spec.boundary_grads if n in passed), None)
        self.boundary_shape = None if boundary is None else (
            (n,) if boundary in spec.per_env else self.out_shape)
        # Output pointer slots O0..O3: the outputs in order, then the boundary gradient in
        # O2 (O3 after three outputs); None in the slots left.
        written = self.n_outputs + (boundary is not None)
        boundary_slot = max(self.n_outputs, 2) if boundary is not None else None
        self.output_slots: tuple[int | None, ...] = tuple(
            i if i < self.n_outputs else self.n_outputs if i == boundary_slot else None
            for i in range(OUTPUT_SLOTS))
        # Positions of the tensors among the pointer arguments: all a launch must look at
        # for alignment and element types (``FastLaunch``'s ``pointers``).
        self.pointers = (*(i for i, n in enumerate(self.slot_inputs) if n is not None),
                         *(SLOTS + self.output_slots.index(i) for i in range(written)))
        # For each pointer argument, the index in ``pointers`` of its tensor, or
        # len(pointers) for None (``FastLaunch``'s ``slots``): the direct launch passes
        # each address once read.
        self.pointer_slots = (
            *(present.index(n) if n is not None else len(self.pointers)
              for n in self.slot_inputs),
            *(len(self.pointers) if i is None else len(present) + i
              for i in self.output_slots))
        block_a = min(next_pow2(max(key.a, 1)), max(1, ACTION_TILE_BUDGET // tile_elems))
        big = n * t * max(key.a, 1) >= INT32_LIMIT
        self._action_pass = None
        if reduce_actions and self.per_action is not None:
            self._action_pass = ActionPass(key, big, FastLaunch)
            block_a = 0  # the builders' sign that the pre-pass reduced the action axis
        self.constexprs: dict[str, Any] = dict(
            COEFFS=self.builder.coeffs,
            FINISH=(self.builder.finish if boundary is None else self.builder.boundary_finish),
            REVERSE=self.builder.reverse,
            NEXT=self.builder.next_value,
            F_TRUNC="trunc" in flags,
            F_BOOT="bootstrap" in flags or "next" in flags,
            F_ENV=_env_flag(spec, flags, boundary),
            F_STARTS="starts_at" in flags,
            BLOCK_A=block_a,
            BIG=big,
            ALIGN_N=self.align_n,
            ALIGN_T=self.align_t,
            ALIGN_A=self.align_a,
            RUN=scan_run(key, tile_elems, num_warps),
            DESCEND=descend_tiles(key, tile_elems, num_warps, bool(descend)),
        )
        self.args = self._compile_args()

    def after_pointers(self, scalar: Callable[[str], str]) -> list[str]:
        """Source text of the arguments after the pointers: sizes and strides (constants
        of the key), then the scalars (``scalar(name)``: the expression reading one) and
        the unused scalar slots."""
        return [*(repr(v) for v in (*self._sizes_and_a, *self._strides, *self.out_strides)),
                *(scalar(name) for name in self.scalars),
                *(repr(v) for v in self.scalar_padding)]

    def _compile_args(self) -> Callable[[Call], tuple[list[Any], tuple[torch.Tensor, ...]]]:
        """``args(call)``: the positional arguments common to every core, and the freshly
        allocated outputs (and boundary gradient).

        This runs on every launch, so it is generated as one flat function for the key:
        each tensor read by name, every size and stride a constant, no loop. Outputs are
        ``empty_like`` of the reference input (a required per-step input: validated to
        the outputs' shape and contiguous, so its preserved format is the contiguous one)
        where it is a plain Tensor of the output dtype: no argument to parse (on a CPU
        0.75 µs against 0.84 for ``new_empty`` with the shape as ints and 0.92 for
        ``empty_like`` with a ``memory_format``); a subclass's ``__torch_function__``
        never decides what the outputs are. Otherwise, and for the boundary gradient's
        other shape, ``new_empty`` (no dtype and device keywords to parse) or
        ``torch.empty``, with the shape as separate ints (a tuple is parsed slower)."""
        shape = ", ".join(map(str, self.out_shape))
        lines = ["def args(call):", "    tensors = call.tensors"]
        if self._action_pass is not None:
            lines.append("    tensors = reduce_actions(tensors)")
        lines += [f"    ref = tensors[{self.ref!r}]",
                  "    dtype = call.out_dtype",
                  "    if type(ref) is Tensor and ref.dtype is dtype:",
                  *(f"        o{i} = empty_like(ref)" for i in range(self.n_outputs)),
                  "        new = ref.new_empty",
                  "    else:",
                  "        new = partial(empty, dtype=dtype, device=ref.device)",
                  *(f"        o{i} = new({shape})" for i in range(self.n_outputs))]
        outputs = [f"o{i}" for i in range(self.n_outputs)]
        if self.boundary_shape is not None:
            lines.append(f"    o{self.n_outputs} = new({', '.join(map(str, self.boundary_shape))})")
            outputs.append(f"o{self.n_outputs}")
        items = [f"tensors[{name!r}]" if name is not None else "None" for name in self.slot_inputs]
        items += [f"o{i}" if i is not None else "None" for i in self.output_slots]
        items += self.after_pointers(lambda name: f"scalars[{name!r}]")
        lines += ["    scalars = call.scalars",
                  f"    return [{', '.join(items)}], ({', '.join(outputs)},)"]
        namespace: dict[str, Any] = {
            "Tensor": torch.Tensor, "partial": partial, "empty": torch.empty,
            "empty_like": torch.empty_like,
            "reduce_actions": None if self._action_pass is None else self._action_pass.run}
        return generated_function(lines, "args",
                                  f"<rltriton_tune Packer.args {self.key.as_text()}>", namespace)


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


class TritonStrategy:
    """Base of the Triton strategies: parameter plumbing around ``space``/``check``.

    Subclasses define ``name``, ``space(key)`` (the tuner's candidates),
    ``check(key, params)`` (every validity rule, raising :class:`InvalidConfig`),
    ``default_params(key)`` and ``_launcher(key, params)``.
    """

    name: str = ""
    searchable: bool = True

    def __init__(self) -> None:
        self._cache: dict[tuple[ProblemKey, tuple[tuple[str, Any], ...]], Launcher] = {}

    def available(self, device: torch.device) -> bool:
        device = torch.device(device)
        return device.type == "cuda" or (device.type == "cpu" and interpreting())

    def space(self, key: ProblemKey) -> dict[str, list[Any]]:
        raise NotImplementedError

    def default_params(self, key: ProblemKey) -> Params:
        raise NotImplementedError

    def check(self, key: ProblemKey, params: Params) -> None:
        raise NotImplementedError

    def skip_reason(self, key: ProblemKey, params: Params,
                    sm_count: int | None = None) -> str | None:
        """Configs with more threads than tile elements are not searched: the extra threads
        hold copies of the same elements. In all 56 H200 sweep tables (12 exhaustive, 44
        partial) the fastest config kept none idle, and
        leaving them out removed 9-56% of each table."""
        threads = 32 * params["num_warps"]
        elems = self.tile_elems(key, params)
        if elems < threads:
            return f"{threads} threads for a {elems}-element tile"
        return None

    def transfer(self, source: ProblemKey, target: ProblemKey,
                 params: Params) -> tuple[str, Params]:
        """Unchanged by default: chunk loops and split/lookback chunks do not depend on the
        shape beyond what ``validate`` adjusts."""
        return self.name, dict(params)

    def validate(self, key: ProblemKey, params: Params) -> Params:
        if key.dtype not in SUPPORTED_DTYPES:
            raise InvalidConfig(f"{self.name}: dtype {key.dtype} is not supported by Triton "
                                f"kernels (expected one of {SUPPORTED_DTYPES})")
        names = set(self.space(key))
        unknown = sorted(set(params) - names)
        if unknown:
            raise InvalidConfig(f"{self.name}: unknown parameter(s) {unknown}; "
                                f"expected {sorted(names)}")
        full: Params = {}
        defaults = self.default_params(key)
        for name in sorted(names):
            value = params.get(name, defaults[name])
            try:
                full[name] = int(value)
            except (TypeError, ValueError, OverflowError):  # int(inf) overflows
                raise InvalidConfig(f"{self.name}: parameter {name}={value!r} is not an "
                                    "integer") from None
            if not isinstance(value, (int, str)) and value != full[name]:
                # int() would truncate it (2.5, Fraction(5, 2)): a fraction is a wrong
                # config, not a rounded one; a whole float (JSON's 4.0) is that integer.
                raise InvalidConfig(f"{self.name}: parameter {name}={value!r} is not an "
                                    "integer")
            if name in SWITCH_PARAMS:
                if full[name] not in (0, 1):
                    raise InvalidConfig(f"{self.name}: {name}={value!r} must be 0 or 1")
            elif name != "num_stages" and not is_pow2(full[name]):
                raise InvalidConfig(f"{self.name}: {name}={value!r} must be a power of two")
        if not 1 <= full.get("num_warps", 1) <= 32:
            raise InvalidConfig(f"{self.name}: num_warps={full['num_warps']} not in [1, 32]")
        if not 1 <= full.get("num_stages", 1) <= 8:
            raise InvalidConfig(f"{self.name}: num_stages={full['num_stages']} not in [1, 8]")
        self.check(key, full)
        per_thread = self.tile_elems(key, full) // (32 * full["num_warps"])
        require(per_thread <= MAX_ELEMS_PER_THREAD, self.name,
                f"{per_thread} tile elements per thread with num_warps={full['num_warps']}; "
                f"at most {MAX_ELEMS_PER_THREAD} (use more warps or a smaller tile)")
        return full

    def tile_elems(self, key: ProblemKey, params: Params) -> int:
        """Elements of the largest tile one program holds (a register-pressure measure)."""
        raise NotImplementedError

    def prepare(self, key: ProblemKey, params: Params) -> Launcher:
        params = self.validate(key, params)
        cache_key = (key, tuple(sorted(params.items())))
        launcher = self._cache.get(cache_key)
        if launcher is None:
            if key.n == 0 or key.t == 0:
                launcher = _empty_launcher(key)
            else:
                builder = BUILDERS[key.algorithm]
                launcher = self._launcher(key, params, builder)
                if builder.exact is not None:
                    launcher = by_scalars(key, builder, launcher, partial(
                        self._launcher, key, params, builder.exact))
            self._cache[cache_key] = launcher
        return launcher

    def _launcher(self, key: ProblemKey, params: Params,
                  builder: Builder | None = None) -> Launcher:
        raise NotImplementedError


def by_scalars(key: ProblemKey, builder: Builder, launcher: Launcher,
               exact: Callable[[], Launcher]) -> Launcher:
    """``launcher`` (of ``builder``) for calls whose scalars ``builder.serves``; the
    launcher ``exact()`` builds (of ``builder.exact``, compiled on first use) for the
    others. The bound launch (``bind``) and the other attributes are ``launcher``'s; the
    bound launch's generated code makes the same test (:meth:`FastLaunch.bind`) and
    declines the others to this function.

    The exact variant is not what the tuner timed and gated, and its first call can come
    at any step of a run: where it fails to build or launch, those calls take the torch
    implementation from then on, with a warning, rather than fail the run."""
    names, serves = key.spec.scalars, builder.serves
    other: list[Launcher] = []

    def launch(call: Call) -> tuple[torch.Tensor, ...]:
        scalars = call.scalars
        if serves(*(scalars[name] for name in names)):
            return launcher(call)
        if other:
            return other[0](call)
        try:
            chosen = exact()
            out = chosen(call)
        except Exception as exc:  # noqa: BLE001 - any failure of the untuned variant
            from rltriton_tune.fallback import STRATEGIES

            warnings.warn(f"rltriton-tune: the exact finish of {key.as_text()} failed "
                          f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); "
                          "calls with these scalars take the torch implementation",
                          RuntimeWarning, stacklevel=2)
            torch_impl = STRATEGIES["torch"]
            chosen = torch_impl.prepare(key, torch_impl.default_params(key))
            out = chosen(call)
        other.append(chosen)
        return out

    launch.__dict__.update(vars(launcher))
    return launch


#: Parameters that turn a kernel path on (1) or off (0).
SWITCH_PARAMS = frozenset({"REDUCE_A", "DESCEND", "TWO_BLOCKS"})


def _empty_launcher(key: ProblemKey) -> Launcher:
    shape = (key.t, key.n) if key.time_major else (key.n, key.t)
    count = len(key.spec.outputs)

    def launch(call: Call) -> tuple[torch.Tensor, ...]:
        return tuple(torch.empty(shape, dtype=call.out_dtype, device=call.device)
                     for _ in range(count))

    return launch


def require(ok: bool, strategy: str, message: str) -> None:
    """Raise InvalidConfig(``strategy: message``) unless ``ok``."""
    if not ok:
        raise InvalidConfig(f"{strategy}: {message}")



class FastLaunch:
    """Launch one Triton kernel with fixed grid and constexprs at the lowest host cost.

    The first launch on a device goes through Triton's generic path
    (``kernel[grid](...)``: binding, specialisation, cache lookup, compile if
    needed) and keeps the compiled binary it returns. Later launches call that
    binary's launch function directly (:mod:`~rltriton_tune.kernels.native_launch`),
    which skips the per-call binding that costs tens of microseconds for kernels with
    many arguments. This is valid because a launcher serves one problem key: every
    integer argument (sizes, strides) is the same on each call, so only pointer
    alignment could change Triton's specialisation, and a misaligned pointer takes the
    generic path. Launch hooks (profilers) also take the generic path. A direct launch
    that raises turns the direct path off for this kernel; a bad argument raises as it
    would on the generic path. The compiled binaries are kept referenced, so that their
    modules stay loaded while their handles are in use.

    The direct path runs on every launch, so it is generated once per kernel as one flat
    function (each tensor read by position, the pointer slots and constexprs written
    out, no loop): on an H100 host about 1 µs less per launch than a loop over the
    arguments.
    """

    __slots__ = ("_launch", "_consts", "_grid", "_tail", "_compiled", "_direct", "_knobs",
                 "_pointer_positions", "_slot_indices", "_leading", "_native", "_fast",
                 "_kept")

    def __init__(self, kernel: Any, grid: tuple[int, ...], consts: dict[str, Any],
                 pointers: tuple[int, ...] | None = None,
                 slots: tuple[int, ...] | None = None, *,
                 leading: int = POINTER_ARGS) -> None:
        """``leading``: how many leading arguments are tensors (the scan cores'
        :data:`POINTER_ARGS`). ``pointers``: positions of the distinct tensors among them
        (``Packer.pointers``); all of them by default. ``slots``: for each of those
        arguments, the index in ``pointers`` of its tensor, or ``len(pointers)`` where the
        argument is None (``Packer.pointer_slots``); required with ``pointers``."""
        if (pointers is None) != (slots is None):
            raise ValueError("FastLaunch: pass pointers and slots together")
        self._launch = kernel[grid]
        self._leading = leading
        self._pointer_positions = tuple(range(leading) if pointers is None else pointers)
        self._slot_indices = tuple(range(leading) if slots is None else slots)
        self._consts = consts
        self._grid = (grid[0], grid[1] if len(grid) > 1 else 1, grid[2] if len(grid) > 2 else 1)
        names = list(kernel.arg_names)
        constexpr_names = [n for n in names if n in consts]
        n_runtime = len(names) - len(constexpr_names)
        # Values of the constexpr parameters, in signature order (they follow the runtime ones).
        self._tail = tuple(consts[n] for n in names[n_runtime:])
        self._compiled: dict[tuple[Any, ...], NativeLaunch] = {}
        self._kept: list[Any] = []
        self._native = True
        self._fast: Callable[[list[Any]], bool | None] | None = None
        self._knobs = _runtime_knobs()
        self._direct = (not interpreting() and self._knobs is not None
                        and names[n_runtime:] == constexpr_names)

    @property
    def direct(self) -> bool:
        """Whether launches may take the direct path: off under the interpreter, on a
        Triton without runtime knobs, and for good once a direct launch has failed."""
        return self._direct

    @property
    def native(self) -> bool:
        """Whether every binary kept for the direct path is launched by Triton's C launch
        function itself (:mod:`~rltriton_tune.kernels.native_launch`), not through its
        Python launcher."""
        return self._native and bool(self._compiled)

    @property
    def binaries(self) -> int:
        """Compiled binaries kept for the direct path (one per device and pointer
        element types seen)."""
        return len(self._compiled)

    def generic(self, args: list[Any]) -> Any:
        """Launch ``args`` through Triton's generic path alone (binding, specialisation,
        the compile cache): every launch the direct path does not take, and tools that
        intercept it (benchmarks/kernel_sass.py). Returns what Triton's launch returns
        (the compiled kernel)."""
        return self._launch(*args, **self._consts)

    def __call__(self, args: list[Any]) -> None:
        if self._direct:
            fast = self._fast
            if fast is not None:
                launched = fast(args)
                if launched:
                    return
                if launched is None:  # the launch raised: an ABI this code does not know
                    self._direct = False
                    self._fast = None
                    self.generic(args)
                    return
            positions = self._pointer_positions
            if not any(args[i].data_ptr() & 15 for i in positions):
                # The binary is specialised on the pointers' element types: key it by them.
                variant = (current_device(), *(args[i].dtype for i in positions))
                compiled = self.generic(args)
                if variant not in self._compiled and compiled is not None:
                    compiled = compiled.result() if hasattr(compiled, "result") else compiled
                    plan, native = native_launch(compiled.run, self._grid, compiled.function,
                                                 compiled.packed_metadata)
                    self._compiled[variant] = plan
                    self._kept.append(compiled)  # the binary's module lives while it does
                    self._native = self._native and native
                    if self._fast is None:
                        self._fast = self._generate(len(args))
                return
        self.generic(args)

    def _generate(self, n_args: int) -> Callable[[list[Any]], bool | None]:
        """``fast(args)``: launch through a kept binary and return True, or return False
        where the generic path must launch (a misaligned pointer, element types or a
        device without a binary yet, a launch hook set, an argument list of another
        length), or None where the launch itself raised. A bad argument raises as it
        would on the generic path."""
        positions = self._pointer_positions
        tensors = [f"t{j}" for j in range(len(positions))]
        addresses = [f"a{j}" for j in range(len(positions))]
        slots = [addresses[s] if s < len(positions) else "None" for s in self._slot_indices]
        lines = ["def fast(args):",
                 f"    if len(args) != {n_args}:",
                 "        return False",
                 *(f"    {t} = args[{i}]" for t, i in zip(tensors, positions, strict=True)),
                 *(f"    {a} = {t}.data_ptr()" for a, t in zip(addresses, tensors, strict=True)),
                 f"    if ({' | '.join(addresses) or '0'}) & 15:",
                 "        return False",
                 *_launch_lines("".join(f"{t}.dtype, " for t in tensors),
                                "".join(f"{x}, " for x in slots) + f"*args[{self._leading}:], ",
                                "False"),
                 "    return True"]
        namespace = {"compiled": self._compiled, "knobs": self._knobs, "tail": self._tail,
                     "current_device": current_device, "current_stream": current_stream}
        return generated_function(lines, "fast", "<rltriton_tune FastLaunch>",
                                  namespace)

    def bind(self, pack: Packer, tensors: tuple[str, ...], scalars: tuple[str, ...],
             like: str, single: bool,
             device_index: int | None = None) -> Callable[..., Any] | None:
        """The whole launch of one call as one function of its inputs, for the usual
        call's fast path (:mod:`rltriton_tune.hot_path`), or None where this kernel's
        calls need more than ``pack`` (an action pre-pass, a boundary gradient, arguments
        of its own).

        With ``device_index``, ``go`` declines a call made while another CUDA device is
        current (Triton launches on the current device; the caller's general path then
        runs it under a device guard).

        ``go(*tensors, *scalars, *dtypes)`` takes the call's tensors in the order
        ``tensors`` names them and its float scalars in the order of ``scalars``, already
        validated for this launcher's key, and optionally (the fast path passes them) the
        dtypes of those tensors but ``like``, in the same order, as the fast path read
        them: then it reads no dtype itself. ``like``'s dtype is the key's, as are the
        outputs': constants here (without ``dtypes``, ``like`` of another dtype declines).
        It allocates the outputs (``empty_like`` of the ``[N, T]`` input ``like``, which
        has the outputs' dtype and shape; None where ``like`` is another kind of input)
        and launches through a kept binary, returning the outputs (the one output where
        ``single``), or returns None before anything is launched where the direct path
        cannot serve (see :meth:`_generate`): the caller then makes a ``Call`` and calls
        the launcher. No ``Call``, argument list or intermediate frame is made, which is
        most of the host time left around the launch itself."""
        if (pack._action_pass is not None or pack.boundary_shape is not None
                or self._leading != POINTER_ARGS or not self._direct):
            return None
        position = {name: f"x{i}" for i, name in enumerate(tensors)}
        if like not in position or any(name is not None and name not in position
                                       for name in pack.slot_inputs):
            return None
        value = {name: f"s{j}" for j, name in enumerate(scalars)}
        if any(name not in value for name in pack.scalars):
            return None
        outputs = [f"o{i}" for i in range(pack.n_outputs)]
        inputs = [name for name in pack.slot_inputs if name is not None]
        # The pointer arguments, each as the variable holding its address.
        address = {name: f"a{i}" for i, name in enumerate(inputs)}
        slots = [address[name] if name is not None else "None" for name in pack.slot_inputs]
        slots += [f"b{i}" if i is not None else "None" for i in pack.output_slots]
        spec = pack.key.spec
        if like in spec.per_action or like in spec.per_env:  # outputs are [N, T]
            return None
        # Each tensor's dtype: a parameter (the fast path's reading), or for ``like`` the
        # key's dtype, which the outputs have too.
        dtype = {name: f"d{i}" for i, name in enumerate(tensors) if name != like}
        others = list(dtype.items())
        dtype[like] = "out_dtype"
        like = position[like]
        parameters = [*position.values(), *(f"s{j}" for j in range(len(scalars))),
                      *(f"{d}=None" for _, d in others)]
        # Called without the dtypes (not from the fast path): read them, and check
        # ``like``'s, which the fast path's memo key has checked otherwise.
        check_like = [f"if {like}.dtype is not out_dtype:", "    return None"]
        read = [*check_like, *(f"{d} = {position[name]}.dtype" for name, d in others)]
        serves = pack.builder.serves
        lines = [f"def go({', '.join(parameters)}):",
                 "    if not kernel._direct:",
                 "        return None",
                 # Scalars this builder does not serve: by_scalars launches its exact variant.
                 *([f"    if not serves({', '.join(value[name] for name in pack.scalars)}):",
                    "        return None"] if serves is not None else []),
                 *((f"    if {others[0][1]} is None:", *(f"        {x}" for x in read))
                   if others else (f"    {x}" for x in check_like)),
                 *(f"    {address[name]} = {position[name]}.data_ptr()" for name in inputs),
                 f"    if ({' | '.join(address.values()) or '0'}) & 15:",
                 "        return None",
                 # The fast path checked ``like``: the key's shape, contiguous, so its
                 # preserved format is the contiguous one (see Packer._compile_args).
                 *(f"    {o} = empty_like({like})"
                   for o in outputs),
                 *(f"    b{i} = {o}.data_ptr()" for i, o in enumerate(outputs)),
                 f"    if ({' | '.join(f'b{i}' for i in range(len(outputs)))}) & 15:",
                 "        return None",
                 *_launch_lines("".join(f"{dtype[name]}, " for name in inputs)
                                + "out_dtype, " * pack.n_outputs,
                                "".join(f"{x}, " for x in [*slots,
                                                           *pack.after_pointers(value.get)]),
                                "None", device_index),
                 f"    return {outputs[0] if single else '(' + ', '.join(outputs) + ',)'}"]
        namespace = {"kernel": self, "compiled": self._compiled, "knobs": self._knobs,
                     "serves": serves,
                     "tail": self._tail, "current_device": current_device,
                     "current_stream": current_stream, "empty_like": torch.empty_like,
                     "out_dtype": DTYPES_BY_NAME[pack.key.dtype]}
        return generated_function(lines, "go", f"<rltriton_tune FastLaunch.bind "
                                  f"{pack.key.as_text()}>", namespace)


def _launch_lines(dtypes: str, arguments: str, declined: str,
                  device_index: int | None = None) -> list[str]:
    """The generated direct launches' common end: find the kept binary for the current
    device and ``dtypes`` (source text of the pointers' element types), and launch it on
    the current stream with ``arguments`` (source text of the items before the
    constexprs). The lines return ``declined`` where there is no binary for them or a
    launch hook is set (hooks can be set at any time, so this is checked per launch, and
    a hooked launch takes the generic path) or, with ``device_index``, another device is
    current, and None where the launch raises."""
    return ["    device = current_device()",
            *([f"    if device != {int(device_index)}:", f"        return {declined}"]
              if device_index is not None else []),
            f"    plan = compiled.get((device, {dtypes}))",
            "    if plan is None:",
            f"        return {declined}",
            "    enter = knobs.launch_enter_hook",
            "    exit_ = knobs.launch_exit_hook",
            "    if (enter is not None and getattr(enter, 'calls', None) != []) or \\",
            "            (exit_ is not None and getattr(exit_, 'calls', None) != []):",
            f"        return {declined}",
            # Addresses go in as integers: for a tensor, Triton's launcher calls
            # data_ptr() and asks the driver about the pointer (cuPointerGetAttribute)
            # once per argument, which validation has made redundant.
            "    try:",
            f"        plan(current_stream(device), ({arguments}*tail))",
            "    except Exception:",
            "        return None"]


def packed_launcher(pack: Packer, kernel: FastLaunch) -> Launcher:
    """The launcher of a strategy that launches one kernel with ``pack``'s arguments.
    Its ``bind`` attribute is ``kernel.bind`` for ``pack`` (the usual call's fast path);
    ``pack`` and ``kernel`` are there for inspection (``benchmarks/dispatch_overhead.py``
    times them apart)."""
    args_of = pack.args

    def launch(call: Call) -> tuple[torch.Tensor, ...]:
        args, outs = args_of(call)
        kernel(args)
        return outs

    launch.bind = partial(kernel.bind, pack)  # type: ignore[attr-defined]
    launch.pack, launch.kernel = pack, kernel  # type: ignore[attr-defined]
    return launch


#: Index of the current CUDA device: PyTorch's C function where this build has CUDA
#: (the direct path runs after a launch on a CUDA tensor, so CUDA is initialised).
current_device: Callable[[], int] = (getattr(torch._C, "_cuda_getDevice", None)
                                     or torch.cuda.current_device)


def current_stream(device: int) -> int:
    """Raw handle of the current CUDA stream of ``device`` (Triton's own lookup)."""
    return driver.active.get_current_stream(device)


def _runtime_knobs() -> Any:
    """Triton's runtime settings (launch hooks), or None where this Triton has none."""
    try:
        from triton import knobs
    except ImportError:
        return None
    return getattr(knobs, "runtime", None)
