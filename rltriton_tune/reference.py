"""Float64, step-by-step ground truth for the seven estimators (SPEC.md).

Written for obviousness, not speed: pointwise terms are computed for all steps
at once, then each recurrence runs as a Python loop over time, vectorised over
environments. It shares no code with validation or dispatch, so tests and the
tuner's correctness gate compare against an independent implementation. Inputs
are assumed valid; outputs are float64 CPU tensors in the caller's layout.

Internally every ``[N, T]`` array is held time-first, ``x[t]`` being the ``[N]``
values of step ``t``, so the code reads like the formulas in SPEC.md. The
implementations record autograd (:func:`reference_vjp` differentiates them, which is
the reference of the estimators' gradients and of the grad algorithms);
:func:`reference` runs them without.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.autograd.function import once_differentiable

from rltriton_tune.algorithms import ALGORITHMS

Tensor = torch.Tensor

_F64 = torch.float64


def _steps(x: Tensor, time_major: bool) -> Tensor:
    """``[N, T(, A)]`` (or ``[T, N(, A)]`` when time-major) -> float64 ``[T, N(, A)]``."""
    x = x.to("cpu")
    if not time_major:
        x = x.transpose(0, 1)
    return x.to(_F64).contiguous()


def _per_env(x: Tensor | None, n: int) -> Tensor:
    """An optional ``[N]`` tensor as float64, zeros when absent."""
    if x is None:
        return torch.zeros(n, dtype=_F64)
    return x.to("cpu", _F64)


def _flags(x: Tensor | None, like: Tensor, time_major: bool) -> Tensor:
    """0/1 flags as float64 ``[T, N]`` (non-zero, NaN included, means true); all zeros
    when absent."""
    if x is None:
        return torch.zeros_like(like)
    return (_steps(x, time_major) != 0).to(_F64)


def _bootstrap(bootstrap_values: Tensor | None, last_value: Tensor | None,
               like: Tensor, time_major: bool) -> Tensor:
    """``b[t]``: the given bootstrap values, or zeros with ``b[T-1] = last_value``."""
    if bootstrap_values is not None:
        return _steps(bootstrap_values, time_major)
    b = torch.zeros_like(like)
    if last_value is not None and b.shape[0] > 0:
        b[-1] = _per_env(last_value, b.shape[1])
    return b


def _episode(rewards: Tensor, terminateds: Tensor, truncateds: Tensor | None,
             time_major: bool) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Rewards, terminations, truncations (zeros if absent) and done = either, time first."""
    r = _steps(rewards, time_major)
    term = _flags(terminateds, r, time_major)
    trunc = _flags(truncateds, r, time_major)
    return r, term, trunc, torch.maximum(term, trunc)


def _next_value(values: Tensor, b: Tensor, trunc: Tensor) -> Tensor:
    """``nv[t] = b[t]`` if ``t == T-1`` or ``trunc[t]`` is set, else ``values[t+1]``."""
    following = torch.cat([values[1:], b[-1:]])    # values[t+1]; b[T-1] at t = T-1
    return torch.where(trunc != 0, b, following)


def _zero_row(x: Tensor) -> Tensor:
    """Zeros for one step of ``x`` (``[N]``): the boundary value ``y[T] = 0``."""
    return torch.zeros(x.shape[1:], dtype=_F64)


# The loops unbind their inputs into steps once and stack the results once (indexing a
# step, or writing it into a preallocated tensor, is a whole-tensor operation per step).
# Autograd does not go through them step by step: T steps of small nodes cost seconds
# at T = 70000, and minutes on a slower host. Each recurrence is one autograd node
# instead, differentiated by its adjoint, the recurrence run the other way (the
# backward loop's adjoint is a forward loop and the reverse).


def _run_backward(alpha: Tensor, beta: Tensor, end: Tensor) -> Tensor:
    """``y[t] = alpha[t] + beta[t]·y[t+1]`` with ``y[T] = end``; inputs of one shape."""
    steps = []
    following = end
    for a, b in zip(alpha.unbind(0)[::-1], beta.unbind(0)[::-1], strict=True):
        following = a + b * following
        steps.append(following)
    return torch.stack(steps[::-1]) if steps else alpha.new_empty(alpha.shape)


