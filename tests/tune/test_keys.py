"""tune/keys.py: the keys a tuning run covers."""

from __future__ import annotations

import pytest

from rltriton_tune.algorithms import ADJOINT_SCANS, ALGORITHMS, ESTIMATOR_NAMES, GRAD_ALGORITHMS
from rltriton_tune.call import ProblemKey
from rltriton_tune.tune.keys import (
    COMMON_FLAGS,
    SHIP_SHAPES,
    coarse_to_fine,
    coverage_order,
    flag_sets,
    grid_keys,
)


def test_common_flags_cover_every_algorithm():
    """`--algorithms all --flags common` takes the adjoint scans too (plain keys) and the
    grad algorithms with the flags they keep of their estimator's common sets, boundary
    gradient asked or not."""
    keys = grid_keys(ALGORITHMS, [(8, 16)], ["float32"], ["env"], ["common"], 8)
    by_algorithm = {}
    for key in keys:
        by_algorithm.setdefault(key.algorithm, []).append(key.flags)
    assert set(by_algorithm) == set(ALGORITHMS)
    for name in (*ESTIMATOR_NAMES, *GRAD_ALGORITHMS.values()):
        assert tuple(by_algorithm[name]) == COMMON_FLAGS[name]
    for name in ADJOINT_SCANS.values():
        assert by_algorithm[name] == ["none"]
    # Each with and without the boundary input's gradient.
    assert COMMON_FLAGS["gae_grad"] == ("none", "last_value", "trunc", "bootstrap+trunc")
    assert COMMON_FLAGS["episodic_prefix_sum_grad"] == ("none", "seed")


@pytest.mark.parametrize("requested, expected", [
    (["none"], ["trunc"]),                # Retrace's truncation flag is always there
    (["last_value"], []),                 # Retrace takes no last_value
    (["none", "trunc", "none"], ["trunc"]),
])
def test_flag_sets_add_required_flags_and_drop_impossible_ones(requested, expected):
    assert flag_sets("retrace", requested) == expected


def test_flag_sets_refuse_last_value_with_truncations():
    assert flag_sets("gae", ["last_value+trunc", "bootstrap+trunc"]) == ["bootstrap+trunc"]


def test_grid_keys_are_unique_and_ordered():
    keys = grid_keys(["gae", "vtrace"], [(8, 8), (32, 8)], ["float32", "bfloat16"],
                     ["env", "time"], ["none", "none"], 8)
    assert len(keys) == len(set(keys)) == 2 * 2 * 2 * 2
    assert keys[0] == ProblemKey("gae", 8, 8, "float32", "env", "none", 0)
    assert all(n * t <= 1 << 28 for n, t in SHIP_SHAPES)


def test_coarse_to_fine_spreads_every_prefix_over_the_grid():
    shapes = [(n, t) for n in (8, 32, 128, 512) for t in (8, 32, 128, 512)]
    order = coarse_to_fine(shapes)
    assert sorted(order) == sorted(shapes)
    assert order[0] == (8, 8)
    assert order[1] == (512, 512)               # farthest from the first
    assert set(order[2:4]) == {(8, 512), (512, 8)}
    assert coarse_to_fine([]) == []
    assert coarse_to_fine([(4, 4), (4, 4)]) == [(4, 4)]


def test_coverage_order_puts_plain_keys_of_every_shape_first():
    keys = grid_keys(["gae", "discounted_returns"], [(8, 8), (8, 512), (512, 8)],
                     ["float32", "bfloat16"], ["env", "time"], ["common"], 8)
    ordered = coverage_order(keys)
    assert sorted(ordered, key=str) == sorted(keys, key=str)
    plain = [k for k in keys if k.flags == "none" and k.dtype == "float32"]
    assert set(ordered[:len(plain)]) == set(plain)
    # then one dimension away (flag set or dtype), then both
    tiers = [(k.flags != "none") + (k.dtype != "float32") for k in ordered]
    assert tiers == sorted(tiers)
    assert ordered[0] == ProblemKey("gae", 8, 8, "float32", "env", "none", 0)
    assert (ordered[1].algorithm, ordered[1].layout) == ("discounted_returns", "env")
