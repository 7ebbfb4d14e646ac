"""The decision for one (problem key, device): which strategy, which params, and why.

Order: forced > the key's own profile entry > online tuning (when a tool installed
it and ``RLTRITON_TUNE_ONLINE`` is on) > the best entry to borrow
(:mod:`.lookup`) > the built-in rules (:mod:`.rules`, for a GPU without any
usable entry) > the torch fallback. The entries are this GPU's own over those of
its nearest sibling GPU (``tuning_db.siblings``). A config that failed to compile or
launch in this process is skipped everywhere. Runs only on memo misses and in ``explain``,
so clarity wins over speed here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.dispatch import lookup, registry, rules
from rltriton_tune.dispatch.devices import device_fingerprint, normalize_device
from rltriton_tune.dispatch.forcing import Forced
from rltriton_tune.settings import ENV_FORCE
from rltriton_tune.state import STATE, FallbackWarning, warn_once
from rltriton_tune.strategy import InvalidConfig, Strategy

__all__ = ["Decision", "FallbackWarning", "decide", "mark_failed", "rules_decision",
           "borrow_alternatives", "usable_strategies", "FALLBACK", "ORIGINS"]

FALLBACK = "torch"

#: Where a decision came from, in the order they are tried.
ORIGINS = ("forced", "profile", "online", "borrowed", "rules", "fallback")


@dataclass(frozen=True)
class Decision:
    """What dispatch runs for ``key``: ``strategy`` with ``params``, and where that came from.

    ``origin`` is one of :data:`ORIGINS`; ``entry`` the key text of the profile entry that
    served (exact or borrowed) and ``path`` its file; ``detail`` says why, in words.
    ``source`` is the one-line form: ``profile:<path>``, ``borrowed:<entry>@<path>``,
    ``fallback:<reason>`` or the origin itself.
    """

    key: ProblemKey
    strategy: str
    params: dict[str, Any] = field(hash=False)
    origin: str
    detail: str = ""
    entry: str = ""
    path: str = ""

    @property
    def source(self) -> str:
        if self.origin == "profile":
            return f"profile:{self.path}"
        if self.origin == "borrowed":
            return f"borrowed:{self.entry}@{self.path}"
        if self.origin == "fallback":
            return f"fallback:{self.detail}"
        return self.origin


def mark_failed(device: torch.device, strategy: str, params: dict[str, Any],
                reason: str) -> None:
    """Remember that ``strategy`` with ``params`` failed on ``device`` in this process."""
    with STATE.lock:
        STATE.failed_configs[(normalize_device(device), strategy,
                              lookup.frozen_params(params))] = reason


def _failed(device: torch.device) -> frozenset:
    with STATE.lock:
        return frozenset((s, p) for d, s, p in STATE.failed_configs if d == device)


def _forced_decision(key: ProblemKey, device: torch.device, forced: Forced) -> Decision | None:
    impl = registry.all_strategies().get(forced.strategy)
    if impl is None or not impl.available(device):
        message = f"forced strategy {forced.strategy!r} cannot run on device {device}"
        if forced.origin == "force":
            raise ValueError(message)
        warn_once(f"env-force:{forced.strategy}:{device.type}", message + "; ignoring "
                  f"{ENV_FORCE} for such calls")
        return None
    # A parameter only some keys have (Retrace's REDUCE_A) is left out for the others, so
    # that a forced Retrace config still serves the backward pass's scans and other calls.
    defaults = impl.default_params(key)
    own = {*impl.space(key), *defaults}
    params = {name: value for name, value in forced.params_dict().items() if name in own}
    try:
        params = dict(impl.validate(key, {**defaults, **params}))
    except InvalidConfig as exc:
        where = "" if forced.origin == "force" else f"{ENV_FORCE}: "
        raise ValueError(f"{where}forced config {forced.strategy} {params} is invalid for "
                         f"{key.as_text()}: {exc}") from None
    return Decision(key, forced.strategy, params, "forced",
                    "force()" if forced.origin == "force" else ENV_FORCE)


def _gpu_unavailable_reason(device: torch.device) -> str | None:
    """Why Triton cannot serve ``device`` (None when it can)."""
    if device.type != "cuda":
        return f"device type {device.type!r} is served by torch"
    if not registry.triton_ok():
        return "Triton is not installed"
    major, minor = torch.cuda.get_device_capability(device)
    if (major, minor) < registry.MIN_CAPABILITY:
        return f"compute capability {major}.{minor} < 7.0 (unsupported by Triton)"
    return None


def usable_strategies(device: torch.device) -> tuple[dict[str, Strategy], str | None]:
    """Strategies usable on ``device``, and the reason Triton is out (if it is)."""
    torch_only = registry.torch_strategies()
    if device.type == "cpu":
        return torch_only, None
    reason = _gpu_unavailable_reason(device)
    if reason is not None:
        return torch_only, reason
    usable = {n: s for n, s in registry.triton_strategies().items() if s.available(device)}
    return {**usable, **torch_only}, None


def load_profiles(fingerprint: dict[str, Any]) -> Any:
    """The entries serving ``fingerprint`` (its own over a sibling GPU's); None (after one
    warning) if loading failed."""
    from rltriton_tune.tuning_db.siblings import serving_profiles

    try:
        return serving_profiles(fingerprint)
    except Exception as exc:  # noqa: BLE001 - a bad profile must never stop a call
        warn_once("profiles", f"rltriton-tune: could not load tuning profiles ({exc}); "
                  "using the built-in rules")
        return None


def _from_found(key: ProblemKey, found: lookup.Found) -> Decision:
    """A decision from a profile entry: ``profile`` for the key's own entry measured on this
    GPU; ``borrowed`` for another key's, or any entry of a sibling GPU's profile (the
    workload record counts those as misses, so ``tune --from-record`` measures them here)."""
    return Decision(key, found.strategy, found.params, "profile" if found.exact else "borrowed",
                    found.describe(), found.entry, found.path)


def rules_decision(key: ProblemKey, sm_count: int, usable: dict[str, Strategy],
                   failed: frozenset = frozenset()) -> Decision | None:
    """The first built-in rule candidate for ``key`` that a ``usable`` strategy validates."""
    for name, overrides, why in rules.candidates(key, sm_count):
        impl = usable.get(name)
        params = None if impl is None else lookup.validated(impl, key, overrides)
        if params is not None and (name, lookup.frozen_params(params)) not in failed:
            return Decision(key, name, params, "rules", why)
    return None


def _fallback(key: ProblemKey, reason: str, usable: dict[str, Strategy] | None = None) -> Decision:
    impl = (usable or registry.torch_strategies())[FALLBACK]
    return Decision(key, FALLBACK, dict(impl.default_params(key)), "fallback", reason)


def _online(key: ProblemKey, device: torch.device, fingerprint: dict[str, Any],
            usable: dict[str, Strategy]) -> Decision | None:
    """Tune ``key`` now with the installed online tuner (each key at most once)."""
    tuner = STATE.online_tuner
    if tuner is None or not STATE.settings.online:
        return None
    with STATE.lock:
        if (key, device) in STATE.online_attempted:
            return None
        STATE.online_attempted.add((key, device))
    try:
        entry = tuner(key, device, fingerprint, STATE.settings.online_budget_s)
    except Exception as exc:  # noqa: BLE001 - online tuning must never break a call
        warn_once("online", f"rltriton-tune: online tuning failed ({type(exc).__name__}: "
                  f"{exc}); using the normal decision order")
        return None
    impl = None if entry is None else usable.get(entry.strategy)
    params = None if impl is None else lookup.validated(impl, key, dict(entry.params))
    if params is None:
        return None
    return Decision(key, entry.strategy, params, "online",
                    f"tuned on first use, {entry.device_time_us} us")


def decide(key: ProblemKey, device: torch.device | str, forced: Forced | None = None,
           *, online: bool = False) -> Decision:
    """Choose the implementation for ``key`` on ``device`` (see the module doc for the order).

    ``online=True`` lets a key without an entry of its own be tuned now, where online
    tuning is installed and enabled; ``explain`` never tunes.
    """
    device = normalize_device(device)
    if forced is not None:
        decision = _forced_decision(key, device, forced)
        if decision is not None:
            return decision
    usable, reason = usable_strategies(device)
    if reason is not None:
        warn_once("gpu-fallback", f"rltriton-tune: {reason}; using the torch fallback "
                  "(same results, slower)")
        return _fallback(key, reason, usable)
    fingerprint = device_fingerprint(device)
    failed = _failed(device)
    profiles = load_profiles(fingerprint)
    if profiles is not None:
        found = lookup.exact(key, profiles, usable, failed)
        if found is not None:
            return _from_found(key, found)
    if online:
        decision = _online(key, device, fingerprint, usable)
        if decision is not None:
            return decision
    if profiles is not None:
        found = next(lookup.borrowed(key, profiles, usable, failed), None)
        if found is not None:
            return _from_found(key, found)
    if device.type == "cpu":
        return _fallback(key, "cpu", usable)
    decision = rules_decision(key, int(fingerprint.get("sm_count", 1)), usable, failed)
    if decision is not None:
        return decision
    reason = "no Triton config valid for this key"
    warn_once("gpu-fallback", f"rltriton-tune: {reason} ({key.as_text()}); using the torch "
              "fallback")
    return _fallback(key, reason, usable)


def borrow_alternatives(key: ProblemKey, device: torch.device | str,
                        count: int = 3) -> list[Decision]:
    """The next ``count`` entries dispatch would borrow for ``key`` after the one it uses:
    for measuring how well borrowing works (``bench``)."""
    device = normalize_device(device)
    usable, reason = usable_strategies(device)
    profiles = None if reason is not None else load_profiles(device_fingerprint(device))
    if profiles is None:
        return []
    found = []
    for candidate in lookup.borrowed(key, profiles, usable):
        found.append(_from_found(key, candidate))
        if len(found) > count:
            break
    return found[1:]
