"""Built-in choice for a GPU key that no profile covers.

The rules are read off DESIGN.md's "H200 reference points" table (GAE,
float32, env-major, torch 2.11, Triton 3.6; raw numbers in
``anchors/h200-2026-11-30.jsonl``), this project's exhaustive H200 sweeps of GAE
and V-trace for env-major T <= 512 (see ``FLAT_TILE``), its rule probe of four
estimators on off-grid shapes (``HALF_TILE_MAX_N``, ``TIME_MAJOR_BLOCKS``), the oracle
sweeps of all seven (``LOOKBACK_RULES``, ``MANY_ROWS_MAX_T``, the per-action rules) and
its tuned entries. All estimators run the same scan cores; where the best config depends on how
much an estimator moves per step (look-back chunk length, half tiles), the rules scale
with ``step_streams``. Per-action estimators (Retrace) have their own rules (see
``ACTION_ELEMS_PER_WARP``; many actions: :mod:`many_actions`). Each rule
gives an ordered list of candidates; dispatch keeps the first that the strategy
validates for the key (merged over the strategy's ``default_params``), so a rule
never produces an invalid config.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from rltriton_tune.algorithms import ALGORITHMS
from rltriton_tune.call import ProblemKey
from rltriton_tune.dispatch import many_actions
from rltriton_tune.pow2 import next_pow2, pow2_floor
from rltriton_tune.problems import data_bytes

#: (strategy, parameter overrides, why) in order of preference.
Candidate = tuple[str, dict[str, Any], str]

#: Elements (N*T) from which a one-row tiled chunk loop beats the flat kernel:
#: 4096x2048 (8M) tiled 41.0 vs flat 49.8 us; 32768x512 (16M) 64.7 vs 67.9 us;
#: below it (4096x512, 32768x128) flat wins (8.0 vs 8.8, 21.7 vs 22.9 us).
LARGE_ELEMENTS = 1 << 23

#: Chunk loop of those large keys with at most 4096 rows, by step_streams (at most
#: LARGE_LIGHT_STREAMS values a step, or more). H200 oracle sweeps at 3000x5000 (quick
#: pass, ratio to each table's best): (1, 512, 4 warps) is 1.000-1.006 for eligibility
#: traces and discounted returns and V-trace but 1.095 for GAE; (1, 1024, 8 warps,
#: 3 stages) 1.001-1.002 for GAE, lambda returns and V-trace, 1.03-1.04 for the light
#: two; the (1, 1024, 4) it replaces was 1.02-1.10 (oracle benches: GAE 68.4 vs 64.4 us,
#: lambda returns 67.9 vs 62.6, V-trace 121.9 vs 114.9).
LARGE_LIGHT_STREAMS = 3
LARGE_TILES: dict[bool, dict[str, int]] = {
    False: {"BLOCK_N": 1, "BLOCK_T": 512, "num_warps": 4, "num_stages": 1},
    True: {"BLOCK_N": 1, "BLOCK_T": 1024, "num_warps": 8, "num_stages": 3},
}

#: Steps from which few-row problems need time parallelism: 16x32768 runs
#: 95.8 us flat and 42.3 us tiled, but torch's parallel scan does 30.7 us.
LONG_T = 8192

#: Env-major keys up to this T (below LARGE_ELEMENTS) run the flat kernel with
#: FLAT_TILE-element tiles: BLOCK_N = FLAT_TILE / next_pow2(T) rows (at most
#: FLAT_MAX_ROWS) and 4 warps. From the H200 exhaustive tables
#: (benchmarks/results/search_quality, first-in-batch readings left out), this config is
#: within 9% of the best of 382-1392 configs at GAE 4096x8, 16384x16, 32768x32, 1024x64,
#: 256x128, 4096x512 and V-trace 4096x8, 32768x32, 256x128 (GAE 32768x32: it is the
#: best config, 6.63 us; the tiled rule it replaced measured 8.45). Measured up to T = 512.
FLAT_TILE = 512
FLAT_MAX_ROWS = 16
FLAT_TILE_MAX_T = 512

#: Per-action estimators (Retrace) load A values per step, a different balance of
#: loads to scan work: one row per program at every size, with a warp per this many
#: tile elements (next_pow2(T) * next_pow2(A)) up to T = FLAT_TILE_MAX_T, the rl-triton
#: warps above (the flat defaults). H200 bench, Retrace A=8
#: (benchmarks/results/bench_h200/retrace): 32768x32 one row, one warp
#: 40.0 us against 62.5 for the 512-element rule; 50000x20 52.5 vs 88.0; 3000x40 two
#: warps 9.8 vs 12.1; 777x77 four warps 6.0 vs 6.7 at two; only 10000x12 went the other
#: way (12.2 vs 11.5). Large keys with many rows: ACTION_MANY_ROWS_PER_SM.
ACTION_ELEMS_PER_WARP = 256
#: ... and twice as many for tiles of up to ACTION_SHORT_TILE_T steps with at least
#: ACTION_MANY_ROWS_PER_SM rows a SM: H200 oracle sweeps (session 13, quick pass, ratio to
#: the best) Retrace 5000x75 2 warps 1.00, 4 warps 1.04 (the oracle bench: 15.6 us against
#: 15.1 for rl-triton's 2); 9500x40 1 warp 1.00, 2 warps 1.03. Head to head (session 20)
#: the 128-step tiles split: 4 warps within 5% of the best at 9 of 12 keys (h2h_actband,
#: h2h_actval3, h2h_actval4), these 2 warps at 7, but on the 8 unseen ones 6 against 5,
#: and the oracle bench of 5000x75 measured 4 warps 1.042x off and 0.965x of the flat
#: heuristic (rl-triton's 2 warps): kept.
ACTION_SHORT_TILE_T = 128

#: Per-action keys with at least this many rows per SM and LARGE_ELEMENTS steps in all
#: run a one-row chunk loop, ACTION_MANY_ROWS_TILE, now that Retrace reads its [N, T, A]
#: rows once. H200 oracle sweeps (Retrace A=8, quick pass, ratio to each table's best):
#: (1, 256, 4 warps) 1.022 at 32768x2048, 1.001 at 3000x5000, 1.018 at 2000x7000, where
#: the (1, 64, 1 warp) tile it replaces read 1.000, 1.031 and 1.246 (2000x7000 oracle
#: bench: 433 us against 353). With fewer rows (256x8192, 256x32768) the wide chunk loop
#: stays ahead.
ACTION_MANY_ROWS_PER_SM = 8
#: ... and so do such keys below 2^23 elements whose flat tile would be at least this many
#: steps (next_pow2(T)): Retrace 1500x3500 (third held-out set, session 15) measured the
#: one-row flat kernel with 16 warps at 2.71x the oracle's tiled (1, 512, 8 warps) head to
#: head; its sweep reads (1, 256, 4 warps) 1.07, as at 3000x5000 (1.00) and 2000x7000
#: (1.02), where the flat kernel reads 3.0x and 3.2x.
ACTION_MANY_ROWS_TILE_MIN_SPAN = 4096
ACTION_MANY_ROWS_TILE = {"BLOCK_N": 1, "BLOCK_T": 256, "num_warps": 4, "num_stages": 1}
#: Per-action keys with rows of FLAT_TILE_MAX_T + 1 steps to ACTION_MANY_ROWS_TILE_MIN_SPAN
#: (next_pow2(T)): the look-back scan below ACTION_ROW_LOOKBACK_ROWS_PER_SM rows per SM,
#: the ACTION_MANY_ROWS_TILE loop from there. Head to head: one flat row (the rule for
#: 2^20+ elements before) read 1.14-2.2x of the best of 8 configs at Retrace 1000x1700,
#: 2500x1300, 600x2000 and 300x3600 (session 18, h2h_flatbandr), where these read 1.00,
#: 1.04, 1.07 and 1.00; on 8 shapes they had not seen (h2h_flatvalr; one flat row 1.13-2.49x
#: off at all 8) 5 within 5% with the split at 3 rows a SM, 6 at 4. Rows of 513-1024 steps
#: (session 19, h2h_act1k, h2h_actshort; the look-back below 2^20 elements and one flat
#: row above it before): from 4 rows a SM the loop within 5% of the best at 9 of 10 keys
#: (N = 550-2000; worst 1.07x, 1200x600), the look-back at 2 (worst 1.25x).
ACTION_ROW_LOOKBACK_ROWS_PER_SM = 4

#: Env-major rows of 64-512 steps take half the tile (FLAT_TILE // 2 elements: 4 rows
#: at T = 64, 2 at 128, 1 at 256) below this many rows. H200 rule probe, 4 estimators x
#: 8 shapes of N = 256-3000 (benchmarks/results/rule_probe): the full tile was up to
#: 1.31x (V-trace 777x77) and 1.82x (V-trace 600x250) off the best config, the half tile
#: at most 1.13x; at 12000x160 the full tile is 1.11x ahead of one row (bench).
HALF_TILE_MAX_N = 8192

#: Estimators that move fewer than HEAVY_STREAMS values a step (all but V-trace; see
#: ``step_streams``) take the half tile only below LIGHT_HALF_TILE_MAX_N rows. In the rule
#: probe the full tile was within 1.03x of the best at N = 2000-3000 for GAE, eligibility
#: traces and discounted returns (the half tile up to 1.05x), V-trace's 1.10-1.13x; the
#: H200 oracle benches (session 11) found the full tile best at 1800x220 (GAE 3.75 against
#: 4.02 us for the half tile; eligibility traces 3.06 against 3.13) and 5000x75
#: (eligibility traces 3.68 against 3.98); at 1200x90 and below the half tile stays ahead.
HEAVY_STREAMS = 6
LIGHT_HALF_TILE_MAX_N = 1536

#: Env-major keys with at least HALF_TILE_MAX_N rows of up to this many steps
#: (next_pow2(T)) run the flat kernel with at least 16 rows a program (FLAT_TILE //
#: next_pow2(T) where that is more). Warps come from head-to-head timings (9 interleaved
#: rounds, `benchmarks/headtohead_probe.py`, session 15) of six estimators at 9500x40,
#: 20000x28, 15000x36, 40000x20, 70000x10 and 100000x12, ratios to each key's best:
#: estimators lighter than HEAVY_STREAMS take 4 warps for 17-32-step rows (16 rows,
#: 4 warps within 1.052x for GAE, lambda and discounted returns and episodic sums, where
#: the 8 warps used before read 1.08-1.26x at 40000x20); V-trace keeps 8 (4 warps: 1.198x
#: at 15000x36). Rows of 33-64 steps keep the plain 512-element tile (8 rows, 4 warps):
#: head to head at 9500x40, 15000x36, 12000x50, 30000x60, 50000x45, 8200x64 and 20000x48
#: (session 16, six estimators, benchmarks/results/session16/h2h_w64) it was within 5% of
#: the best of seven configs at 39 of 42 keys (worst 1.085x), 16 rows at 35-37 (worst
#: 1.11-1.19x).
MANY_ROWS_MAX_T = 32
MANY_ROWS_MIN_ROWS = 16
#: ... 8 warps for every estimator for 9-16-step rows (32-row tiles), the better worst
#: case: 4 warps win at 100000x12 (as in session 12's benches; 8 warps read up to 1.095x,
#: discounted returns) but lose at 70000x10 (up to 1.110x, GAE), five estimators timed;
#: the third held-out set's 50000x14 then measured 8 warps at 1.002x (GAE) and 1.000x
#: (V-trace) of the oracle. So do 5-8-step rows (64-row tiles, two elements a thread):
#: head to head (session 19, h2h_many, four estimators at 20000x8, 45000x5 and 120000x7)
#: 8 warps within 5% of the best at 12 of 12 keys, 4 warps at 10 (V-trace 1.07-1.08x),
#: and the fourth held-out set's sweeps of 150000x6 read 4 warps 1.04-1.11x off for all
#: four estimators timed there, 8 warps 1.00-1.05x. 4 warps for rows up to this many
#: steps (128-256 rows a program: the best at 80000x3, 250000x4 and 400000x2).
MANY_ROWS_FEW_WARPS_MAX_T = 4
MANY_ROWS_SHORT_T = 16

#: Env-major keys of more than 2048 steps (next_pow2(T) >= MID_LONG_SPAN) with at least
#: one row per SM and MID_LONG_MIN_ELEMENTS to 2^23 elements: a row per program still
#: (ROW_WARPS, below), but rl-triton's 16-32 warps are 1.2-1.5x off there. Head to
#: head (session 16, six estimators x 1500x3500, 1000x5000, 2500x2500, 700x6000,
#: 1200x3000, 600x4000, 400x6000, 500x3000, 11 configs;
#: benchmarks/results/session16/h2h_midlong): backward estimators with rows over 4096
#: steps take a chunk loop (below), everything else one flat row: 38 of those 48 keys
#: land within 5% of the best (worst 1.21x, V-trace 2500x2500), against 8 for
#: rl-triton's warps (worst 1.52x).
#: The chunk loop's width follows the warps in flight: from MID_LONG_NARROW_ROWS_PER_SM
#: rows per SM (MID_LONG_HEAVY_NARROW_ROWS_PER_SM for estimators of at least
#: HEAVY_STREAMS values a step, which keep more loads in flight a thread) 512-step chunks
#: with 4 warps, fewer rows the (1, 1024, 8 warps) loop. Head to head over both session-16
#: sets' backward keys past 4096 steps (28 keys, N = 250-1100, h2h_midlong and
#: h2h_midlongval): that split puts every key within 1.006x of the best of 11 configs,
#: where either loop alone reads up to 1.24x (1024, V-trace 1100x4200) or 1.44x (512,
#: V-trace 250x5000). Checked after on 20 unseen keys (four estimators x 650x6500,
#: 900x5000, 480x8000, 1300x5500, 300x4500, h2h_loopval): 19 at the best of the two loops
#: and flat 8 warps, V-trace 1300x5500 1.08x (the 1024 loop wins there).
MID_LONG_SPAN = 4096
MID_LONG_MIN_ELEMENTS = 1 << 20
MID_LONG_TILE = {"BLOCK_N": 1, "BLOCK_T": 1024, "num_warps": 8, "num_stages": 3}
MID_LONG_NARROW_TILE = {"BLOCK_N": 1, "BLOCK_T": 512, "num_warps": 4, "num_stages": 3}
MID_LONG_NARROW_ROWS_PER_SM = 6
MID_LONG_HEAVY_NARROW_ROWS_PER_SM = 4

#: Light backward estimators that read a neighbouring step (GAE's ``values[t+1]``) take the
#: chunk loop in the 2049-4096-step band too, from NEIGHBOUR_LOOP_MIN_ROWS_PER_SM rows per
#: SM: the mid-long loops (1024 steps with 8 warps, 512 with 4 from
#: MID_LONG_NARROW_ROWS_PER_SM rows per SM), and from NEIGHBOUR_LOOP_NARROWEST_ROWS_PER_SM
#: 256 steps with one warp. Head to head (session 16, GAE h2h_midlong and h2h_midlongval,
#: N = 600-3000): one flat row of 8 warps was 1.07-1.13x off the best at 600x4000,
#: 1500x3500, 1800x2300 and 3000x2200, the loops within 1.002x at all six keys from 4.5
#: rows per SM; below 4 rows per SM (140x3300 ... 500x3000) the flat row stays within
#: 1.04x and the loops read 1.07-1.9x. On 22 shapes no probe had timed (session 23,
#: h2h_nbloop and h2h_bandrows, 3.4-30 rows per SM) the flat row was within 5% of the best
#: at 9, these loops (with 256-step chunks of 2 warps from 16 rows per SM) at 17; with one
#: warp, within 1.004x at all 9 keys from 16 rows per SM, where two read up to 1.10x. The
#: other light estimators keep the flat row there (from 4 rows per SM): lambda returns,
#: eligibility traces and episodic sums within 5% of the best at 15 of 16 keys each,
#: discounted returns at 17 of 27, where no single loop does better (the best of them,
#: 512 steps with 4 warps, 14 of 33; the best moves between 256 and 512 steps of 1-4 warps).
NEIGHBOUR_LOOP_MIN_ROWS_PER_SM = 4
NEIGHBOUR_LOOP_NARROWEST_ROWS_PER_SM = 16
NEIGHBOUR_LOOP_NARROWEST_TILE = {"BLOCK_N": 1, "BLOCK_T": 256, "num_warps": 1,
                                 "num_stages": 3}

#: Estimators of at least HEAVY_STREAMS values a step (V-trace) with rows of 2049 to
#: HEAVY_LOOP_MAX_T steps (a 4096-step flat tile at most three quarters full) and at least
#: HEAVY_LOOP_MIN_ROWS_PER_SM rows per SM take the same chunk loop as the mid-long rule
#: (512 steps, 4 warps from MID_LONG_HEAVY_NARROW_ROWS_PER_SM rows per SM; 1024 steps,
#: 8 warps below), not one flat row of 16 warps. Head to head over 26 V-trace keys of this
#: tile (N = 60-3000, T = 2100-4000; session 16 h2h_midlong(val), session 18 h2h_flatband
#: and h2h_flatval, session 19 h2h_vband): one flat row within 5% of the best at 15, this
#: rule at 23 (worst 1.14x, 1200x3000). Rows past 3072 steps, or fewer rows, keep the
#: flat row (600x4000, 1500x3500, 160x3800, 230x2200 at the best). Its first form (the
#: 1024-step loop throughout) read 7 of the 10 h2h_vband keys, which it had not seen,
#: where one flat row read 5.
HEAVY_LOOP_MAX_T = 3072
HEAVY_LOOP_MIN_ROWS_PER_SM = 2

#: One flat row per program (rows of 513-4096 steps below 2^23 elements, and the mid-long
#: keys above that keep a row) takes ROW_WARPS warps, twice that (rl-triton's 16) for
#: tiles of at least ROW_WIDE_MIN_SPAN steps while the rows' tiles come to at most
#: ROW_WIDE_ELEMS_PER_SM elements per SM (3 rows of 2048 steps, 1.5 of 4096); estimators
#: of at least HEAVY_STREAMS values a step take 8 below MID_LONG_SPAN steps (V-trace
#: 350x1300: 6.21 and 6.26 us against 6.77 and 6.72 for 16 in two oracle benches) and 16
#: from there. Head to head (session 18, six estimators x 13 shapes, N = 120-5000 x T =
#: 600-4000, 8 configs; benchmarks/results/session18/h2h_flatband): 8 warps alone within
#: 5% of the best at 71 of 78 keys, rl-triton's warps at 60 (worst 1.25x), 4 warps at 39;
#: sixteen stay ahead on a few rows a SM (150x1800, 280x1500, 120x2600: by up to 4%) and
#: fall 1.1-1.8x behind past them. The oracle benches of the main set's 100x3000 and
#: 350x1300 (16 warps the oracle at 6 of 10 cells, 8 warps 1.00-1.05x) set the split.
#: This rule: 73 of those 78 keys, and 69 of 72 at 12 shapes the probe had not covered
#: (h2h_flatval, 30x2000 ... 6000x1300; its first form, 8 warps throughout, 68; rl-triton's
#: warps 58, worst 1.34x).
ROW_WARPS = 8
ROW_WIDE_MIN_SPAN = 2048
ROW_WIDE_ELEMS_PER_SM = 3 * ROW_WIDE_MIN_SPAN

#: Per-action rows of up to this many steps (next_pow2(T)) share a program:
#: ACTION_SHORT_ROWS rows with one warp. H200 oracle sweeps (session 13, quick pass,
#: Retrace A=8): four rows best at 4096x8 and 100000x12; eight (the 128-step tile this
#: replaces) 1.20x and 1.08x, one row (rl-triton's) further off.
ACTION_SHORT_T = 16
ACTION_SHORT_ROWS = 4
#: ... and more rows (up to ACTION_SHORT_MAX_ROWS) where those would cover fewer than
#: ACTION_SHORT_MIN_ELEMS (rows x next_pow2(T) x next_pow2(A)) elements, 8 a lane: head to
#: head (session 19, h2h_actshort) Retrace 20000x3 ran 1.24x slower with 4 rows of 4 steps
#: than with 8, and 150000x5 (8-step rows, 4 x 8 x 8 = 256 elements) 1.05x.
ACTION_SHORT_MIN_ELEMS = 256
ACTION_SHORT_MAX_ROWS = 8
#: ... except rows of up to ACTION_TINY_T steps, ACTION_TINY_ROWS a program, and rows of
#: ACTION_SHORT_T + 1 to ACTION_PAIR_T steps, ACTION_PAIR_ROWS. Head to head (session 20,
#: h2h_actrows, Retrace A=8, one warp, 1-64 rows): 32 rows the best at all 7 keys of 1-2
#: steps (N = 1500-250000), where 8 rows ran 1.01-2.56x and 64 rows 1.05-1.46x slower; at
#: 3 steps 32 rows fell to 1.93x on 2500 rows, so the band stops at 2. Rows of 17-24
#: steps (at most three quarters of their 32-step tile): two rows within 5% of the best
#: at 4 of 5 keys (h2h_actrows, h2h_actshort, the session 14-15 sweeps), one row (the
#: element rule's) at 1 (the others 1.05-1.16x off). From 25 steps one row is as good:
#: within 5% at 4 of 4 keys (20000x28, 30000x30, 5000x32, 32768x32), and the oracle bench
#: of 20000x28 measured two rows 1.06x off (session 20, call 2). Checked on unseen shapes
#: (session 20, h2h_actval3): 4 of 4 keys of 1-2 steps, 4 of 4 of 18-30 steps.
ACTION_TINY_T = 2
ACTION_TINY_ROWS = 32
ACTION_PAIR_T = 24
ACTION_PAIR_ROWS = 2
#: Those row counts were measured at A=8, where every best program held at most this
#: many elements (rows x next_pow2(T) x next_pow2(A): 16 a lane). With more actions the
#: rows shrink to stay within it (down to one), and a row that alone holds more takes a
#: warp per this many elements (up to ACTION_MAX_WARPS), as the one-row rule below does
#: with its own budget: a guard against register spills, not a measured optimum.
ACTION_SHORT_MAX_ELEMS = 512

#: Every per-action rule here was measured at A=8. Action sets of ACTION_WIDE_MIN_A to
#: ACTION_WIDE_MAX_A (Atari's full set is 18) ran best with other programs. Head to head
#: (session 21, benchmarks/results/session21/h2h_a18fit and h2h_a18val, Retrace A=18, 25
#: shapes of 5-5000 steps, 32 configs) the A=8 rules were within 5% of the best at 7
#: keys (worst 2.31x), the rules below, fitted there, at 23; on 12 shapes no probe had
#: timed (h2h_a18new) 10 against 2. They stop at 24: on unseen shapes at A=12 they did
#: worse than the A=8 rules (3 of 7 keys against 5, h2h_a12), so 9-16 actions keep the
#: A=8 rules; at A=32 and A=64 neither set fits (3 of 8 against 2, 1 of 6 against 2;
#: h2h_a32, h2h_a64): from 25 actions :mod:`many_actions` decides. Rows of up to
#: ACTION_WIDE_TINY_T steps: as many rows as fill ACTION_WIDE_TINY_ELEMS elements (rows x
#: next_pow2(T) x next_pow2(A)), one warp (16384x10: 2 rows the best, one row 1.29x;
#: 2048x5: 4 rows 1.02x, 2 rows 1.24x).
ACTION_WIDE_MIN_A, ACTION_WIDE_MAX_A = 17, 24
ACTION_WIDE_TINY_T = 16
ACTION_WIDE_TINY_ELEMS = 1024
#: ... rows of up to ACTION_SHORT_TILE_T steps with ACTION_MANY_ROWS_PER_SM rows a SM:
#: rows filling an ACTION_WIDE_TILE-step tile, ACTION_WIDE_TILE_WARPS warps (4000x40 and
#: 12000x64: 4 rows the best, one row 1.06-1.47x; 4096x20 8 rows 1.01x).
ACTION_WIDE_TILE = 256
ACTION_WIDE_TILE_WARPS = 4
#: ... otherwise one row with a warp per ACTION_WIDE_ELEMS_PER_WARP elements, up to
#: ACTION_WIDE_MAX_WARPS: 4 warps at 64x80 and 256x80, 8 at 300x200, 16 at 2000x300, all
#: the best (the A=8 rule's 4 warps 1.06-1.12x); also for rows of up to
#: WIDE_ACTION_ROW_MAX_SPAN steps under ACTION_ROW_LOOKBACK_ROWS_PER_SM rows a SM, where
#: the look-back scan ran 2.3x off (200x1000: one row of 16 warps 1.10x, the best a (1,
#: 512, 8 warps) chunk loop). Many-row keys of LARGE_ELEMENTS keep ACTION_MANY_ROWS_TILE
#: (no A=18 probe reached that size).
ACTION_WIDE_ELEMS_PER_WARP = 1024
ACTION_WIDE_MAX_WARPS = 16
WIDE_ACTION_ROW_MAX_SPAN = 1024
#: ... and look-back chunks of such rows take this many warps: 256-step chunks with two
#: warps were the best at 16x5000, 1.79x ahead of one.
ACTION_WIDE_LOOKBACK_WARPS = 2

#: One flat per-action row takes at most this many warps: with fewer rows than
#: ACTION_MANY_ROWS_PER_SM per SM every program fits one wave (Retrace 900x400 4 warps
#: 12.9 us against 13.9 at the 16 of the element rule, oracle bench, session 13; 256x128
#: best at 4), and with more, rows of 129-512 steps ran best at 4 too: head to head
#: (session 20, h2h_actband, and session 19's h2h_actshort) 4 warps within 5% of the best
#: at all 8 such keys (1200x200 ... 5000x300), the 8 this replaces at 5 (1.05-1.08x off);
#: the session 13-14 sweeps read 4 warps 1.04 at 4096x512, 1.05 at 1300x300, 1.00 at
#: 2500x150 (whose oracle bench put 8 warps 1.056x off) and 1.11 at 1800x220. On 15
#: unseen keys (h2h_actval3, h2h_actval4) 4 warps within 5% at 13, 8 warps at 11. The
#: oracle benches of the three bench cells it moved (session 20, call 2): 2500x150 1.000x
#: (8 warps 1.056x), 1300x300 1.053x (1.002x), 1800x220 1.065x (1.012x).
ACTION_MAX_WARPS = 4

#: Per-action keys with rows longer than ACTION_MANY_ROWS_TILE_MIN_SPAN up to this many
#: elements, those of FLAT_TILE_MAX_T + 1 steps up to that under
#: ACTION_ROW_LOOKBACK_ROWS_PER_SM rows per SM, and fewer rows than SMs from T =
#: ACTION_SPLIT_T on, take the one-pass look-back scan with one warp a chunk: each row
#: cut into at least ACTION_CHUNKS_A_ROW chunks of ACTION_MIN_CHUNK to ACTION_MAX_CHUNK
#: steps. H200 oracle sweeps (session 13, Retrace A=8, ratio to each table's best):
#: 350x1300 128 steps 1.00 (one flat row, 16 warps: 1.18); 100x3000 256 1.00 (flat: 1.51);
#: 40x9000 256 1.00, 512 1.08; the (1, 1024, 4 warps) chunks this replaced were 1.07-1.54x
#: off. Rows of 16384+ steps kept 512-step
#: chunks until a head-to-head probe of 14 shapes (N = 2-120, T = 5000-300000, session 17,
#: ``h2h_lbfitr``) put 256 within 5% of the best at 13 of them (512: 4 of 14).
ACTION_LOOKBACK_MAX_ELEMS = 1 << 20
ACTION_CHUNKS_A_ROW = 8
ACTION_MIN_CHUNK, ACTION_MAX_CHUNK = 128, 256
#: Per-action keys with fewer rows than SMs split time from this T on (the split
#: strategy serves Retrace 10x20000 in 26.9 us and 16x32768 in 59 us; one row per
#: program took 88.8 us at 48x6000, twice torch.compile's 44.4).
ACTION_SPLIT_T = 4096

#: Env-major keys of that few-rows, long-T kind take the one-pass look-back scan, one warp
#: a chunk. A chunk's length trades the work a program does in one pass against the
#: length of each row's look-back chain and how many programs share the GPU: each class
#: of estimator takes the longest chunk (``shortest`` to ``longest`` steps) that still
#: cuts a row into ``chunks_a_row`` chunks and launches ``programs_per_sm`` programs per
#: multiprocessor, and from ``two_rows`` = (N, T) on, programs of two rows of
#: ``two_row_chunk`` steps with two warps. Fitted to H200 head-to-head probes of 12
#: configs at 28 shapes (N = 2-125, T = 9000-6x10^5, session 17,
#: ``benchmarks/results/session17/h2h_lbfit`` and ``h2h_lbval``; ``benchmarks/h2h_replay.py``
#: replays dispatch there) and the oracle sweeps of 36 few-row keys (sessions 11-15). The
#: chunks-per-row rules they replace were within 5% of the best at 67 of the first probe's
#: 96 keys and 50 of the second's 72; the first fit of these rules 84 of 96 and 62 of 72
#: on the second probe, which it had not seen; these, refitted on both, 82 and 68.
#: Forward scans (eligibility traces, episodic sums) want long look-back chains: at least
#: 16 chunks a row, 1024-2048 steps; backward scans that read a neighbouring step (GAE's
#: ``values[t+1]``) 1024-2048 steps, at least 6 a row and 3 programs per SM; those that do
#: not (lambda and discounted returns) follow the programs from 1024 down to 512 steps and
#: take two rows from 6 x 30000 (2048-step chunks: 1.07-1.30x off at 7x400000 and
#: 110x25000); V-trace (``HEAVY_STREAMS`` values a step) 512-step chunks, two rows from 4
#: rows.
@dataclass(frozen=True)
class LookbackRule:
    """Chunk length and rows a program of the env-major look-back scan, for one class."""

    shortest: int
    longest: int
    chunks_a_row: int = 0
    programs_per_sm: int = 0
    two_rows: tuple[int, int] | None = None
    two_row_chunk: int = 1024


LOOKBACK_RULES: dict[str, LookbackRule] = {
    "forward": LookbackRule(shortest=1024, longest=2048, chunks_a_row=16),
    "backward_neighbour": LookbackRule(shortest=1024, longest=2048, chunks_a_row=6,
                                       programs_per_sm=3),
    "backward": LookbackRule(shortest=512, longest=1024, programs_per_sm=6,
                             two_rows=(6, 30000)),
    "heavy": LookbackRule(shortest=512, longest=512, two_rows=(4, 0), two_row_chunk=512),
}


#: Time-major rollouts up to this many steps use the sequential kernel:
#: 32768x8 sequential 2.7 vs tiled 3.1 us, 32768x32 7.1 vs 7.5 us; from T=128 on
#: sequential falls far behind (68.9 vs 22.9 us), so longer ones use the row-block rules
#: below (TIME_MAJOR_BLOCKS).
SEQUENTIAL_MAX_T = 32

#: Time-major keys with T > 32 and at least one row per SM: (largest next_pow2(T),
#: strategy, overrides). Rows are the contiguous axis, so a program takes a block of
#: them. H200 rule probe, 4 estimators x 7 shapes (benchmarks/results/rule_probe): every
#: choice within 1.23x of the best of 29 configs, where the one-row tiled loop it
#: replaces was 2-6x off.
TIME_MAJOR_BLOCKS: tuple[tuple[int, str, dict[str, int]], ...] = (
    (128, "flat", {"BLOCK_N": 16, "num_warps": 4}),                   # 20000x100, 30000x60
    (256, "tiled", {"BLOCK_N": 16, "BLOCK_T": 64, "num_warps": 2}),   # 12000x160
    (512, "tiled", {"BLOCK_N": 8, "BLOCK_T": 128, "num_warps": 4}),   # 4096x512
    (1 << 62, "tiled", {"BLOCK_N": 8, "BLOCK_T": 128, "num_warps": 8}),  # 1500x1500 ...
)


def _row_warps(n: int, t: int, streams: int, sm_count: int) -> int:
    """Warps of a one-row flat program (see ROW_WARPS)."""
    width = next_pow2(t)
    if streams >= HEAVY_STREAMS:
        return ROW_WARPS * (2 if width >= MID_LONG_SPAN else 1)
    few = width >= ROW_WIDE_MIN_SPAN and n * width <= ROW_WIDE_ELEMS_PER_SM * sm_count
    return ROW_WARPS * (2 if few else 1)


def _loop_tile(n: int, streams: int, sm_count: int) -> dict[str, int]:
    """Chunk loop of a backward mid-long key: narrow from enough rows per SM (see
    MID_LONG_NARROW_ROWS_PER_SM)."""
    per_sm = MID_LONG_HEAVY_NARROW_ROWS_PER_SM if streams >= HEAVY_STREAMS else \
        MID_LONG_NARROW_ROWS_PER_SM
    return dict(MID_LONG_NARROW_TILE if n >= per_sm * sm_count else MID_LONG_TILE)


def neighbour_loop(key: ProblemKey, sm_count: int) -> dict[str, int] | None:
    """The chunk loop of a light backward key that reads a neighbouring step, with rows of
    MID_LONG_SPAN // 2 + 1 to MID_LONG_SPAN steps and enough rows per SM; None for any
    other key (see NEIGHBOUR_LOOP_MIN_ROWS_PER_SM)."""
    spec = ALGORITHMS[key.algorithm]
    streams = step_streams(key)
    if (key.a or key.time_major or spec.direction != "backward" or not spec.neighbour_step
            or streams >= HEAVY_STREAMS or next_pow2(key.t) != MID_LONG_SPAN
            or key.n < NEIGHBOUR_LOOP_MIN_ROWS_PER_SM * sm_count):
        return None
    if key.n >= NEIGHBOUR_LOOP_NARROWEST_ROWS_PER_SM * sm_count:
        return dict(NEIGHBOUR_LOOP_NARROWEST_TILE)
    return _loop_tile(key.n, streams, sm_count)


def step_streams(key: ProblemKey) -> int:
    """Values an ideal kernel reads or writes per (row, step) of ``key``: inputs, flags
    and outputs, not per-row scalars; a measure of per-step work that ignores the dtype."""
    steps = 1 << 16
    per_step = replace(key, n=1, t=steps, dtype="float32")
    return data_bytes(per_step) // (4 * steps)


def lookback_class(key: ProblemKey) -> str:
    """The LOOKBACK_RULES class of ``key``'s estimator, from what it moves and reads a step."""
    spec = ALGORITHMS[key.algorithm]
    if step_streams(key) >= HEAVY_STREAMS:
        return "heavy"
    if spec.direction == "forward":
        return "forward"
    return "backward_neighbour" if spec.neighbour_step else "backward"


