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

import math
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


class Inputs:
    """Logical ``[N, T]`` (``[N, T, A]``) views of a call's inputs in the compute dtype."""

    def __init__(self, call: Call) -> None:
        self.call = call
        self.cd = call.compute_dtype

    def raw(self, name: str) -> Tensor | None:
        """The input as given, transposed to ``[N, T]`` for time-major calls (a view)."""
        x = self.call.tensors.get(name)
        return None if x is None else self.call.logical(x)

    def value(self, name: str) -> Tensor | None:
        """The input in the compute dtype (possibly the caller's tensor: read only)."""
        x = self.raw(name)
        return None if x is None else x.to(self.cd)

    def flag(self, name: str, step: int | None = None) -> Tensor | None:
        """A flag input as 0/1 in the compute dtype: non-zero (NaN included) means true
        (SPEC), so every path agrees for flags such as -1 or 0.5; fresh. All steps, or
        the ``[N]`` of one ``step``."""
        x = self.raw(name)
        if x is None:
            return None
        return ((x if step is None else x[:, step]) != 0).to(self.cd)

    def fresh(self, name: str) -> Tensor:
        """A private compute-dtype copy (never the caller's tensor), for α."""
        x = self.raw(name)
        return x.to(self.cd) if x.dtype != self.cd else x.clone()

    def scalar(self, name: str) -> float | Tensor:
        """A float, or a 0-d tensor on the inputs' device (read there, without a sync)."""
        return self.call.scalars[name]

    def clip(self, name: str) -> float | Tensor:
        """A clip threshold as ``clamp_max`` takes it: a float beyond the compute dtype's
        range (1e300, a valid "no clipping", with float32 inputs) becomes ±inf, which
        clips every value of that dtype alike; torch refuses to convert it."""
        value = self.call.scalars[name]
        if isinstance(value, float) and abs(value) > torch.finfo(self.cd).max:
            return math.copysign(math.inf, value)
        return value


def _fold(alpha: Tensor, beta: Tensor, reverse: bool, carry: Tensor | None) -> None:
    """α[edge] += β[edge]·carry (carry 0 when absent, so a NaN β still propagates)."""
    edge = -1 if reverse else 0
    a, b = alpha[:, edge], beta[:, edge]
    if carry is None:
        a.add_(b * 0)
    else:
        a.addcmul_(b, carry.to(alpha.dtype))


# Builders allocate as few [N, T] tensors as they can and update them in place:
# on CPU each fresh large allocation costs page faults comparable to the
# arithmetic. Only tensors created here are modified; inputs never are.


def _shift_next(x: Tensor, last: Tensor | float) -> Tensor:
    """out[t] = x[t+1], out[T-1] = last (a fresh tensor with the strides of ``x``)."""
    out = torch.empty_like(x)
    out[:, :-1] = x[:, 1:]
    out[:, -1] = last
    return out


def _shift_prev(x: Tensor, first: float) -> Tensor:
    """out[t] = x[t-1], out[0] = first (fresh)."""
    out = torch.empty_like(x)
    out[:, 1:] = x[:, :-1]
    out[:, 0] = first
    return out


def _one_minus(x: Tensor, scale: float = 1.0) -> Tensor:
    """scale·(1 - x), fresh (exact for 0/1 flags whatever the order of products)."""
    return torch.mul(x, -scale).add_(scale)


def _not_done(term: Tensor, trunc: Tensor | None, scale: float = 1.0) -> Tensor:
    """scale·(1 - max(term, trunc)), fresh."""
    if trunc is None:
        return _one_minus(term, scale)
    return torch.maximum(term, trunc).mul_(-scale).add_(scale)