def _run_forward(alpha: Tensor, beta: Tensor, start: Tensor) -> Tensor:
    """``y[t] = alpha[t] + beta[t]·y[t-1]`` with ``y[-1] = start``; inputs of one shape."""
    steps = []
    previous = start
    for a, b in zip(alpha.unbind(0), beta.unbind(0), strict=True):
        previous = a + b * previous
        steps.append(previous)
    return torch.stack(steps) if steps else alpha.new_empty(alpha.shape)


class _Recurrence(torch.autograd.Function):
    """One linear recurrence as one autograd node. With ``y[t] = alpha[t] +
    beta[t]·y[t±1]`` and ``g`` the gradient reaching ``y``, the adjoint ``z`` runs the
    other way, ``z[t] = g[t] + beta[t∓1]·z[t∓1]``; then dalpha = z, dbeta[t] =
    z[t]·y[t±1] (the boundary value past the end) and dboundary = beta·z at the step
    next to the boundary."""

    @staticmethod
    def forward(ctx: Any, alpha: Tensor, beta: Tensor, boundary: Tensor,
                reverse: bool) -> Tensor:
        y = (_run_backward if reverse else _run_forward)(alpha, beta, boundary)
        ctx.reverse = reverse
        ctx.save_for_backward(beta, boundary, y)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, ...]:
        beta, boundary, y = ctx.saved_tensors
        if not len(y):
            return torch.zeros_like(g), torch.zeros_like(beta), torch.zeros_like(boundary), None
        zero = torch.zeros_like(boundary)  # the adjoint's own boundary, and beta past an end
        if ctx.reverse:  # y[t] feeds y[t-1] through beta[t-1]
            z = _run_forward(g, torch.cat([zero[None], beta[:-1]]), zero)
            neighbour, edge = torch.cat([y[1:], boundary[None]]), -1
        else:  # y[t] feeds y[t+1] through beta[t+1]
            z = _run_backward(g, torch.cat([beta[1:], zero[None]]), zero)
            neighbour, edge = torch.cat([boundary[None], y[:-1]]), 0
        return z, z * neighbour, beta[edge] * z[edge], None


def _recurrence(alpha: Tensor, beta: Tensor, boundary: Tensor, reverse: bool) -> Tensor:
    """The recurrence on ``alpha``'s shape (``beta`` and ``boundary`` broadcast to it:
    their gradients are summed back by autograd)."""
    alpha, beta = torch.broadcast_tensors(alpha, beta)
    boundary = boundary.expand(alpha.shape[1:])
    return _Recurrence.apply(alpha, beta, boundary, reverse)


def _backward(alpha: Tensor, beta: Tensor, end: Tensor) -> Tensor:
    """``y[t] = alpha[t] + beta[t]·y[t+1]`` with ``y[T] = end``; returns ``y[0..T-1]``."""
    return _recurrence(alpha, beta, end, reverse=True)


def _forward(alpha: Tensor, beta: Tensor, start: Tensor) -> Tensor:
    """``y[t] = alpha[t] + beta[t]·y[t-1]`` with ``y[-1] = start``."""
    return _recurrence(alpha, beta, start, reverse=False)


def _scalar(x: Any) -> Any:
    """A scalar argument as a float (0-d tensors read on the CPU)."""
    return float(x.detach().to("cpu")) if isinstance(x, Tensor) else x


def _gae(rewards, values, terminateds, truncateds=None, gamma=0.99, lambda_=0.95,
         bootstrap_values=None, last_value=None, *, next_values=None, time_major=False):
    gamma, lambda_ = _scalar(gamma), _scalar(lambda_)
    r, term, trunc, done = _episode(rewards, terminateds, truncateds, time_major)
    v = _steps(values, time_major)
    b = _bootstrap(bootstrap_values, last_value, r, time_major)

    # next_values, when given, is nv[t] at every step (the last and truncated ones too).
    nv = _next_value(v, b, trunc) if next_values is None else _steps(next_values, time_major)
    delta = r + gamma * (1 - term) * nv - v
    # A[t] = δ[t] + γ·λ·(1-done[t])·A[t+1],  A[T] = 0
    advantages = _backward(delta, gamma * lambda_ * (1 - done), _zero_row(r))
    return (advantages,)


