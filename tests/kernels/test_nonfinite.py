"""Non-finite values through the Triton kernels and the torch fallback, against the
float64 reference.

SPEC: NaN or Inf in the data propagate exactly as the recurrence says. The builders
skip the work of absent inputs (no truncations, no bootstrap values), so these cases
check that skipping a term never drops what the term would have carried: a NaN
bootstrap value at a step that is not truncated, an infinite gamma, and products of
betas that overflow float32 where the carry they multiply is zero. GAE and V-trace take
a bootstrap value at the last and truncated steps alone (``nv[t] = b[t]`` there): their
kernels read it there alone, and a NaN or Inf elsewhere reaches no result.
"""

from __future__ import annotations

import pytest
import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.estimators import prepare_call
from rltriton_tune.kernels import strategies

from .cases import check_outputs, expected, small_params

pytestmark = pytest.mark.skipif(not strategies(), reason="Triton is not installed")

STRATEGIES = ("flat", "tiled", "split", "lookback", "sequential")


def _run(strategy: str, algorithm: str, kwargs: dict, what: str) -> None:
    call = prepare_call(algorithm, **kwargs)
    impl = type(strategies()[strategy])()
    key: ProblemKey = call.key
    outs = impl.prepare(key, small_params(strategy, key.t))(call)
    check_outputs(outs, expected(algorithm, kwargs), call, f"{strategy} {what}")


