"""Moving a tuned config to another shape (``Strategy.transfer``), hand-computed cases."""

from __future__ import annotations

import pytest

from rltriton_tune.call import ProblemKey
from rltriton_tune.fallback.torch_strategy import TorchStrategy
from rltriton_tune.kernels import strategies
from rltriton_tune.kernels.launch import rescale_tile


def key(n, t, algorithm="gae"):
    return ProblemKey(algorithm, n, t)


#: GAE is a backward scan: its flat configs carry a tile order (launch.tile_order_space).
ORDER = {"DESCEND": 0, "TWO_BLOCKS": 0}  # the defaults a moved flat config is completed with


@pytest.fixture(scope="module")
def triton_strategies():
    return strategies()


def moved(strategies_by_name, name, source, target, params):
    impl = strategies_by_name[name]
    to, params = impl.transfer(source, target, params)
    return to, strategies_by_name[to].validate(target, params)


def test_shorter_row_keeps_the_tile_with_more_rows():
    # 128-step rows, 1 row, 2 warps -> 32-step rows: 4 rows keep the 128-element tile.
    out = rescale_tile({"BLOCK_N": 1, "num_warps": 2}, 128, 32, key(32768, 32))
    assert out == {"BLOCK_N": 4, "num_warps": 2}


def test_shorter_row_keeps_enough_programs():
    # 512-element tile moved to 128-step rows would take 4 rows; N=300 allows 2 for 256
    # programs (next_pow2(300) = 512 rows / 256 programs).
    out = rescale_tile({"BLOCK_N": 1, "num_warps": 4}, 512, 128, key(300, 100))
    assert out == {"BLOCK_N": 2, "num_warps": 4}
    # A source with more rows than that keeps its own.
    out = rescale_tile({"BLOCK_N": 8, "num_warps": 4}, 32, 8, key(300, 8))
    assert out["BLOCK_N"] == 8


def test_longer_row_drops_rows_then_adds_warps():
    # 128-element tile, 2 warps = 2 elements per thread; 512-step rows need 8 warps.
    out = rescale_tile({"BLOCK_N": 1, "num_warps": 2}, 128, 512, key(4096, 512))
    assert out == {"BLOCK_N": 1, "num_warps": 8}
    # 4 rows of 64 steps (256 elements, 4 warps) -> 2 rows of 128 steps, same warps.
    out = rescale_tile({"BLOCK_N": 4, "num_warps": 4}, 64, 128, key(4096, 100))
    assert out == {"BLOCK_N": 2, "num_warps": 4}
    # Moving adds warps up to 16 only; a source with more keeps its own.
    out = rescale_tile({"BLOCK_N": 1, "num_warps": 16}, 2048, 4096, key(6000, 3000))
    assert out == {"BLOCK_N": 1, "num_warps": 16}
    out = rescale_tile({"BLOCK_N": 1, "num_warps": 32}, 8192, 65536, key(16, 65536))
    assert out["num_warps"] == 32


def test_flat_moves_its_row_tile(triton_strategies):
    assert moved(triton_strategies, "flat", key(32768, 128), key(32768, 32),
                 {"BLOCK_N": 1, "num_warps": 2, "num_stages": 1}) == \
        ("flat", {"BLOCK_N": 4, "num_warps": 2, "num_stages": 1, **ORDER})
    assert moved(triton_strategies, "flat", key(256, 32), key(256, 100),
                 {"BLOCK_N": 1, "num_warps": 2, "num_stages": 3}) == \
        ("flat", {"BLOCK_N": 1, "num_warps": 4, "num_stages": 3, **ORDER})
    # Same next_pow2(T) and more rows: nothing to move.
    same = {"BLOCK_N": 2, "num_warps": 8, "num_stages": 1, **ORDER}
    assert moved(triton_strategies, "flat", key(4096, 512), key(6000, 300), same) == \
        ("flat", same)


