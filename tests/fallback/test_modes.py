"""Every eager mode x algorithm x flags x layout x dtype against ``reference.py``."""

from __future__ import annotations

import functools
import zlib

import pytest
import torch

from rltriton_tune.estimators import prepare_call
from rltriton_tune.fallback import CPU_MODES, launch
from rltriton_tune.problems import random_inputs

from .helpers import CASES, FLAG_SETS, assert_matches, expected, make_case, make_key

#: chunk=3 on T=37 exercises padding and the recursive carry scan.
MODE_PARAMS = {"loop": {}, "chunked": {"chunk": 3}, "doubling": {}}


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("layout", ["env", "time"])
@pytest.mark.parametrize("algorithm, flags", CASES)
@pytest.mark.parametrize("mode", CPU_MODES)
def test_mode_matches_reference(mode, algorithm, flags, layout, dtype):
    key = make_key(algorithm, 5, 37, flags, layout, dtype)
    kwargs, call = make_case(key, seed=zlib.crc32(f"{algorithm}|{flags}".encode()) % 1000)
    outputs = launch(call, mode, **MODE_PARAMS[mode])
    assert_matches(outputs, expected(algorithm, kwargs), dtype)
    for out in outputs:
        assert out.shape == ((37, 5) if layout == "time" else (5, 37))
        assert out.is_contiguous()


@pytest.mark.parametrize("n, t", [(1, 1), (1, 2), (2, 1), (1, 97), (13, 1), (11, 31), (3, 257)])
@pytest.mark.parametrize("algorithm", sorted(FLAG_SETS))
@pytest.mark.parametrize("mode", CPU_MODES)
def test_odd_shapes(mode, algorithm, n, t):
    flags = FLAG_SETS[algorithm][-1]
    for layout in ("env", "time"):
        kwargs, call = make_case(make_key(algorithm, n, t, flags, layout))
        assert_matches(launch(call, mode), expected(algorithm, kwargs), "float32")


@pytest.mark.parametrize("algorithm", ["gae", "retrace", "eligibility_traces"])
@pytest.mark.parametrize("mode", CPU_MODES)
def test_float16_inputs(mode, algorithm):
    kwargs, call = make_case(make_key(algorithm, 4, 19, FLAG_SETS[algorithm][-1], dtype="float16"))
    assert_matches(launch(call, mode), expected(algorithm, kwargs), "float16")


@functools.cache
def _long_case(algorithm: str, flags: str):
    key = make_key(algorithm, 2, 10**5, flags, "time")
    kwargs, call = make_case(key, seed=7)
    return kwargs, call, expected(algorithm, kwargs)


@pytest.mark.parametrize("algorithm, flags", [("vtrace", "bootstrap+trunc"),
                                              ("episodic_prefix_sum", "seed")])
@pytest.mark.parametrize("mode", ["chunked", "doubling"])
def test_long_sequence(mode, algorithm, flags):
    kwargs, call, want = _long_case(algorithm, flags)
    assert_matches(launch(call, mode), want, "float32")


@pytest.mark.parametrize("mode", CPU_MODES)
def test_bool_and_integer_flags(mode):
    for flag_dtype in (torch.bool, torch.int32):
        key = make_key("gae", 6, 21, "bootstrap+trunc")
        kwargs = random_inputs(key, seed=3, flag_dtype=flag_dtype)
        call = prepare_call("gae", **kwargs)
        assert_matches(launch(call, mode), expected("gae", kwargs), "float32")


@pytest.mark.parametrize("algorithm, flags", [("vtrace", "bootstrap+trunc"),
                                              ("eligibility_traces", "seed")])
def test_loop_with_time_major_storage_for_many_rows(algorithm, flags):
    """Env-major calls with many rows run the loop on time-major copies of α, β."""
    from rltriton_tune.fallback import run

    n, t = run.LOOP_TRANSPOSE_MIN_N + 3, run.LOOP_TRANSPOSE_MIN_T + 1
    kwargs, call = make_case(make_key(algorithm, n, t, flags, "env"))
    outputs = launch(call, "loop")
    assert all(o.is_contiguous() and o.shape == (n, t) for o in outputs)
    assert_matches(outputs, expected(algorithm, kwargs), "float32")


#: The grad algorithms (the estimators' fused backward passes) and their flag sets.
GRAD_FLAG_SETS = {"gae_grad": ("none", "trunc", "next", "next+trunc"),
                  "lambda_returns_grad": ("none", "trunc"),
                  "discounted_returns_grad": ("none", "trunc"),
                  "eligibility_traces_grad": ("none",),
                  "episodic_prefix_sum_grad": ("none", "starts_at")}


@pytest.mark.parametrize("algorithm, flags",
                         [(a, f) for a, sets in GRAD_FLAG_SETS.items() for f in sets])
@pytest.mark.parametrize("mode", CPU_MODES)
def test_grad_algorithms_match_reference(mode, algorithm, flags):
    for (n, t), layout, dtype in [((5, 37), "env", "float32"), ((5, 37), "time", "bfloat16"),
                                  ((1, 1), "env", "float64"), ((2, 2), "time", "float32")]:
        kwargs, call = make_case(make_key(algorithm, n, t, flags, layout, dtype), seed=n * t)
        assert_matches(launch(call, mode, **MODE_PARAMS[mode]), expected(algorithm, kwargs),
                       dtype)


@pytest.mark.parametrize("mode", CPU_MODES)
def test_an_infinite_decay_follows_the_recurrence_on_a_cpu(mode):
    """V-trace with c_bar = inf and an infinite importance ratio: the decay at step 0 is
    infinite and the one at the terminated step 1 is zero. Step by step D[0] is +inf;
    a scan that multiplies the decays together makes inf * 0 = NaN there, so on a CPU
    such a call is scanned step by step in every mode."""
    inf = float("inf")
    kwargs = dict(log_pi_target=torch.tensor([[inf, 0.0, 0.0], [0.0, 0.0, 0.0]]),
                  log_pi_behavior=torch.zeros(2, 3),
                  values=torch.tensor([[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]]),
                  rewards=torch.tensor([[1.0, 3.0, 1.0], [1.0, 3.0, 1.0]]),
                  terminateds=torch.tensor([[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]]),
                  gamma=0.9, rho_bar=1.0, c_bar=inf)
    outputs = launch(prepare_call("vtrace", **kwargs), mode, **MODE_PARAMS[mode])
    want = expected("vtrace", kwargs)
    assert outputs[0][0, 0].item() == inf
    for got, ref in zip(outputs, want, strict=True):
        torch.testing.assert_close(got.double(), ref, equal_nan=True)


@pytest.mark.parametrize("mode", CPU_MODES)
def test_decays_whose_product_overflows_follow_the_recurrence_on_a_cpu(mode):
    """gamma = 1e200 (float64): no decay is infinite, but products of them overflow, and
    a scan that multiplies them together meets the zero decay at the terminated step
    with inf * 0 = NaN; step by step every return is finite."""
    rewards = torch.zeros(2, 8, dtype=torch.float64)
    rewards[:, 5] = 1.0
    terminateds = torch.zeros(2, 8, dtype=torch.float64)
    terminateds[:, 3] = 1.0
    kwargs = dict(rewards=rewards, terminateds=terminateds, gamma=1e200)
    (got,) = launch(prepare_call("discounted_returns", **kwargs), mode, **MODE_PARAMS[mode])
    (want,) = expected("discounted_returns", kwargs)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, want)