def _returns_inputs(algorithm: str, t: int, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    kwargs = {"rewards": torch.randn(3, t, generator=g),
              "terminateds": (torch.rand(3, t, generator=g) < 0.2).float(), "gamma": 0.9}
    if algorithm == "lambda_returns":
        kwargs.update(next_values=torch.randn(3, t, generator=g), lambda_=0.8)
    return kwargs


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("algorithm", ["discounted_returns", "lambda_returns"])
def test_a_nan_bootstrap_value_without_truncations_propagates(strategy, algorithm):
    """Without truncations the term gamma * trunc[t] * b[t] is 0 * b[t]: a NaN or Inf in
    b at a step that is not the last makes that step's return NaN, and the steps before
    it back to an episode's end, as in the reference."""
    kwargs = _returns_inputs(algorithm, 33, seed=1)
    b = torch.randn(3, 33)
    b[0, 20] = float("nan")
    b[1, 5] = float("inf")
    kwargs["bootstrap_values"] = b
    _run(strategy, algorithm, kwargs, f"{algorithm} NaN/Inf bootstrap values")


@pytest.mark.parametrize(("strategy", "time_major"),
                         [(s, False) for s in STRATEGIES] + [("flat", True), ("columns", True)])
@pytest.mark.parametrize("algorithm", ["gae", "vtrace"])
@pytest.mark.parametrize("truncated", [False, True])
def test_a_bootstrap_value_where_no_step_takes_it_reaches_no_result(strategy, time_major,
                                                                    algorithm, truncated):
    """GAE and V-trace select b[t] where t is the last step or truncated, and nowhere
    else: NaN and Inf at other steps leave every output finite and equal to the
    reference's, while the steps that take b[t] still read the right value (env-major
    on every strategy, time-major on flat and on columns, which serves it alone)."""
    g = torch.Generator().manual_seed(3)
    n, t = 3, 33
    kwargs = {"rewards": torch.randn(n, t, generator=g), "values": torch.randn(n, t, generator=g),
              "terminateds": (torch.rand(n, t, generator=g) < 0.1).float(), "gamma": 0.9}
    if algorithm == "vtrace":
        kwargs.update(log_pi_target=torch.randn(n, t, generator=g) * 0.3,
                      log_pi_behavior=torch.randn(n, t, generator=g) * 0.3)
    else:
        kwargs["lambda_"] = 0.8
    b = torch.randn(n, t, generator=g)
    taken = torch.zeros(n, t, dtype=torch.bool)
    taken[:, -1] = True
    if truncated:
        trunc = torch.zeros(n, t)
        trunc[0, 7] = trunc[2, 19] = 1.0
        kwargs["truncateds"] = trunc
        taken |= trunc.bool()
    b[~taken] = torch.tensor([float("nan"), float("inf"), -float("inf")]).repeat(n * t)[
        :int((~taken).sum())]
    kwargs["bootstrap_values"] = b
    for out in expected(algorithm, kwargs):
        assert torch.isfinite(out).all()  # the case is what it says
    if time_major:
        kwargs = {k: v.T.contiguous() if isinstance(v, torch.Tensor) else v
                  for k, v in kwargs.items()}
        kwargs["time_major"] = True
    _run(strategy, algorithm, kwargs, f"{algorithm} non-finite b where no step takes it")


@pytest.mark.parametrize("strategy", ["flat", "tiled", "sequential"])
@pytest.mark.parametrize("algorithm", ["discounted_returns", "lambda_returns", "gae"])
def test_an_infinite_gamma_gives_the_recurrences_nans(strategy, algorithm):
    """gamma = inf is accepted (SPEC refuses only NaN scalars): every product with a zero
    factor is NaN, as in the reference, including the last step's G[T] = 0 and the
    steps whose episode ends (inf * (1 - done))."""
    if algorithm == "gae":
        kwargs = _returns_inputs("discounted_returns", 9, 2)
        kwargs.update(values=torch.randn(3, 9), lambda_=0.9)
    else:
        kwargs = _returns_inputs(algorithm, 9, 2)
    kwargs["gamma"] = float("inf")
    _run(strategy, algorithm, kwargs, f"{algorithm} gamma=inf")


@pytest.mark.parametrize("strategy", ["split", "lookback"])
def test_overflowing_products_times_a_zero_carry_stay_finite(strategy):
    """gamma = 2 over a zero-reward tail: the product of betas from the last step
    overflows float32, but the last step's beta is 0, so the chunks that compose it
    with the zero carry beyond T give the reference's finite values, not inf * 0."""
    t = 512
    rewards = torch.zeros(1, t)
    rewards[:, : t // 2] = 1.0
    terminateds = torch.zeros(1, t)
    terminateds[:, : t // 2] = 1.0
    kwargs = {"rewards": rewards, "terminateds": terminateds, "gamma": 2.0}
    call = prepare_call("discounted_returns", **kwargs)
    params = ({"BLOCK_N": 1, "CHUNK_T": 256, "BLOCK_T": 64, "CARRY_BLOCK": 16, "num_warps": 1}
              if strategy == "split" else {"BLOCK_N": 1, "BLOCK_T": 512, "num_warps": 1})
    outs = strategies()[strategy].prepare(call.key, params)(call)
    assert not outs[0].isnan().any()
    check_outputs(outs, expected("discounted_returns", kwargs), call, f"{strategy} gamma=2")


@pytest.mark.parametrize("mode", ["loop", "chunked", "doubling"])
@pytest.mark.parametrize("algorithm", ["discounted_returns", "lambda_returns"])
def test_the_torch_fallback_propagates_a_nan_bootstrap_value_too(mode, algorithm):
    """The torch implementation follows the same recurrence: without truncations a NaN
    or Inf bootstrap value still reaches its step and the steps before it."""
    from rltriton_tune.fallback.torch_strategy import TorchStrategy

    kwargs = _returns_inputs(algorithm, 33, seed=1)
    b = torch.randn(3, 33)
    b[0, 20] = float("nan")
    b[1, 5] = float("inf")
    kwargs["bootstrap_values"] = b
    call = prepare_call(algorithm, **kwargs)
    impl = TorchStrategy()
    outs = impl.prepare(call.key, {**impl.default_params(call.key), "mode": mode})(call)
    assert outs[0][0, :21].isnan().any()
    check_outputs(outs, expected(algorithm, kwargs), call, f"torch {mode} {algorithm}")


def _vtrace_inputs(t: int, seed: int) -> dict:
    """V-trace with bootstrap values and truncations, 3 rows of ``t`` steps (truncated at
    steps 3 and 2t/3, terminated at t/3), the default bars (the division finish's)."""
    from rltriton_tune.problems import random_inputs

    key = ProblemKey("vtrace", 3, t, "float32", "env", "bootstrap+trunc")
    kwargs = random_inputs(key, seed=seed)
    kwargs["truncateds"] = torch.zeros(3, t)
    kwargs["truncateds"][:, [3, 2 * t // 3]] = 1.0
    kwargs["terminateds"] = torch.zeros(3, t)
    kwargs["terminateds"][:, t // 3] = 1.0
    return kwargs


@pytest.mark.parametrize("strategy", ["flat", "tiled", "lookback"])
def test_vtrace_division_finish_carries_non_finite_data_as_the_reference(strategy):
    """V-trace's advantage from ``D[t] - delta[t]`` (the division finish): a NaN reward
    after a truncation leaves the truncated step's advantage finite (it takes b, whatever
    D[t+1] holds); an infinite reward gives the reference's inf, not inf - inf;
    a log-ratio of -inf (ratio 0, so c = rho = 0) gives 0 * D[t+1], NaN only where
    D[t+1] is."""
    kwargs = _vtrace_inputs(33, seed=4)
    kwargs["rewards"][0, 5] = float("nan")        # row 0: NaN after the truncation at 3
    kwargs["rewards"][1, 7] = float("inf")        # row 1: an infinite delta inside an episode
    kwargs["log_pi_target"][2, 8] = float("-inf")   # row 2: ratio 0 inside an episode
    kwargs["rewards"][2, 9] = float("nan")        # ... with D[t+1] NaN behind it
    kwargs["log_pi_target"][2, 22] = float("-inf")  # and with D[t+1] finite
    ref = expected("vtrace", kwargs)
    assert torch.isfinite(ref[1][0, 3]) and ref[1][1, 7] == float("inf")
    _run(strategy, "vtrace", kwargs, "V-trace non-finite data")


@pytest.mark.parametrize("strategy", ["flat", "tiled"])
def test_vtrace_with_an_infinite_gamma_takes_the_exact_finish(strategy):
    """gamma = inf makes D[t] NaN at every step, where the reference's advantage takes b
    or v[t+1]: the division finish does not serve it, and the exact one matches."""
    from rltriton_tune.kernels.builders import BUILDERS

    kwargs = _vtrace_inputs(9, seed=5)
    kwargs["gamma"] = float("inf")
    assert not BUILDERS["vtrace"].serves(kwargs["gamma"], 1.0, 1.0)
    _run(strategy, "vtrace", kwargs, "V-trace gamma=inf")