class _Bootstrap:
    """SPEC's b[t]: ``bootstrap_values``, or ``last_value`` at T-1, else 0. GAE's and
    V-trace's ``next_values`` (which excludes both) is the bootstrap at every step:
    nv[t] everywhere, and V-trace's nvs[t] at t = T-1 and at truncations."""

    def __init__(self, inp: Inputs) -> None:
        following = inp.value("next_values") if "next_values" in inp.call.spec.optional \
            else None
        self.following = following
        self.full = inp.value("bootstrap_values") if following is None else following
        lv = inp.value("last_value")
        self.last = self.full[:, -1] if self.full is not None else lv

    def next_value(self, v: Tensor, trunc_mask: Tensor | None) -> Tensor:
        """nv[t] of GAE and V-trace, fresh: ``next_values``, else :meth:`next_or_b` of v."""
        if self.following is not None:
            return self.following.to(v.dtype, copy=True)
        return self.next_or_b(v, trunc_mask)

    def next_or_b(self, x: Tensor, trunc_mask: Tensor | None) -> Tensor:
        """SPEC's nv, fresh: b[t] at t = T-1 or where truncated, else x[t+1]."""
        out = _shift_next(x, 0.0 if self.last is None else self.last)
        if trunc_mask is not None:
            if self.full is None:
                out.masked_fill_(trunc_mask, 0.0)
            elif out.requires_grad or self.full.requires_grad:
                out = torch.where(trunc_mask, self.full, out)  # out= does not record autograd
            else:
                torch.where(trunc_mask, self.full, out, out=out)
        return out

    def trunc_term(self, trunc: Tensor | None, gamma: float) -> Tensor | None:
        """γ·trunc[t]·b[t] (λ-returns / returns), or None without bootstrap values (0).
        Without truncations it is γ·0·b[t]: zero, except NaN where b[t] is NaN or
        infinite, which SPEC has propagate as the recurrence says."""
        if self.full is None:
            return None
        if trunc is None:
            return torch.mul(self.full, gamma * 0.0)
        return torch.mul(trunc, self.full).mul_(gamma)


def _clip_last_use(ratio: Tensor, clip: float) -> Tensor:
    """min(ratio, clip) at ratio's last use: in place, unless autograd records ``ratio``
    (the backward pass rebuilds the coefficients with autograd, which saved ``ratio``
    for the other clip)."""
    if ratio.requires_grad:
        return torch.clamp_max(ratio, clip)
    return ratio.clamp_max_(clip)


def _mask(trunc: Tensor | None) -> Tensor | None:
    return None if trunc is None else trunc != 0


def _td_error(nv: Tensor, not_term: Tensor, r: Tensor, v: Tensor, g: float) -> Tensor:
    """r + γ·(1-term)·nv - v, computed in ``nv``'s storage."""
    return nv.mul_(not_term).mul_(g).add_(r).sub_(v)


def gae(call: Call) -> Coefficients:
    inp = Inputs(call)
    g, lam = inp.scalar("gamma"), inp.scalar("lambda_")
    r, v = inp.value("rewards"), inp.value("values")
    term, trunc = inp.flag("terminateds"), inp.flag("truncateds")
    nv = _Bootstrap(inp).next_value(v, _mask(trunc))
    alpha = _td_error(nv, _one_minus(term), r, v, g)
    beta = _not_done(term, trunc, g * lam)
    _fold(alpha, beta, True, None)
    return Coefficients(alpha, beta, True, _identity)


def vtrace(call: Call) -> Coefficients:
    inp = Inputs(call)
    g = inp.scalar("gamma")
    r, v = inp.value("rewards"), inp.value("values")
    term, trunc = inp.flag("terminateds"), inp.flag("truncateds")
    mask = _mask(trunc)
    boot = _Bootstrap(inp)
    ratio = torch.sub(inp.value("log_pi_target"), inp.value("log_pi_behavior")).exp_()
    rho = torch.clamp_max(ratio, inp.clip("rho_bar"))
    not_term = _one_minus(term)
    alpha = _td_error(boot.next_value(v, mask), not_term, r, v, g).mul_(rho)
    beta = _clip_last_use(ratio, inp.clip("c_bar")).mul_(_not_done(term, trunc, g))
    _fold(alpha, beta, True, None)

    def finish(d: Tensor) -> tuple[Tensor, ...]:
        vs = d.add_(v)
        adv = _td_error(boot.next_or_b(vs, mask), not_term, r, v, g).mul_(rho)
        return vs, adv

    return Coefficients(alpha, beta, True, finish)


