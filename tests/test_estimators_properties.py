"""Identities between estimators and behaviours of the public functions.

Properties (GAE λ=1, λ-returns λ=1, V-trace on-policy, traces λ=0), layout
equivalence, inputs never modified, non-contiguous inputs, NaN isolation, empty
problems, output dtypes and the exact public signatures.
"""

import inspect

import pytest
import torch

import rltriton_tune
from rltriton_tune import dispatch
from rltriton_tune.algorithms import ALGORITHMS, ESTIMATOR_NAMES
from rltriton_tune.call import ProblemKey
from rltriton_tune.estimators import (
    ESTIMATORS,
    compute_discounted_returns,
    compute_eligibility_traces,
    compute_gae,
    compute_lambda_returns,
    compute_vtrace,
    prepare_call,
)
from rltriton_tune.problems import random_inputs
from rltriton_tune.reference import reference


def flags(n, t, rate, seed):
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(n, t, generator=gen) < rate).float()


def randn(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def close(got, want, **kw):
    torch.testing.assert_close(got, want, rtol=kw.get("rtol", 2e-5), atol=kw.get("atol", 2e-5))


def as_tuple(outputs):
    return outputs if isinstance(outputs, tuple) else (outputs,)


def full_key(algorithm, n=6, t=29, layout="env", dtype="float32"):
    """A key with truncations/bootstrap (or seeds) so every input path is exercised."""
    richest = {
        "gae": "bootstrap+trunc", "vtrace": "bootstrap+trunc", "retrace": "none",
        "lambda_returns": "bootstrap+trunc", "discounted_returns": "bootstrap+trunc",
        "eligibility_traces": "seed", "episodic_prefix_sum": "seed+starts_at",
    }[algorithm]
    return ProblemKey(algorithm, n, t, dtype, layout, richest, 4 if algorithm == "retrace" else 0)


# ---------------------------------------------------------------- identities

def test_gae_lambda_one_is_bootstrapped_returns_minus_values():
    n, t = 9, 41
    rewards, values, bootstrap = randn(n, t, seed=1), randn(n, t, seed=2), randn(n, t, seed=3)
    trunc = flags(n, t, 0.1, 4)
    term = flags(n, t, 0.1, 5) * (1 - trunc)  # SPEC differs when both are set at one step
    advantages = compute_gae(rewards, values, term, trunc, gamma=0.9, lambda_=1.0,
                             bootstrap_values=bootstrap)
    returns = compute_discounted_returns(rewards, term, trunc, gamma=0.9,
                                         bootstrap_values=bootstrap)
    close(advantages, returns - values)


def test_gae_lambda_one_with_last_value():
    n, t = 4, 17
    rewards, values, last = randn(n, t, seed=1), randn(n, t, seed=2), randn(n, seed=3)
    term = flags(n, t, 0.1, 5)
    bootstrap = torch.zeros(n, t)
    bootstrap[:, -1] = last
    advantages = compute_gae(rewards, values, term, gamma=0.95, lambda_=1.0, last_value=last)
    returns = compute_discounted_returns(rewards, term, gamma=0.95, bootstrap_values=bootstrap)
    close(advantages, returns - values)


def test_lambda_returns_lambda_one_are_discounted_returns():
    n, t = 7, 53
    rewards, next_values, bootstrap = randn(n, t, seed=1), randn(n, t, seed=2), randn(n, t, seed=3)
    term, trunc = flags(n, t, 0.1, 4), flags(n, t, 0.1, 5)
    got = compute_lambda_returns(rewards, next_values, term, trunc, gamma=0.93, lambda_=1.0,
                                 bootstrap_values=bootstrap)
    want = compute_discounted_returns(rewards, term, trunc, gamma=0.93, bootstrap_values=bootstrap)
    close(got, want)


def test_lambda_returns_lambda_zero_are_one_step_targets():
    n, t = 5, 19
    rewards, next_values, bootstrap = randn(n, t, seed=1), randn(n, t, seed=2), randn(n, t, seed=3)
    term, trunc = flags(n, t, 0.1, 4), flags(n, t, 0.1, 5)
    done = torch.maximum(term, trunc)
    got = compute_lambda_returns(rewards, next_values, term, trunc, gamma=0.9, lambda_=0.0,
                                 bootstrap_values=bootstrap)
    # G[t] = r[t] + γ·(1-done[t])·next_values[t] + γ·trunc[t]·b[t] at every t (λ = 0)
    want = rewards + 0.9 * (1 - done) * next_values + 0.9 * trunc * bootstrap
    close(got, want)


def test_vtrace_on_policy_unclipped_is_td_lambda_one():
    n, t = 8, 37
    log_pi = randn(n, t, seed=1)
    rewards, values, bootstrap = randn(n, t, seed=2), randn(n, t, seed=3), randn(n, t, seed=4)
    trunc = flags(n, t, 0.1, 5)
    term = flags(n, t, 0.1, 6) * (1 - trunc)
    vs, advantages = compute_vtrace(log_pi, log_pi.clone(), values, rewards, term, trunc,
                                    gamma=0.9, rho_bar=1.0, c_bar=1.0, bootstrap_values=bootstrap)
    # TD(λ=1) target: the bootstrapped discounted return, also GAE(λ=1) + V.
    returns = compute_discounted_returns(rewards, term, trunc, gamma=0.9,
                                         bootstrap_values=bootstrap)
    close(vs, returns)
    close(vs, compute_gae(rewards, values, term, trunc, gamma=0.9, lambda_=1.0,
                          bootstrap_values=bootstrap) + values)
    # advantages[t] = r[t] + γ(1-term[t])·vs[t+1] (or b[t] at truncations / the end) - V[t]
    next_vs = torch.cat([vs[:, 1:], bootstrap[:, -1:]], dim=1)
    next_vs = torch.where(trunc == 1, bootstrap, next_vs)
    close(advantages, rewards + 0.9 * (1 - term) * next_vs - values)


def test_eligibility_traces_lambda_zero_are_the_gradients():
    gradients = randn(6, 31, seed=1)
    seed = randn(6, seed=2)
    got = compute_eligibility_traces(gradients, flags(6, 31, 0.2, 3), gamma=0.9, lambda_=0.0,
                                     seed_values=seed)
    assert torch.equal(got, gradients)


# ---------------------------------------------------------------- layouts and inputs

def transpose_inputs(kwargs):
    """Env-major kwargs -> time-major ones ([N, T] -> [T, N], [N, T, A] -> [T, N, A])."""
    out = {}
    for name, value in kwargs.items():
        if isinstance(value, torch.Tensor) and value.dim() >= 2:
            value = value.transpose(0, 1).contiguous()
        out[name] = value
    out["time_major"] = True
    return out


@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_time_major_equals_transposed_env_major(algorithm):
    kwargs = random_inputs(full_key(algorithm), seed=1)
    env = as_tuple(ESTIMATORS[algorithm](**kwargs))
    time = as_tuple(ESTIMATORS[algorithm](**transpose_inputs(kwargs)))
    for e, t in zip(env, time, strict=True):
        assert t.shape == e.shape[::-1]
        close(t.transpose(0, 1), e)


@pytest.mark.parametrize("layout", ["env", "time"])
@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_inputs_are_never_modified(algorithm, layout):
    kwargs = random_inputs(full_key(algorithm, layout=layout), seed=2)
    # A non-contiguous view too: the copy made for it must not leak back either.
    first = ALGORITHMS[algorithm].first_float
    base = torch.cat([kwargs[first], kwargs[first]], dim=-1)
    kwargs[first] = base[..., ::2]
    before = {k: v.clone() for k, v in kwargs.items() if isinstance(v, torch.Tensor)}
    base_before = base.clone()
    ESTIMATORS[algorithm](**kwargs)
    for name, value in before.items():
        assert torch.equal(kwargs[name], value), name
    assert torch.equal(base, base_before)


@pytest.mark.parametrize("layout", ["env", "time"])
@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_non_contiguous_inputs(algorithm, layout):
    kwargs = random_inputs(full_key(algorithm, layout=layout), seed=3)
    strided = {}
    for name, value in kwargs.items():
        if isinstance(value, torch.Tensor):
            # Every other element of a twice-as-wide buffer: same values, strided.
            wide = torch.stack([value, torch.zeros_like(value)], dim=-1)
            value = wide[..., 0]
            assert not value.is_contiguous() or value.numel() <= 1
        strided[name] = value
    for got, want in zip(as_tuple(ESTIMATORS[algorithm](**strided)),
                         as_tuple(ESTIMATORS[algorithm](**kwargs)), strict=True):
        assert got.is_contiguous()
        close(got, want)


def test_transposed_views_as_time_major_input():
    n, t = 5, 12
    rewards, values = randn(n, t, seed=1), randn(n, t, seed=2)
    term = flags(n, t, 0.2, 3)
    want = compute_gae(rewards, values, term)
    got = compute_gae(rewards.t(), values.t(), term.t(), time_major=True)
    close(got.t(), want)


@pytest.mark.parametrize("layout", ["env", "time"])
@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_nan_in_one_row_does_not_poison_others(algorithm, layout):
    key = full_key(algorithm, n=5, t=16, layout=layout)
    kwargs = random_inputs(key, seed=4)
    first = ALGORITHMS[algorithm].first_float
    poisoned = kwargs[first].clone()
    if layout == "time":
        poisoned[8, 2] = float("nan")
    else:
        poisoned[2, 8] = float("nan")
    kwargs[first] = poisoned
    got = as_tuple(ESTIMATORS[algorithm](**kwargs))
    want = as_tuple(reference(algorithm, **kwargs))
    keep = [0, 1, 3, 4]
    for g, w in zip(got, want, strict=True):
        if layout == "time":
            g, w = g.t(), w.t()
        assert torch.isnan(g[2]).any()
        # Within the poisoned row NaN spreads exactly as the recurrence says (0·NaN = NaN).
        assert torch.equal(torch.isnan(g[2]), torch.isnan(w[2]))
        assert torch.isfinite(g[keep]).all()
        close(g[keep].double(), w[keep], rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("shape", [(0, 7), (4, 0), (0, 0)])
@pytest.mark.parametrize("layout", ["env", "time"])
@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_empty_problems_return_empty_outputs_without_dispatch(algorithm, layout, shape,
                                                              monkeypatch):
    def fail(call):
        raise AssertionError("an empty problem must not be dispatched")

    monkeypatch.setattr(dispatch, "run", fail)
    n, t = shape
    key = full_key(algorithm, n=n, t=t, layout=layout, dtype="bfloat16")
    kwargs = random_inputs(key, seed=0)
    outputs = as_tuple(ESTIMATORS[algorithm](**kwargs))
    assert len(outputs) == len(ALGORITHMS[algorithm].outputs)
    for out in outputs:
        assert out.shape == ((t, n) if layout == "time" else (n, t))
        assert out.dtype == torch.bfloat16
    assert prepare_call(algorithm, **kwargs) is None


def test_dispatch_gets_a_normalised_call(monkeypatch):
    seen = []

    def capture(call):
        seen.append(call)
        return (torch.zeros(call.n, call.t),)

    monkeypatch.setattr(dispatch, "run", capture)
    r = randn(3, 8, seed=1).half()
    base = randn(3, 16, seed=2).half()
    dones = torch.zeros(3, 8, dtype=torch.bool)
    out = rltriton_tune.compute_gae(r, base[:, ::2], dones, gamma=1, lambda_=0.5)
    assert out.shape == (3, 8)
    (call,) = seen
    assert call.algorithm == "gae" and (call.n, call.t, call.a) == (3, 8, 0)
    assert list(call.tensors) == ["rewards", "values", "terminateds"]
    assert call.tensors["rewards"] is r and call.tensors["terminateds"] is dones
    assert call.tensors["values"].is_contiguous()
    assert torch.equal(call.tensors["values"], base[:, ::2])
    assert call.scalars == {"gamma": 1.0, "lambda_": 0.5}
    assert all(type(v) is float for v in call.scalars.values())
    assert call.out_dtype == torch.float16 and not call.time_major
    assert call.key.flags == "none"


def test_prepare_call_matches_public_function_and_fills_defaults():
    kwargs = random_inputs(full_key("retrace", n=3, t=5), seed=0)
    del kwargs["lambda_"], kwargs["c_bar"]
    call = prepare_call("retrace", **kwargs)
    assert call.a == 4 and call.scalars["lambda_"] == 1.0 and call.scalars["c_bar"] == 1.0
    assert set(call.tensors) == set(ALGORITHMS["retrace"].tensors)
    prefix = prepare_call("episodic_prefix_sum", inputs=torch.ones(2, 3),
                          dones=torch.zeros(2, 3), boundary="starts_at", time_major=True)
    assert prefix.starts_at and prefix.time_major and (prefix.n, prefix.t) == (3, 2)
    assert prefix.key.flags == "starts_at" and prefix.key.layout == "time"


# ---------------------------------------------------------------- public API

SPEC_SIGNATURES = {
    "compute_gae": "(rewards, values, terminateds, truncateds=None, gamma=0.99, lambda_=0.95, "
                   "bootstrap_values=None, last_value=None, *, next_values=None, "
                   "time_major=False)",
    "compute_vtrace": "(log_pi_target, log_pi_behavior, values, rewards, terminateds, "
                      "truncateds=None, gamma=0.99, rho_bar=1.0, c_bar=1.0, "
                      "bootstrap_values=None, last_value=None, *, next_values=None, "
                      "time_major=False)",
    "compute_retrace": "(action_probs_target, action_probs_behavior, q_values, "
                       "next_q_values_all, actions, rewards, terminateds, truncateds, gamma, "
                       "lambda_=1.0, c_bar=1.0, rho_bar=1.0, *, time_major=False)",
    "compute_lambda_returns": "(rewards, next_values, terminateds, truncateds=None, gamma=0.99, "
                              "lambda_=0.95, bootstrap_values=None, *, time_major=False)",
    "compute_discounted_returns": "(rewards, terminateds, truncateds=None, gamma=0.99, "
                                  "bootstrap_values=None, *, time_major=False)",
    "compute_eligibility_traces": "(gradients, dones, gamma, lambda_, seed_values=None, *, "
                                  "time_major=False)",
    "compute_episodic_prefix_sum": "(inputs, dones, seed_values=None, boundary='ends_at', *, "
                                   "time_major=False)",
}


@pytest.mark.parametrize("name", list(SPEC_SIGNATURES))
def test_public_signatures_match_spec(name):
    function = getattr(rltriton_tune, name)
    signature = inspect.signature(function).replace(return_annotation=inspect.Signature.empty)
    bare = signature.replace(parameters=[p.replace(annotation=inspect.Parameter.empty)
                                         for p in signature.parameters.values()])
    assert str(bare) == SPEC_SIGNATURES[name]
    assert name in rltriton_tune.__all__
    assert ESTIMATORS[name.removeprefix("compute_")] is function