def _vtrace(log_pi_target, log_pi_behavior, values, rewards, terminateds, truncateds=None,
            gamma=0.99, rho_bar=1.0, c_bar=1.0, bootstrap_values=None, last_value=None, *,
            next_values=None, time_major=False):
    delta, beta, finish = _vtrace_terms(
        log_pi_target, log_pi_behavior, values, rewards, terminateds, truncateds, gamma,
        rho_bar, c_bar, bootstrap_values, last_value, next_values, time_major)
    # D[t] = δ[t] + γ·c[t]·(1-done[t])·D[t+1],  D[T] = 0
    return finish(_backward(delta, beta, _zero_row(delta)))


def _vtrace_terms(log_pi_target, log_pi_behavior, values, rewards, terminateds, truncateds,
                  gamma, rho_bar, c_bar, bootstrap_values, last_value, next_values, time_major):
    """V-trace as δ, β of its scan value D = vs - values and ``finish(D) -> (vs, adv)``."""
    gamma, rho_bar, c_bar = _scalar(gamma), _scalar(rho_bar), _scalar(c_bar)
    r, term, trunc, done = _episode(rewards, terminateds, truncateds, time_major)
    v = _steps(values, time_major)
    # next_values, when given, is the bootstrap at every step: nv[t] everywhere, and
    # nvs[t] at t = T-1 and at truncations (vs[t+1] elsewhere, as without it).
    b = _bootstrap(bootstrap_values if next_values is None else next_values, last_value, r,
                   time_major)

    ratio = torch.exp(_steps(log_pi_target, time_major) - _steps(log_pi_behavior, time_major))
    rho = torch.clamp(ratio, max=rho_bar)
    c = torch.clamp(ratio, max=c_bar)
    nv = _next_value(v, b, trunc) if next_values is None else b
    delta = rho * (r + gamma * (1 - term) * nv - v)

    def finish(d: Tensor) -> tuple[Tensor, Tensor]:
        vs = v + d
        nvs = _next_value(vs, b, trunc)
        return vs, rho * (r + gamma * (1 - term) * nvs - v)

    return delta, gamma * c * (1 - done), finish


def _retrace(action_probs_target, action_probs_behavior, q_values, next_q_values_all, actions,
             rewards, terminateds, truncateds, gamma, lambda_=1.0, c_bar=1.0, rho_bar=1.0, *,
             time_major=False):
    gamma, lambda_ = _scalar(gamma), _scalar(lambda_)
    c_bar, rho_bar = _scalar(c_bar), _scalar(rho_bar)
    r, term, trunc, done = _episode(rewards, terminateds, truncateds, time_major)
    q = _steps(q_values, time_major)
    pi = _steps(action_probs_target, time_major)         # [T, N, A]
    next_q = _steps(next_q_values_all, time_major)       # [T, N, A]
    mu = _steps(action_probs_behavior, time_major)
    a = actions.detach().to("cpu")
    a = (a if time_major else a.transpose(0, 1)).to(torch.int64)

    # π_a[t] = π[t, actions[t]]; an action outside [0, A) has no probability: NaN.
    num_actions = pi.shape[-1]
    valid = (a >= 0) & (a < num_actions)
    picked = torch.gather(pi, -1, a.clamp(0, max(num_actions - 1, 0)).unsqueeze(-1)).squeeze(-1)
    pi_a = torch.where(valid, picked, torch.full_like(picked, float("nan")))

    ratio = pi_a / mu
    c = lambda_ * torch.clamp(ratio, max=c_bar)
    rho = torch.clamp(ratio, max=rho_bar)
    c_next = torch.cat([c[1:], torch.zeros_like(c[:1])])     # c[t+1], c[T] = 0
    expected_q = (pi * next_q).sum(-1)
    delta = r + gamma * (1 - term) * expected_q - q
    # D[t] = δ[t] + γ·c[t+1]·(1-done[t])·D[t+1],  D[T] = 0
    d = _backward(delta, gamma * c_next * (1 - done), _zero_row(r))
    q_ret = q + d
    q_ret_next = torch.cat([q_ret[1:], torch.zeros_like(q_ret[:1])])   # q_ret[T] = 0
    advantages = rho * (r + gamma * (1 - term) * q_ret_next - q)
    return q_ret, advantages