def _expected_q(inp: Inputs) -> Tensor:
    """EQ[t] = Σ_a π[t, a]·Q'[t, a], in the caller's layout, transposed at the end.

    Eager CPU: one batched matmul (2-4x faster there than a reduction over a
    short last dimension). GPU and torch.compile: multiply and sum, which
    fuses (inductor also fails to compile the matmul form on some layouts).
    """
    probs = inp.call.tensors["action_probs_target"].to(inp.cd)
    next_q = inp.call.tensors["next_q_values_all"].to(inp.cd)
    if probs.device.type == "cpu" and not torch.compiler.is_compiling():
        eq = torch.matmul(probs.unsqueeze(-2), next_q.unsqueeze(-1)).squeeze(-1).squeeze(-1)
    else:
        eq = (probs * next_q).sum(-1)
    return eq.t() if inp.call.time_major else eq


def _gather_actions(inp: Inputs) -> tuple[Tensor, Tensor]:
    """π_a[t] and a per-row "some action out of range" mask ``[N, 1]``.

    The index is clamped so the gather never faults (GPU: no device sync to
    check); out-of-range steps get π_a = NaN and their whole row becomes NaN.
    Works in the caller's layout (contiguous gathers), transposed at the end.
    """
    probs = inp.call.tensors["action_probs_target"]
    actions = inp.call.tensors["actions"]
    n_act = probs.shape[-1]
    if n_act == 0:
        pi_a = torch.full(actions.shape, float("nan"), dtype=inp.cd, device=actions.device)
        bad = torch.ones(actions.shape, dtype=torch.bool, device=actions.device)
    else:
        idx = actions.to(torch.int64).clamp(0, n_act - 1)
        bad = idx != actions
        pi_a = probs.gather(-1, idx.unsqueeze(-1)).squeeze(-1).to(inp.cd)
        pi_a.masked_fill_(bad, float("nan"))
    if inp.call.time_major:
        pi_a, bad = pi_a.t(), bad.t()
    return pi_a, bad.any(dim=1, keepdim=True)


def retrace(call: Call) -> Coefficients:
    inp = Inputs(call)
    g, lam = inp.scalar("gamma"), inp.scalar("lambda_")
    r, q = inp.value("rewards"), inp.value("q_values")
    term, trunc = inp.flag("terminateds"), inp.flag("truncateds")
    pi_a, bad_row = _gather_actions(inp)
    ratio = pi_a.div_(inp.value("action_probs_behavior"))
    rho = torch.clamp_max(ratio, inp.clip("rho_bar"))
    c = _clip_last_use(ratio, inp.clip("c_bar")).mul_(lam)
    not_term = _one_minus(term)
    alpha = _td_error(_expected_q(inp), not_term, r, q, g)
    beta = _shift_next(c, 0.0).mul_(_not_done(term, trunc, g))
    del c, ratio
    _fold(alpha, beta, True, None)

    def finish(d: Tensor) -> tuple[Tensor, ...]:
        q_ret = d.add_(q)
        adv = _td_error(_shift_next(q_ret, 0.0), not_term, r, q, g).mul_(rho)
        return q_ret.masked_fill_(bad_row, float("nan")), adv.masked_fill_(bad_row, float("nan"))

    return Coefficients(alpha, beta, True, finish)


def lambda_returns(call: Call) -> Coefficients:
    inp = Inputs(call)
    g, lam = inp.scalar("gamma"), inp.scalar("lambda_")
    r, nv = inp.value("rewards"), inp.value("next_values")
    term, trunc = inp.flag("terminateds"), inp.flag("truncateds")
    boot = _Bootstrap(inp)
    not_done = _not_done(term, trunc)
    alpha = torch.mul(nv, 1 - lam).mul_(not_done).mul_(g).add_(r)
    extra = boot.trunc_term(trunc, g)
    if extra is not None:
        alpha += extra
    # In place unless autograd saved not_done for alpha's product (the backward pass).
    beta = not_done * (g * lam) if alpha.requires_grad else not_done.mul_(g * lam)
    _fold(alpha, beta, True, boot.last)
    return Coefficients(alpha, beta, True, _identity)