def lookback_params(key: ProblemKey, sm_count: int) -> dict[str, int]:
    """The look-back config for an env-major, few-rows, long-T key without per-action
    inputs (see LOOKBACK_RULES)."""
    rule = LOOKBACK_RULES[lookback_class(key)]
    if rule.two_rows and key.n >= rule.two_rows[0] and key.t >= rule.two_rows[1]:
        return {"BLOCK_N": 2, "BLOCK_T": rule.two_row_chunk, "num_warps": 2}
    chunk = rule.longest
    while chunk > rule.shortest and (key.t < rule.chunks_a_row * chunk or
                                     key.n * -(-key.t // chunk) < rule.programs_per_sm * sm_count):
        chunk //= 2
    return {"BLOCK_N": 1, "BLOCK_T": chunk, "num_warps": 1}


def action_short_params(key: ProblemKey) -> dict[str, int]:
    """Rows a program and warps of a flat per-action key of up to ACTION_PAIR_T steps."""
    row = next_pow2(key.t) * next_pow2(key.a)
    if key.t <= ACTION_TINY_T:
        rows = ACTION_TINY_ROWS
    elif key.t > ACTION_SHORT_T:
        rows = ACTION_PAIR_ROWS
    else:
        rows = min(max(ACTION_SHORT_ROWS, ACTION_SHORT_MIN_ELEMS // row), ACTION_SHORT_MAX_ROWS)
    rows = min(rows, max(1, ACTION_SHORT_MAX_ELEMS // row), next_pow2(key.n))
    warps = min(ACTION_MAX_WARPS, max(1, rows * row // ACTION_SHORT_MAX_ELEMS))
    return {"BLOCK_N": rows, "num_warps": warps}


def wide_action(key: ProblemKey) -> bool:
    """Whether ``key``'s action count takes the wide-action rules (see ACTION_WIDE_MIN_A)."""
    return ACTION_WIDE_MIN_A <= key.a <= ACTION_WIDE_MAX_A


def wide_action_flat_params(key: ProblemKey, many_rows: bool) -> dict[str, int]:
    """The flat config of a wide-action key (see ACTION_WIDE_MIN_A)."""
    span, width = next_pow2(key.t), next_pow2(key.a)
    if key.t <= ACTION_WIDE_TINY_T:
        rows = min(max(1, ACTION_WIDE_TINY_ELEMS // (span * width)), next_pow2(key.n))
        return {"BLOCK_N": rows, "num_warps": 1}
    if many_rows and span <= ACTION_SHORT_TILE_T:
        return {"BLOCK_N": ACTION_WIDE_TILE // span, "num_warps": ACTION_WIDE_TILE_WARPS}
    warps = min(ACTION_WIDE_MAX_WARPS, max(1, span * width // ACTION_WIDE_ELEMS_PER_WARP))
    return {"BLOCK_N": 1, "num_warps": warps}


def action_lookback_params(key: ProblemKey, sm_count: int) -> dict[str, int]:
    """The look-back config of a per-action key (see ACTION_LOOKBACK_MAX_ELEMS and, for
    many actions, :mod:`many_actions`)."""
    if many_actions.many_actions(key):
        return many_actions.lookback_params(key, sm_count)
    chunk = max(ACTION_MIN_CHUNK, min(ACTION_MAX_CHUNK, pow2_floor(key.t // ACTION_CHUNKS_A_ROW)))
    warps = ACTION_WIDE_LOOKBACK_WARPS if wide_action(key) else 1
    return {"BLOCK_N": 1, "BLOCK_T": chunk, "num_warps": warps}


def candidates(key: ProblemKey, sm_count: int) -> list[Candidate]:
    """Ordered candidates for ``key`` on a GPU with ``sm_count`` multiprocessors."""
    n, t = key.n, key.t
    streams = step_streams(key)
    ranked: list[Candidate] = []
    few_rows = n < sm_count
    many_action_rows = n >= ACTION_MANY_ROWS_PER_SM * sm_count
    action_row_loop = many_action_rows and (n * t >= LARGE_ELEMENTS or
                                            next_pow2(t) >= ACTION_MANY_ROWS_TILE_MIN_SPAN)
    if key.time_major and t <= SEQUENTIAL_MAX_T:
        ranked.append(("sequential", {}, "time-major, T<=32: sequential (32768x8: 2.7 us)"))
    elif few_rows and (t >= LONG_T or (key.a and t >= ACTION_SPLIT_T)):
        if not key.time_major:
            lookback = action_lookback_params if key.a else lookback_params
            params = lookback(key, sm_count)
            ranked.append(("lookback", params,
                           f"N<{sm_count} SMs, long T: one-pass look-back scan, {params} "
                           "(GAE 5x300000: 14.3 vs split 21.1 us)"))
        ranked.append(("split", {}, f"N<{sm_count} SMs, long T: split time across programs "
                                    "(16x32768: flat 95.8, tiled 42.3, torch scan 30.7 us)"))
        ranked.append(("tiled", {"BLOCK_N": 1, "BLOCK_T": 1024, "num_warps": 8},
                       "few rows, long T: tiled (1, 1024, 8) (16x32768: 42.3 us)"))
    elif key.time_major and not few_rows:
        width = next_pow2(t)
        name, overrides = next((s, p) for top, s, p in TIME_MAJOR_BLOCKS if width <= top)
        ranked.append((name, overrides, f"time-major, T>{SEQUENTIAL_MAX_T}: {name} over row "
                                        f"blocks {overrides} (rule probe: within 1.23x of best)"))
    elif key.time_major:
        ranked.append(("flat", {"BLOCK_N": 1},
                       f"time-major, N<{sm_count} SMs: flat, one row per program (48x6000: "
                       "4x ahead of any row block)"))
    elif key.a and many_actions.many_actions(key):
        ranked.append(many_actions.choice(key, sm_count))
    elif key.a and wide_action(key) and not action_row_loop and (
            t <= FLAT_TILE_MAX_T or (next_pow2(t) <= WIDE_ACTION_ROW_MAX_SPAN and
                                     n < ACTION_ROW_LOOKBACK_ROWS_PER_SM * sm_count)):
        params = wide_action_flat_params(key, many_action_rows)
        ranked.append(("flat", params,
                       f"per-action inputs, A={key.a} of {ACTION_WIDE_MIN_A}-"
                       f"{ACTION_WIDE_MAX_A}: flat {params} (head to head at A=18: within 5% "
                       "of the best at 33 of 37 keys, the A=8 rules 9)"))
    elif key.a and t <= ACTION_PAIR_T:
        params = action_short_params(key)
        ranked.append(("flat", params,
                       f"per-action inputs, T<={ACTION_PAIR_T}: flat {params} (head to head, "
                       "A=8: 32 rows at 1-2 steps, 4-8 to 16, 2 to 24, one warp)"))
    elif key.a and action_row_loop:
        ranked.append(("tiled", dict(ACTION_MANY_ROWS_TILE),
                       f"per-action inputs, N>={ACTION_MANY_ROWS_PER_SM}x{sm_count} SMs, "
                       f"N*T>=2^23 or next_pow2(T)>={ACTION_MANY_ROWS_TILE_MIN_SPAN}: tiled "
                       "(1, 256, 4 warps) (oracle sweeps: within 1.07x of the best at "
                       "32768x2048, 3000x5000, 2000x7000 and 1500x3500)"))
    elif key.a and t > FLAT_TILE_MAX_T and next_pow2(t) <= ACTION_MANY_ROWS_TILE_MIN_SPAN:
        span = f"rows of {FLAT_TILE_MAX_T + 1}-{ACTION_MANY_ROWS_TILE_MIN_SPAN} steps"
        per_sm = ACTION_ROW_LOOKBACK_ROWS_PER_SM
        if n < per_sm * sm_count:
            params = action_lookback_params(key, sm_count)
            ranked.append(("lookback", params,
                           f"per-action inputs, {span}, under {per_sm} rows per SM: look-back "
                           f"scan {params} (Retrace 100x3000: 1.51x faster than one flat row)"))
        else:
            ranked.append(("tiled", dict(ACTION_MANY_ROWS_TILE),
                           f"per-action inputs, {span}, at least {per_sm} rows per SM: tiled "
                           "(1, 256, 4 warps) (head to head: Retrace 1000x1700 at the best of 8 "
                           "configs, one flat row 1.24x)"))
    elif key.a and t > FLAT_TILE_MAX_T and n * t <= ACTION_LOOKBACK_MAX_ELEMS:
        params = action_lookback_params(key, sm_count)
        ranked.append(("lookback", params,
                       f"per-action inputs, T>{ACTION_MANY_ROWS_TILE_MIN_SPAN}, N*T<=2^20: "
                       f"look-back scan {params} (Retrace 40x9000: best of the sweep)"))
    elif key.a and next_pow2(t) >= LONG_T:
        # The flat kernel's tile is next_pow2(T) steps, so T = 5000 compiles the same
        # 8192-step tile as T = 8192 (held-out bench: Retrace 3000x5000 flat 2363 us,
        # 6.5x its HBM floor and 2.2x torch.compile).
        ranked.append(("tiled", {"BLOCK_N": 1, "BLOCK_T": 1024, "num_warps": 8},
                       f"per-action inputs, next_pow2(T)>={LONG_T}: tiled chunk loop "
                       "(1, 1024, 8) (tuned Retrace 256x8192: 126 vs 641 us for one flat row)"))
    elif key.a:
        short_tile = many_action_rows and next_pow2(t) <= ACTION_SHORT_TILE_T
        per_warp = ACTION_ELEMS_PER_WARP * (2 if short_tile else 1)
        warps = max(1, min(ACTION_MAX_WARPS, next_pow2(t) * next_pow2(key.a) // per_warp))
        ranked.append(("flat", {"BLOCK_N": 1, "num_warps": warps},
                       f"per-action inputs (A={key.a}): flat, one row per program, "
                       f"{warps} warps (32768x32: 40.0 vs 62.5 us for 2 rows, 4 warps)"))
    elif n * t >= LARGE_ELEMENTS:
        params = dict(LARGE_TILES[streams > LARGE_LIGHT_STREAMS]) if n <= 4096 else \
            {"BLOCK_N": 1, "BLOCK_T": 256, "num_warps": 1}
        ranked.append(("tiled", params,
                       f"N*T>=2^23: tiled {params} (4096x2048: 41.0 vs flat 49.8; "
                       "32768x2048: 267.8 vs 373.7 us)"))
    elif (streams >= HEAVY_STREAMS and next_pow2(t) == MID_LONG_SPAN and
          t <= HEAVY_LOOP_MAX_T and n >= HEAVY_LOOP_MIN_ROWS_PER_SM * sm_count):
        tile = _loop_tile(n, streams, sm_count)
        ranked.append(("tiled", tile,
                       f"{streams} values a step, T={MID_LONG_SPAN // 2 + 1}-{HEAVY_LOOP_MAX_T}, "
                       f"N>={HEAVY_LOOP_MIN_ROWS_PER_SM}x{sm_count} SMs: tiled {tile} (head "
                       "to head: 23 of 26 keys within 5% of the best, one flat row 15)"))
    elif not few_rows and next_pow2(t) >= MID_LONG_SPAN and n * t >= MID_LONG_MIN_ELEMENTS:
        backward = ALGORITHMS[key.algorithm].direction == "backward"
        if backward and next_pow2(t) > MID_LONG_SPAN:
            tile = _loop_tile(n, streams, sm_count)
            ranked.append(("tiled", tile,
                           f"backward, T>{MID_LONG_SPAN}, 2^20<=N*T<2^23: tiled {tile} "
                           "(rows per SM set the chunk; head to head: within 1.006x of the "
                           "best loop)"))
        elif neighbour_tile := neighbour_loop(key, sm_count):
            ranked.append(("tiled", neighbour_tile,
                           f"backward with a neighbour-step read, T={MID_LONG_SPAN // 2 + 1}-"
                           f"{MID_LONG_SPAN}, N>={NEIGHBOUR_LOOP_MIN_ROWS_PER_SM}x{sm_count} SMs: "
                           f"tiled {neighbour_tile} (head to head, GAE: within 5% of the "
                           "best at 17 of 22 unseen keys, one flat row at 9)"))
        else:
            warps = _row_warps(n, t, streams, sm_count)
            ranked.append(("flat", {"BLOCK_N": 1, "num_warps": warps},
                           f"T>{MID_LONG_SPAN // 2}, 2^20<=N*T<2^23: flat, one row per "
                           f"program, {warps} warps (rl-triton's 16-32: 1.2-1.5x off)"))
    elif t <= MANY_ROWS_MAX_T and n >= HALF_TILE_MAX_N:
        width = next_pow2(t)
        rows = max(MANY_ROWS_MIN_ROWS, FLAT_TILE // width)
        eight = width <= MANY_ROWS_SHORT_T or streams >= HEAVY_STREAMS
        warps = 8 if width > MANY_ROWS_FEW_WARPS_MAX_T and eight else 4
        ranked.append(("flat", {"BLOCK_N": rows, "num_warps": warps},
                       f"N>={HALF_TILE_MAX_N}, T<={MANY_ROWS_MAX_T}: flat, {rows} rows, {warps} "
                       "warps (head to head: within 1.10x of the best at T = 10-40)"))
    elif t <= FLAT_TILE_MAX_T:
        width = next_pow2(t)
        half_below = HALF_TILE_MAX_N if streams >= HEAVY_STREAMS else \
            LIGHT_HALF_TILE_MAX_N
        tile = FLAT_TILE // 2 if width >= 64 and n < half_below else FLAT_TILE
        rows = max(1, min(FLAT_MAX_ROWS, tile // width, next_pow2(n)))
        ranked.append(("flat", {"BLOCK_N": rows, "num_warps": 4},
                       f"T<={FLAT_TILE_MAX_T}: flat, {rows} rows x next_pow2(T) per program, "
                       "4 warps (exhaustive tables and rule probe: within 1.13x of the best)"))
    elif next_pow2(t) <= MID_LONG_SPAN:
        warps = _row_warps(n, t, streams, sm_count)
        ranked.append(("flat", {"BLOCK_N": 1, "num_warps": warps},
                       f"T>{FLAT_TILE_MAX_T} below 2^23 elements: flat, one row per program, "
                       f"{warps} warps (head to head: within 5% of the best at 73 of 78 keys, "
                       "rl-triton's warps 60)"))
    else:
        ranked.append(("flat", {"BLOCK_N": 1},
                       f"T>{MID_LONG_SPAN}, few rows or below 2^20 elements: flat, one row per "
                       "program (DESIGN.md's 256xT rows: flat ahead of tiled)"))
    # Generic tail: whatever the strategies call reasonable for this key.
    ranked.append(("tiled", {"BLOCK_N": 1, "BLOCK_T": 1024, "num_warps": 4},
                   "fallback rule: tiled (1, 1024, 4)"))
    ranked.extend((name, {}, f"fallback rule: {name} defaults")
                  for name in ("tiled", "flat", "split", "sequential", "lookback"))
    return ranked
