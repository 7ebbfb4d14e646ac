"""``flat`` strategy: the whole sequence in one tile, BLOCK_N rows per program.

BLOCK_T = next_pow2(T), so the tile must fit a register budget; no carries,
one launch. rl-triton 0.1.3 is this strategy with BLOCK_N = 1 (and, for backward
scans, DESCEND = 1: its tiles hold their steps last to first).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from rltriton_tune.call import ProblemKey
from rltriton_tune.kernels.actions import reduce_actions_default, reduce_actions_space
from rltriton_tune.kernels.builders import Builder
from rltriton_tune.kernels.launch import (
    MAX_BLOCK_N,
    MAX_ELEMS_PER_THREAD,
    TILE_BUDGET,
    FastLaunch,
    Packer,
    TritonStrategy,
    interpreting,
    next_pow2,
    one_row_at_odd_length,
    packed_launcher,
    pow2_range,
    register_cap,
    require,
    rescale_tile,
    tile_order_default,
    tile_order_space,
    two_blocks_space,
)
from rltriton_tune.kernels.scan import (
    edges,
    row_block,
    scan_pairs,
    scan_tile_next,
    time_block,
    true_sizes,
)
from rltriton_tune.strategy import Launcher, Params


@triton.jit
def flat_kernel(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, N, T, A, sn, st, se, san,
                sat, saa, osn, ost, S0, S1, S2, S3, COEFFS: tl.constexpr, FINISH: tl.constexpr,
                REVERSE: tl.constexpr, NEXT: tl.constexpr, F_TRUNC: tl.constexpr,
                F_BOOT: tl.constexpr, F_ENV: tl.constexpr, F_STARTS: tl.constexpr,
                BLOCK_A: tl.constexpr, BIG: tl.constexpr, ALIGN_N: tl.constexpr,
                ALIGN_T: tl.constexpr, ALIGN_A: tl.constexpr, RUN: tl.constexpr,
                DESCEND: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_T: tl.constexpr):
    N, T, A, sn, st, san, sat, osn, ost = true_sizes(
        N, T, A, sn, st, san, sat, osn, ost, ALIGN_N, ALIGN_T, ALIGN_A)
    rows = row_block(tl.program_id(0), BLOCK_N, BIG)
    ts = time_block(0, BLOCK_T, BIG, DESCEND)
    SCAN_REVERSE: tl.constexpr = REVERSE and not DESCEND  # see scan.time_block
    a, b = COEFFS(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, rows, ts, N, T, A, sn, st, se, san, sat,
                  saa, S0, S1, S2, S3, F_TRUNC, F_BOOT, F_ENV, F_STARTS, BLOCK_A)
    if NEXT:
        feed, _ = edges(BLOCK_T, SCAN_REVERSE)
        y, _, y_next, _ = scan_tile_next(a, b, tl.zeros([BLOCK_N], tl.float32), feed,
                                         SCAN_REVERSE, NEXT, RUN)
    else:
        y, _ = scan_pairs(a, b, SCAN_REVERSE, RUN)
        y_next = y
    FINISH(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, rows, ts, y, y_next, N, T, A, sn,
           st, se, san, sat, saa, osn, ost, S0, S1, S2, S3, F_TRUNC, F_BOOT, F_ENV, F_STARTS,
           BLOCK_A)


#: rl-triton 0.1.3's warps by next_pow2(T) past 128 steps (2 up to 128, 16 past 16384):
#: GAE, V-trace, Retrace and λ-returns (its ``ops/gae.py`` and the like), and the lighter
#: discounted returns, eligibility traces and episodic prefix sums (``_WARPS_LIGHT`` of
#: ``ops/returns.py``, ``ops/prefix_sum.py``), which take more warps at 512 and 1024.
RL_TRITON_WARPS = {256: 4, 512: 4, 1024: 8, 2048: 16, 4096: 16, 8192: 32, 16384: 32}
RL_TRITON_WARPS_LIGHT = {**RL_TRITON_WARPS, 512: 8, 1024: 16}
#: The estimators with the lighter table; they also ask for 2 stages from 1024 steps, the
#: others from 2048 (1 below).
RL_TRITON_LIGHT = frozenset({"discounted_returns", "eligibility_traces",
                             "episodic_prefix_sum"})


def rl_triton_params(t: int, algorithm: str = "gae") -> dict[str, int]:
    """rl-triton 0.1.3's config for ``algorithm`` at T = ``t`` (one row per program, warps
    and stages by next_pow2(T)): the baseline, and the floor of the tuner's choice."""
    bt = next_pow2(t)
    light = algorithm in RL_TRITON_LIGHT
    warps = 2 if bt <= 128 else (RL_TRITON_WARPS_LIGHT if light else RL_TRITON_WARPS).get(bt, 16)
    stages = 2 if bt >= (1024 if light else 2048) else 1
    return {"BLOCK_N": 1, "num_warps": warps, "num_stages": stages}


