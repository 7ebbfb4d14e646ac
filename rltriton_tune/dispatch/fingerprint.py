"""Device fingerprints as dispatch needs them: normalised devices, cached per device.

A profile measured on one GPU model, Triton release or kernel ABI is not valid
on another, so profiles are keyed by a fingerprint (DESIGN.md, "Tuning
database"): CUDA {kind, name, capability, sm_count, triton, abi}; CPU and other
torch-served devices {kind, name (CPU model), arch, cores, torch, abi}. The
fields are defined once, in :mod:`rltriton_tune.tuning_db.fingerprint`, so what
the tuner records and what dispatch looks up can never disagree; this module
adds the per-device cache and device normalisation used on the miss path.
"""

from __future__ import annotations

import threading
from typing import Any

import torch

_lock = threading.Lock()
_cache: dict[torch.device, dict[str, Any]] = {}


def normalize_device(device: torch.device | str) -> torch.device:
    """A device with an explicit index for CUDA (``cuda`` -> ``cuda:<current>``)."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def device_fingerprint(device: torch.device | str) -> dict[str, Any]:
    """The fingerprint of ``device`` (computed once per device; callers get a copy)."""
    device = normalize_device(device)
    found = _cache.get(device)
    if found is None:
        from rltriton_tune.tuning_db.fingerprint import device_fingerprint as compute

        with _lock:
            found = _cache.setdefault(device, compute(device))
    return dict(found)