def test_flat_takes_one_row_a_program_at_long_odd_rows(triton_strategies):
    # 32768x512's two rows a program on 4 warps (8 elements a thread) at 30019x275: one
    # 512-step row a program, on 2 warps to keep 8 elements a thread.
    two_rows = {"BLOCK_N": 2, "num_warps": 4, "num_stages": 1, **ORDER}
    one_row = {"BLOCK_N": 1, "num_warps": 2, "num_stages": 1, **ORDER}
    assert moved(triton_strategies, "flat", key(32768, 512), key(30019, 275), two_rows) == \
        ("flat", one_row)
    # A shorter span first keeps the tile (8192 steps -> two 4096-step rows), then one row.
    assert moved(triton_strategies, "flat", key(32768, 8192), key(27665, 2425),
                 {"BLOCK_N": 1, "num_warps": 32, "num_stages": 1, **ORDER}) == \
        ("flat", {"BLOCK_N": 1, "num_warps": 16, "num_stages": 1, **ORDER})
    # From ONE_ODD_ROW_SPAN (256) on: a 201-step row takes one row a program.
    assert moved(triton_strategies, "flat", key(4096, 256), key(5000, 201), two_rows) == \
        ("flat", one_row)
    # Rows of even length, odd rows of a span below ONE_ODD_ROW_SPAN, an entry tuned at
    # an odd length, and Retrace (its action tile grows as rows shrink) keep their rows.
    assert moved(triton_strategies, "flat", key(32768, 512), key(30000, 276), two_rows) == \
        ("flat", two_rows)
    assert moved(triton_strategies, "flat", key(2048, 128), key(2415, 91), two_rows) == \
        ("flat", two_rows)
    assert moved(triton_strategies, "flat", key(30019, 275), key(24001, 301), two_rows) == \
        ("flat", two_rows)
    # A one-tile tiled config (4 rows of 256 steps on 8 warps, 4 elements a thread)
    # becoming flat at 301-step rows: 2 rows of the 512-step span, then one row on 4 warps.
    assert moved(triton_strategies, "tiled", key(4096, 256), key(5001, 301),
                 {"BLOCK_N": 4, "BLOCK_T": 256, "num_warps": 8, "num_stages": 1}) == \
        ("flat", {"BLOCK_N": 1, "num_warps": 4, "num_stages": 1, **ORDER})
    retrace = {"BLOCK_N": 2, "num_warps": 4, "num_stages": 1, "REDUCE_A": 0, **ORDER}
    assert moved(triton_strategies, "flat", ProblemKey("retrace", 4096, 512, flags="trunc", a=8),
                 ProblemKey("retrace", 5001, 301, flags="trunc", a=8), retrace) == \
        ("flat", retrace)
    # Time-major flat configs hold columns of environments, not rows: not moved.
    time_major = ProblemKey("gae", 30019, 275, layout="time")
    columns = {"BLOCK_N": 2, "num_warps": 4, "num_stages": 1}
    assert triton_strategies["flat"].transfer(
        ProblemKey("gae", 32768, 512, layout="time"), time_major, columns) == \
        ("flat", columns)


def test_one_tile_tiled_config_becomes_flat(triton_strategies):
    # 4096x32's tiled (16 rows x 32 steps, 4 warps) moved to T=8: the flat kernel with
    # 16 rows of 8 steps (N=4096 leaves 16 rows for 256 programs).
    assert moved(triton_strategies, "tiled", key(4096, 32), key(4096, 8),
                 {"BLOCK_N": 16, "BLOCK_T": 32, "num_warps": 4, "num_stages": 1}) == \
        ("flat", {"BLOCK_N": 16, "num_warps": 4, "num_stages": 1, **ORDER})
    # ... and to T=40 (64-step rows): 8 rows keep the 512-element tile.
    assert moved(triton_strategies, "tiled", key(4096, 32), key(3000, 40),
                 {"BLOCK_N": 16, "BLOCK_T": 32, "num_warps": 4, "num_stages": 1}) == \
        ("flat", {"BLOCK_N": 8, "num_warps": 4, "num_stages": 1, **ORDER})


def test_a_retrace_config_keeps_its_action_pre_pass_when_it_becomes_flat(triton_strategies):
    retrace = [ProblemKey("retrace", 4096, t, flags="trunc", a=8) for t in (256, 128)]
    for reduce_actions in (0, 1):
        params = {"BLOCK_N": 2, "BLOCK_T": 256, "num_warps": 4, "num_stages": 1,
                  "REDUCE_A": reduce_actions}
        to, moved_params = moved(triton_strategies, "tiled", *retrace, params)
        assert to == "flat" and moved_params["REDUCE_A"] == reduce_actions


def test_tiled_chunk_loop_is_kept_or_cut_to_the_row(triton_strategies):
    loop = {"BLOCK_N": 2, "BLOCK_T": 256, "num_warps": 4, "num_stages": 1}
    assert moved(triton_strategies, "tiled", key(4096, 8192), key(3000, 6000), loop) == \
        ("tiled", loop)
    # T=100 is shorter than the chunk: a 128-step chunk, rows up to the 512-element tile.
    assert moved(triton_strategies, "tiled", key(4096, 8192), key(4096, 100), loop) == \
        ("tiled", {"BLOCK_N": 4, "BLOCK_T": 128, "num_warps": 4, "num_stages": 1})


@pytest.mark.parametrize("name", ["split", "sequential", "lookback"])
def test_other_strategies_keep_their_config(triton_strategies, name):
    params = triton_strategies[name].default_params(key(16, 32768))
    assert triton_strategies[name].transfer(key(16, 32768), key(24, 12000), params) == \
        (name, params)


