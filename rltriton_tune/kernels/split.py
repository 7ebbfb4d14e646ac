"""``split`` strategy: few rows, long sequences; the time axis is split across programs.

Phase 1 (``split_reduce_kernel``): program (row block, chunk) scans its CHUNK_T
span from a zero carry, tile by tile, and writes the chunk's aggregate
(y at the chunk's entry edge, product of beta) per row to a small float32
buffer ``[2, n_chunks, N]``.
Phase 2 (``split_scan_kernel``): each program composes the aggregates of the
chunks after it (backward) / before it (forward), CARRY_BLOCK at a time with a
tile scan, to get its incoming carry, then rescans its chunk and stores the
outputs. The aggregate buffer is the only intermediate in memory.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from rltriton_tune.call import Call, ProblemKey
from rltriton_tune.kernels.actions import reduce_actions_default, reduce_actions_space
from rltriton_tune.kernels.builders import Builder
from rltriton_tune.kernels.launch import (
    INT32_LIMIT,
    TILE_BUDGET,
    FastLaunch,
    Packer,
    TritonStrategy,
    next_pow2,
    pow2_range,
    require,
)
from rltriton_tune.kernels.scan import (
    edges,
    row_block,
    scan_span,
    scan_tile,
    take,
    tile_start,
    time_block,
    true_sizes,
    wide_product,
)
from rltriton_tune.kernels.shapes import stage_buffers_too_big
from rltriton_tune.strategy import Launcher, Params

#: Most chunks per row: phase 2 composes up to this many aggregates per program.
MAX_CHUNKS = 4096

#: Largest default CARRY_BLOCK: aggregates phase 2 composes per step (a
#: [BLOCK_N, CARRY_BLOCK] tile scan); a tunable parameter of the strategy.
CARRY_BLOCK = 64


@triton.jit
def _chunk(pid, N, T, BLOCK_N: tl.constexpr, CHUNK_T: tl.constexpr, BIG: tl.constexpr):
    """(rows, chunk index, chunk start) of a flattened (row block, chunk) program id."""
    n_blocks = tl.cdiv(N, BLOCK_N)
    rows = row_block(pid % n_blocks, BLOCK_N, BIG)
    c = pid // n_blocks
    c0 = c * CHUNK_T
    return rows, c, c0


@triton.jit
def split_reduce_kernel(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, N, T, A, sn, st, se,
                        san, sat, saa, osn, ost, S0, S1, S2, S3, AGG, NC, COEFFS: tl.constexpr,
                        FINISH: tl.constexpr, REVERSE: tl.constexpr, NEXT: tl.constexpr,
                        F_TRUNC: tl.constexpr, F_BOOT: tl.constexpr, F_ENV: tl.constexpr,
                        F_STARTS: tl.constexpr, BLOCK_A: tl.constexpr, BIG: tl.constexpr,
                        ALIGN_N: tl.constexpr, ALIGN_T: tl.constexpr, ALIGN_A: tl.constexpr,
                        RUN: tl.constexpr, DESCEND: tl.constexpr, BLOCK_N: tl.constexpr,
                        BLOCK_T: tl.constexpr, CHUNK_T: tl.constexpr, CARRY_BLOCK: tl.constexpr,
                        STAGES: tl.constexpr):
    N, T, A, sn, st, san, sat, osn, ost = true_sizes(
        N, T, A, sn, st, san, sat, osn, ost, ALIGN_N, ALIGN_T, ALIGN_A)
    rows, c, c0 = _chunk(tl.program_id(0), N, T, BLOCK_N, CHUNK_T, BIG)
    SCAN_REVERSE: tl.constexpr = REVERSE and not DESCEND  # see scan.time_block
    feed, out = edges(BLOCK_T, SCAN_REVERSE)
    n_tiles = tl.cdiv(tl.minimum(T - c0, CHUNK_T), BLOCK_T)
    agg_a = tl.zeros([BLOCK_N], tl.float32)
    agg_b = tl.zeros([BLOCK_N], tl.float32) + 1.0
    for i in tl.range(0, n_tiles, num_stages=STAGES):  # loads STAGES - 1 tiles ahead
        ts = time_block(tile_start(i, n_tiles, c0, BLOCK_T, REVERSE), BLOCK_T, BIG, DESCEND)
        a, b = COEFFS(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, rows, ts, N, T, A, sn, st, se, san,
                      sat, saa, S0, S1, S2, S3, F_TRUNC, F_BOOT, F_ENV, F_STARTS, BLOCK_A)
        y, p = scan_tile(a, b, agg_a, feed, SCAN_REVERSE, RUN)
        agg_a = take(y, out)
        agg_b = take(p, out) * agg_b
    r = tl.reshape(rows, [BLOCK_N])
    m = r < N
    off = wide_product(c, N, BIG) + r
    tl.store(AGG + off, agg_a, mask=m)
    tl.store(AGG + wide_product(NC, N, BIG) + off, agg_b, mask=m)


@triton.jit
def split_scan_kernel(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, N, T, A, sn, st, se,
                      san, sat, saa, osn, ost, S0, S1, S2, S3, AGG, NC, COEFFS: tl.constexpr,
                      FINISH: tl.constexpr, REVERSE: tl.constexpr, NEXT: tl.constexpr,
                      F_TRUNC: tl.constexpr, F_BOOT: tl.constexpr, F_ENV: tl.constexpr,
                      F_STARTS: tl.constexpr, BLOCK_A: tl.constexpr, BIG: tl.constexpr,
                      ALIGN_N: tl.constexpr, ALIGN_T: tl.constexpr, ALIGN_A: tl.constexpr,
                      RUN: tl.constexpr, DESCEND: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_T: tl.constexpr, CHUNK_T: tl.constexpr, CARRY_BLOCK: tl.constexpr,
                      STAGES: tl.constexpr):
    N, T, A, sn, st, san, sat, osn, ost = true_sizes(
        N, T, A, sn, st, san, sat, osn, ost, ALIGN_N, ALIGN_T, ALIGN_A)
    rows, c, c0 = _chunk(tl.program_id(0), N, T, BLOCK_N, CHUNK_T, BIG)
    # Incoming carry: compose the aggregates of the chunks this one depends on.
    cfeed, cout = edges(CARRY_BLOCK, REVERSE)
    rmask = rows < N
    carry = tl.zeros([BLOCK_N], tl.float32)
    if REVERSE:
        n_before = NC - 1 - c
    else:
        n_before = c
    n_steps = tl.cdiv(n_before, CARRY_BLOCK)
    for j in range(0, n_steps):
        if REVERSE:
            ks = NC - (j + 1) * CARRY_BLOCK + tl.arange(0, CARRY_BLOCK)[None, :]
            km = ks > c
        else:
            ks = j * CARRY_BLOCK + tl.arange(0, CARRY_BLOCK)[None, :]
            km = ks < c
        if BIG:
            ks = ks.to(tl.int64)
        m = rmask & km
        off = ks * N + rows
        ka = tl.load(AGG + off, mask=m, other=0.0)
        kb = tl.load(AGG + wide_product(NC, N, BIG) + off, mask=m, other=1.0)
        y, _ = scan_tile(ka, kb, carry, cfeed, REVERSE, 1)  # chunk-major: no thread runs
        carry = take(y, cout)
    # Rescan the chunk from that carry.
    scan_span(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, N, T, A, sn, st, se, san, sat,
              saa, osn, ost, S0, S1, S2, S3, rows, carry, c0,
              tl.cdiv(tl.minimum(T - c0, CHUNK_T), BLOCK_T), COEFFS, FINISH, REVERSE, F_TRUNC,
              F_BOOT, F_ENV, F_STARTS, BLOCK_A, BIG, BLOCK_T, NEXT, RUN, DESCEND, STAGES)


class SplitStrategy(TritonStrategy):
    name = "split"

    def space(self, key: ProblemKey) -> dict[str, list[int]]:
        bt = next_pow2(key.t)
        return {
            "CHUNK_T": pow2_range(min(256, bt), max(min(65536, bt), 1)),
            "BLOCK_N": pow2_range(1, max(1, min(16, next_pow2(key.n)))),
            "BLOCK_T": pow2_range(min(64, bt), min(2048, bt)),
            "num_warps": pow2_range(1, 16),
            "CARRY_BLOCK": [16, 64],
            # Tiles loaded ahead in both passes' loops (``scan.scan_span``).
            "num_stages": [1, 3],
            **reduce_actions_space(key),
        }

    def tile_elems(self, key: ProblemKey, p: Params) -> int:
        return p["BLOCK_N"] * max(p["BLOCK_T"], p["CARRY_BLOCK"])

    def skip_reason(self, key: ProblemKey, params: Params,
                    sm_count: int | None = None) -> str | None:
        """Env-major keys are not searched: ``lookback`` splits time the same way in one
        pass where split reads the inputs twice. H200:
        split's best was 1.12-2.23x off the best config in all 12 sweeps (10 complete) of
        GAE and eligibility traces, 1.4-1.9x off the look-back scan on 10 few-row,
        long-T probes; it won no cell of the strategy table. Time-major keys keep it
        (tuned entries at 16x32768 use it)."""
        if not key.time_major:
            return "env-major: the lookback scan does split's work in one pass"
        return (stage_buffers_too_big(key, params["BLOCK_N"] * params["BLOCK_T"],
                                      params["num_stages"])
                or super().skip_reason(key, params, sm_count))

    def check(self, key: ProblemKey, p: Params) -> None:
        chunk, bn, bt = p["CHUNK_T"], p["BLOCK_N"], p["BLOCK_T"]
        require(bn * p["CARRY_BLOCK"] <= TILE_BUDGET, self.name,
                f"BLOCK_N={bn} x CARRY_BLOCK={p['CARRY_BLOCK']} exceeds the tile budget")
        require(chunk >= bt, self.name, f"CHUNK_T={chunk} must be a multiple of BLOCK_T={bt}")
        require(bn * bt <= TILE_BUDGET, self.name,
                f"BLOCK_N={bn} x BLOCK_T={bt} exceeds the tile budget {TILE_BUDGET}")
        chunks = triton.cdiv(key.t, chunk)
        require(chunks <= MAX_CHUNKS, self.name,
                f"CHUNK_T={chunk} gives {chunks} chunks for T={key.t}; at most {MAX_CHUNKS}")
        require(triton.cdiv(key.n, bn) * chunks < 2**31, self.name,
                f"grid of {triton.cdiv(key.n, bn) * chunks} programs is too large")

    def default_params(self, key: ProblemKey) -> Params:
        bt = min(1024, next_pow2(key.t))
        chunk = max(bt, next_pow2(triton.cdiv(key.t, 128)), next_pow2(triton.cdiv(key.t,
                                                                                 MAX_CHUNKS)))
        return {"CHUNK_T": chunk, "BLOCK_N": 1, "BLOCK_T": bt,
                "num_warps": max(1, min(8, bt // 128)),
                "CARRY_BLOCK": min(CARRY_BLOCK, next_pow2(triton.cdiv(key.t, chunk))),
                "num_stages": 1, **reduce_actions_default(key)}

    def _launcher(self, key: ProblemKey, params: Params,
                  builder: Builder | None = None) -> Launcher:
        chunk, bn, bt = params["CHUNK_T"], params["BLOCK_N"], params["BLOCK_T"]
        pack = Packer(key, bn * bt, params["num_warps"], params.get("REDUCE_A", 0), builder=builder)
        n_chunks = triton.cdiv(key.t, chunk)
        grid = (triton.cdiv(key.n, bn) * n_chunks,)
        consts = dict(pack.constexprs, BLOCK_N=bn, BLOCK_T=bt,
                      CHUNK_T=chunk, CARRY_BLOCK=params["CARRY_BLOCK"],
                      STAGES=params["num_stages"], num_warps=params["num_warps"],
                      num_stages=params["num_stages"])
        agg_shape = (2, n_chunks, key.n)
        # The aggregates' offsets reach 2 * chunks * N, past the inputs' N * T when
        # chunks are short.
        consts["BIG"] = consts["BIG"] or 2 * n_chunks * key.n >= INT32_LIMIT
        reduce = FastLaunch(split_reduce_kernel, grid, consts, pack.pointers, pack.pointer_slots)
        scan = FastLaunch(split_scan_kernel, grid, consts, pack.pointers, pack.pointer_slots)

        def launch(call: Call):
            args, outs = pack.args(call)
            agg = torch.empty(*agg_shape, dtype=torch.float32, device=outs[0].device)
            args += [agg, n_chunks]
            reduce(args)
            scan(args)
            return outs

        return launch
