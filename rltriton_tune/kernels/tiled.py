"""``tiled`` strategy: BLOCK_N rows x BLOCK_T steps per tile, looping over time with a carry.

One program owns BLOCK_N rows and walks their time axis tile by tile (last to
first for backward estimators), carrying the scan value between tiles; loads
are contiguous along t for env-major inputs. No size limit on T.
"""

from __future__ import annotations

import triton
import triton.language as tl

from rltriton_tune.call import ProblemKey
from rltriton_tune.kernels.actions import (
    reads_actions,
    reduce_actions_default,
    reduce_actions_space,
)
from rltriton_tune.kernels.builders import Builder
from rltriton_tune.kernels.launch import (
    MAX_BLOCK_N,
    TILE_BUDGET,
    FastLaunch,
    Packer,
    TritonStrategy,
    next_pow2,
    one_row_at_odd_length,
    packed_launcher,
    pow2_range,
    require,
    rescale_tile,
)
from rltriton_tune.kernels.scan import row_block, scan_span, true_sizes
from rltriton_tune.kernels.shapes import (
    stage_buffers_too_big,
    time_major_columns,
    vector_elems,
)
from rltriton_tune.strategy import Launcher, Params


@triton.jit
def tiled_kernel(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, N, T, A, sn, st, se, san,
                 sat, saa, osn, ost, S0, S1, S2, S3, COEFFS: tl.constexpr, FINISH: tl.constexpr,
                 REVERSE: tl.constexpr, NEXT: tl.constexpr, F_TRUNC: tl.constexpr,
                 F_BOOT: tl.constexpr, F_ENV: tl.constexpr, F_STARTS: tl.constexpr,
                 BLOCK_A: tl.constexpr, BIG: tl.constexpr, ALIGN_N: tl.constexpr,
                 ALIGN_T: tl.constexpr, ALIGN_A: tl.constexpr, RUN: tl.constexpr,
                 DESCEND: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_T: tl.constexpr,
                 STAGES: tl.constexpr):
    N, T, A, sn, st, san, sat, osn, ost = true_sizes(
        N, T, A, sn, st, san, sat, osn, ost, ALIGN_N, ALIGN_T, ALIGN_A)
    rows = row_block(tl.program_id(0), BLOCK_N, BIG)
    scan_span(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, N, T, A, sn, st, se, san, sat,
              saa, osn, ost, S0, S1, S2, S3, rows, tl.zeros([BLOCK_N], tl.float32), 0,
              tl.cdiv(T, BLOCK_T), COEFFS, FINISH, REVERSE, F_TRUNC, F_BOOT, F_ENV, F_STARTS,
              BLOCK_A, BIG, BLOCK_T, NEXT, RUN, DESCEND, STAGES)


#: Steps from which an env-major key with fewer rows than SMs is left to the look-back
#: scan in searches (``TiledStrategy.skip_reason``; the dispatch rule's ``LONG_T``).
FEW_ROWS_LONG_T = 8192


