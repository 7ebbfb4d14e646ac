"""Device fingerprints: what a profile was measured on, and the file name it gets.

A fingerprint is a flat dict of JSON scalars naming the hardware and the
package's kernel ABI: a profile measured on another GPU model is this GPU's only
as a sibling's (same vendor, capability and kernel ABI: ``siblings``), one for another
kernel ABI never. Software versions (torch, Triton) are not part of a
device's identity: they are recorded beside each entry (``software_versions``),
a profile measured under other versions is still used, and ``doctor`` reports
the difference. Profiles written when the fingerprint still carried a version
(a ``triton`` or ``torch`` field) match on their other fields.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
from functools import cache
from typing import Any

from rltriton_tune.tuning_db.schema import canonical_fingerprint

#: Fields shown in the readable part of a fingerprint id, in order, with a label.
_SLUG_FIELDS = (("kind", ""), ("name", ""), ("capability", "cc"), ("abi", "abi"))

#: Fields older fingerprints carried that are software versions, not device identity.
SOFTWARE_FIELDS = frozenset({"triton", "torch"})


def fingerprint_id(fp: dict[str, Any]) -> str:
    """Stable, filename-safe id: a readable slug plus a short hash of the canonical JSON.

    e.g. ``cuda-nvidia-h200-cc9.0-abi1-1a2b3c4d5e``. The hash covers every identity
    field, so fingerprints differing only in an unlisted field still differ.
    """
    fp = identity(fp)
    canonical = canonical_fingerprint(fp)
    parts = [f"{label}{fp[name]}" for name, label in _SLUG_FIELDS
             if fp.get(name) not in (None, "")]
    slug = re.sub(r"[^a-z0-9.]+", "-", "-".join(parts).lower()).strip("-.")[:80] or "device"
    digest = hashlib.sha256(canonical.encode("ascii")).hexdigest()[:10]
    return f"{slug}-{digest}"


def identity(fp: dict[str, Any]) -> dict[str, Any]:
    """``fp`` without software-version fields: what decides whether a profile applies."""
    canonical_fingerprint(fp)  # validates, naming the argument
    return {name: value for name, value in fp.items() if name not in SOFTWARE_FIELDS}


def identity_text(fp: dict[str, Any]) -> str:
    """Canonical JSON of :func:`identity` (the equality used to match profiles)."""
    return canonical_fingerprint(identity(fp))


def same_fingerprint(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two fingerprints denote the same device (equal identities)."""
    return identity_text(a) == identity_text(b)


def software_versions() -> dict[str, str]:
    """The torch and Triton versions (major.minor) of this process, as recorded in entries."""
    import torch

    return {"torch": _major_minor(torch.__version__), "triton": _triton_version()}


def describe_mismatch(theirs: dict[str, Any], ours: dict[str, Any]) -> str:
    """Why a profile's fingerprint is not ours, e.g. ``fingerprint is for NVIDIA A100 (...)``."""
    theirs, ours = identity(theirs), identity(ours)
    differing = sorted(name for name in set(theirs) | set(ours)
                       if theirs.get(name) != ours.get(name))
    label = theirs.get("name") or theirs.get("kind") or "another device"
    return f"fingerprint is for {label} (differs in {', '.join(differing)})"


def device_fingerprint(device: Any = None) -> dict[str, Any]:
    """The fingerprint of ``device`` (a ``torch.device``, a string, or ``None`` for the
    current CUDA device when there is one, else the CPU).

    CUDA: GPU name, compute capability, SM count, kernel ABI.
    CPU and other devices: processor name, architecture, core count, kernel ABI.
    """
    import torch

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dev.type == "cuda":
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        return dict(_cuda_fingerprint(index))
    return dict(_host_fingerprint(dev.type))


@cache
def _cuda_fingerprint(index: int) -> tuple[tuple[str, Any], ...]:
    import torch

    from rltriton_tune.kernels.abi import KERNEL_ABI

    props = torch.cuda.get_device_properties(index)
    return (("kind", "cuda"), ("name", props.name),
            ("capability", f"{props.major}.{props.minor}"),
            ("sm_count", props.multi_processor_count), ("abi", KERNEL_ABI))


@cache
def _host_fingerprint(kind: str) -> tuple[tuple[str, Any], ...]:
    from rltriton_tune.kernels.abi import KERNEL_ABI

    name = _cpu_name() if kind == "cpu" else kind
    return (("kind", kind), ("name", name), ("arch", platform.machine()),
            ("cores", os.cpu_count() or 0), ("abi", KERNEL_ABI))


def _triton_version() -> str:
    try:
        import triton
    except ImportError:
        return "none"
    return _major_minor(triton.__version__)


def _major_minor(version: str) -> str:
    return ".".join(version.split("+")[0].split(".")[:2])


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown cpu"
