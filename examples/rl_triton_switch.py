"""Code written for rl-triton 0.1.3, switched to rltriton-tune by changing one import.

Everything below the import is rl-triton 0.1.3 usage as its documentation shows
it: positional arguments, ``last_value`` for the common case, ``bootstrap_values``
with truncations, ``(vs, advantages)`` from V-trace, and ``AssertionError`` when
both bootstrap arguments are given. rl-triton needed CUDA; this runs anywhere
(``python examples/rl_triton_switch.py`` on a CPU uses the torch fallback).
"""

from __future__ import annotations

import torch

# Before: from rl_triton import compute_gae, compute_lambda_returns, compute_vtrace
from rltriton_tune import compute_gae, compute_lambda_returns, compute_vtrace

device = "cuda" if torch.cuda.is_available() else "cpu"
num_envs, seq_len = 16, 128
gen = torch.Generator().manual_seed(0)


def randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=gen).to(device)


def flags(rate: float) -> torch.Tensor:
    return (torch.rand(num_envs, seq_len, generator=gen) < rate).float().to(device)


rewards, values = randn(num_envs, seq_len), randn(num_envs, seq_len)
terminateds, truncateds = flags(0.02), flags(0.01)
truncateds = truncateds * (1 - terminateds)

# The common case: no interior truncations, V(s_T) per environment.
last_value = randn(num_envs)
advantages = compute_gae(rewards, values, terminateds, None, 0.99, 0.95, None, last_value)

# Interior truncations: the true continuation value at truncated steps and at T-1.
bootstrap_values = torch.where(truncateds.bool(), randn(num_envs, seq_len),
                               torch.zeros_like(rewards))
bootstrap_values[:, -1] = last_value
advantages_trunc = compute_gae(rewards, values, terminateds, truncateds,
                               bootstrap_values=bootstrap_values)

# V-trace returns (vs, advantages), like rl-triton.
log_pi_target, log_pi_behavior = 0.1 * randn(num_envs, seq_len), 0.1 * randn(num_envs, seq_len)
vs, pg_advantages = compute_vtrace(log_pi_target, log_pi_behavior, values, rewards,
                                   terminateds, gamma=0.99, last_value=last_value)

# TD(lambda) targets from stored next-state values.
next_values = torch.cat([values[:, 1:], last_value[:, None]], dim=1)
targets = compute_lambda_returns(rewards, next_values, terminateds, gamma=0.99, lambda_=0.95)

# rl-triton asserted that last_value and bootstrap_values are not both given; the
# same error here is an AssertionError and a ValueError.
try:
    compute_gae(rewards, values, terminateds, bootstrap_values=bootstrap_values,
                last_value=last_value)
except AssertionError as error:
    print(f"caught as AssertionError: {error}")

for name, out in [("advantages", advantages), ("advantages (truncations)", advantages_trunc),
                  ("vs", vs), ("pg advantages", pg_advantages), ("td(lambda)", targets)]:
    assert out.shape == (num_envs, seq_len) and torch.isfinite(out).all(), name
    print(f"{name:26s} mean {out.mean().item():+.4f}")