class TiledStrategy(TritonStrategy):
    name = "tiled"

    def space(self, key: ProblemKey) -> dict[str, list[int]]:
        return {
            # Time-major tiles go up to one warp of 16-byte vectors of columns (128 float32,
            # 256 16-bit: whole columns a thread, see ``shapes.time_major_columns``).
            "BLOCK_N": pow2_range(1, max(1, min(self._max_rows(key), next_pow2(key.n)))),
            "BLOCK_T": pow2_range(min(8, next_pow2(key.t)), min(4096, next_pow2(key.t))),
            "num_warps": pow2_range(1, 16),
            # Tiles whose loads are in flight ahead of the scan (``scan.scan_span``). H200,
            # time-major float32 32768x2048, (128, 16, 1 warp): GAE 877 us at 1 stage, 339
            # at 2, 254 at 3, 267 at 4 (env-major: 266); V-trace (64, 16, 1) 472 at 3
            # (env-major 429); (128, 8, 1) GAE 282 at 3, 259 at 5.
            "num_stages": [1, 2, 3, 5],
            **reduce_actions_space(key),
        }

    @staticmethod
    def _max_rows(key: ProblemKey) -> int:
        if key.time_major:
            return max(MAX_BLOCK_N, 32 * vector_elems(key))
        return MAX_BLOCK_N

    def tile_elems(self, key: ProblemKey, p: Params) -> int:
        return p["BLOCK_N"] * p["BLOCK_T"]

    def skip_reason(self, key: ProblemKey, params: Params,
                    sm_count: int | None = None) -> str | None:
        """Env-major keys with fewer rows than SMs and at least FEW_ROWS_LONG_T steps are not
        searched (when the SM count is known): a program walks its rows' whole length, so
        at most N programs run, where the look-back scan splits time into N * T / chunk
        of them. H200 exhaustive sweeps: tiled's best was
        1.44-13.1x off the best config at all 16 such keys of four estimators (GAE,
        eligibility traces, V-trace, lambda returns; 258-430 configs a key, the largest
        share of each table). Per-action keys (Retrace) keep it: no sweep says otherwise."""
        if sm_count and not key.time_major and not key.a and key.n < sm_count \
                and key.t >= FEW_ROWS_LONG_T:
            return f"{key.n} rows < {sm_count} SMs, T >= {FEW_ROWS_LONG_T}: look-back splits time"
        if reads_actions(key, params) and params["BLOCK_N"] > MAX_BLOCK_N:
            # The time-major blocks of whole columns suit [N, T] loads; Retrace's fused
            # [N, T, A] loads keep the narrower blocks it was searched with.
            return f"BLOCK_N={params['BLOCK_N']} > {MAX_BLOCK_N} with the action loads fused"
        return (stage_buffers_too_big(key, self.tile_elems(key, params), params["num_stages"])
                or super().skip_reason(key, params, sm_count))

    def check(self, key: ProblemKey, p: Params) -> None:
        require(p["BLOCK_N"] * p["BLOCK_T"] <= TILE_BUDGET, self.name,
                f"BLOCK_N={p['BLOCK_N']} x BLOCK_T={p['BLOCK_T']} exceeds the tile budget "
                f"{TILE_BUDGET}")

    def default_params(self, key: ProblemKey) -> Params:
        if key.time_major and not key.a:
            return time_major_columns(key)
        bt = min(max(next_pow2(key.t), 8), 1024 if key.n <= 1024 else 256)
        bn = max(1, min(next_pow2(key.n), 512 // bt, 16))
        warps = max(1, min(8, bn * bt // 128))
        return {"BLOCK_N": bn, "BLOCK_T": bt, "num_warps": warps, "num_stages": 1,
                **reduce_actions_default(key)}

    def transfer(self, source: ProblemKey, target: ProblemKey,
                 params: Params) -> tuple[str, Params]:
        """A time tile that held the whole row becomes the flat kernel's tile for the
        target's row (the same tile without the chunk loop: in the H200 exhaustive tables
        one-tile tiled configs run 7-35% (median per table) slower than the flat config
        with the same tile and warps); a shorter one stays a chunk loop, cut to the row if
        longer. The tile's size is kept as its span changes (see :func:`rescale_tile`), and
        a flat tile of several rows takes one at long odd rows (see
        :func:`one_row_at_odd_length`)."""
        span_from = params["BLOCK_T"]
        if span_from >= next_pow2(source.t):
            moved = one_row_at_odd_length(
                rescale_tile(params, span_from, next_pow2(target.t), target), source, target)
            return "flat", {k: moved[k] for k in ("BLOCK_N", "num_warps", "num_stages",
                                                  "REDUCE_A") if k in moved}
        span_to = max(8, min(span_from, next_pow2(target.t)))
        if span_to == span_from:
            return self.name, dict(params)
        moved = rescale_tile(params, span_from, span_to, target)
        return self.name, {**moved, "BLOCK_T": span_to}

    def _launcher(self, key: ProblemKey, params: Params,
                  builder: Builder | None = None) -> Launcher:
        bn, bt = params["BLOCK_N"], params["BLOCK_T"]
        pack = Packer(key, bn * bt, params["num_warps"], params.get("REDUCE_A", 0), builder=builder)
        grid = (triton.cdiv(key.n, bn),)
        consts = dict(pack.constexprs, BLOCK_N=bn, BLOCK_T=bt, STAGES=params["num_stages"],
                      num_warps=params["num_warps"], num_stages=params["num_stages"])
        return packed_launcher(pack, FastLaunch(tiled_kernel, grid, consts, pack.pointers,
                                                pack.pointer_slots))