def _lambda_returns(rewards, next_values, terminateds, truncateds=None, gamma=0.99,
                    lambda_=0.95, bootstrap_values=None, *, time_major=False):
    gamma, lambda_ = _scalar(gamma), _scalar(lambda_)
    r, term, trunc, done = _episode(rewards, terminateds, truncateds, time_major)
    nv = _steps(next_values, time_major)
    b = _bootstrap(bootstrap_values, None, r, time_major)

    # G[t] = r[t] + γ·(1-done[t])·((1-λ)·nv[t] + λ·G[t+1]) + γ·trunc[t]·b[t],  G[T] = b[T-1]
    alpha = r + gamma * (1 - done) * (1 - lambda_) * nv + gamma * trunc * b
    beta = gamma * (1 - done) * lambda_
    end = b[-1] if r.shape[0] else _zero_row(r)
    return (_backward(alpha, beta, end),)


def _discounted_returns(rewards, terminateds, truncateds=None, gamma=0.99,
                        bootstrap_values=None, *, time_major=False):
    gamma = _scalar(gamma)
    r, term, trunc, done = _episode(rewards, terminateds, truncateds, time_major)
    b = _bootstrap(bootstrap_values, None, r, time_major)

    # G[t] = r[t] + γ·(1-done[t])·G[t+1] + γ·trunc[t]·b[t],  G[T] = b[T-1]
    end = b[-1] if r.shape[0] else _zero_row(r)
    return (_backward(r + gamma * trunc * b, gamma * (1 - done), end),)


def _eligibility_traces(gradients, dones, gamma, lambda_, seed_values=None, *,
                        time_major=False):
    gamma, lambda_ = _scalar(gamma), _scalar(lambda_)
    g = _steps(gradients, time_major)
    done = (_steps(dones, time_major) != 0).to(_F64)  # non-zero means true
    done_prev = torch.cat([torch.zeros_like(done[:1]), done[:-1]])    # done[t-1], done[-1] = 0
    # z[t] = g[t] + γ·λ·(1-done[t-1])·z[t-1],  z[-1] = seed
    return (_forward(g, gamma * lambda_ * (1 - done_prev), _per_env(seed_values, g.shape[1])),)


def _episodic_prefix_sum(inputs, dones, seed_values=None, boundary="ends_at", *,
                         time_major=False):
    x = _steps(inputs, time_major)
    done = (_steps(dones, time_major) != 0).to(_F64)  # non-zero means true
    if boundary == "ends_at":
        # C[t] = x[t] + (1-done[t-1])·C[t-1],  done[-1] = 0
        keep = 1 - torch.cat([torch.zeros_like(done[:1]), done[:-1]])
    else:
        # C[t] = x[t] + (1-done[t])·C[t-1]
        keep = 1 - done
    return (_forward(x, keep, _per_env(seed_values, x.shape[1])),)


def _adjoint_scan_forward(grads, beta, *, time_major=False):
    g, b = _steps(grads, time_major), _steps(beta, time_major)
    # z[t] = g[t] + β[t-1]·z[t-1],  β[-1] = 0
    shifted = torch.cat([torch.zeros_like(b[:1]), b[:-1]])
    return (_forward(g, shifted, _zero_row(g)),)


def _adjoint_scan_backward(grads, beta, *, time_major=False):
    g, b = _steps(grads, time_major), _steps(beta, time_major)
    # z[t] = g[t] + β[t+1]·z[t+1],  β[T] = 0
    shifted = torch.cat([b[1:], torch.zeros_like(b[:1])])
    return (_backward(g, shifted, _zero_row(g)),)


# Grad algorithms (rltriton_tune.algorithms.GRAD_ALGORITHMS): the kernel outputs of each,
# autograd through the estimator's reference. The estimators are affine in the inputs
# differentiated here, so their values do not matter: zeros. GAE's next_values is passed
# on (only its presence changes the gradients); a boundary input given asks for its
# gradient as the last output.