def test_torch_strategy_keeps_its_config():
    params = {"mode": "chunked", "chunk": 64}
    assert TorchStrategy().transfer(key(16, 4096), key(20, 3000), params) == ("torch", params)


def test_transfer_does_not_modify_the_entry(triton_strategies):
    params = {"BLOCK_N": 16, "BLOCK_T": 32, "num_warps": 4, "num_stages": 1}
    before = dict(params)
    triton_strategies["tiled"].transfer(key(4096, 32), key(4096, 8), params)
    assert params == before


@pytest.mark.parametrize("params", [{"BLOCK_N": 0, "num_warps": 0, "num_stages": 1},
                                    {"BLOCK_N": "x", "num_warps": 4},
                                    {"num_warps": 4}])
def test_foreign_params_in_a_profile_never_break_dispatch(params, monkeypatch):
    """A broken entry's config is skipped (moved or not), whatever ``transfer`` raises."""
    from types import SimpleNamespace

    from rltriton_tune.dispatch import lookup
    from rltriton_tune.tuning_db import Entry

    source = key(4096, 32)
    entry = Entry(key=source, strategy="flat", params=params, device_time_us=1.0)
    profiles = SimpleNamespace(entries={source.as_text(): entry},
                               sources={source.as_text(): "foreign.json"}, index={})
    found = list(lookup.borrowed(key(4096, 40), profiles, strategies()))
    assert all(d.params.get("BLOCK_N", 1) >= 1 for d in found)


def test_sequential_keeps_its_program_count(triton_strategies):
    # 32768 rows in blocks of 256 = 128 programs; at 4096 rows, blocks of 32 keep 128.
    assert moved(triton_strategies, "sequential", key(32768, 2048, "retrace"),
                 key(4096, 8192, "retrace"), {"BLOCK_N": 256, "num_warps": 4}) == \
        ("sequential", {"BLOCK_N": 32, "num_warps": 1, "num_stages": 1})
    # Not below one warp's 32 rows (or the key's own rows), never wider than tuned.
    assert moved(triton_strategies, "sequential", key(32768, 32), key(300, 32),
                 {"BLOCK_N": 256, "num_warps": 8}) == \
        ("sequential", {"BLOCK_N": 32, "num_warps": 1, "num_stages": 1})
    assert moved(triton_strategies, "sequential", key(32768, 32), key(20, 32),
                 {"BLOCK_N": 256, "num_warps": 8})[1]["BLOCK_N"] == 32
    assert moved(triton_strategies, "sequential", key(4096, 32), key(32768, 32),
                 {"BLOCK_N": 64, "num_warps": 2}) == \
        ("sequential", {"BLOCK_N": 64, "num_warps": 2, "num_stages": 1})
    # 4096 rows / 128 programs = 32 exactly; 6000 rows allow 32 (46.9 per program).
    assert moved(triton_strategies, "sequential", key(32768, 32), key(6000, 32),
                 {"BLOCK_N": 256, "num_warps": 4})[1]["BLOCK_N"] == 32


def test_a_flat_tile_order_goes_only_where_the_target_offers_it(triton_strategies):
    """``DESCEND`` exists for backward scans of env-major rows: a flat config moved to
    another such key keeps it, one moved to a time-major key drops it."""
    params = {"BLOCK_N": 1, "num_warps": 4, "num_stages": 1, "DESCEND": 1, "TWO_BLOCKS": 0}
    env = ProblemKey("gae", 333, 150)
    assert moved(triton_strategies, "flat", env, ProblemKey("gae", 600, 150), params) == \
        ("flat", params)
    to, moved_params = moved(triton_strategies, "flat", env,
                             ProblemKey("gae", 600, 150, layout="time"), params)
    assert to == "flat" and "DESCEND" not in moved_params


def test_a_register_cap_is_dropped_where_the_moved_config_has_too_few_warps(triton_strategies):
    """``TWO_BLOCKS=1`` moves with its config while it still caps something: 8 rows of 256
    steps on 16 warps, moved to rows of odd length, take one row a program on 2 warps,
    where there is nothing to cap."""
    params = {"BLOCK_N": 1, "num_warps": 16, "num_stages": 1, "DESCEND": 0, "TWO_BLOCKS": 1}
    assert moved(triton_strategies, "flat", ProblemKey("vtrace", 4096, 2048),
                 ProblemKey("vtrace", 4745, 1047), params) == ("flat", params)
    rows = {**params, "BLOCK_N": 8}
    to, odd = moved(triton_strategies, "flat", ProblemKey("vtrace", 4096, 256),
                    ProblemKey("vtrace", 4745, 255), rows)
    assert (odd["BLOCK_N"], odd["num_warps"], odd["TWO_BLOCKS"]) == (1, 2, 0)
