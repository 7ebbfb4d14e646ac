"""The built-in rules: the choice for a GPU that has no tuning profile at all.

A GPU with a profile is served from measured entries (:mod:`.lookup`); these rules
are the short default for one without, in the manner of vLLM's default kernel
configs. They encode the shape of the problem, not one GPU's timings: how many
programs fill the device, how long a row is, and which strategies exist for a
layout. The reference measurements they were read from (GAE, H200) are in
``benchmarks/results/h200/reference.jsonl``. Each rule gives candidates in order
of preference; dispatch keeps the first one the strategy validates.
"""

from __future__ import annotations

from typing import Any

from rltriton_tune.call import ProblemKey
from rltriton_tune.kernels.shapes import time_major_columns
from rltriton_tune.pow2 import next_pow2

#: (strategy, parameter overrides, why) in order of preference.
Candidate = tuple[str, dict[str, Any], str]

#: Elements a flat program holds (rows x next_pow2(T)) for short rows.
FLAT_TILE = 512
#: Rows up to this many steps fit one flat tile; longer rows take one row a program.
FLAT_MAX_T = 512
#: From this many elements a chunk loop over time streams better than whole-row tiles.
LOOP_ELEMENTS = 1 << 23
#: Rows at least this long, with fewer rows than multiprocessors, are split in time.
LONG_T = 8192
#: Time-major rows up to this many steps: one step at a time across rows.
SEQUENTIAL_MAX_T = 32


def candidates(key: ProblemKey, sm_count: int) -> list[Candidate]:
    """Ordered candidates for ``key`` on a GPU with ``sm_count`` multiprocessors."""
    n, t, span = key.n, key.t, next_pow2(key.t)
    ranked: list[Candidate] = []
    if key.time_major and t <= SEQUENTIAL_MAX_T:
        ranked.append(("sequential", {}, "time-major, short rows: one step at a time"))
    elif key.time_major and n >= sm_count and key.a:
        ranked.append(("tiled", {"BLOCK_N": 8, "BLOCK_T": 128, "num_warps": 4},
                       "time-major, per-action: blocks of rows, a chunk loop over time"))
    elif key.time_major and n >= sm_count:
        ranked.append(("tiled", time_major_columns(key, sm_count),
                       "time-major: whole columns a thread, a pipelined chunk loop over time"))
    elif n < sm_count and t >= LONG_T and not key.time_major:
        chunk = 256 if key.a else 1024
        ranked.append(("lookback", {"BLOCK_N": 1, "BLOCK_T": chunk, "num_warps": 1},
                       "fewer rows than SMs, long rows: one-pass look-back scan"))
        ranked.append(("split", {}, "fewer rows than SMs, long rows: time split in phases"))
    elif t <= FLAT_MAX_T and not key.a and not key.time_major:
        rows = max(1, min(16, FLAT_TILE // span, next_pow2(n)))
        ranked.append(("flat", {"BLOCK_N": rows, "num_warps": 4},
                       f"short rows: {rows} whole rows a program"))
    elif n * t < LOOP_ELEMENTS and span * max(key.a, 1) <= LONG_T:
        warps = 1 if span * max(key.a, 1) <= 256 else 4 if span <= 2048 else 8
        ranked.append(("flat", {"BLOCK_N": 1, "num_warps": warps},
                       "one whole row a program"))
    ranked.append(("tiled", {"BLOCK_N": 1, "BLOCK_T": 256, "num_warps": 4},
                   "one row a program, chunk loop over time"))
    ranked.extend((name, {}, f"generic: {name} defaults")
                  for name in ("tiled", "flat", "split", "sequential", "lookback"))
    return ranked
