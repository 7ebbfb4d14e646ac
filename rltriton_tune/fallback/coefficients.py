"""Per-algorithm coefficients of the shared recurrence y[t] = α[t] + β[t]·y[t∓1].

One builder per estimator turns a :class:`~rltriton_tune.call.Call` into
:class:`Coefficients`: α and β as logical ``[N, T]`` tensors in the compute
dtype (a transposed view's strides for time-major inputs, so no copy of the
data is made), with the boundary carry (``G[T] = b[T-1]``, seeds) folded into α
at the boundary step so every scan starts from a zero carry, and a pointwise
``finish`` that turns the scan result into the algorithm's outputs. The scans in
:mod:`rltriton_tune.fallback.scans` know nothing about algorithms.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from rltriton_tune.call import Call

#: Turns the scan result (logical ``[N, T]``, compute dtype) into the outputs.
Finish = Callable[[Tensor], tuple[Tensor, ...]]


@dataclass
class Coefficients:
    """α, β (fresh tensors the scan may overwrite), scan direction and finisher."""

    alpha: Tensor
    beta: Tensor
    reverse: bool
    finish: Finish


def _identity(y: Tensor) -> tuple[Tensor, ...]:
    return (y,)


class _Inputs:
    """Logical ``[N, T]`` (``[N, T, A]``) views of a call's inputs in the compute dtype."""

    def __init__(self, call: Call) -> None:
        self.call = call
        self.cd = call.compute_dtype

    def raw(self, name: str) -> Tensor | None:
        x = self.call.tensors.get(name)
        if x is None or not self.call.time_major or x.dim() == 1:
            return x
        return x.transpose(0, 1)

    def float(self, name: str) -> Tensor | None:
        x = self.raw(name)
        return None if x is None else x.to(self.cd)

    def fresh(self, name: str) -> Tensor:
        """A private compute-dtype copy (never the caller's tensor), for α."""
        x = self.raw(name)
        return x.to(self.cd) if x.dtype != self.cd else x.clone()

    def flag(self, name: str) -> Tensor | None:
        return self.float(name)

    def scalar(self, name: str) -> float:
        return float(self.call.scalars[name])


def _fold(alpha: Tensor, beta: Tensor, reverse: bool, carry: Tensor | None) -> None:
    """α[edge] += β[edge]·carry (carry 0 when absent, so a NaN β still propagates)."""
    edge = -1 if reverse else 0
    a, b = alpha[:, edge], beta[:, edge]
    if carry is None:
        a.add_(b * 0)
    else:
        a.addcmul_(b, carry.to(alpha.dtype))


def _shift_next(x: Tensor, last: Tensor | float) -> Tensor:
    """out[t] = x[t+1], out[T-1] = last (same strides as ``x``)."""
    out = torch.empty_like(x)
    out[:, :-1] = x[:, 1:]
    out[:, -1] = last
    return out


def _shift_prev(x: Tensor, first: float) -> Tensor:
    """out[t] = x[t-1], out[0] = first."""
    out = torch.empty_like(x)
    out[:, 1:] = x[:, :-1]
    out[:, 0] = first
    return out


class _Bootstrap:
    """SPEC's b[t]: ``bootstrap_values``, or ``last_value`` at T-1, else 0."""

    def __init__(self, inp: _Inputs) -> None:
        self.full = inp.float("bootstrap_values")
        lv = inp.float("last_value")
        self.last = self.full[:, -1] if self.full is not None else lv

    def next_or_b(self, x: Tensor, trunc: Tensor | None) -> Tensor:
        """SPEC's nv: b[t] at t = T-1 or where truncated, else x[t+1]."""
        out = _shift_next(x, 0.0 if self.last is None else self.last)
        if trunc is not None:
            b = self.full if self.full is not None else torch.zeros((), dtype=x.dtype,
                                                                   device=x.device)
            out = torch.where(trunc != 0, b, out)
        return out

    def trunc_term(self, trunc: Tensor | None, gamma: float) -> Tensor | None:
        """γ·trunc[t]·b[t] (λ-returns / returns), or None when it is identically 0."""
        if trunc is None or self.full is None:
            return None
        return gamma * trunc * self.full


def _done(term: Tensor, trunc: Tensor | None) -> Tensor:
    return term if trunc is None else torch.maximum(term, trunc)


def gae(call: Call) -> Coefficients:
    inp = _Inputs(call)
    g, lam = inp.scalar("gamma"), inp.scalar("lambda_")
    r, v = inp.float("rewards"), inp.float("values")
    term, trunc = inp.flag("terminateds"), inp.flag("truncateds")
    nv = _Bootstrap(inp).next_or_b(v, trunc)
    alpha = r + g * (1 - term) * nv - v
    beta = (g * lam) * (1 - _done(term, trunc))
    _fold(alpha, beta, True, None)
    return Coefficients(alpha, beta, True, _identity)


def vtrace(call: Call) -> Coefficients:
    inp = _Inputs(call)
    g = inp.scalar("gamma")
    r, v = inp.float("rewards"), inp.float("values")
    term, trunc = inp.flag("terminateds"), inp.flag("truncateds")
    boot = _Bootstrap(inp)
    ratio = torch.exp(inp.float("log_pi_target") - inp.float("log_pi_behavior"))
    rho = torch.clamp_max(ratio, inp.scalar("rho_bar"))
    c = torch.clamp_max(ratio, inp.scalar("c_bar"))
    del ratio
    not_term = 1 - term
    alpha = rho * (r + g * not_term * boot.next_or_b(v, trunc) - v)
    beta = g * c * (1 - _done(term, trunc))
    del c
    _fold(alpha, beta, True, None)

    def finish(d: Tensor) -> tuple[Tensor, ...]:
        vs = d.add_(v)
        adv = rho * (r + g * not_term * boot.next_or_b(vs, trunc) - v)
        return vs, adv

    return Coefficients(alpha, beta, True, finish)


