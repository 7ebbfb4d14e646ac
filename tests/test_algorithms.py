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
