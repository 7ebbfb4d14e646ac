"""The extensions beyond rl-triton 0.1.3 (SPEC.md, last section) at the public functions:
batch dims, ``next_values``, 0-d tensor scalars and the "not both" error class."""

import math

import pytest
import torch

from rltriton_tune import dispatch, fallback
from rltriton_tune.algorithms import ALGORITHMS, ESTIMATOR_NAMES
from rltriton_tune.call import ProblemKey
from rltriton_tune.estimators import (
    ESTIMATORS,
    ExclusiveArgumentsError,
    compute_gae,
    compute_vtrace,
    prepare_call,
)
from rltriton_tune.problems import random_inputs
from rltriton_tune.reference import reference

RICHEST = {
    "gae": "bootstrap+trunc", "vtrace": "bootstrap+trunc", "retrace": "trunc",
    "lambda_returns": "bootstrap+trunc", "discounted_returns": "bootstrap+trunc",
    "eligibility_traces": "seed", "episodic_prefix_sum": "seed",
}


def as_tuple(outputs):
    return outputs if isinstance(outputs, tuple) else (outputs,)


def flat_inputs(algorithm, n, t, time_major=False, flags=None, seed=0):
    key = ProblemKey(algorithm, n, t, "float32", "time" if time_major else "env",
                     flags or RICHEST[algorithm], 3 if algorithm == "retrace" else 0)
    return random_inputs(key, seed=seed)


def unflatten(algorithm, kwargs, batch, time_major):
    """The same inputs with the N axis split into ``batch`` dims."""
    spec = ALGORITHMS[algorithm]
    out = {}
    for name, value in kwargs.items():
        if isinstance(value, torch.Tensor):
            if name in spec.per_env:
                value = value.reshape(batch)
            elif time_major:
                value = value.reshape(value.shape[0], *batch, *value.shape[2:])
            else:
                value = value.reshape(*batch, *value.shape[1:])
        out[name] = value
    return out


# ---------------------------------------------------------------- batch dims

@pytest.mark.parametrize("batch", [(2, 3), (2, 1, 3), (6,)])
@pytest.mark.parametrize("time_major", [False, True])
@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_batch_dims_equal_the_flattened_call(algorithm, time_major, batch):
    t = 11
    kwargs = flat_inputs(algorithm, math.prod(batch), t, time_major, seed=len(batch))
    want = as_tuple(ESTIMATORS[algorithm](**kwargs))
    got = as_tuple(ESTIMATORS[algorithm](**unflatten(algorithm, kwargs, batch, time_major)))
    shape = (t, *batch) if time_major else (*batch, t)
    for g, w in zip(got, want, strict=True):
        assert g.shape == shape
        assert torch.equal(g.reshape(w.shape), w)


def test_batch_dims_seed_values_and_episodic_prefix_sum():
    kwargs = flat_inputs("episodic_prefix_sum", 6, 9, flags="seed+starts_at")
    batched = unflatten("episodic_prefix_sum", kwargs, (3, 2), False)
    assert batched["seed_values"].shape == (3, 2)
    got = ESTIMATORS["episodic_prefix_sum"](**batched)
    assert torch.equal(got.reshape(6, 9), ESTIMATORS["episodic_prefix_sum"](**kwargs))


@pytest.mark.parametrize("time_major", [False, True])
@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_batch_dims_are_flattened_without_copies(algorithm, time_major, monkeypatch):
    seen = []
    monkeypatch.setattr(dispatch, "run", lambda call: seen.append(call) or tuple(
        torch.zeros((call.t, call.n) if call.time_major else (call.n, call.t))
        for _ in ALGORITHMS[algorithm].outputs))
    kwargs = unflatten(algorithm, flat_inputs(algorithm, 6, 5, time_major), (2, 3), time_major)
    ESTIMATORS[algorithm](**kwargs)
    (call,) = seen
    assert (call.n, call.t) == (6, 5) and call.shape == tuple(kwargs[
        ALGORITHMS[algorithm].first_float].shape)
    spec = ALGORITHMS[algorithm]
    for name, x in call.tensors.items():
        assert x.data_ptr() == kwargs[name].data_ptr(), name
        assert x.dim() == (1 if name in spec.per_env else 3 if name in spec.per_action else 2)


