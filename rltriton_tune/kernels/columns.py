"""``columns`` strategy: time-major rollouts as columns of environments, chunked over time.

In a time-major ``[T, N]`` buffer the environments of one step are contiguous. A
program here owns BLOCK_N neighbouring environments (a column block) for BLOCK_T
steps: each step's loads are 16-byte vectors across environments (narrower where N
allows no more, ``shapes.lane_elems``), and with BLOCK_N at least one such load per
lane of a warp every thread holds whole columns, so the scan along time runs in
registers, without shuffles or shared memory.
Chunks of BLOCK_T steps are separate programs, N / BLOCK_N x T / BLOCK_T of them,
so a few column blocks still fill the GPU; each chunk gets its carry from the chunks
before it by the look-back of ``lookback`` (same kernel), reading a few predecessors
per step (``window``) because every row of the wide block has its own carry.

``sequential`` walks the same columns one step at a time and ``tiled`` one program
per column block over all of T: both keep too few bytes in flight per SM once N /
BLOCK_N programs no longer fill it (H200, GAE 32768x2048 float32: ``sequential``
(256, 4 warps) 1290 us, ``tiled`` 531 us, env-major 243 us).
"""

from __future__ import annotations

from rltriton_tune.call import ProblemKey
from rltriton_tune.kernels import lookback
from rltriton_tune.kernels.actions import (
    reads_actions,
    reduce_actions_default,
    reduce_actions_space,
)
from rltriton_tune.kernels.builders import BUILDERS
from rltriton_tune.kernels.launch import TILE_BUDGET, next_pow2, pow2_range, require
from rltriton_tune.kernels.lookback import LookbackStrategy
from rltriton_tune.kernels.shapes import lane_elems
from rltriton_tune.strategy import Params

#: Tagged words (per plane) a thread may hold while it looks back: the window shrinks
#: as the column block widens, so the look-back does not spill the held tile.
WINDOW_WORDS = 16


class ColumnsStrategy(LookbackStrategy):
    name = "columns"
    searchable = True

    def space(self, key: ProblemKey) -> dict[str, list[int]]:
        bt = next_pow2(key.t)
        return {
            "BLOCK_N": pow2_range(min(32, next_pow2(key.n)), min(1024, max(32, next_pow2(key.n)))),
            # Up to 64 steps: with more warps than one vector of rows a lane, the extra
            # warps take steps (a longer chunk a program, fewer look-backs per step).
            "BLOCK_T": pow2_range(min(4, bt), min(64, bt)),
            "num_warps": pow2_range(1, 4),
            **reduce_actions_space(key),
        }

    def check(self, key: ProblemKey, p: Params) -> None:
        bn, bt = p["BLOCK_N"], p["BLOCK_T"]
        require(bn * bt <= TILE_BUDGET, self.name,
                f"BLOCK_N={bn} x BLOCK_T={bt} exceeds the tile budget {TILE_BUDGET}")
        # The look-back's [BLOCK_N, window] words must not be copied across warps (see
        # ``lookback``): at least one row per warp.
        require(p["num_warps"] <= bn, self.name,
                f"BLOCK_N={bn} with num_warps={p['num_warps']}: at least one row per warp")
        programs = -(-key.n // bn) * -(-key.t // bt)
        require(programs < 2**31 - 1, self.name, f"grid of {programs} programs is too large")

    def skip_reason(self, key: ProblemKey, params: Params,
                    sm_count: int | None = None) -> str | None:
        """Env-major keys are not searched (``lookback`` and ``tiled`` scan rows there),
        nor blocks narrower than one warp of the widest loads the key allows (16-byte
        vectors: 128 float32 rows; 32 rows where N is odd, see ``shapes.lane_elems``)
        where the key has more environments: Triton then spreads a column's steps over
        several lanes. Warps beyond that one go along time (compiled for sm_90, (128, 32,
        2 warps) lays lanes along environments and warps along steps), so they are
        searched. Per-action keys (Retrace) keep narrow blocks where the scan reads the
        [N, T, A] inputs, whose loads lay the tile out by actions (H200, 4096x1024, A = 8:
        (64, 8, 1) 199 us, (128, 8, 1) 253 us); after the action pre-pass (``REDUCE_A``)
        their loads are those of any estimator."""
        if not key.time_major:
            return "env-major: columns of environments are not contiguous"
        full = lane_elems(key) * 32
        if params["BLOCK_N"] < full and next_pow2(key.n) > params["BLOCK_N"] \
                and not reads_actions(key, params):
            return f"BLOCK_N={params['BLOCK_N']} < {full}: steps spread over lanes"
        return super(LookbackStrategy, self).skip_reason(key, params, sm_count)

    def default_params(self, key: ProblemKey) -> Params:
        """One warp, one load of environments a thread (a 16-byte vector where N allows,
        ``shapes.lane_elems``), 64 values a thread (32 where a finish reads the
        neighbour's value too, V-trace's exact one included).
        H200, 32768x2048 time-major
        float32: (128, 16, 1) was the best of 3-8 configs for five single-output
        estimators (GAE: 460 us against 436 for (256, 16, 2)), (128, 8, 1) for V-trace
        (852 us; 16 steps: 1728); bfloat16 GAE (256, 8, 1)."""
        vec = lane_elems(key)
        builder = BUILDERS[key.algorithm]
        reads_next = builder.next_value or (builder.exact is not None
                                            and builder.exact.next_value)
        per_thread = 32 if reads_next else 64
        bn = min(32 * vec, max(32, next_pow2(key.n)))
        bt = max(1, min(per_thread // vec, next_pow2(key.t)))
        return {"BLOCK_N": bn, "BLOCK_T": bt, "num_warps": 1, **reduce_actions_default(key)}

    def window(self, key: ProblemKey, params: Params) -> int:
        """About WINDOW_WORDS words per thread: 4 predecessors for 128 rows on a warp."""
        words = WINDOW_WORDS * 32 * params["num_warps"] // params["BLOCK_N"]
        return max(1, min(lookback.LOOK_WINDOW, next_pow2(max(1, words) + 1) // 2))
