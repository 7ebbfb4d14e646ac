"""``sequential`` strategy: one time step at a time over a BLOCK_N vector of rows.

Each step reads one element per row, so loads are coalesced for time-major
inputs (rows contiguous); no scan, no tile along time. No size limit on T.
"""

from __future__ import annotations

import triton
import triton.language as tl

from rltriton_tune.call import ProblemKey
from rltriton_tune.kernels.actions import reduce_actions_default, reduce_actions_space
from rltriton_tune.kernels.builders import Builder
from rltriton_tune.kernels.launch import (
    FastLaunch,
    Packer,
    TritonStrategy,
    next_pow2,
    packed_launcher,
    pow2_range,
    require,
)
from rltriton_tune.kernels.scan import row_block, tile_start, time_block, true_sizes
from rltriton_tune.strategy import Launcher, Params


@triton.jit
def sequential_kernel(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, N, T, A, sn, st, se,
                      san, sat, saa, osn, ost, S0, S1, S2, S3, COEFFS: tl.constexpr,
                      FINISH: tl.constexpr, REVERSE: tl.constexpr, NEXT: tl.constexpr,
                      F_TRUNC: tl.constexpr, F_BOOT: tl.constexpr, F_ENV: tl.constexpr,
                      F_STARTS: tl.constexpr, BLOCK_A: tl.constexpr, BIG: tl.constexpr,
                      ALIGN_N: tl.constexpr, ALIGN_T: tl.constexpr, ALIGN_A: tl.constexpr,
                      RUN: tl.constexpr, DESCEND: tl.constexpr, BLOCK_N: tl.constexpr,
                      STAGES: tl.constexpr):
    N, T, A, sn, st, san, sat, osn, ost = true_sizes(
        N, T, A, sn, st, san, sat, osn, ost, ALIGN_N, ALIGN_T, ALIGN_A)
    rows = row_block(tl.program_id(0), BLOCK_N, BIG)
    carry = tl.zeros([BLOCK_N, 1], tl.float32)
    # STAGES > 1: each step's loads are issued STAGES - 1 steps ahead (see scan.scan_span).
    for i in tl.range(0, T, num_stages=STAGES):
        ts = time_block(tile_start(i, T, 0, 1, REVERSE), 1, BIG)
        a, b = COEFFS(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, rows, ts, N, T, A, sn, st, se, san,
                      sat, saa, S0, S1, S2, S3, F_TRUNC, F_BOOT, F_ENV, F_STARTS, BLOCK_A)
        before = carry                      # the neighbour's value (y[t+1] backward)
        carry = a + b * carry
        FINISH(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, rows, ts, carry, before, N,
               T, A, sn, st, se, san, sat, saa, osn, ost, S0, S1, S2, S3, F_TRUNC, F_BOOT, F_ENV,
               F_STARTS, BLOCK_A)


class SequentialStrategy(TritonStrategy):
    name = "sequential"

    def space(self, key: ProblemKey) -> dict[str, list[int]]:
        return {
            "BLOCK_N": pow2_range(min(32, next_pow2(key.n)), min(1024, max(32, next_pow2(key.n)))),
            "num_warps": pow2_range(1, 8),
            # Steps whose loads are in flight ahead of the recurrence (``scan.scan_span``).
            # H200, GAE 32768x2048 time-major float32, (128, 1 warp): 1207 us at 1 stage,
            # 513 at 4, 333 at 8.
            "num_stages": [1, 4, 8],
            **reduce_actions_space(key),
        }

    def tile_elems(self, key: ProblemKey, p: Params) -> int:
        return p["BLOCK_N"]

    def skip_reason(self, key: ProblemKey, params: Params,
                    sm_count: int | None = None) -> str | None:
        """Env-major keys are not searched: a thread walks one row, so each step's loads
        are T elements apart (H200 exhaustive sweeps: 1.23-935x off the best
        config in every swept env-major key). It serves time-major rollouts."""
        if not key.time_major:
            return "env-major: one thread per row reads uncoalesced"
        return super().skip_reason(key, params, sm_count)

    def check(self, key: ProblemKey, p: Params) -> None:
        require(p["BLOCK_N"] <= 4096, self.name, f"BLOCK_N={p['BLOCK_N']} exceeds 4096")

    def default_params(self, key: ProblemKey) -> Params:
        bn = min(256, max(32, next_pow2(key.n)))
        return {"BLOCK_N": bn, "num_warps": max(1, min(8, bn // 64)), "num_stages": 1,
                **reduce_actions_default(key)}

    def transfer(self, source: ProblemKey, target: ProblemKey,
                 params: Params) -> tuple[str, Params]:
        """The programs walk all of T, so the rows are the only parallelism: a config moved
        to fewer environments takes narrower row blocks, down to one warp's 32 rows, to
        keep the source's program count (H200, Retrace 4096x8192 time-major: the
        BLOCK_N=256 of 32768x2048 ran 16 programs, 0.36x of rl-triton)."""
        programs = -(-source.n // params["BLOCK_N"])
        fit = next_pow2(max(1, target.n // programs + 1)) // 2   # largest pow2 <= n / programs
        bn = min(params["BLOCK_N"], max(min(32, next_pow2(target.n)), fit))
        return self.name, {**params, "BLOCK_N": bn,
                           "num_warps": max(1, min(params["num_warps"], bn // 32))}

    def _launcher(self, key: ProblemKey, params: Params,
                  builder: Builder | None = None) -> Launcher:
        bn = params["BLOCK_N"]
        pack = Packer(key, bn, params["num_warps"], params.get("REDUCE_A", 0), builder=builder)
        grid = (triton.cdiv(key.n, bn),)
        consts = dict(pack.constexprs, BLOCK_N=bn, STAGES=params["num_stages"],
                      num_warps=params["num_warps"], num_stages=params["num_stages"])
        return packed_launcher(pack, FastLaunch(sequential_kernel, grid, consts, pack.pointers,
                                                pack.pointer_slots))