def discounted_returns(call: Call) -> Coefficients:
    inp = Inputs(call)
    g = inp.scalar("gamma")
    term, trunc = inp.flag("terminateds"), inp.flag("truncateds")
    boot = _Bootstrap(inp)
    alpha = inp.fresh("rewards")
    extra = boot.trunc_term(trunc, g)
    if extra is not None:
        alpha += extra
    beta = _not_done(term, trunc, g)
    _fold(alpha, beta, True, boot.last)
    return Coefficients(alpha, beta, True, _identity)


def _keep_previous(dones: Tensor, scale: float) -> Tensor:
    """scale·(1 - done[t-1]) with done[-1] = 0, fresh."""
    return _shift_prev(dones, 0.0).mul_(-scale).add_(scale)


def eligibility_traces(call: Call) -> Coefficients:
    inp = Inputs(call)
    gl = inp.scalar("gamma") * inp.scalar("lambda_")
    alpha = inp.fresh("gradients")
    beta = _keep_previous(inp.flag("dones"), gl)
    _fold(alpha, beta, False, inp.value("seed_values"))
    return Coefficients(alpha, beta, False, _identity)


def episodic_prefix_sum(call: Call) -> Coefficients:
    inp = Inputs(call)
    alpha = inp.fresh("inputs")
    dones = inp.flag("dones")
    beta = _one_minus(dones) if call.starts_at else _keep_previous(dones, 1.0)
    _fold(alpha, beta, False, inp.value("seed_values"))
    return Coefficients(alpha, beta, False, _identity)


def adjoint_scan_forward(call: Call) -> Coefficients:
    """z[t] = g[t] + β[t-1]·z[t-1] (the adjoint of a backward-in-time estimator)."""
    inp = Inputs(call)
    return Coefficients(inp.fresh("grads"), _shift_prev(inp.value("beta"), 0.0), False,
                        _identity)


def adjoint_scan_backward(call: Call) -> Coefficients:
    """z[t] = g[t] + β[t+1]·z[t+1] (the adjoint of a forward-in-time estimator)."""
    inp = Inputs(call)
    return Coefficients(inp.fresh("grads"), _shift_next(inp.value("beta"), 0.0), True,
                        _identity)


# Grad algorithms (rltriton_tune.algorithms.GRAD_ALGORITHMS): α = the output gradient, β the
# estimator's β read one step over, and a finish that writes the input gradients from z.


def _adjoint_of_backward(inp: Inputs, scale: float) -> tuple[Tensor, Tensor, Tensor]:
    """(α, β, not_done) of the adjoint of a backward-in-time estimator whose β is
    ``scale·(1 - done[t])``: α = g, β[t] = scale·(1 - done[t-1]) (0 at t = 0), and the
    fresh ``1 - done``."""
    not_done = _not_done(inp.flag("terminateds"), inp.flag("truncateds"))
    return inp.fresh("grads"), _shift_prev(not_done, 0.0).mul_(scale), not_done


def _kept(inp: Inputs, scale: float) -> Tensor:
    """scale·(1 - term), fresh: the gradient of nv[t] per unit z[t] (GAE's δ)."""
    return _one_minus(inp.flag("terminateds"), scale)


def gae_grad(call: Call) -> Coefficients:
    """z[t] = g[t] + γλ(1-done[t-1])·z[t-1]; grad_values[t] = -z[t] + γ(1-done[t-1])·z[t-1]
    (α[t-1] reads values[t] as nv unless t-1 is truncated), or with next_values
    grad_next_values = γ(1-term)·z; and a boundary input's gradient where one is given
    (:data:`rltriton_tune.algorithms.GRAD_ALGORITHMS`)."""
    inp = Inputs(call)
    g, lam = inp.scalar("gamma"), inp.scalar("lambda_")
    alpha, beta, not_done = _adjoint_of_backward(inp, g * lam)
    tensors = call.tensors

    def finish(z: Tensor) -> tuple[Tensor, ...]:
        if "next_values" in tensors:
            return z, _kept(inp, g).mul_(z)
        grad_values = torch.neg(z)
        grad_values[:, 1:].addcmul_(not_done[:, :-1].mul_(g), z[:, :-1])
        if "last_value" in tensors:
            last = _one_minus(inp.flag("terminateds", -1), g)
            return z, grad_values, last.mul_(z[:, -1])
        if "bootstrap_values" in tensors:
            # nv[t] = b[t] where t = T-1 or truncated.
            cut = inp.flag("truncateds")
            cut = torch.zeros_like(z) if cut is None else cut
            cut[:, -1] = 1.0
            return z, grad_values, _kept(inp, g).mul_(cut).mul_(z)
        return z, grad_values

    return Coefficients(alpha, beta, False, finish)


