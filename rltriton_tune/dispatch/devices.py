"""Devices as dispatch sees them: normalised, with their fingerprint computed once.

The fingerprint's fields are defined in :mod:`rltriton_tune.tuning_db.fingerprint`,
so what the tuner records and what dispatch looks up can never disagree; this
module caches it per device in the process state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from rltriton_tune.state import STATE

#: Index of the current CUDA device (PyTorch's C function where this build has CUDA).
#: Triton launches on the current device; a call whose tensors live on another runs
#: under a device guard (:func:`rltriton_tune.dispatch.run`). The kernels' launcher reads
#: it through its own ``kernels.launch.current_device``: kernels import nothing from
#: dispatch.
current_cuda_device: Callable[[], int] = (getattr(torch._C, "_cuda_getDevice", None)
                                          or torch.cuda.current_device)


def normalize_device(device: torch.device | str) -> torch.device:
    """A device with an explicit index for CUDA (``cuda`` -> ``cuda:<current>``)."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def device_fingerprint(device: torch.device | str) -> dict[str, Any]:
    """The fingerprint of ``device`` (computed once per device; callers get a copy)."""
    device = normalize_device(device)
    found = STATE.fingerprints.get(device)
    if found is None:
        from rltriton_tune.tuning_db.fingerprint import device_fingerprint as compute

        found = compute(device)
        with STATE.lock:
            found = STATE.fingerprints.setdefault(device, found)
    return dict(found)
