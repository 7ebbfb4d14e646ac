"""Dispatch: choose and run an implementation for each call (the single seam).

Every public estimator hands its validated :class:`~rltriton_tune.call.Call` to
:func:`run`; nothing else launches work.
"""

from __future__ import annotations

import torch

from rltriton_tune.call import Call


def run(call: Call) -> tuple[torch.Tensor, ...]:
    """Compute the outputs of ``call`` with the implementation chosen for its key."""
    from rltriton_tune.fallback import STRATEGIES

    strategy = STRATEGIES["torch"]
    return strategy.prepare(call.key, strategy.default_params(call.key))(call)