class FlatStrategy(TritonStrategy):
    name = "flat"

    def space(self, key: ProblemKey) -> dict[str, list[int]]:
        bt = next_pow2(key.t)
        return {
            "BLOCK_N": pow2_range(1, max(1, min(MAX_BLOCK_N, next_pow2(key.n), TILE_BUDGET // bt))),
            "num_warps": pow2_range(1, 32),
            # The kernel has no loop for Triton to pipeline, so stages change nothing: the
            # H200 exhaustive tables show 0.2-1% between stage counts, their noise level.
            # Searched at 1; any 1-8 is accepted (rl-triton asks for 1 or 2).
            "num_stages": [1],
            **reduce_actions_space(key),
            **tile_order_space(key),
            **two_blocks_space(key),
        }

    def tile_elems(self, key: ProblemKey, p: Params) -> int:
        return p["BLOCK_N"] * next_pow2(key.t)

    def applies(self, key: ProblemKey, param: str, drawn: Params) -> bool:
        """``TWO_BLOCKS`` takes effect only at 8 warps or more (:func:`register_cap`): a
        search draws it only there, rather than spend a trial on a refused config."""
        return param != "TWO_BLOCKS" or "num_warps" not in drawn or \
            register_cap(drawn["num_warps"]) is not None

    def check(self, key: ProblemKey, p: Params) -> None:
        bt = next_pow2(key.t)
        require(p["BLOCK_N"] * bt <= TILE_BUDGET, self.name,
                f"BLOCK_N={p['BLOCK_N']} x next_pow2(T)={bt} exceeds the tile budget "
                f"{TILE_BUDGET} (use tiled or split for long sequences)")
        require(not p.get("TWO_BLOCKS") or register_cap(p["num_warps"]) is not None, self.name,
                f"TWO_BLOCKS=1 caps nothing at num_warps={p['num_warps']} (8 or more)")

    def default_params(self, key: ProblemKey) -> Params:
        """rl-triton's config, with at least the warps the register rule of ``validate``
        needs (at most ``MAX_ELEMS_PER_THREAD`` elements a thread): past 32768 steps
        rl-triton's 16 warps would hold 128 elements a thread, so the row takes 32."""
        params = rl_triton_params(key.t, key.algorithm)
        fits = self.tile_elems(key, params) // (32 * MAX_ELEMS_PER_THREAD)
        params["num_warps"] = max(params["num_warps"], min(32, fits))
        return {**params, **reduce_actions_default(key), **tile_order_default(key),
                "TWO_BLOCKS": 0}

    def transfer(self, source: ProblemKey, target: ProblemKey,
                 params: Params) -> tuple[str, Params]:
        """A row is one next_pow2(T) tile: keep the tile's size as T moves (see
        :func:`rescale_tile`). ``DESCEND`` goes only where the target offers it. A config
        of several rows a program moved from rows of even length to env-major rows of odd
        length takes one row a program (see :func:`one_row_at_odd_length`), and one
        left with fewer warps than a register cap needs drops ``TWO_BLOCKS``."""
        if "DESCEND" in params and not tile_order_space(target):
            params = {k: v for k, v in params.items() if k != "DESCEND"}
        span_from, span_to = next_pow2(source.t), next_pow2(target.t)
        moved = dict(params) if span_from == span_to else \
            rescale_tile(params, span_from, span_to, target)
        moved = one_row_at_odd_length(moved, source, target)
        if moved.get("TWO_BLOCKS") and register_cap(moved["num_warps"]) is None:
            moved["TWO_BLOCKS"] = 0  # fewer warps than a cap needs: the compiler's registers
        return self.name, moved

    def _launcher(self, key: ProblemKey, params: Params,
                  builder: Builder | None = None) -> Launcher:
        bn, bt = params["BLOCK_N"], next_pow2(key.t)
        pack = Packer(key, bn * bt, params["num_warps"], params.get("REDUCE_A", 0),
                      params.get("DESCEND", 0), builder=builder)
        grid = (triton.cdiv(key.n, bn),)
        consts = dict(pack.constexprs, BLOCK_N=bn, BLOCK_T=bt,
                      num_warps=params["num_warps"], num_stages=params["num_stages"])
        cap = register_cap(params["num_warps"]) if params.get("TWO_BLOCKS") else None
        if cap is not None and not interpreting() and torch.version.hip is None:
            consts["maxnreg"] = cap  # an option of the CUDA backend alone
        return packed_launcher(pack, FastLaunch(flat_kernel, grid, consts, pack.pointers,
                                                pack.pointer_slots))
