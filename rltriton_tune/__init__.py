"""rltriton-tune: autotuned Triton kernels for RL credit-assignment estimators."""

from rltriton_tune.dispatch import explain, force
from rltriton_tune.estimators import (
    compute_discounted_returns,
    compute_eligibility_traces,
    compute_episodic_prefix_sum,
    compute_gae,
    compute_lambda_returns,
    compute_retrace,
    compute_vtrace,
)

__version__ = "0.1.0"

__all__ = [
    "compute_gae",
    "compute_vtrace",
    "compute_retrace",
    "compute_lambda_returns",
    "compute_discounted_returns",
    "compute_eligibility_traces",
    "compute_episodic_prefix_sum",
    "force",
    "explain",
]
