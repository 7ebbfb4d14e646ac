"""Triton kernels: one scan core per strategy, one fused coefficient builder per estimator.

Importing this package never needs Triton; :func:`strategies` imports the
Triton modules lazily and returns ``{}`` when Triton is missing.

* ``builders``: per-estimator ``coeffs``/``finish`` jit functions (alpha, beta,
  boundary carry, second output), shared by every core.
* ``scan``: the combine operator and carry helpers.
* ``flat``, ``tiled``, ``split``, ``sequential``, ``lookback``: one core + its Strategy each;
  ``columns``: the look-back core's configs for time-major inputs.
* ``launch``: host-side argument packing and the strategy base class.
"""

from __future__ import annotations

from functools import lru_cache

from rltriton_tune.kernels.abi import KERNEL_ABI
from rltriton_tune.strategy import Strategy

__all__ = ["KERNEL_ABI", "STRATEGY_NAMES", "strategies", "triton_available"]

#: Names of the Triton strategies, in the order they are listed everywhere.
STRATEGY_NAMES = ("flat", "tiled", "split", "sequential", "lookback", "columns")


@lru_cache(maxsize=1)
def triton_available() -> bool:
    """Whether Triton can be imported in this process."""
    try:
        import triton  # noqa: F401
        import triton.language  # noqa: F401
    except Exception:  # missing or broken install: the torch strategies serve instead
        return False
    return True


@lru_cache(maxsize=1)
def _load() -> dict[str, Strategy]:
    from rltriton_tune.kernels.columns import ColumnsStrategy
    from rltriton_tune.kernels.flat import FlatStrategy
    from rltriton_tune.kernels.lookback import LookbackStrategy
    from rltriton_tune.kernels.sequential import SequentialStrategy
    from rltriton_tune.kernels.split import SplitStrategy
    from rltriton_tune.kernels.tiled import TiledStrategy

    found = [FlatStrategy(), TiledStrategy(), SplitStrategy(), SequentialStrategy(),
             LookbackStrategy(), ColumnsStrategy()]
    return {s.name: s for s in found}


def strategies() -> dict[str, Strategy]:
    """The Triton strategies by name (``{}`` when Triton is not installed)."""
    if not triton_available():
        return {}
    return dict(_load())
