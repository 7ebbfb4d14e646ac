"""The estimator table is self-consistent: every role names one of the estimator's tensors."""

from __future__ import annotations

import pytest

from rltriton_tune.algorithms import ALGORITHMS


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_role_names_a_tensor_of_the_estimator(name):
    spec = ALGORITHMS[name]
    for role in ("optional", "per_action", "per_env", "integer", "flags_inputs",
                 "neighbour_step"):
        assert set(getattr(spec, role)) <= set(spec.tensors), role
    assert spec.direction in ("backward", "forward")


def test_neighbour_reads_follow_the_spec():
    # SPEC: GAE and V-trace use V(s_{t+1}) = values[t+1]; Retrace c[t+1] and q[t+1];
    # the forward scans done[t-1]; lambda and discounted returns nothing next door.
    assert ALGORITHMS["gae"].neighbour_step == ("values",)
    assert ALGORITHMS["vtrace"].neighbour_step == ("values",)
    assert {"actions", "q_values"} <= set(ALGORITHMS["retrace"].neighbour_step)
    assert ALGORITHMS["eligibility_traces"].neighbour_step == ("dones",)
    assert not ALGORITHMS["lambda_returns"].neighbour_step
    assert not ALGORITHMS["discounted_returns"].neighbour_step


def test_estimators_and_their_adjoint_scans():
    from rltriton_tune.algorithms import ADJOINT_SCANS, ESTIMATOR_NAMES

    assert ESTIMATOR_NAMES == ("gae", "vtrace", "retrace", "lambda_returns",
                               "discounted_returns", "eligibility_traces",
                               "episodic_prefix_sum")
    assert set(ALGORITHMS) == set(ESTIMATOR_NAMES) | set(ADJOINT_SCANS.values())
    for direction, scan in ADJOINT_SCANS.items():
        spec = ALGORITHMS[scan]
        assert spec.direction != direction          # the adjoint runs the other way
        assert spec.tensors == ("grads", "beta") and spec.neighbour_step == ("beta",)
        assert not spec.possible_flags and not spec.scalars
