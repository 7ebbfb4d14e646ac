"""Built-in choice for per-action keys (Retrace) with MANY_ACTIONS_MIN_A or more actions.

The A=8 rules in :mod:`heuristic` count rows and steps; with 32-100 actions a row of the
same length holds 4-12x the elements, and what decides a program is how many elements it
holds. A loop's chunk is sized by its tile, steps x next_pow2(A); the regimes and warps
by the elements a row loads, ``next_pow2(T) * A`` ("row elements" below); look-back
chunks by the programs they launch. H200 head to head, Retrace float32 env-major, 50
configs a key (flat 1-16 rows x 1-16 warps, chunk loops of 32-256 steps x 1-8 warps,
look-back chunks of 64-256 steps): fitted on 36 keys of 3-30000 steps at A=32 and A=64 (session 21
``h2h_a32``/``h2h_a64``, session 22 ``h2h_a32fit``/``h2h_a64fit``) and 31 at A=32, 48, 64
and 100 (session 22 ``h2h_a{32,48,64,100}val``, which a first fit had not seen: 15 of
31 within 5% of the best, the A=8 rules 7). Over the 67: these rules 49 within 5% (one
unmeasured; worst 1.43x), the A=8 rules 17 (worst 1.91x). Checked on 24 shapes timed
after that fit, at A=32, 40 and 80 (``h2h_a{32,40,80}chk``): 12 within 5% (A=8 rules 5),
but A=80's loops started at row tiles of 8192-16384 elements where the rows load 5120-
10240 (1.35-1.54x off a flat program); the regimes have counted loaded elements since,
which changes no key of A=32 or 64 and gives 13 of those 24 (in sample now; worst 1.35x).
``benchmarks/h2h_replay.py`` replays the rules on any of these probes.
"""

from __future__ import annotations

from typing import Any

from rltriton_tune.call import ProblemKey
from rltriton_tune.pow2 import next_pow2, pow2_floor

#: Actions from which these rules apply; below it up to heuristic.ACTION_WIDE_MAX_A the
#: A=18 rules do, and A=8's below those.
MANY_ACTIONS_MIN_A = 25
#: Flat programs hold rows of at least FLAT_MIN_STEPS steps in all (rows x next_pow2(T)),
#: with a warp per FLAT_ELEMS_PER_WARP loaded elements (rows x next_pow2(T) x A, rounded
#: down to a power of two) up to FLAT_MAX_WARPS: at A=32 20000x4 8 rows of one warp, 700x150
#: one row of 8 warps, at A=64 500x120 one row of 8, all the best. The A=64 rows of
#: 2048-4096 elements are noisy (2500x20: one row of 1, 2 and 4 warps read 1.02, 1.43 and
#: 1.15, 4 rows of 8 warps the best).
FLAT_MIN_STEPS = 32
FLAT_ELEMS_PER_WARP = 1024
FLAT_MAX_WARPS = 16
#: ... but rows stop where the padded tile (rows x next_pow2(T) x next_pow2(A)) would pass
#: this many elements: a guard against register spills past the probed range (A <= 100
#: never reaches it; A=1000 would put 32768 elements in one program), not a measured optimum.
FLAT_MAX_TILE = 8192
#: Rows of at least LOOP_MIN_ELEMS row elements (or LOOP_MANY_ROWS_MIN_ELEMS with
#: LOOP_MANY_ROWS_PER_SM rows a SM), from LOOKBACK_ROWS_PER_SM rows a SM on, run a one-row
#: chunk loop of LOOP_CHUNK_ELEMS tile elements (at most LOOP_MAX_CHUNK steps) with
#: LOOP_WARPS warps: A=32 2500x500 and 4000x350, A=64 800x200 and 1100x130 the best, where
#: one flat row read 1.06-1.91x; the loop's best chunk moves between keys (32-256 steps)
#: without a pattern these probes resolve (worst 1.22x, A=100 1500x150).
LOOP_MIN_ELEMS = 16384
LOOP_MANY_ROWS_MIN_ELEMS = 8192
LOOP_MANY_ROWS_PER_SM = 8
LOOP_CHUNK_ELEMS = 8192
LOOP_MAX_CHUNK = 128
LOOP_WARPS = 4
#: Fewer rows than LOOKBACK_ROWS_PER_SM per SM, with rows of more than LOOKBACK_MIN_T steps
#: or of LOOP_MIN_ELEMS row elements, take the one-pass look-back scan, one warp a chunk of
#: LOOKBACK_CHUNK steps where that still launches LOOKBACK_PROGRAMS_PER_SM programs a SM,
#: half that below, whatever the action count: 128 steps at A=32 (120x900 ... 20x6000),
#: A=48 (70x2500), A=64 (10x10000, 6x30000), A=80 (30x5000) and A=128 (100x1500,
#: 10x12000, 940-1400 programs); 64 at A=64 (40x1500, 20x4000), A=80 (250x350), A=100
#: (100x700, 10x8000), A=128 (400x200) and A=256 (50x1500, 8x8000), 480-800 programs.
#: The rule it replaces sized chunks by the elements they load (the fewest steps loading
#: 4096, doubled from 11 programs a SM): 25 of 36 probed look-back keys within 5% of the
#: best, worst 1.30x (A=28 300x1000: 256 steps where 128 was the best; session 23
#: h2h_a28, h2h_a128, h2h_a256); this one 28 of 35, worst 1.11x (A=256 300x150 wants 32
#: steps; A=32 12x20000 and 30x9000 256, 1.07-1.08x at 128). On 16 shapes no probe had
#: timed (session 23, h2h_lba26 ... h2h_lba384, A = 26-384): 10 within 5% of the best,
#: the element rule 8. Neither is a good fit there: A=26 wanted 64 steps at 1420-2000
#: programs (128: 1.43-1.67x) where A=28 wanted 128, and 64 won at 1280-3925 programs for
#: A = 40, 72 and 200.
LOOKBACK_ROWS_PER_SM = 4
LOOKBACK_MIN_T = 512
LOOKBACK_CHUNK = 128
LOOKBACK_PROGRAMS_PER_SM = 7