def _grad_outputs(algorithm: str, grads: Tensor, wrt: tuple[str, ...], time_major: bool,
                  **kwargs: Any) -> tuple[Tensor, ...]:
    """Gradients of ``sum(grads·algorithm(...))`` for the inputs ``wrt``, time first
    (``[N]`` for a per-env input); the boundary input among ``kwargs`` that is given
    (not None) is added to ``wrt``."""
    spec = ALGORITHMS[f"{algorithm}_grad"]
    wrt = wrt + tuple(name for name in spec.boundary_grads if kwargs.get(name) is not None)
    n = grads.shape[1] if time_major else grads.shape[0]
    zeros = {name: torch.zeros(n if name in spec.per_env else grads.shape, dtype=_F64)
             for name in wrt}
    found = reference_vjp(algorithm, (grads,), wrt, **{**kwargs, **zeros},
                          time_major=time_major)
    return tuple(found[name] if found[name].dim() == 1 else _steps(found[name], time_major)
                 for name in wrt)


def _gae_grad(grads, terminateds, truncateds=None, next_values=None, bootstrap_values=None,
              last_value=None, gamma=0.99, lambda_=0.95, *, time_major=False):
    if next_values is not None:  # values then only enter as -values: next_values's instead
        return _grad_outputs("gae", grads, ("rewards", "next_values"), time_major,
                             terminateds=terminateds, truncateds=truncateds, values=torch.zeros(
                                 grads.shape, dtype=_F64), gamma=gamma, lambda_=lambda_)
    return _grad_outputs("gae", grads, ("rewards", "values"), time_major,
                         terminateds=terminateds, truncateds=truncateds,
                         bootstrap_values=bootstrap_values, last_value=last_value,
                         gamma=gamma, lambda_=lambda_)


def _vtrace_grad(grads, grad_advantages, vs, log_pi_target, log_pi_behavior, values, rewards,
                 terminateds, truncateds=None, bootstrap_values=None, last_value=None,
                 next_values=None, gamma=0.99, rho_bar=1.0, c_bar=1.0, *, time_major=False):
    """The pull-back of (grads, grad_advantages) through V-trace, taking its scan value as
    the kernels do, D = vs - values from the forward output given: by autograd through the
    terms of :func:`_vtrace` (``finish`` at that D, and δ + β·D[t+1] weighted by the adjoint
    z of the gradient reaching D). For vs computed from the same inputs it is the gradient
    of V-trace itself."""
    given = {"log_pi_target": log_pi_target, "log_pi_behavior": log_pi_behavior,
             "values": values, "rewards": rewards, "bootstrap_values": bootstrap_values,
             "last_value": last_value, "next_values": next_values}
    boundary = tuple(name for name in ("bootstrap_values", "last_value", "next_values")
                     if given[name] is not None)
    leaves = {name: given[name].detach().to("cpu", _F64).requires_grad_()
              for name in ("log_pi_target", "values", "rewards", *boundary)}
    args = {**given, **leaves}
    d_given = _steps(vs, time_major) - _steps(values.detach(), time_major)
    with torch.enable_grad():
        delta, beta, finish = _vtrace_terms(
            args["log_pi_target"], args["log_pi_behavior"], args["values"], args["rewards"],
            terminateds, truncateds, gamma, rho_bar, c_bar, args["bootstrap_values"],
            args["last_value"], args["next_values"], time_major)
        d = d_given.clone().requires_grad_()
        out_vs, out_adv = finish(d)
        pulled = ((_steps(grads, time_major) * out_vs).sum()
                  + (_steps(grad_advantages, time_major) * out_adv).sum())
        (g_d,) = torch.autograd.grad(pulled, d, retain_graph=True)
        # z[t] = g_d[t] + β[t-1]·z[t-1],  β[-1] = 0
        b = beta.detach()
        z = _forward(g_d, torch.cat([torch.zeros_like(b[:1]), b[:-1]]), _zero_row(b))
        d_next = torch.cat([d_given[1:], torch.zeros_like(d_given[:1])])    # D[t+1], D[T] = 0
        total = pulled + (z * (delta + beta * d_next)).sum()
        found = torch.autograd.grad(total, tuple(leaves.values()), allow_unused=True)
    found = [torch.zeros_like(leaf) if g is None else g
             for leaf, g in zip(leaves.values(), found, strict=True)]
    return tuple(g if g.dim() == 1 else _steps(g, time_major) for g in found)