def test_batch_dims_that_cannot_merge_are_copied_and_still_right():
    kwargs = flat_inputs("gae", 6, 7)
    # [3, 2, T] storage seen as [2, 3, T]: the batch dims do not merge into one stride.
    swapped = {k: (v.reshape(3, 2, 7).transpose(0, 1) if isinstance(v, torch.Tensor) else v)
               for k, v in kwargs.items()}
    assert not swapped["rewards"].is_contiguous()
    dense = {k: (v.contiguous() if isinstance(v, torch.Tensor) else v)
             for k, v in swapped.items()}
    got = compute_gae(**swapped)
    assert got.shape == (2, 3, 7) and torch.equal(got, compute_gae(**dense))


def test_batch_dims_shape_errors_name_the_caller_shapes():
    kwargs = unflatten("gae", flat_inputs("gae", 6, 5, flags="none"), (2, 3), False)
    kwargs["values"] = kwargs["values"].reshape(3, 2, 5)   # same N x T, other batch shape
    with pytest.raises(ValueError, match=r"values has shape \(3, 2, 5\).*\(2, 3, 5\)"):
        compute_gae(**kwargs)
    kwargs = unflatten("gae", flat_inputs("gae", 6, 5, flags="last_value"), (2, 3), False)
    kwargs["last_value"] = kwargs["last_value"].reshape(6)
    with pytest.raises(ValueError, match=r"last_value has shape \(6,\); expected \(2, 3\)"):
        compute_gae(**kwargs)
    kwargs = unflatten("retrace", flat_inputs("retrace", 6, 5), (2, 3), False)
    kwargs["next_q_values_all"] = kwargs["next_q_values_all"].reshape(6, 5, 3)
    with pytest.raises(ValueError, match="next_q_values_all"):
        ESTIMATORS["retrace"](**kwargs)


@pytest.mark.parametrize("time_major", [False, True])
def test_one_dimensional_input_is_refused_with_a_hint(time_major):
    x = torch.zeros(7)
    with pytest.raises(ValueError, match=r"rewards must be .*at least one batch dim.*unsqueeze"):
        compute_gae(x, x, x, time_major=time_major)


@pytest.mark.parametrize("batch", [(0, 3), (2, 0)])
def test_empty_batch_dims(batch):
    x = torch.zeros(*batch, 4)
    assert compute_gae(x, x, x).shape == (*batch, 4)
    vs, adv = compute_vtrace(x, x, x, x, x, last_value=torch.zeros(batch))
    assert vs.shape == adv.shape == (*batch, 4)


# ---------------------------------------------------------------- next_values

@pytest.mark.parametrize("mode", ["dispatch", *fallback.CPU_MODES])
@pytest.mark.parametrize("flags", ["next", "next+trunc"])
@pytest.mark.parametrize("time_major", [False, True])
@pytest.mark.parametrize("algorithm", ["gae", "vtrace"])
def test_next_values_match_the_reference(algorithm, time_major, flags, mode):
    key = ProblemKey(algorithm, 5, 23, "float32", "time" if time_major else "env", flags)
    kwargs = random_inputs(key, seed=3)
    assert "next_values" in kwargs
    if mode == "dispatch":
        got = as_tuple(ESTIMATORS[algorithm](**kwargs))
    else:
        got = fallback.launch(prepare_call(algorithm, **kwargs), mode)
    for g, w in zip(got, as_tuple(reference(algorithm, **kwargs)), strict=True):
        torch.testing.assert_close(g.double(), w, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("algorithm", ["gae", "vtrace"])
def test_next_values_built_from_values_and_bootstrap_values_change_nothing(algorithm):
    """next_values = b[t] where truncated or t = T-1, values[t+1] elsewhere: SPEC's nv."""
    kwargs = flat_inputs(algorithm, 4, 17, seed=5)   # truncateds + bootstrap_values
    values, boot = kwargs["values"], kwargs["bootstrap_values"]
    shifted = torch.cat([values[:, 1:], boot[:, -1:]], dim=1)
    following = torch.where(kwargs["truncateds"] != 0, boot, shifted)
    want = as_tuple(ESTIMATORS[algorithm](**kwargs))
    kwargs["bootstrap_values"] = None
    got = as_tuple(ESTIMATORS[algorithm](**kwargs, next_values=following))
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-6)


