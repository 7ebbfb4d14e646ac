"""The public estimators on a CUDA device: agreement with the reference, GPU-only rules.

Skipped without CUDA (tests/conftest.py). Run on the H200 with
``pytest tests/test_estimators_gpu.py -q``.
"""

import pytest
import torch

from rltriton_tune.algorithms import ALGORITHMS, ESTIMATOR_NAMES
from rltriton_tune.call import ProblemKey
from rltriton_tune.estimators import ESTIMATORS
from rltriton_tune.problems import random_inputs
from rltriton_tune.reference import reference

pytestmark = pytest.mark.gpu

TOLERANCE = {"float32": 2e-5, "float16": 3e-3, "bfloat16": 3e-2}

RICHEST = {
    "gae": "bootstrap+trunc", "vtrace": "bootstrap+trunc", "retrace": "trunc",
    "lambda_returns": "bootstrap+trunc", "discounted_returns": "bootstrap+trunc",
    "eligibility_traces": "seed", "episodic_prefix_sum": "seed+starts_at",
}
PLAIN = {name: "none" for name in ESTIMATOR_NAMES}
PLAIN["gae"] = "last_value"
PLAIN["retrace"] = "trunc"  # Retrace always takes truncations: its one flag set runs once
FLAG_SETS = {name: tuple(dict.fromkeys((PLAIN[name], RICHEST[name])))
             for name in ESTIMATOR_NAMES}
#: Scalars of each flag set (those an estimator takes): the clip levels unequal and away
#: from 1, in both orders, gamma and lambda off their defaults.
SCALARS = ({"gamma": 0.9, "lambda_": 0.8, "rho_bar": 1.7, "c_bar": 0.6},
           {"gamma": 0.8, "lambda_": 0.6, "rho_bar": 0.6, "c_bar": 1.7})


def as_tuple(outputs):
    return outputs if isinstance(outputs, tuple) else (outputs,)


def relative_error(got, want):
    got = got.detach().to("cpu", torch.float64)
    return ((got - want).norm() / want.norm().clamp_min(1e-30)).item()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("layout", ["env", "time"])
@pytest.mark.parametrize("shape", [(1, 1), (3, 8191), (4099, 33), (257, 129)])
@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_cuda_matches_reference(algorithm, shape, layout, dtype):
    for i, flags in enumerate(FLAG_SETS[algorithm]):
        key = ProblemKey(algorithm, *shape, dtype, layout, flags,
                         5 if algorithm == "retrace" else 0)
        kwargs = random_inputs(key, device="cuda", seed=1, every_flag=True)
        kwargs.update({k: v for k, v in SCALARS[i].items() if k in key.spec.scalars})
        got = as_tuple(ESTIMATORS[algorithm](**kwargs))
        want = as_tuple(reference(algorithm, **kwargs))
        for g, w in zip(got, want, strict=True):
            assert g.device.type == "cuda" and g.dtype == kwargs[key.spec.first_float].dtype
            assert g.shape == w.shape
            error = relative_error(g, w)
            assert error <= TOLERANCE[dtype], f"{key.as_text()}: relative error {error:.3g}"


@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_calls_do_not_synchronise(algorithm):
    kwargs = random_inputs(ProblemKey(algorithm, 64, 48, "float32", "env", RICHEST[algorithm],
                                      3 if algorithm == "retrace" else 0), device="cuda")
    ESTIMATORS[algorithm](**kwargs)          # first call: decision, compilation
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        ESTIMATORS[algorithm](**kwargs)
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_retrace_out_of_range_action_is_nan_not_a_fault():
    key = ProblemKey("retrace", 4, 37, "float32", "env", "none", 3)
    kwargs = random_inputs(key, device="cuda", seed=2)
    actions = kwargs["actions"].clone()
    actions[1, 10] = 3
    actions[2, 0] = -1
    kwargs["actions"] = actions
    got = ESTIMATORS["retrace"](**kwargs)
    torch.cuda.synchronize()
    want = reference("retrace", **kwargs)
    for g, w in zip(got, want, strict=True):
        g = g.cpu()
        # Wherever the recurrence gives NaN the kernel must too (it may blank more of the row).
        assert torch.isnan(g[torch.isnan(w)]).all()
        torch.testing.assert_close(g[[0, 3]].double(), w[[0, 3]], rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_float64_is_refused_on_cuda(algorithm):
    kwargs = random_inputs(ProblemKey(algorithm, 3, 5, "float32", "env", "none",
                                      2 if algorithm == "retrace" else 0), device="cuda")
    name = ALGORITHMS[algorithm].first_float
    kwargs[name] = kwargs[name].double()
    with pytest.raises(TypeError, match=name):
        ESTIMATORS[algorithm](**kwargs)


def test_device_mismatch_with_cpu():
    kwargs = random_inputs(ProblemKey("gae", 3, 5), device="cuda")
    kwargs["values"] = kwargs["values"].cpu()
    with pytest.raises(ValueError, match="values"):
        ESTIMATORS["gae"](**kwargs)


# ---------------------------------------------------------------- extensions (issue 33)

@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("layout", ["env", "time"])
@pytest.mark.parametrize("flags", ["next", "next+trunc"])
@pytest.mark.parametrize("algorithm", ["gae", "vtrace"])
def test_next_values_on_cuda_match_reference(algorithm, flags, layout, dtype):
    for shape in [(3, 8191), (4099, 33), (257, 129)]:
        key = ProblemKey(algorithm, *shape, dtype, layout, flags)
        kwargs = random_inputs(key, device="cuda", seed=3)
        got = as_tuple(ESTIMATORS[algorithm](**kwargs))
        want = as_tuple(reference(algorithm, **kwargs))
        for g, w in zip(got, want, strict=True):
            error = relative_error(g, w)
            assert error <= TOLERANCE[dtype], f"{key.as_text()}: relative error {error:.3g}"


@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_batch_dims_on_cuda_equal_the_flattened_call(algorithm):
    key = ProblemKey(algorithm, 6, 77, "float32", "env", RICHEST[algorithm],
                     3 if algorithm == "retrace" else 0)
    kwargs = random_inputs(key, device="cuda", seed=4)
    spec = ALGORITHMS[algorithm]
    batched = {name: (value.reshape(2, 3) if name in spec.per_env else
                      value.reshape(2, 3, *value.shape[1:]))
               if isinstance(value, torch.Tensor) else value for name, value in kwargs.items()}
    for g, w in zip(as_tuple(ESTIMATORS[algorithm](**batched)),
                    as_tuple(ESTIMATORS[algorithm](**kwargs)), strict=True):
        assert g.shape == (2, 3, 77)
        torch.testing.assert_close(g.reshape(6, 77), w, rtol=0, atol=0)


@pytest.mark.parametrize("algorithm", ["gae", "vtrace", "lambda_returns"])
def test_device_tensor_scalars_do_not_synchronise(algorithm):
    """0-d CUDA tensors for gamma & co. are never read on the host: the torch
    implementation reads them on the device (same numbers as Python floats)."""
    key = ProblemKey(algorithm, 64, 48, "float32", "env", RICHEST[algorithm])
    kwargs = random_inputs(key, device="cuda", seed=5)
    want = as_tuple(ESTIMATORS[algorithm](**kwargs))
    for name in key.spec.scalars:
        kwargs[name] = torch.tensor(kwargs[name], device="cuda")
    ESTIMATORS[algorithm](**kwargs)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        got = as_tuple(ESTIMATORS[algorithm](**kwargs))
    finally:
        torch.cuda.set_sync_debug_mode("default")
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