def _gather_actions(inp: _Inputs) -> tuple[Tensor, Tensor]:
    """π_a[t] and a per-row "some action out of range" mask ``[N, 1]``.

    The index is clamped so the gather never faults (GPU: no device sync to
    check); out-of-range steps get π_a = NaN and their whole row becomes NaN.
    """
    probs, actions = inp.raw("action_probs_target"), inp.raw("actions")
    n_act = probs.shape[-1]
    bad = (actions < 0) | (actions >= n_act)
    if n_act == 0:
        pi_a = torch.full(actions.shape, float("nan"), dtype=inp.cd, device=actions.device)
    else:
        idx = actions.clamp(0, n_act - 1).to(torch.int64).unsqueeze(-1)
        pi_a = probs.gather(-1, idx).squeeze(-1).to(inp.cd)
        pi_a = torch.where(bad, float("nan"), pi_a)
    return pi_a, bad.any(dim=1, keepdim=True)


def retrace(call: Call) -> Coefficients:
    inp = _Inputs(call)
    g, lam = inp.scalar("gamma"), inp.scalar("lambda_")
    r, q = inp.float("rewards"), inp.float("q_values")
    term, trunc = inp.flag("terminateds"), inp.flag("truncateds")
    pi_a, bad_row = _gather_actions(inp)
    ratio = pi_a / inp.float("action_probs_behavior")
    del pi_a
    c = lam * torch.clamp_max(ratio, inp.scalar("c_bar"))
    rho = torch.clamp_max(ratio, inp.scalar("rho_bar"))
    del ratio
    expected_q = torch.linalg.vecdot(inp.float("action_probs_target"),
                                     inp.float("next_q_values_all"), dim=-1)
    not_term = 1 - term
    alpha = r + g * not_term * expected_q - q
    del expected_q
    beta = g * _shift_next(c, 0.0) * (1 - _done(term, trunc))
    del c
    _fold(alpha, beta, True, None)

    def finish(d: Tensor) -> tuple[Tensor, ...]:
        q_ret = d.add_(q)
        adv = rho * (r + g * not_term * _shift_next(q_ret, 0.0) - q)
        nan = torch.tensor(float("nan"), dtype=q_ret.dtype, device=q_ret.device)
        return torch.where(bad_row, nan, q_ret), torch.where(bad_row, nan, adv)

    return Coefficients(alpha, beta, True, finish)


def lambda_returns(call: Call) -> Coefficients:
    inp = _Inputs(call)
    g, lam = inp.scalar("gamma"), inp.scalar("lambda_")
    r, nv = inp.float("rewards"), inp.float("next_values")
    term, trunc = inp.flag("terminateds"), inp.flag("truncateds")
    boot = _Bootstrap(inp)
    not_done = 1 - _done(term, trunc)
    alpha = r + g * not_done * ((1 - lam) * nv)
    extra = boot.trunc_term(trunc, g)
    if extra is not None:
        alpha += extra
    beta = not_done.mul_(g * lam)
    _fold(alpha, beta, True, boot.last)
    return Coefficients(alpha, beta, True, _identity)


def discounted_returns(call: Call) -> Coefficients:
    inp = _Inputs(call)
    g = inp.scalar("gamma")
    term, trunc = inp.flag("terminateds"), inp.flag("truncateds")
    boot = _Bootstrap(inp)
    alpha = inp.fresh("rewards")
    extra = boot.trunc_term(trunc, g)
    if extra is not None:
        alpha += extra
    beta = g * (1 - _done(term, trunc))
    _fold(alpha, beta, True, boot.last)
    return Coefficients(alpha, beta, True, _identity)


def eligibility_traces(call: Call) -> Coefficients:
    inp = _Inputs(call)
    gl = inp.scalar("gamma") * inp.scalar("lambda_")
    alpha = inp.fresh("gradients")
    beta = _shift_prev((1 - inp.flag("dones")).mul_(gl), gl)
    _fold(alpha, beta, False, inp.float("seed_values"))
    return Coefficients(alpha, beta, False, _identity)


def episodic_prefix_sum(call: Call) -> Coefficients:
    inp = _Inputs(call)
    alpha = inp.fresh("inputs")
    not_done = 1 - inp.flag("dones")
    beta = not_done if call.starts_at else _shift_prev(not_done, 1.0)
    _fold(alpha, beta, False, inp.float("seed_values"))
    return Coefficients(alpha, beta, False, _identity)


#: One coefficient builder per algorithm name (see ``rltriton_tune.algorithms``).
BUILDERS: dict[str, Callable[[Call], Coefficients]] = {
    "gae": gae,
    "vtrace": vtrace,
    "retrace": retrace,
    "lambda_returns": lambda_returns,
    "discounted_returns": discounted_returns,
    "eligibility_traces": eligibility_traces,
    "episodic_prefix_sum": episodic_prefix_sum,
}


def build(call: Call) -> Coefficients:
    """Coefficients of ``call`` (requires N ≥ 1 and T ≥ 1)."""
    coeffs = BUILDERS[call.algorithm](call)
    expected = "backward" if coeffs.reverse else "forward"
    assert call.spec.direction == expected, (call.algorithm, expected)
    return coeffs