def test_next_values_at_truncations_are_used_not_zeroed():
    # One step, truncated: A = r + γ·next_value - v (the trace ends, the value does not).
    one = torch.ones(1, 1)
    adv = compute_gae(one, 0 * one, 0 * one, one, gamma=0.5, next_values=4 * one)
    assert adv.item() == 1 + 0.5 * 4
    # Terminated: the next value is ignored.
    adv = compute_gae(one, 0 * one, one, gamma=0.5, next_values=4 * one)
    assert adv.item() == 1


def test_next_values_key_flag():
    kwargs = flat_inputs("gae", 3, 4, flags="trunc")
    call = prepare_call("gae", **kwargs, next_values=torch.zeros(3, 4))
    assert call.key.flags == "next+trunc"
    # λ-returns' own (required) next_values is not a flag.
    call = prepare_call("lambda_returns", **flat_inputs("lambda_returns", 3, 4, flags="none"))
    assert call.key.flags == "none"


# ---------------------------------------------------------------- scalars

@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_zero_dim_cpu_tensor_scalars_equal_numbers(algorithm):
    kwargs = flat_inputs(algorithm, 3, 9)
    spec = ALGORITHMS[algorithm]
    want = as_tuple(ESTIMATORS[algorithm](**kwargs))
    for dtype in (torch.float32, torch.float64):
        tensors = {name: torch.tensor(kwargs[name], dtype=dtype) for name in spec.scalars}
        call = prepare_call(algorithm, **{**kwargs, **tensors})
        assert not call.tensor_scalars
        assert all(type(v) is float for v in call.scalars.values())
        got = as_tuple(ESTIMATORS[algorithm](**{**kwargs, **tensors}))
        for g, w in zip(got, want, strict=True):
            if dtype is torch.float64:   # the same double: the same outputs
                assert torch.equal(g, w)
            else:                        # 0.9 rounded to float32 first
                torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    assert prepare_call("gae", **{**flat_inputs("gae", 3, 9),
                                  "gamma": torch.tensor(1)}).scalars["gamma"] == 1.0


def test_device_tensor_scalars_are_not_read_and_skip_dispatch(monkeypatch):
    """A 0-d tensor on the inputs' device (meta stands in for a GPU: reading it fails)
    stays a tensor and the call goes to the torch implementation, not dispatch."""

    def fail(call):
        raise AssertionError("a call with device scalars must not reach dispatch")

    monkeypatch.setattr(dispatch, "run", fail)
    kwargs = {k: v.to("meta") if isinstance(v, torch.Tensor) else v
              for k, v in flat_inputs("vtrace", 4, 6).items()}
    gamma = torch.tensor(0.9, device="meta")
    call = prepare_call("vtrace", **{**kwargs, "gamma": gamma})
    assert call.tensor_scalars and call.scalars["gamma"] is not None
    vs, adv = compute_vtrace(**{**kwargs, "gamma": gamma, "c_bar": torch.tensor(
        0.5, device="meta")})
    assert vs.shape == adv.shape == (4, 6) and vs.device.type == "meta"
    with pytest.raises(ValueError, match="gamma is on meta"):
        compute_vtrace(**{**flat_inputs("vtrace", 4, 6), "gamma": gamma})


@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_torch_implementation_reads_tensor_scalars(algorithm):
    """The path device scalars take, run on CPU tensors: same numbers as floats."""
    kwargs = flat_inputs(algorithm, 4, 13, seed=2)
    call = prepare_call(algorithm, **kwargs)
    want = fallback.launch(call, "loop")
    call.scalars = {k: torch.tensor(v) for k, v in call.scalars.items()}
    for mode in fallback.CPU_MODES:
        for g, w in zip(fallback.launch(call, mode), want, strict=True):
            torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- errors

def test_exclusive_arguments_error_is_value_and_assertion_error():
    assert issubclass(ExclusiveArgumentsError, ValueError)
    assert issubclass(ExclusiveArgumentsError, AssertionError)
    x = torch.zeros(2, 3)
    with pytest.raises(ExclusiveArgumentsError):
        compute_gae(x, x, x, bootstrap_values=x, last_value=torch.zeros(2))
