"""The interface every implementation strategy offers to dispatch and the tuner.

A strategy (a Triton scan core in ``kernels/`` or a torch implementation in
``fallback/``) declares its parameter space and validity rules in one place and
turns a (problem key, params) pair into a prepared launcher.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import torch

from rltriton_tune.call import Call, ProblemKey

#: A prepared launcher: computes the outputs of one call (a tuple, one tensor per
#: output of the algorithm) without synchronising the device. It may carry a ``bind``
#: attribute, ``bind(tensor_names, scalar_names, like, single)``, returning the same
#: computation as one function of the inputs (or None): the usual call's fast path uses
#: it (see ``kernels.launch.FastLaunch.bind``).
Launcher = Callable[[Call], tuple[torch.Tensor, ...]]

Params = dict[str, Any]


class InvalidConfig(ValueError):
    """A parameter set that a strategy cannot run for a given problem key."""


class Strategy(Protocol):
    """What dispatch and the tuner need from an implementation strategy."""

    #: Strategy name used in profiles, ``force`` and the CLI.
    name: str
    #: Whether the tuner searches it (False: runs only when forced or named by a profile).
    searchable: bool

    def available(self, device: torch.device) -> bool:
        """Whether this strategy can run on ``device`` in this process."""
        ...

    def space(self, key: ProblemKey) -> dict[str, list[Any]]:
        """Candidate values of each parameter for ``key`` (the tuner's search space)."""
        ...

    def validate(self, key: ProblemKey, params: Params) -> Params:
        """Return ``params`` completed and normalised for ``key``; raise
        :class:`InvalidConfig` when no valid adjustment exists."""
        ...

    def default_params(self, key: ProblemKey) -> Params:
        """A reasonable config for ``key`` without tuning."""
        ...

    # A strategy may also define ``applies(key, param, drawn) -> bool``: whether a search
    # draws ``param`` after the parameters ``drawn`` before it in ``space`` order (one
    # that cannot take effect with them is left to its default instead).

    def skip_reason(self, key: ProblemKey, params: Params,
                    sm_count: int | None = None) -> str | None:
        """Why the tuner leaves out this valid, validated config (``None``: it is searched).
        Forcing and profiles still run it; only searches and sweeps skip it. ``sm_count``
        is the device's multiprocessor count where known (rules about filling the GPU)."""
        ...

    def transfer(self, source: ProblemKey, target: ProblemKey,
                 params: Params) -> tuple[str, Params]:
        """``params`` tuned for ``source``, moved to the shape of ``target`` (dispatch's
        nearest-entry lookup), as (strategy name, params): a config may have a faster
        equivalent on another strategy. The result is validated for ``target`` afterwards."""
        ...

    def prepare(self, key: ProblemKey, params: Params) -> Launcher:
        """Build (and cache whatever can be cached for) a launcher for ``key``."""
        ...