def vtrace_grad(call: Call) -> Coefficients:
    """z[t] = α[t] + γ·c[t-1]·(1-done[t-1])·z[t-1] with α[t] = g_vs[t] plus vs[t]'s share of
    adv[t-1]; the gradients of log_pi_target, values, rewards and of the boundary input
    given (:data:`rltriton_tune.algorithms.GRAD_ALGORITHMS`)."""
    inp = Inputs(call)
    g, rho_bar, c_bar = inp.scalar("gamma"), inp.clip("rho_bar"), inp.clip("c_bar")
    g_vs, g_adv = inp.value("grads"), inp.value("grad_advantages")
    ratio = torch.sub(inp.value("log_pi_target"), inp.value("log_pi_behavior")).exp_()
    rho = torch.clamp_max(ratio, rho_bar)
    term, trunc = inp.flag("terminateds"), inp.flag("truncateds")
    cut = torch.zeros_like(term, dtype=torch.bool) if trunc is None else trunc != 0
    cut[:, -1] = True
    kept = _one_minus(term, g)                                   # γ(1-term)
    weight = kept.masked_fill(cut, 0.0).mul_(rho)                # of vs[t+1] in adv[t]
    alpha = _shift_prev(weight * g_adv, 0.0).add_(g_vs)
    not_done = _not_done(term, trunc, g)                         # γ(1-done)
    beta = _shift_prev(torch.clamp_max(ratio, c_bar).mul_(not_done), 0.0)
    boot = _Bootstrap(inp)

    def finish(z: Tensor) -> tuple[Tensor, ...]:
        v, r = inp.value("values"), inp.value("rewards")
        vs = inp.value("vs")
        mask = _mask(trunc)
        nv = boot.next_value(v, mask)
        nvs = boot.next_or_b(vs, mask)
        w = torch.add(g_adv, z).mul_(rho)                        # grad_rewards
        through_rho = g_adv * (kept * nvs + r - v) + z * (kept * nv + r - v)
        through_c = _shift_next(vs - v, 0.0).mul_(not_done).mul_(z)
        grad_lpt = ratio * (torch.where(ratio <= rho_bar, through_rho, 0.0)
                            + torch.where(ratio <= c_bar, through_c, 0.0))
        carried = g_adv if boot.following is not None else g_adv + z
        grad_values = _shift_prev(weight * carried, 0.0).add_(g_vs).sub_(w)
        outputs = (grad_lpt, grad_values, w)
        if boot.following is not None:
            return (*outputs, kept * rho * (z + g_adv.masked_fill(~cut, 0.0)))
        if "bootstrap_values" in call.tensors:
            return (*outputs, (kept * w).masked_fill_(~cut, 0.0))
        if "last_value" in call.tensors:
            return (*outputs, kept[:, -1] * w[:, -1])
        return outputs

    return Coefficients(alpha, beta, False, finish)


def _returns_bootstrap_grad(inp: Inputs, z: Tensor, decay: float | Tensor) -> Tensor:
    """A returns estimator's bootstrap gradient: γ·trunc[t]·z[t], plus
    decay·(1-done[T-1])·z[T-1] at T-1 (the folded G[T] = b[T-1])."""
    trunc = inp.flag("truncateds")
    grad = torch.zeros_like(z) if trunc is None else trunc.mul(z).mul_(inp.scalar("gamma"))
    last = 1 - inp.flag("terminateds", -1)
    if trunc is not None:
        last.mul_(1 - trunc[:, -1])
    grad[:, -1].addcmul_(last.mul_(decay), z[:, -1])
    return grad


