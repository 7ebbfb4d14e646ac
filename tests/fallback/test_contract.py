"""Input rules every mode keeps: inputs untouched, any strides, NaN rows isolated,
out-of-range Retrace actions never fault."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from rltriton_tune.call import Call
from rltriton_tune.estimators import compute_vtrace, prepare_call
from rltriton_tune.fallback import CPU_MODES, launch

from .helpers import CASES, assert_matches, expected, make_case, make_key


@pytest.mark.parametrize("algorithm, flags", CASES)
@pytest.mark.parametrize("mode", CPU_MODES)
def test_inputs_are_never_modified(mode, algorithm, flags):
    for layout in ("env", "time"):
        kwargs, call = make_case(make_key(algorithm, 3, 9, flags, layout))
        before = {k: v.clone() for k, v in call.tensors.items()}
        outputs = launch(call, mode, chunk=2)
        for name, value in call.tensors.items():
            assert torch.equal(value, before[name]), name
            for out in outputs:
                assert out.data_ptr() != value.data_ptr(), name


def _strided(x: torch.Tensor) -> torch.Tensor:
    """The same values in a non-contiguous tensor (every other element of a wider buffer)."""
    wide = torch.zeros(*x.shape[:-1], 2 * x.shape[-1], dtype=x.dtype)
    wide[..., ::2] = x
    return wide[..., ::2]


@pytest.mark.parametrize("algorithm, flags", [("gae", "bootstrap+trunc"), ("retrace", "trunc"),
                                              ("episodic_prefix_sum", "seed+starts_at")])
@pytest.mark.parametrize("mode", CPU_MODES)
def test_non_contiguous_inputs(mode, algorithm, flags):
    kwargs, _ = make_case(make_key(algorithm, 4, 11, flags))
    strided = {k: _strided(v) if isinstance(v, torch.Tensor) and v.dim() == 2 else v
               for k, v in kwargs.items()}
    assert not strided["terminateds" if "terminateds" in strided else "dones"].is_contiguous()
    call = prepare_call(algorithm, **strided)
    assert_matches(launch(call, mode), expected(algorithm, kwargs), "float32")


@pytest.mark.parametrize("algorithm, flags", CASES)
@pytest.mark.parametrize("mode", CPU_MODES)
def test_nan_and_inf_stay_in_their_row(mode, algorithm, flags):
    kwargs, call = make_case(make_key(algorithm, 4, 17, flags))
    first = call.spec.first_float if algorithm != "retrace" else "q_values"
    poisoned = call.tensors[first].clone()
    poisoned[1, 8] = float("nan")
    poisoned[2, 3] = float("inf")
    call = dataclasses.replace(call, tensors={**call.tensors, first: poisoned})
    outputs = launch(call, mode, chunk=4)
    want = expected(algorithm, {**kwargs, first: poisoned})
    for out, ref in zip(outputs, want, strict=True):
        assert torch.isfinite(out[0]).all() and torch.isfinite(out[3]).all()
        torch.testing.assert_close(out.double(), ref, rtol=2e-5, atol=1e-4, equal_nan=True)


@pytest.mark.parametrize("layout", ["env", "time"])
@pytest.mark.parametrize("mode", CPU_MODES)
def test_retrace_out_of_range_action_gives_nan_row(mode, layout):
    kwargs, call = make_case(make_key("retrace", 4, 10, "trunc", layout))
    actions = call.tensors["actions"].clone()
    bad = (2, 6) if layout == "env" else (6, 2)
    actions[bad] = 4  # A = 4: one past the end
    neg = (3, 0) if layout == "env" else (0, 3)
    actions[neg] = -1
    call = dataclasses.replace(call, tensors={**call.tensors, "actions": actions})
    q_ret, adv = launch(call, mode)
    want = expected("retrace", kwargs)
    rows = (lambda x: x) if layout == "env" else (lambda x: x.t())
    for out, ref in ((q_ret, want[0]), (adv, want[1])):
        out, ref = rows(out), rows(ref)
        assert torch.isnan(out[2:]).all()
        torch.testing.assert_close(out[:2].double(), ref[:2], rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("mode", CPU_MODES)
def test_empty_call_gives_empty_outputs(mode):
    x = torch.zeros(0, 5, dtype=torch.bfloat16)
    call = Call("vtrace", {"log_pi_target": x, "log_pi_behavior": x, "values": x, "rewards": x,
                           "terminateds": x}, {"gamma": 0.9, "rho_bar": 1.0, "c_bar": 1.0},
                n=5, t=0, time_major=True, out_dtype=torch.bfloat16)
    outputs = launch(call, mode)
    assert [o.shape for o in outputs] == [(0, 5), (0, 5)]
    assert all(o.dtype == torch.bfloat16 for o in outputs)


@pytest.mark.parametrize("algorithm", ["vtrace", "retrace"])
@pytest.mark.parametrize("mode", CPU_MODES)
def test_clips_beyond_the_compute_dtype_clip_nothing(mode, algorithm):
    """Clips of ±1e300 (float32 inputs cannot hold them) act as ±inf: no torch overflow
    error, the reference's results; and the backward pass takes them too. (Retrace's
    rho_bar only scales its advantages: -inf there keeps the scan finite.)"""
    kwargs, _ = make_case(make_key(algorithm, 3, 9, "trunc"))
    rho = -1.0 if algorithm == "retrace" else 1.0
    huge = {**kwargs, "rho_bar": rho * 1e300, "c_bar": 1e300}
    call = prepare_call(algorithm, **huge)
    wanted = expected(algorithm, {**kwargs, "rho_bar": rho * math.inf, "c_bar": math.inf})
    assert_matches(launch(call, mode), wanted, "float32")
    if algorithm == "vtrace":
        leaf = huge["values"].clone().requires_grad_()
        vs, adv = compute_vtrace(**{**huge, "values": leaf})
        (vs.sum() + adv.sum()).backward()
        assert torch.isfinite(leaf.grad).all()