def _lambda_returns_grad(grads, terminateds, truncateds=None, bootstrap_values=None, gamma=0.99,
                         lambda_=0.95, *, time_major=False):
    return _grad_outputs("lambda_returns", grads, ("rewards", "next_values"), time_major,
                         terminateds=terminateds, truncateds=truncateds,
                         bootstrap_values=bootstrap_values, gamma=gamma, lambda_=lambda_)


def _discounted_returns_grad(grads, terminateds, truncateds=None, bootstrap_values=None,
                             gamma=0.99, *, time_major=False):
    return _grad_outputs("discounted_returns", grads, ("rewards",), time_major,
                         terminateds=terminateds, truncateds=truncateds,
                         bootstrap_values=bootstrap_values, gamma=gamma)


def _eligibility_traces_grad(grads, dones, seed_values=None, gamma=0.99, lambda_=0.95, *,
                             time_major=False):
    return _grad_outputs("eligibility_traces", grads, ("gradients",), time_major, dones=dones,
                         seed_values=seed_values, gamma=gamma, lambda_=lambda_)


def _episodic_prefix_sum_grad(grads, dones, seed_values=None, boundary="ends_at", *,
                              time_major=False):
    return _grad_outputs("episodic_prefix_sum", grads, ("inputs",), time_major, dones=dones,
                         seed_values=seed_values, boundary=boundary)


_IMPLEMENTATIONS: dict[str, Callable[..., tuple[Tensor, ...]]] = {
    "gae": _gae,
    "vtrace": _vtrace,
    "retrace": _retrace,
    "lambda_returns": _lambda_returns,
    "discounted_returns": _discounted_returns,
    "eligibility_traces": _eligibility_traces,
    "episodic_prefix_sum": _episodic_prefix_sum,
    "adjoint_scan_forward": _adjoint_scan_forward,
    "adjoint_scan_backward": _adjoint_scan_backward,
    "gae_grad": _gae_grad,
    "vtrace_grad": _vtrace_grad,
    "lambda_returns_grad": _lambda_returns_grad,
    "discounted_returns_grad": _discounted_returns_grad,
    "eligibility_traces_grad": _eligibility_traces_grad,
    "episodic_prefix_sum_grad": _episodic_prefix_sum_grad,
}


def reference(algorithm: str, **kwargs: Any) -> Tensor | tuple[Tensor, Tensor]:
    """Outputs of ``algorithm`` for the public function's keyword arguments.

    Returns float64 CPU tensors in the caller's layout: one tensor, or a pair for
    ``vtrace`` and ``retrace``, exactly like the public functions.
    """
    time_major = bool(kwargs.get("time_major", False))
    with torch.no_grad():
        outputs = _IMPLEMENTATIONS[algorithm](**kwargs)
    if not time_major:
        outputs = tuple(y.transpose(0, 1).contiguous() if y.dim() > 1 else y for y in outputs)
    return outputs[0] if len(outputs) == 1 else outputs


def reference_vjp(algorithm: str, grad_outputs: Sequence[Tensor], wrt: Sequence[str],
                  **kwargs: Any) -> dict[str, Tensor]:
    """Gradients of ``sum(grad_outputs · outputs)`` of ``algorithm`` with respect to the
    inputs ``wrt``, by autograd through the float64 reference.

    ``kwargs`` are the public function's; ``grad_outputs`` are in the caller's layout, one
    per output. Returns float64 CPU tensors shaped like the inputs (zeros for an input the
    outputs do not depend on).
    """
    time_major = bool(kwargs.get("time_major", False))
    leaves = {name: kwargs[name].detach().to("cpu", _F64).requires_grad_() for name in wrt}
    with torch.enable_grad():
        outputs = _IMPLEMENTATIONS[algorithm](**{**kwargs, **leaves})
        grads = [_steps(g, time_major) for g in grad_outputs]
        found = torch.autograd.grad(outputs, tuple(leaves.values()), grads, allow_unused=True)
    return {name: torch.zeros_like(leaf) if g is None else g
            for (name, leaf), g in zip(leaves.items(), found, strict=True)}
