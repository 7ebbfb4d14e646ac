"""The estimator table is self-consistent: every role names one of the estimator's tensors."""

from __future__ import annotations

import pytest

from rltriton_tune.algorithms import ALGORITHMS, ESTIMATOR_NAMES, GRAD_ALGORITHMS
from rltriton_tune.autograd import differentiable


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
    from rltriton_tune.algorithms import ADJOINT_SCANS, ESTIMATOR_NAMES, GRAD_ALGORITHMS

    assert ESTIMATOR_NAMES == ("gae", "vtrace", "retrace", "lambda_returns",
                               "discounted_returns", "eligibility_traces",
                               "episodic_prefix_sum")
    assert set(ALGORITHMS) == (set(ESTIMATOR_NAMES) | set(ADJOINT_SCANS.values())
                               | set(GRAD_ALGORITHMS.values()))
    for direction, scan in ADJOINT_SCANS.items():
        spec = ALGORITHMS[scan]
        assert spec.direction != direction          # the adjoint runs the other way
        assert spec.tensors == ("grads", "beta") and spec.neighbour_step == ("beta",)
        assert not spec.possible_flags and not spec.scalars


@pytest.mark.parametrize("estimator", sorted(GRAD_ALGORITHMS))
def test_grad_algorithms_mirror_their_estimator(estimator):
    """A grad algorithm scans the other way, reads the output gradients (``grads`` for the
    first output, ``grad_<output>`` for the others), some of its estimator's inputs and
    outputs, takes its scalars, keys a subset of its flags, and writes ``grad_<input>`` for
    floating inputs of the estimator (the adjoint z first for a single output)."""
    spec, est = ALGORITHMS[GRAD_ALGORITHMS[estimator]], ALGORITHMS[estimator]
    assert spec.direction != est.direction
    grads_of_outputs = {f"grad_{name}" for name in est.outputs[1:]}
    assert spec.tensors[0] == "grads" and grads_of_outputs <= set(spec.tensors)
    assert set(spec.tensors[1:]) <= set(est.tensors) | set(est.outputs) | grads_of_outputs
    assert spec.scalars == est.scalars and spec.possible_flags <= est.possible_flags
    assert set(spec.flags_inputs) == set(est.flags_inputs) & set(spec.tensors)
    assert set(spec.boundary_grads) <= set(est.optional)
    inputs = [name.removeprefix("grad_") for name in spec.outputs]
    assert set(inputs) <= set(differentiable(estimator)) and 1 <= len(inputs) <= 3
    if len(est.outputs) == 1:
        assert inputs[0] == est.first_float


def test_only_retrace_has_no_grad_algorithm():
    """Its per-action inputs would need [N, T, A] gradients: its backward pass takes the
    three phases."""
    assert set(GRAD_ALGORITHMS) == set(ESTIMATOR_NAMES) - {"retrace"}
