"""Which strategies exist, and which of them can serve a device in this process.

Triton strategies come from ``kernels`` only when Triton imports; the torch
strategies from ``fallback`` always exist. Kept apart from the decision logic so
tests can substitute strategies and devices.
"""

from __future__ import annotations

from rltriton_tune.kernels import STRATEGY_NAMES
from rltriton_tune.strategy import Strategy

#: Names of the Triton scan strategies (known even when Triton is missing, so
#: ``force("tiled")`` on a machine without Triton gives a precise error).
TRITON_STRATEGIES = STRATEGY_NAMES

#: Oldest CUDA compute capability the Triton backend compiles for.
MIN_CAPABILITY = (7, 0)


def triton_ok() -> bool:
    """Whether the Triton kernels can be imported in this process."""
    try:
        from rltriton_tune.kernels import triton_available
    except Exception:  # noqa: BLE001 - a broken kernels import means "no Triton"
        return False
    return bool(triton_available())


def triton_strategies() -> dict[str, Strategy]:
    """The Triton strategies by name (empty without Triton)."""
    if not triton_ok():
        return {}
    from rltriton_tune.kernels import strategies

    return dict(strategies())


def torch_strategies() -> dict[str, Strategy]:
    """The torch strategies by name (available on every device)."""
    from rltriton_tune.fallback import STRATEGIES

    return dict(STRATEGIES)


def all_strategies() -> dict[str, Strategy]:
    """Every strategy this process can construct, by name."""
    return {**triton_strategies(), **torch_strategies()}


def known_names() -> tuple[str, ...]:
    """Every strategy name ``force`` accepts (Triton names even without Triton)."""
    return tuple(dict.fromkeys((*TRITON_STRATEGIES, *torch_strategies())))