def lambda_returns_grad(call: Call) -> Coefficients:
    """z[t] = g[t] + γλ(1-done[t-1])·z[t-1]; grad_next_values = γ(1-λ)(1-done)·z; and the
    bootstrap gradient where ``bootstrap_values`` is given."""
    inp = Inputs(call)
    g, lam = inp.scalar("gamma"), inp.scalar("lambda_")
    alpha, beta, not_done = _adjoint_of_backward(inp, g * lam)

    def finish(z: Tensor) -> tuple[Tensor, ...]:
        outputs = (z, not_done.mul_(z).mul_(g * (1 - lam)))
        if "bootstrap_values" in call.tensors:
            return (*outputs, _returns_bootstrap_grad(inp, z, g * lam))
        return outputs

    return Coefficients(alpha, beta, False, finish)


def discounted_returns_grad(call: Call) -> Coefficients:
    """z[t] = g[t] + γ(1-done[t-1])·z[t-1]; and the bootstrap gradient where
    ``bootstrap_values`` is given."""
    inp = Inputs(call)
    g = inp.scalar("gamma")
    alpha, beta, _ = _adjoint_of_backward(inp, g)
    if "bootstrap_values" not in call.tensors:
        return Coefficients(alpha, beta, False, _identity)
    return Coefficients(alpha, beta, False,
                        lambda z: (z, _returns_bootstrap_grad(inp, z, g)))


def _adjoint_of_forward(inp: Inputs, beta_next: Tensor, first_beta: float | Tensor
                        ) -> Coefficients:
    """α = g, β = ``beta_next`` (the estimator's β[t+1]) with β[T-1] = 0: a backward scan;
    where ``seed_values`` is given, its gradient ``first_beta``·z[0] (β[0]·z[0])."""
    beta_next[:, -1] = 0.0
    if "seed_values" not in inp.call.tensors:
        return Coefficients(inp.fresh("grads"), beta_next, True, _identity)
    return Coefficients(inp.fresh("grads"), beta_next, True,
                        lambda z: (z, z[:, 0] * first_beta))


def eligibility_traces_grad(call: Call) -> Coefficients:
    """z[t] = g[t] + γλ(1-done[t])·z[t+1]; seed gradient γλ·z[0]."""
    inp = Inputs(call)
    gl = inp.scalar("gamma") * inp.scalar("lambda_")
    return _adjoint_of_forward(inp, _one_minus(inp.flag("dones"), gl), gl)


def episodic_prefix_sum_grad(call: Call) -> Coefficients:
    """z[t] = g[t] + (1-done[t])·z[t+1] (``starts_at``: (1-done[t+1])·z[t+1]); seed
    gradient z[0] (``starts_at``: (1-done[0])·z[0])."""
    inp = Inputs(call)
    dones = inp.flag("dones")
    keep = _shift_next(dones, 0.0) if call.starts_at else dones
    first = 1 - dones[:, 0] if call.starts_at else 1.0
    return _adjoint_of_forward(inp, _one_minus(keep), first)


#: One coefficient builder per algorithm name (see ``rltriton_tune.algorithms``).
BUILDERS: dict[str, Callable[[Call], Coefficients]] = {
    "gae": gae,
    "vtrace": vtrace,
    "retrace": retrace,
    "lambda_returns": lambda_returns,
    "discounted_returns": discounted_returns,
    "eligibility_traces": eligibility_traces,
    "episodic_prefix_sum": episodic_prefix_sum,
    "adjoint_scan_forward": adjoint_scan_forward,
    "adjoint_scan_backward": adjoint_scan_backward,
    "gae_grad": gae_grad,
    "vtrace_grad": vtrace_grad,
    "lambda_returns_grad": lambda_returns_grad,
    "discounted_returns_grad": discounted_returns_grad,
    "eligibility_traces_grad": eligibility_traces_grad,
    "episodic_prefix_sum_grad": episodic_prefix_sum_grad,
}


def build(call: Call) -> Coefficients:
    """Coefficients of ``call`` (requires N ≥ 1 and T ≥ 1)."""
    coeffs = BUILDERS[call.algorithm](call)
    expected = "backward" if coeffs.reverse else "forward"
    assert call.spec.direction == expected, (call.algorithm, expected)
    return coeffs
