"""Built-in choice for per-action keys (Retrace) with MANY_ACTIONS_MIN_A or more actions.

The A=8 rules in :mod:`heuristic` count rows and steps; with 32 or 64 actions a row of
the same length holds 4-8x the elements, and what decides a program is the element
count of a row's tile, ``next_pow2(T) * next_pow2(A)`` ("row elements" below). H200
head to head, Retrace float32 env-major, 22 fit shapes of 3-20000 steps at A=32 and
A=64 with 50 configs each (session 22, ``benchmarks/results/session22/h2h_a32fit``,
``h2h_a64fit``) and session 21's 14 (``session21/h2h_a32``, ``h2h_a64``): the A=8 rules
were within 5% of the best at 10 of 36 keys, worst 1.91x (a flat row of 16384+ elements
where a chunk loop or the look-back belongs); these rules, fitted there, at 27 of the 35
they were timed at, worst 1.21x (the A=64 flat rows of 2048-4096 elements are noisy: 1,
2 and 4 warps each win somewhere). ``benchmarks/h2h_replay.py`` replays them there.
"""

from __future__ import annotations

from typing import Any

from rltriton_tune.call import ProblemKey

#: Actions from which these rules apply; below it up to heuristic.ACTION_WIDE_MAX_A the
#: A=18 rules do, and A=8's below those.
MANY_ACTIONS_MIN_A = 25
#: Flat programs hold rows of at least this many steps in all (rows x next_pow2(T)), one
#: warp per FLAT_ELEMS_PER_WARP elements up to FLAT_MAX_WARPS: at A=32 every key of up to
#: 8192 row elements within 5% of the best (10 of 10: 20000x4 8 rows one warp, 6000x50 one
#: row two warps, 700x150 eight warps), at A=64 4 of 8 (1000x30, 2000x40, 3000x60 wanted
#: 2-4x the warps or two rows, 1.12-1.21x).
FLAT_MIN_STEPS = 32
FLAT_ELEMS_PER_WARP = 1024
FLAT_MAX_WARPS = 16
#: Rows of at least LOOP_MIN_ELEMS elements (or LOOP_MANY_ROWS_MIN_ELEMS with
#: LOOP_MANY_ROWS_PER_SM rows a SM), from LOOKBACK_ROWS_PER_SM rows a SM on, run a one-row
#: chunk loop of LOOP_CHUNK_ELEMS elements (at most LOOP_MAX_CHUNK steps), LOOP_WARPS
#: warps: the (1, 128, 4) loop was the best worst case over the 7 such keys (1.14x at A=32
#: 1200x400, 1.00 at 2500x500 and 800x200), where one flat row read 1.06-1.91x; the loop's
#: best chunk moves between keys (32-256 steps) without a pattern these probes resolve.
LOOP_MIN_ELEMS = 16384
LOOP_MANY_ROWS_MIN_ELEMS = 8192
LOOP_MANY_ROWS_PER_SM = 8
LOOP_CHUNK_ELEMS = 8192
LOOP_MAX_CHUNK = 128
LOOP_WARPS = 4
#: Fewer rows than this per SM, with rows of more than LOOKBACK_MIN_T steps or of
#: LOOP_MIN_ELEMS elements, take the one-pass look-back scan, one warp a chunk of
#: LOOKBACK_CHUNK_ELEMS elements, twice that where a row still holds
#: LOOKBACK_LONG_CHUNKS such chunks: A=64 64-step chunks at 150x500, 40x1500 and 2500x300
#: (128 steps 1.12-1.21x), 128 at 10x10000 and 6x30000 (64: 1.19x); A=32 128 steps from
#: 400x300 to 20x6000 (256: 1.18-1.31x), 256 at 12x20000 (128: 1.07x).
LOOKBACK_ROWS_PER_SM = 4
LOOKBACK_MIN_T = 512
LOOKBACK_CHUNK_ELEMS = 4096
LOOKBACK_LONG_CHUNKS = 64


def _next_pow2(x: int) -> int:
    return 1 << max(0, x - 1).bit_length()


def many_actions(key: ProblemKey) -> bool:
    """Whether ``key`` takes these rules: per-action inputs with many actions."""
    return key.a >= MANY_ACTIONS_MIN_A


def row_elements(key: ProblemKey) -> int:
    """Elements of one row's flat tile, next_pow2(T) x next_pow2(A)."""
    return _next_pow2(key.t) * _next_pow2(key.a)


def lookback_params(key: ProblemKey) -> dict[str, int]:
    """The look-back chunk of a many-action key (see LOOKBACK_CHUNK_ELEMS)."""
    width = _next_pow2(key.a)
    chunk = max(1, LOOKBACK_CHUNK_ELEMS // width)
    if key.t >= LOOKBACK_LONG_CHUNKS * 2 * chunk:
        chunk *= 2
    return {"BLOCK_N": 1, "BLOCK_T": chunk, "num_warps": 1}


def choice(key: ProblemKey, sm_count: int) -> tuple[str, dict[str, Any], str]:
    """(strategy, parameter overrides, why) for an env-major many-action key."""
    elems = row_elements(key)
    n = key.n
    if n < LOOKBACK_ROWS_PER_SM * sm_count and (key.t > LOOKBACK_MIN_T or
                                                elems >= LOOP_MIN_ELEMS):
        params = lookback_params(key)
        return ("lookback", params,
                f"A={key.a}, under {LOOKBACK_ROWS_PER_SM} rows per SM, long rows: look-back "
                f"{params} (A=64 40x1500: 64-step chunks the best, 128 1.21x)")
    if elems >= LOOP_MIN_ELEMS or (elems >= LOOP_MANY_ROWS_MIN_ELEMS and
                                   n >= LOOP_MANY_ROWS_PER_SM * sm_count):
        chunk = max(1, min(LOOP_MAX_CHUNK, LOOP_CHUNK_ELEMS // _next_pow2(key.a)))
        params = {"BLOCK_N": 1, "BLOCK_T": chunk, "num_warps": LOOP_WARPS, "num_stages": 1}
        return ("tiled", params,
                f"A={key.a}, rows of {elems} elements: chunk loop {params} (A=32 2500x500: "
                "the best, one flat row 1.57x)")
    span = _next_pow2(key.t)
    rows = min(max(1, FLAT_MIN_STEPS // span), _next_pow2(n))
    warps = min(FLAT_MAX_WARPS, max(1, rows * elems // FLAT_ELEMS_PER_WARP))
    params = {"BLOCK_N": rows, "num_warps": warps}
    return ("flat", params,
            f"A={key.a}: flat {params}, a warp per {FLAT_ELEMS_PER_WARP} elements (A=32: "
            "within 5% of the best at 10 of 10 keys)")
