"""tune/keys.py: the keys a tuning run covers."""

from __future__ import annotations

import pytest

from rltriton_tune.algorithms import ADJOINT_SCANS, ALGORITHMS, ESTIMATOR_NAMES, GRAD_ALGORITHMS
from rltriton_tune.call import ProblemKey
from rltriton_tune.tune.keys import COMMON_FLAGS, SHIP_SHAPES, flag_sets, grid_keys


def test_common_flags_cover_every_algorithm():
    """`--algorithms all --flags common` takes the adjoint scans too (plain keys) and the
    grad algorithms with the flags they keep of their estimator's common sets."""
    keys = grid_keys(ALGORITHMS, [(8, 16)], ["float32"], ["env"], ["common"], 8)
    by_algorithm = {}
    for key in keys:
        by_algorithm.setdefault(key.algorithm, []).append(key.flags)
    assert set(by_algorithm) == set(ALGORITHMS)
    for name in (*ESTIMATOR_NAMES, *GRAD_ALGORITHMS.values()):
        assert tuple(by_algorithm[name]) == COMMON_FLAGS[name]
    for name in ADJOINT_SCANS.values():
        assert by_algorithm[name] == ["none"]
    assert COMMON_FLAGS["gae_grad"] == ("none", "trunc")
    assert COMMON_FLAGS["episodic_prefix_sum_grad"] == ("none",)


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
