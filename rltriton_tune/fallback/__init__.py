"""Torch implementations of the seven estimators: CPU, unsupported devices, baselines.

``STRATEGIES["torch"]`` is the :class:`~rltriton_tune.strategy.Strategy` that
dispatch and the tuner use; ``compiled_launcher`` gives the torch.compile
baselines (associative scan, doubling scan) for benchmarks.
"""

from __future__ import annotations

from rltriton_tune.fallback.compiled import BASELINE_SCANS, compile_usable, compiled_launcher
from rltriton_tune.fallback.torch_strategy import (
    CPU_MODES,
    MODES,
    TorchStrategy,
    default_mode,
    launch,
)
from rltriton_tune.strategy import Strategy

STRATEGIES: dict[str, Strategy] = {"torch": TorchStrategy()}

__all__ = [
    "BASELINE_SCANS",
    "CPU_MODES",
    "MODES",
    "STRATEGIES",
    "TorchStrategy",
    "compile_usable",
    "compiled_launcher",
    "default_mode",
    "launch",
]