def many_actions(key: ProblemKey) -> bool:
    """Whether ``key`` takes these rules: per-action inputs with many actions."""
    return key.a >= MANY_ACTIONS_MIN_A


def row_elements(key: ProblemKey) -> int:
    """Elements one row of a flat tile loads, next_pow2(T) x A."""
    return next_pow2(key.t) * key.a


def lookback_params(key: ProblemKey, sm_count: int) -> dict[str, int]:
    """The look-back chunk of a many-action key (see LOOKBACK_CHUNK)."""
    chunk = LOOKBACK_CHUNK
    if key.n * -(-key.t // chunk) < LOOKBACK_PROGRAMS_PER_SM * sm_count:
        chunk //= 2
    return {"BLOCK_N": 1, "BLOCK_T": chunk, "num_warps": 1}


def choice(key: ProblemKey, sm_count: int) -> tuple[str, dict[str, Any], str]:
    """(strategy, parameter overrides, why) for an env-major many-action key."""
    elems = row_elements(key)
    n = key.n
    if n < LOOKBACK_ROWS_PER_SM * sm_count and (key.t > LOOKBACK_MIN_T or
                                                elems >= LOOP_MIN_ELEMS):
        params = lookback_params(key, sm_count)
        return ("lookback", params,
                f"A={key.a}, under {LOOKBACK_ROWS_PER_SM} rows per SM, long rows: look-back "
                f"{params} (A=64 40x1500: 64-step chunks the best, 128 1.21x)")
    if elems >= LOOP_MIN_ELEMS or (elems >= LOOP_MANY_ROWS_MIN_ELEMS and
                                   n >= LOOP_MANY_ROWS_PER_SM * sm_count):
        chunk = max(1, min(LOOP_MAX_CHUNK, LOOP_CHUNK_ELEMS // next_pow2(key.a)))
        params = {"BLOCK_N": 1, "BLOCK_T": chunk, "num_warps": LOOP_WARPS, "num_stages": 1}
        return ("tiled", params,
                f"A={key.a}, rows of {elems} elements: chunk loop {params} (A=32 2500x500: "
                "the best, one flat row 1.57x)")
    span = next_pow2(key.t)
    tile_rows = FLAT_MAX_TILE // (span * next_pow2(key.a))
    rows = min(max(1, min(FLAT_MIN_STEPS // span, tile_rows)), next_pow2(n))
    loaded = rows * elems
    warps = min(FLAT_MAX_WARPS, max(1, pow2_floor(loaded // FLAT_ELEMS_PER_WARP)))
    params = {"BLOCK_N": rows, "num_warps": warps}
    return ("flat", params,
            f"A={key.a}: flat {params}, a warp per {FLAT_ELEMS_PER_WARP} loaded elements "
            "(A=32 20000x4: 8 rows of one warp the best, 4 rows 1.14x)")
