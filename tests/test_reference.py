"""Hand-computed values for every estimator of the float64 reference (SPEC.md).

γ and λ are powers of two so every number below is exact in binary; the
arithmetic of each expected value is written out next to it.
"""

import math

import pytest
import torch

from rltriton_tune.reference import reference

LN2 = math.log(2.0)


def row(*values):
    """One environment, ``[1, T]`` float64."""
    return torch.tensor([values], dtype=torch.float64)


def check(algorithm, expected, **kwargs):
    """Compare the reference to hand values, env-major and time-major."""
    got = reference(algorithm, **kwargs)
    got = got if isinstance(got, tuple) else (got,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == torch.float64 and g.shape == (1, len(e))
        torch.testing.assert_close(g[0], torch.tensor(e, dtype=torch.float64),
                                   rtol=1e-12, atol=1e-12)

    def transpose(value):
        if isinstance(value, torch.Tensor) and value.dim() >= 2:
            return value.transpose(0, 1)
        return value

    tm = reference(algorithm, **{k: transpose(v) for k, v in kwargs.items()}, time_major=True)
    tm = tm if isinstance(tm, tuple) else (tm,)
    for g, e in zip(tm, expected, strict=True):
        assert g.shape == (len(e), 1)
        torch.testing.assert_close(g[:, 0], torch.tensor(e, dtype=torch.float64),
                                   rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- GAE

def test_gae_termination():
    # γ = λ = 0.5, r = [1, 2, 3], V = [0.5, 1, 1.5], episode terminates at t = 2.
    # nv = [V1, V2, b2] = [1, 1.5, 0]
    # δ0 = 1 + 0.5·1 - 0.5 = 1.0;  δ1 = 2 + 0.5·1.5 - 1 = 1.75;  δ2 = 3 + 0 - 1.5 = 1.5
    # A2 = 1.5;  A1 = 1.75 + 0.25·1.5 = 2.125;  A0 = 1 + 0.25·2.125 = 1.53125
    check("gae", [1.53125, 2.125, 1.5],
          rewards=row(1, 2, 3), values=row(0.5, 1, 1.5), terminateds=row(0, 0, 1),
          gamma=0.5, lambda_=0.5)


def test_gae_truncation_with_bootstrap_values():
    # r = [1, 1, 1, 1], V = [1, 2, 3, 4], truncated at t = 1, b = [0, 10, 0, 20].
    # nv = [V1, b1, V3, b3] = [2, 10, 4, 20]
    # δ = [1 + 1 - 1, 1 + 5 - 2, 1 + 2 - 3, 1 + 10 - 4] = [1, 4, 0, 7]
    # A3 = 7;  A2 = 0 + 0.25·7 = 1.75;  A1 = 4 (done);  A0 = 1 + 0.25·4 = 2
    check("gae", [2, 4, 1.75, 7],
          rewards=row(1, 1, 1, 1), values=row(1, 2, 3, 4), terminateds=row(0, 0, 0, 0),
          truncateds=row(0, 1, 0, 0), bootstrap_values=row(0, 10, 0, 20),
          gamma=0.5, lambda_=0.5)


def test_gae_terminated_and_truncated_ignores_bootstrap():
    # t = 0 both terminated and truncated: δ0 = 1 + 0.5·(1-1)·b0 - 0 = 1, no continuation.
    # δ1 = 1 + 0.5·b1 - 0 = 1 + 0.5·2 = 2 (t = T-1 bootstraps from b).
    check("gae", [1, 2],
          rewards=row(1, 1), values=row(0, 0), terminateds=row(1, 0),
          truncateds=row(1, 0), bootstrap_values=row(100, 2), gamma=0.5, lambda_=0.5)


def test_gae_last_value():
    # r = [1, 1], V = [2, 2], last_value = 4: nv = [V1, 4] = [2, 4]
    # δ0 = 1 + 0.5·2 - 2 = 0;  δ1 = 1 + 0.5·4 - 2 = 1;  A1 = 1;  A0 = 0 + 0.25·1 = 0.25
    check("gae", [0.25, 1],
          rewards=row(1, 1), values=row(2, 2), terminateds=row(0, 0),
          last_value=torch.tensor([4.0], dtype=torch.float64), gamma=0.5, lambda_=0.5)


# ---------------------------------------------------------------- V-trace

def test_vtrace_clipping_and_last_value():
    # ratios = exp(target - behavior) = [2, 0.5, 1]; ρ̄ = c̄ = 1: ρ = c = [1, 0.5, 1]
    # r = [1, 2, 3], V = [1, 1, 1], last_value = 2: nv = [1, 1, 2]
    # δ0 = 1·(1 + 0.5·1 - 1) = 0.5;  δ1 = 0.5·(2 + 0.5 - 1) = 0.75;  δ2 = 1·(3 + 1 - 1) = 3
    # D2 = 3;  D1 = 0.75 + 0.5·0.5·3 = 1.5;  D0 = 0.5 + 0.5·1·1.5 = 1.25
    # vs = V + D = [2.25, 2.5, 4];  nvs = [vs1, vs2, b2] = [2.5, 4, 2]
    # adv0 = 1·(1 + 1.25 - 1) = 1.25;  adv1 = 0.5·(2 + 2 - 1) = 1.5;  adv2 = 1·(3 + 1 - 1) = 3
    check("vtrace", ([2.25, 2.5, 4], [1.25, 1.5, 3]),
          log_pi_target=row(LN2, -LN2, 0), log_pi_behavior=row(0, 0, 0),
          values=row(1, 1, 1), rewards=row(1, 2, 3), terminateds=row(0, 0, 0),
          last_value=torch.tensor([2.0], dtype=torch.float64),
          gamma=0.5, rho_bar=1.0, c_bar=1.0)


def test_vtrace_separate_rho_and_c_clips_with_termination():
    # ratios = [1, 2]; ρ̄ = 2, c̄ = 0.5: ρ = [1, 2], c = [0.5, 0.5]
    # r = [1, 1], V = [0, 0], terminated at t = 1: nv = [V1, b1] = [0, 0]
    # δ0 = 1·(1 + 0 - 0) = 1;  δ1 = 2·(1 + 0 - 0) = 2
    # D1 = 2;  D0 = 1 + 0.5·0.5·2 = 1.5;  vs = [1.5, 2];  nvs = [vs1, b1] = [2, 0]
    # adv0 = 1·(1 + 0.5·2) = 2;  adv1 = 2·(1 + 0) = 2
    check("vtrace", ([1.5, 2], [2, 2]),
          log_pi_target=row(0, LN2), log_pi_behavior=row(0, 0),
          values=row(0, 0), rewards=row(1, 1), terminateds=row(0, 1),
          gamma=0.5, rho_bar=2.0, c_bar=0.5)


def test_vtrace_truncation_with_bootstrap_values():
    # ratios = 1; truncated at t = 0 with b = [8, 4]: nv = [b0, b1] = [8, 4]
    # δ0 = 1 + 0.5·8 - 0 = 5;  δ1 = 1 + 0.5·4 = 3;  D1 = 3;  D0 = 5 (done)
    # vs = [5, 3];  nvs = [b0, b1] = [8, 4];  adv = [1 + 4, 1 + 2] = [5, 3]
    check("vtrace", ([5, 3], [5, 3]),
          log_pi_target=row(0, 0), log_pi_behavior=row(0, 0),
          values=row(0, 0), rewards=row(1, 1), terminateds=row(0, 0),
          truncateds=row(1, 0), bootstrap_values=row(8, 4), gamma=0.5)


# ---------------------------------------------------------------- Retrace

def retrace_inputs(actions=(0, 1, 0), truncateds=(0, 0, 0)):
    # π rows [0.5, 0.5], [0.25, 0.75], [1, 0]; μ = [0.25, 1, 0.5]; actions [0, 1, 0]
    # π_a = [0.5, 0.75, 1];  ratio = [2, 0.75, 2]
    # EQ = [0.5·2 + 0.5·4, 0.25·4 + 0.75·0, 1·8 + 0·8] = [3, 1, 8]
    # q = [1, 1, 1], r = [1, 1, 2], terminated at t = 2
    # δ0 = 1 + 0.5·3 - 1 = 1.5;  δ1 = 1 + 0.5·1 - 1 = 0.5;  δ2 = 2 + 0 - 1 = 1
    return dict(
        action_probs_target=torch.tensor([[[0.5, 0.5], [0.25, 0.75], [1.0, 0.0]]],
                                         dtype=torch.float64),
        action_probs_behavior=row(0.25, 1, 0.5),
        q_values=row(1, 1, 1),
        next_q_values_all=torch.tensor([[[2.0, 4.0], [4.0, 0.0], [8.0, 8.0]]],
                                       dtype=torch.float64),
        actions=torch.tensor([actions]),
        rewards=row(1, 1, 2),
        terminateds=row(0, 0, 1),
        truncateds=row(*truncateds),
        gamma=0.5,
    )


def test_retrace_clipping_lambda_one():
    # λ = 1, c̄ = ρ̄ = 1: c = ρ = [1, 0.75, 1];  c[t+1] = [0.75, 1, 0]
    # D2 = 1;  D1 = 0.5 + 0.5·1·1 = 1;  D0 = 1.5 + 0.5·0.75·1 = 1.875
    # q_ret = [2.875, 2, 2];  q_ret[3] = 0
    # adv0 = 1·(1 + 0.5·2 - 1) = 1;  adv1 = 0.75·(1 + 0.5·2 - 1) = 0.75;  adv2 = 1·(2 - 1) = 1
    check("retrace", ([2.875, 2, 2], [1, 0.75, 1]), **retrace_inputs(), lambda_=1.0)


def test_retrace_lambda_half():
    # c = 0.5·min(1, ratio) = [0.5, 0.375, 0.5];  c[t+1] = [0.375, 0.5, 0]
    # D2 = 1;  D1 = 0.5 + 0.5·0.5·1 = 0.75;  D0 = 1.5 + 0.5·0.375·0.75 = 1.640625
    # q_ret = [2.640625, 1.75, 2]
    # adv0 = 1·(1 + 0.5·1.75 - 1) = 0.875;  adv1 = 0.75·(1 + 0.5·2 - 1) = 0.75;  adv2 = 1
    check("retrace", ([2.640625, 1.75, 2], [0.875, 0.75, 1]), **retrace_inputs(),
          lambda_=0.5)


def test_retrace_larger_clips():
    # c̄ = ρ̄ = 4: c = ρ = ratio = [2, 0.75, 2];  c[t+1] = [0.75, 2, 0]
    # D2 = 1;  D1 = 0.5 + 0.5·2·1 = 1.5;  D0 = 1.5 + 0.5·0.75·1.5 = 2.0625
    # q_ret = [3.0625, 2.5, 2]
    # adv0 = 2·(1 + 0.5·2.5 - 1) = 2.5;  adv1 = 0.75·(1 + 0.5·2 - 1) = 0.75;  adv2 = 2·(2 - 1) = 2
    check("retrace", ([3.0625, 2.5, 2], [2.5, 0.75, 2]), **retrace_inputs(),
          lambda_=1.0, c_bar=4.0, rho_bar=4.0)


def test_retrace_truncation_stops_the_trace_only():
    # Truncated at t = 1: D1 = δ1 = 0.5;  D0 = 1.5 + 0.5·0.75·0.5 = 1.6875
    # q_ret = [2.6875, 1.5, 2];  advantages still use q_ret[t+1] (only termination cuts it):
    # adv0 = 1·(1 + 0.5·1.5 - 1) = 0.75;  adv1 = 0.75·(1 + 0.5·2 - 1) = 0.75;  adv2 = 1
    check("retrace", ([2.6875, 1.5, 2], [0.75, 0.75, 1]),
          **retrace_inputs(truncateds=(0, 1, 0)), lambda_=1.0)


def test_retrace_out_of_range_action_is_nan_per_recurrence():
    # actions[1] = 2 with A = 2: π_a[1] = NaN, so c[1] and ρ[1] are NaN.
    # D1 = δ1 + γ·c[2]·D2 is finite (1, as above); D0 = δ0 + γ·c[1]·D1 is NaN.
    # adv1 = ρ[1]·(...) is NaN; adv0 and adv2 do not involve step 1's ratio.
    q_ret, adv = reference("retrace", **retrace_inputs(actions=(0, 2, 0)), lambda_=1.0)
    assert torch.isnan(q_ret[0, 0]) and torch.isnan(adv[0, 1])
    torch.testing.assert_close(q_ret[0, 1:], torch.tensor([2.0, 2.0], dtype=torch.float64))
    torch.testing.assert_close(adv[0, [0, 2]], torch.tensor([1.0, 1.0], dtype=torch.float64))


# ---------------------------------------------------------------- λ-returns

def test_lambda_returns_no_flags():
    # γ = λ = 0.5, r = [1, 1, 1], next_values = [2, 4, 8];  G[3] = b[2] = 0
    # G2 = 1 + 0.5·(0.5·8 + 0.5·0) = 3
    # G1 = 1 + 0.5·(0.5·4 + 0.5·3) = 2.75
    # G0 = 1 + 0.5·(0.5·2 + 0.5·2.75) = 2.1875
    check("lambda_returns", [2.1875, 2.75, 3],
          rewards=row(1, 1, 1), next_values=row(2, 4, 8), terminateds=row(0, 0, 0),
          gamma=0.5, lambda_=0.5)


def test_lambda_returns_truncation_with_bootstrap_values():
    # truncated at t = 1, b = [0, 6, 10] (next_values zeroed there by the caller);  G[3] = b2 = 10
    # G2 = 1 + 0.5·(0.5·8 + 0.5·10) = 5.5
    # G1 = 1 + 0 + 0.5·1·6 = 4
    # G0 = 1 + 0.5·(0.5·2 + 0.5·4) = 2.5
    check("lambda_returns", [2.5, 4, 5.5],
          rewards=row(1, 1, 1), next_values=row(2, 0, 8), terminateds=row(0, 0, 0),
          truncateds=row(0, 1, 0), bootstrap_values=row(0, 6, 10), gamma=0.5, lambda_=0.5)


def test_lambda_returns_lambda_zero_termination():
    # λ = 0 (one-step TD targets), terminated at t = 0:  G1 = 1 + 0.5·5 = 3.5;  G0 = 1
    check("lambda_returns", [1, 3.5],
          rewards=row(1, 1), next_values=row(5, 5), terminateds=row(1, 0),
          gamma=0.5, lambda_=0.0)


# ---------------------------------------------------------------- discounted returns

def test_discounted_returns_termination():
    # γ = 0.5, r = [1, 2, 3, 4], terminated at t = 1
    # G3 = 4;  G2 = 3 + 0.5·4 = 5;  G1 = 2 (done);  G0 = 1 + 0.5·2 = 2
    check("discounted_returns", [2, 2, 5, 4],
          rewards=row(1, 2, 3, 4), terminateds=row(0, 1, 0, 0), gamma=0.5)


def test_discounted_returns_truncation_with_bootstrap_values():
    # truncated at t = 0, b = [4, 0, 8];  G[3] = b2 = 8
    # G2 = 1 + 0.5·8 = 5;  G1 = 1 + 0.5·5 = 3.5;  G0 = 1 + 0 + 0.5·1·4 = 3
    check("discounted_returns", [3, 3.5, 5],
          rewards=row(1, 1, 1), terminateds=row(0, 0, 0), truncateds=row(1, 0, 0),
          bootstrap_values=row(4, 0, 8), gamma=0.5)


# ---------------------------------------------------------------- eligibility traces

def test_eligibility_traces_with_seed():
    # γ·λ = 0.25, g = [4, 8, 16, 4], done at t = 1, seed = 8
    # z0 = 4 + 0.25·8 = 6;  z1 = 8 + 0.25·6 = 9.5;  z2 = 16 (done[1] = 1);  z3 = 4 + 0.25·16 = 8
    check("eligibility_traces", [6, 9.5, 16, 8],
          gradients=row(4, 8, 16, 4), dones=row(0, 1, 0, 0), gamma=0.5, lambda_=0.5,
          seed_values=torch.tensor([8.0], dtype=torch.float64))


def test_eligibility_traces_without_seed():
    # z0 = 4;  z1 = 8 + 0.25·4 = 9;  z2 = 16;  z3 = 4 + 0.25·16 = 8
    check("eligibility_traces", [4, 9, 16, 8],
          gradients=row(4, 8, 16, 4), dones=row(0, 1, 0, 0), gamma=0.5, lambda_=0.5)


# ---------------------------------------------------------------- episodic prefix sum

@pytest.mark.parametrize(("boundary", "expected"), [
    # ends_at: C0 = 1 + 10 = 11;  C1 = 2 + 11 = 13;  C2 = 3 (done[1]);  C3 = 4 + 3 = 7
    ("ends_at", [11, 13, 3, 7]),
    # starts_at: C0 = 1 + 10 = 11;  C1 = 2 (done[1]);  C2 = 3 + 2 = 5;  C3 = 4 + 5 = 9
    ("starts_at", [11, 2, 5, 9]),
])
def test_episodic_prefix_sum_with_seed(boundary, expected):
    check("episodic_prefix_sum", expected,
          inputs=row(1, 2, 3, 4), dones=row(0, 1, 0, 0), boundary=boundary,
          seed_values=torch.tensor([10.0], dtype=torch.float64))


def test_episodic_prefix_sum_default_boundary_without_seed():
    # ends_at: [1, 1 + 2, 3, 3 + 4]
    check("episodic_prefix_sum", [1, 3, 3, 7], inputs=row(1, 2, 3, 4), dones=row(0, 1, 0, 0))


# ---------------------------------------------------------------- rows and layout

def test_rows_are_independent_and_flags_may_be_bool():
    # Two environments at once give each row's own answer (prefix sums, ends_at).
    got = reference("episodic_prefix_sum",
                    inputs=torch.tensor([[1.0, 2, 3], [5, 6, 7]]),
                    dones=torch.tensor([[False, True, False], [True, False, False]]))
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, torch.tensor([[1.0, 3, 3], [5, 6, 13]],
                                                 dtype=torch.float64))


# ---------------------------------------------------------------- gradients

@pytest.mark.parametrize("reverse", [True, False], ids=["backward", "forward"])
def test_recurrence_gradient_is_its_adjoint(reverse):
    """The recurrences carry their adjoint as their gradient (reference_vjp's long-T
    cost): it matches finite differences, including a broadcast decay and a boundary
    value, and autograd through the same loop step by step; T = 0 gives zeros."""
    from rltriton_tune.reference import _recurrence, _run_backward, _run_forward

    gen = torch.Generator().manual_seed(3)
    alpha = torch.randn(6, 3, dtype=torch.float64, generator=gen).requires_grad_()
    beta = torch.rand(6, 3, dtype=torch.float64, generator=gen).requires_grad_()
    boundary = torch.randn(3, dtype=torch.float64, generator=gen).requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b, e: _recurrence(a, b, e, reverse),
                                    (alpha, beta, boundary))
    decay = torch.rand(1, 3, dtype=torch.float64, generator=gen).requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b, e: _recurrence(a, b, e, reverse),
                                    (alpha, decay, boundary))

    y = _recurrence(alpha, beta, boundary, reverse)
    g = torch.randn(y.shape, dtype=torch.float64, generator=gen)
    stepwise = (_run_backward if reverse else _run_forward)(alpha, beta, boundary)
    for ours, theirs in zip(torch.autograd.grad(y, (alpha, beta, boundary), g),
                            torch.autograd.grad(stepwise, (alpha, beta, boundary), g),
                            strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)

    empty = torch.zeros(0, 3, dtype=torch.float64, requires_grad=True)
    y = _recurrence(empty, empty, boundary, reverse)
    assert y.shape == (0, 3)
    d_empty, d_boundary = torch.autograd.grad(y.sum(), (empty, boundary))
    assert d_empty.shape == (0, 3) and not d_boundary.any()
