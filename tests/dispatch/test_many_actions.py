"""The many-action rules (Retrace with 25+ actions): bounds and boundaries, any size."""

import itertools

import pytest

from rltriton_tune.call import ProblemKey
from rltriton_tune.dispatch import many_actions
from rltriton_tune.dispatch.heuristic import candidates
from rltriton_tune.kernels import strategies

SM = 132


def retrace(n: int, t: int, a: int) -> ProblemKey:
    return ProblemKey("retrace", n, t, flags="trunc", a=a)


@pytest.mark.parametrize("a", [25, 32, 33, 48, 64, 100, 128, 300, 1000])
def test_every_first_choice_is_a_valid_config(a):
    impls = strategies()
    for n, t in itertools.product([1, 7, 131, 600, 3000, 50000], [1, 3, 17, 100, 513, 5000]):
        key = retrace(n, t, a)
        name, overrides, why = candidates(key, SM)[0]
        assert why
        impl = impls[name]
        impl.validate(key, {**impl.default_params(key), **overrides})  # raises if invalid


@pytest.mark.parametrize("a", [25, 28, 32, 48, 64, 100, 256, 1000])
def test_lookback_chunk_follows_the_programs_not_the_actions(a):
    # 7 x 132 = 924 programs: 128-step chunks from there, 64 below, at any action count.
    at = retrace(924 // 8, 8 * 128, a)            # 115 rows of 8 chunks: 920 programs
    assert many_actions.lookback_params(at, SM)["BLOCK_T"] == 64
    assert many_actions.lookback_params(retrace(116, 8 * 128, a), SM)["BLOCK_T"] == 128
    assert many_actions.lookback_params(retrace(2, 300000, a), SM)["BLOCK_T"] == 128
    assert many_actions.lookback_params(retrace(60, 1500, a), SM)["BLOCK_T"] == 64


@pytest.mark.parametrize(("n", "t", "a"), [(20000, 1, 25), (20000, 4, 64), (3000, 20, 100),
                                            (5, 9, 32), (700, 150, 32), (2000, 2, 1000)])
def test_flat_programs_hold_32_steps_and_a_warp_per_1024_loaded(n, t, a):
    name, p, _ = many_actions.choice(retrace(n, t, a), SM)
    assert name == "flat"
    span = 1 << max(0, t - 1).bit_length()
    rows = p["BLOCK_N"]
    width = 1 << max(0, a - 1).bit_length()
    assert rows * span >= min(32, span * (1 << max(0, n - 1).bit_length()),
                              max(span, many_actions.FLAT_MAX_TILE // width))
    assert rows == 1 or rows * span * width <= many_actions.FLAT_MAX_TILE
    loaded = rows * span * a
    assert p["num_warps"] <= max(1, loaded // 1024) < 2 * p["num_warps"] or p["num_warps"] == 16


def test_rows_of_16384_elements_loop_from_4_rows_a_sm_and_look_back_below():
    loop = many_actions.choice(retrace(4 * SM, 300, 32), SM)          # 512 x 32
    below = many_actions.choice(retrace(4 * SM - 1, 300, 32), SM)
    assert loop[0] == "tiled" and loop[1]["BLOCK_T"] == 128 and loop[1]["num_warps"] == 4
    assert below[0] == "lookback"


def test_rows_of_8192_elements_loop_only_with_8_rows_a_sm():
    assert many_actions.choice(retrace(8 * SM, 150, 32), SM)[0] == "tiled"
    assert many_actions.choice(retrace(8 * SM - 1, 150, 32), SM)[0] == "flat"


@pytest.mark.parametrize(("n", "t"), [(600, 90), (1500, 35)])
def test_regimes_count_the_elements_a_row_loads_not_its_padded_tile(n, t):
    # A=80 pads to 128 lanes: 128 x 128 = 16384 tile elements, but a row loads 10240.
    name, params, _ = many_actions.choice(retrace(n, t, 80), SM)
    assert name == "flat" and params["BLOCK_N"] == 1
