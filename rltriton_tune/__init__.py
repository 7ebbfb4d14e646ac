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
from rltriton_tune.state import STATE as _STATE

__version__ = "0.1.0"


def _install_online_tuner() -> None:
    """Plug online tuning in where ``RLTRITON_TUNE_ONLINE`` is on and no tuner is: at import,
    and at every ``dispatch.reset()``, which reads the environment again."""
    if _STATE.settings_error is None and _STATE.settings.online and _STATE.online_tuner is None:
        # Online tuning is tooling: it plugs itself into the runtime (see tune/online.py).
        from rltriton_tune.tune import online as _online

        _online.install()


_STATE.online_installer = _install_online_tuner
_install_online_tuner()

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
