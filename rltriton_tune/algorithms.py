"""What each estimator is, as data: its inputs, outputs, scalars and scan direction.

Every layer (validation, kernels, fallback, tuner, CLI) reads this table instead
of hard-coding per-algorithm lists, so adding an estimator starts here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class AlgorithmSpec:
    """Static description of one estimator.

    ``tensors`` lists every tensor argument in canonical order; ``optional`` the
    ones that may be ``None`` (their presence becomes a flag of the problem key);
    ``per_action`` the ``[N, T, A]`` ones; ``per_env`` the ``[N]`` ones;
    ``neighbour_step`` the ones the recurrence also reads at the neighbouring step
    (t+1 backward, t-1 forward: GAE's ``values[t+1]``), which costs the kernels
    unaligned loads and moves their best look-back chunk length.
    """

    name: str
    direction: Literal["backward", "forward"]
    tensors: tuple[str, ...]
    optional: tuple[str, ...]
    outputs: tuple[str, ...]
    scalars: tuple[str, ...]
    per_action: tuple[str, ...] = ()
    per_env: tuple[str, ...] = ()
    integer: tuple[str, ...] = ()
    flags_inputs: tuple[str, ...] = ()
    neighbour_step: tuple[str, ...] = ()
    #: Flags of options that are no input (the prefix sum's ``boundary="starts_at"``).
    options: tuple[str, ...] = ()
    #: Grad algorithms: boundary inputs of the estimator given only to ask for their
    #: gradient (their data is never read), written as one more output after ``outputs``
    #: (``[N]`` for a per-env input). At most one is given.
    boundary_grads: tuple[str, ...] = ()
    #: Grad algorithms whose kernel also reads the boundary input's data (V-trace's: the
    #: gradient of its importance ratios depends on the bootstrap values): the boundary
    #: input is always passed where the call has one, and its gradient always written.
    reads_boundary: bool = False
    #: Grad algorithms: (input, source) pairs whose input's gradient, where the kernel does
    #: not write it, is the negative of the source's (GAE's values with next_values given:
    #: -z; V-trace's log_pi_behavior: minus log_pi_target's).
    negated_grads: tuple[tuple[str, str], ...] = ()

    @property
    def first_float(self) -> str:
        """Name of the tensor whose dtype the outputs take."""
        return "rewards" if "rewards" in self.tensors else self.tensors[0]

    @property
    def keyed_inputs(self) -> tuple[str, ...]:
        """Inputs whose presence a problem key's flags record: the optional ones, and
        flag inputs with a flag name (Retrace's required truncations). λ-returns'
        required ``next_values`` is not one: only GAE's and V-trace's optional one is."""
        return tuple(name for name in self.tensors if name in FLAG_NAMES
                     and (name in self.optional or name in self.flags_inputs))

    @property
    def possible_flags(self) -> frozenset[str]:
        """Flags a problem key of this estimator may carry."""
        return frozenset({FLAG_NAMES[name] for name in self.keyed_inputs} | set(self.options))

    @property
    def required_flags(self) -> frozenset[str]:
        """Flags of inputs this estimator always takes (Retrace's truncations)."""
        return frozenset(FLAG_NAMES[name] for name in self.keyed_inputs
                         if name not in self.optional)


#: Flag for the prefix sum's ``boundary="starts_at"`` option (absent means "ends_at").
STARTS_AT = "starts_at"

ALGORITHMS: dict[str, AlgorithmSpec] = {
    spec.name: spec
    for spec in (
        AlgorithmSpec(
            name="gae",
            direction="backward",
            tensors=("rewards", "values", "terminateds", "truncateds",
                     "bootstrap_values", "last_value", "next_values"),
            optional=("truncateds", "bootstrap_values", "last_value", "next_values"),
            outputs=("advantages",),
            scalars=("gamma", "lambda_"),
            per_env=("last_value",),
            flags_inputs=("terminateds", "truncateds"),
            neighbour_step=("values",),
        ),
        AlgorithmSpec(
            name="vtrace",
            direction="backward",
            tensors=("log_pi_target", "log_pi_behavior", "values", "rewards", "terminateds",
                     "truncateds", "bootstrap_values", "last_value", "next_values"),
            optional=("truncateds", "bootstrap_values", "last_value", "next_values"),
            outputs=("vs", "advantages"),
            scalars=("gamma", "rho_bar", "c_bar"),
            per_env=("last_value",),
            flags_inputs=("terminateds", "truncateds"),
            neighbour_step=("values",),
        ),
        AlgorithmSpec(
            name="retrace",
            direction="backward",
            tensors=("action_probs_target", "action_probs_behavior", "q_values",
                     "next_q_values_all", "actions", "rewards", "terminateds", "truncateds"),
            optional=(),
            outputs=("q_ret", "advantages"),
            scalars=("gamma", "lambda_", "c_bar", "rho_bar"),
            per_action=("action_probs_target", "next_q_values_all"),
            integer=("actions",),
            flags_inputs=("terminateds", "truncateds"),
            neighbour_step=("action_probs_target", "action_probs_behavior", "actions", "q_values"),
        ),
        AlgorithmSpec(
            name="lambda_returns",
            direction="backward",
            tensors=("rewards", "next_values", "terminateds", "truncateds", "bootstrap_values"),
            optional=("truncateds", "bootstrap_values"),
            outputs=("returns",),
            scalars=("gamma", "lambda_"),
            flags_inputs=("terminateds", "truncateds"),
        ),
        AlgorithmSpec(
            name="discounted_returns",
            direction="backward",
            tensors=("rewards", "terminateds", "truncateds", "bootstrap_values"),
            optional=("truncateds", "bootstrap_values"),
            outputs=("returns",),
            scalars=("gamma",),
            flags_inputs=("terminateds", "truncateds"),
        ),
        AlgorithmSpec(
            name="eligibility_traces",
            direction="forward",
            tensors=("gradients", "dones", "seed_values"),
            optional=("seed_values",),
            outputs=("traces",),
            scalars=("gamma", "lambda_"),
            per_env=("seed_values",),
            flags_inputs=("dones",),
            neighbour_step=("dones",),
        ),
        AlgorithmSpec(
            name="episodic_prefix_sum",
            direction="forward",
            tensors=("inputs", "dones", "seed_values"),
            optional=("seed_values",),
            outputs=("sums",),
            scalars=(),
            per_env=("seed_values",),
            flags_inputs=("dones",),
            neighbour_step=("dones",),
            options=(STARTS_AT,),
        ),
    )
}

#: Short flag name used in problem keys for each optional input / option.
FLAG_NAMES: dict[str, str] = {
    "truncateds": "trunc",
    "bootstrap_values": "bootstrap",
    "last_value": "last_value",
    "seed_values": "seed",
    "next_values": "next",
}


# --------------------------------------------------------------------------- adjoint scans
# The two generic first-order scans that the estimators' backward passes run
# (rltriton_tune.autograd): the adjoint of y[t] = α[t] + β[t]·y[t±1] with respect to α is
# the same recurrence in the opposite direction with β read one step over,
#
#     adjoint_scan_forward:   z[t] = g[t] + β[t-1]·z[t-1],   β[-1] = 0   (adjoint of a
#                             backward-in-time estimator: GAE, V-trace, Retrace, returns)
#     adjoint_scan_backward:  z[t] = g[t] + β[t+1]·z[t+1],   β[T] = 0    (adjoint of a
#                             forward-in-time estimator: eligibility traces, prefix sums)
#
# ``beta`` is the estimator's own (unshifted) β, so no shifted copy is made. They are
# problems of their own: the dispatcher keys, memoises and looks them up (and the tuner
# can tune them) like the seven estimators. They have no public function.
ADJOINT_SCANS: dict[str, str] = {"backward": "adjoint_scan_forward",
                                 "forward": "adjoint_scan_backward"}
"""Adjoint-scan algorithm of each estimator scan direction."""

ALGORITHMS.update({
    spec.name: spec
    for spec in (
        AlgorithmSpec(
            name="adjoint_scan_forward",
            direction="forward",
            tensors=("grads", "beta"),
            optional=(),
            outputs=("adjoints",),
            scalars=(),
            neighbour_step=("beta",),
        ),
        AlgorithmSpec(
            name="adjoint_scan_backward",
            direction="backward",
            tensors=("grads", "beta"),
            optional=(),
            outputs=("adjoints",),
            scalars=(),
            neighbour_step=("beta",),
        ),
    )
})


# --------------------------------------------------------------------------- grad algorithms
# The whole backward pass of a single-output estimator as one scan: the adjoint recurrence
# with β computed from the flags (β depends on flags and scalars only, for these five) and
# a finish that writes the input gradients. For a backward-in-time estimator
# y[t] = α[t] + β[t]·y[t+1] the adjoint is z[t] = g[t] + β[t-1]·z[t-1] (β[-1] = 0), for a
# forward-in-time one z[t] = g[t] + β[t+1]·z[t+1] (β[T] = 0); dL/dα = z. The outputs:
#
#     gae_grad:                  z,  -z[t] + γ·(1-done[t-1])·z[t-1]         (rewards, values)
#                                z,  γ·(1-term[t])·z[t]   with next_values  (rewards, next_values)
#     lambda_returns_grad:       z,  γ·(1-λ)·(1-done[t])·z[t]               (rewards, next_values)
#     discounted_returns_grad:   z                                          (rewards)
#     eligibility_traces_grad:   z                                          (gradients)
#     episodic_prefix_sum_grad:  z                                          (inputs)
#
# with β of the estimator: γλ(1-done[t]) (GAE, λ-returns), γ(1-done[t]) (returns),
# γλ(1-done[t-1]) (traces), 1-done[t-1] or 1-done[t] with starts_at (prefix sums). GAE's
# grad call takes ``next_values`` only for its presence (the "next" flag): nv then never
# reads values, whose gradient is -z, so the second output is next_values's instead.
# A boundary input given to a grad call (``boundary_grads``, data never read) asks for its
# gradient as a third output, pointwise in z and the flags:
#
#     bootstrap_values (GAE):            γ(1-term[t])·z[t] where nv[t] = b[t] (t = T-1 or
#                                        truncated), else 0
#     last_value (GAE):                  γ(1-term[T-1])·z[T-1]                        [N]
#     bootstrap_values (returns):        γ·trunc[t]·z[t], plus β[T-1]·z[T-1] at T-1 (the
#                                        folded G[T] = b[T-1])
#     seed_values (traces, prefix sums): β[0]·z[0]: γλ, or 1 (1-done[0] with starts_at)  [N]
#
# Like the adjoint scans these are problems of their own, with no public function.
#
# V-trace's grad algorithm reads both output gradients, its forward output vs (for the scan
# value D = vs - values) and its inputs, and writes the gradients of log_pi_target (that of
# log_pi_behavior is its negative), values, rewards and of the boundary input given. With
# ratio = exp(lpt - lpb), ρ = min(ρ̄, ratio), c = min(c̄, ratio), δ[t] = ρ[t]·E[t],
# E[t] = r + γ(1-term)·nv[t] - v and adv[t] = ρ[t]·A[t], A[t] = r + γ(1-term)·nvs[t] - v,
# nvs[t] = b[t] where cut (t = T-1 or truncated) else vs[t+1]:
#
#     α[t] = g_vs[t] + (1-cut[t-1])·γ(1-term[t-1])·ρ[t-1]·g_adv[t-1]   (through nvs[t-1])
#     β[t] = γ·c[t-1]·(1-done[t-1]),   z[t] = α[t] + β[t]·z[t-1]       (z = dL/dδ)
#     w[t] = ρ[t]·(g_adv[t] + z[t])                                     grad_rewards
#     grad_log_pi_target = ratio·([ratio ≤ ρ̄]·(g_adv·A + z·E) + [ratio ≤ c̄]·z·γ(1-done)·D[t+1])
#     grad_values[t] = g_vs[t] - w[t] + (1-cut[t-1])·γ(1-term[t-1])·ρ[t-1]·(g_adv[t-1] + z[t-1])
#                      (without z[t-1] when next_values is given: nv never reads values)
#     bootstrap_values: cut[t]·γ(1-term[t])·w[t];  last_value: that at T-1;
#     next_values: γ(1-term[t])·ρ[t]·(z[t] + cut[t]·g_adv[t])
#
# Retrace has none: its per-action inputs would need [N, T, A] gradient outputs; its
# backward pass takes the three phases of rltriton_tune.autograd.
GRAD_ALGORITHMS: dict[str, str] = {
    name: f"{name}_grad"
    for name in ("gae", "vtrace", "lambda_returns", "discounted_returns",
                 "eligibility_traces", "episodic_prefix_sum")
}
"""The grad algorithm of each estimator that has one (Retrace has none)."""

ALGORITHMS.update({
    spec.name: spec
    for spec in (
        AlgorithmSpec(
            name="gae_grad",
            direction="forward",
            tensors=("grads", "terminateds", "truncateds", "next_values", "bootstrap_values",
                     "last_value"),
            optional=("truncateds", "next_values", "bootstrap_values", "last_value"),
            outputs=("grad_rewards", "grad_values"),
            scalars=("gamma", "lambda_"),
            per_env=("last_value",),
            boundary_grads=("bootstrap_values", "last_value"),
            negated_grads=(("values", "rewards"),),
            flags_inputs=("terminateds", "truncateds"),
            neighbour_step=("terminateds", "truncateds"),
        ),
        AlgorithmSpec(
            name="vtrace_grad",
            direction="forward",
            tensors=("grads", "grad_advantages", "vs", "log_pi_target", "log_pi_behavior",
                     "values", "rewards", "terminateds", "truncateds", "bootstrap_values",
                     "last_value", "next_values"),
            optional=("truncateds", "bootstrap_values", "last_value", "next_values"),
            outputs=("grad_log_pi_target", "grad_values", "grad_rewards"),
            scalars=("gamma", "rho_bar", "c_bar"),
            per_env=("last_value",),
            boundary_grads=("bootstrap_values", "last_value", "next_values"),
            reads_boundary=True,
            negated_grads=(("log_pi_behavior", "log_pi_target"),),
            flags_inputs=("terminateds", "truncateds"),
            neighbour_step=("grad_advantages", "vs", "log_pi_target", "log_pi_behavior",
                            "values", "terminateds", "truncateds"),
        ),
        AlgorithmSpec(
            name="lambda_returns_grad",
            direction="forward",
            tensors=("grads", "terminateds", "truncateds", "bootstrap_values"),
            optional=("truncateds", "bootstrap_values"),
            boundary_grads=("bootstrap_values",),
            outputs=("grad_rewards", "grad_next_values"),
            scalars=("gamma", "lambda_"),
            flags_inputs=("terminateds", "truncateds"),
            neighbour_step=("terminateds", "truncateds"),
        ),
        AlgorithmSpec(
            name="discounted_returns_grad",
            direction="forward",
            tensors=("grads", "terminateds", "truncateds", "bootstrap_values"),
            optional=("truncateds", "bootstrap_values"),
            boundary_grads=("bootstrap_values",),
            outputs=("grad_rewards",),
            scalars=("gamma",),
            flags_inputs=("terminateds", "truncateds"),
            neighbour_step=("terminateds", "truncateds"),
        ),
        AlgorithmSpec(
            name="eligibility_traces_grad",
            direction="backward",
            tensors=("grads", "dones", "seed_values"),
            optional=("seed_values",),
            per_env=("seed_values",),
            boundary_grads=("seed_values",),
            outputs=("grad_gradients",),
            scalars=("gamma", "lambda_"),
            flags_inputs=("dones",),
        ),
        AlgorithmSpec(
            name="episodic_prefix_sum_grad",
            direction="backward",
            tensors=("grads", "dones", "seed_values"),
            optional=("seed_values",),
            per_env=("seed_values",),
            boundary_grads=("seed_values",),
            outputs=("grad_inputs",),
            scalars=(),
            flags_inputs=("dones",),
            neighbour_step=("dones",),
            options=(STARTS_AT,),
        ),
    )
})

#: The seven public estimators (every algorithm but the adjoint scans and the grad
#: algorithms), in table order.
ESTIMATOR_NAMES: tuple[str, ...] = tuple(
    name for name in ALGORITHMS
    if name not in ADJOINT_SCANS.values() and name not in GRAD_ALGORITHMS.values())
