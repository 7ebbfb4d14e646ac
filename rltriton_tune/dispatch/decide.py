"""The decision for one (problem key, device): which strategy, which params, and why.

Order (DESIGN.md, "A call, end to end"): forced > exact profile entry >
(online tuning, when enabled) > nearest tuned entry of the same family >
built-in heuristic (GPU only) > torch fallback. Runs only on memo misses and in
``explain``, so clarity wins over speed here.
"""

from __future__ import annotations

import math
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any

import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.dispatch import heuristic, registry
from rltriton_tune.dispatch.fingerprint import device_fingerprint, normalize_device
from rltriton_tune.dispatch.forcing import Forced
from rltriton_tune.strategy import InvalidConfig, Strategy

#: The built-in rules' signature: ``heuristic.candidates`` or another revision's.
Rules = Callable[[ProblemKey, int], list[heuristic.Candidate]]

#: Largest (log2 N, log2 T) Euclidean distance at which a tuned entry is reused: a
#: factor of about 1.4 in N and T. Further away the built-in heuristic is the better
#: guess: on the H200 held-out bench (84 float32 cells off the grid, 0.6-1.9 from the
#: nearest entry; benchmarks/NOTES.md, session 4) the heuristic's configs ran 1.30x
#: faster than the flat baseline (geometric mean, worst 0.70x) and the nearest entries'
#: configs, moved, 1.19x (worst 0.53x); the heuristic was > 3% faster in 30 cells, the
#: entry in 8. The best configs change across regime boundaries (few rows and long T,
#: 2^23 elements) that the heuristic's rules know and a nearby entry does not.
MAX_DISTANCE = 0.5

#: A nearby tuned entry is reused only where it beat its own ``flat_heuristic`` baseline
#: by this share: a config a few percent ahead where it was tuned carries little evidence
#: for the shapes around it (Retrace 4096x128's tiled (1, 64, 1 warp), 4% ahead there,
#: ran 1.06-1.17x off the best at four nearby shapes, head to head, session 20). Replayed
#: over 706 probed keys: 634 within 5% of the best against 632 without. The four H200
#: bench cells it moves, measured again (session 21, call 1): GAE 200x2500 1.014x ->
#: 1.000x of the oracle, discounted returns 200x2500 1.000x -> 1.004x, GAE 3500x100
#: 1.032x -> 1.000x, Retrace 3500x100 1.072x -> 1.113x (a miss either way).
NEAREST_MIN_MARGIN = 0.05

#: Distance within which ``transfer_alternatives`` offers entries to measure.
SURVEY_DISTANCE = 2.0

FALLBACK = "torch"


class FallbackWarning(RuntimeWarning):
    """A GPU path was expected but the torch fallback runs instead."""


@dataclass(frozen=True)
class Decision:
    """What dispatch runs for ``key``: ``strategy`` with ``params``, and where that came from.

    ``source`` is one of ``forced``, ``profile:<path>``, ``nearest:<key text>@<path>``,
    ``online``, ``heuristic``, ``fallback:<reason>``; ``detail`` says more in words.
    """

    key: ProblemKey
    strategy: str
    params: dict[str, Any] = field(hash=False)
    source: str
    detail: str = ""


_warn_lock = threading.Lock()
_warned: set[str] = set()
#: (key, device) pairs whose Triton launcher failed on first use in this process.
_failed: dict[tuple[ProblemKey, torch.device], str] = {}


def warn_once(topic: str, message: str) -> None:
    """Issue ``message`` as a :class:`FallbackWarning` at most once per process per topic."""
    with _warn_lock:
        if topic in _warned:
            return
        _warned.add(topic)
    warnings.warn(message, FallbackWarning, stacklevel=4)


def mark_failed(key: ProblemKey, device: torch.device, reason: str) -> None:
    """Remember that Triton failed for ``key`` on ``device`` (later decisions use torch)."""
    _failed[(key, normalize_device(device))] = reason


def reset_state() -> None:
    """Forget warnings given and launch failures (tests, ``dispatch.reset``)."""
    with _warn_lock:
        _warned.clear()
    _failed.clear()


def _validated(impl: Strategy, key: ProblemKey, params: dict[str, Any]) -> dict[str, Any] | None:
    try:
        return dict(impl.validate(key, {**impl.default_params(key), **params}))
    except InvalidConfig:
        return None


def _forced_decision(key: ProblemKey, device: torch.device, forced: Forced) -> Decision | None:
    impl = registry.all_strategies().get(forced.strategy)
    if impl is None or not impl.available(device):
        message = f"forced strategy {forced.strategy!r} cannot run on device {device}"
        if forced.origin == "force":
            raise ValueError(message)
        warn_once(f"env-force:{forced.strategy}:{device.type}", message + "; ignoring "
                  "RLTRITON_TUNE_FORCE for such calls")
        return None
    params = forced.params_dict()
    try:
        params = dict(impl.validate(key, {**impl.default_params(key), **params}))
    except InvalidConfig as exc:
        raise ValueError(f"forced config {forced.strategy} {params} is invalid for "
                         f"{key.as_text()}: {exc}") from None
    return Decision(key, forced.strategy, params, "forced",
                    "force()" if forced.origin == "force" else "RLTRITON_TUNE_FORCE")


def _gpu_unavailable_reason(key: ProblemKey, device: torch.device) -> str | None:
    """Why Triton cannot serve ``device`` (None when it can)."""
    if device.type != "cuda":
        return f"device type {device.type!r} is served by torch"
    if not registry.triton_ok():
        return "Triton is not installed"
    major, minor = torch.cuda.get_device_capability(device)
    if (major, minor) < registry.MIN_CAPABILITY:
        return f"compute capability {major}.{minor} < 7.0 (unsupported by Triton)"
    failed = _failed.get((key, device))
    if failed is not None:
        return f"Triton failed on first launch: {failed}"
    return None


def _candidates(key: ProblemKey, device: torch.device) -> tuple[dict[str, Strategy], str | None]:
    """Strategies usable for ``key`` on ``device``, and the reason Triton is out (if it is)."""
    torch_only = registry.torch_strategies()
    if device.type == "cpu":
        return torch_only, None
    reason = _gpu_unavailable_reason(key, device)
    if reason is not None:
        return torch_only, reason
    usable = {n: s for n, s in registry.triton_strategies().items() if s.available(device)}
    return {**usable, **torch_only}, None


def _load_profiles(fingerprint: dict[str, Any]) -> Any:
    from rltriton_tune.tuning_db import load_profiles

    try:
        return load_profiles(fingerprint)
    except Exception as exc:  # noqa: BLE001 - a bad profile must never stop a call
        warn_once("profiles", f"rltriton-tune: could not load tuning profiles ({exc}); "
                  "using heuristics")
        return None


def _family_index(profiles: Any) -> dict[tuple, list[tuple[ProblemKey, str]]]:
    """Profile entries grouped by ``ProblemKey.family()`` (cached on the profile set)."""
    index = getattr(profiles, "_rltriton_family_index", None)
    if index is not None:
        return index
    index = {}
    for text, entry in profiles.entries.items():
        found = getattr(entry, "key", None)
        if not isinstance(found, ProblemKey):
            try:
                found = ProblemKey.from_text(text)
            except (ValueError, KeyError):
                continue
        index.setdefault(found.family(), []).append((found, text))
    try:
        object.__setattr__(profiles, "_rltriton_family_index", index)
    except (AttributeError, TypeError):
        pass
    return index


def _distance(a: ProblemKey, b: ProblemKey) -> float:
    return math.hypot(math.log2(max(a.n, 1)) - math.log2(max(b.n, 1)),
                      math.log2(max(a.t, 1)) - math.log2(max(b.t, 1)))


def _from_entry(key: ProblemKey, entry: Any, usable: dict[str, Strategy]) -> dict[str, Any] | None:
    impl = usable.get(entry.strategy)
    return None if impl is None else _validated(impl, key, dict(entry.params))


def _profile_decision(key: ProblemKey, profiles: Any, usable: dict[str, Strategy],
                      sm_count: int | None = None,
                      rules: Rules = heuristic.candidates) -> tuple[Decision | None, bool]:
    """Exact entry, else nearest valid entry; also whether an exact entry existed."""
    text = key.as_text()
    entry = profiles.entries.get(text)
    if entry is not None:
        params = _from_entry(key, entry, usable)
        if params is not None:
            path = profiles.sources.get(text, "?")
            return Decision(key, entry.strategy, params, f"profile:{path}",
                            f"exact entry, {entry.device_time_us} us"), True
    for found in nearest_decisions(key, profiles, usable, sm_count=sm_count, rules=rules):
        return found, entry is not None
    return None, entry is not None


def exact_or_nearest(key: ProblemKey, profiles: Any, usable: dict[str, Strategy],
                     sm_count: int | None = None,
                     rules: Rules = heuristic.candidates) -> Decision | None:
    """What ``profiles`` say for ``key``: its exact entry, else the nearest entry within
    :data:`MAX_DISTANCE` (one the ``rules`` treat like ``key`` on ``sm_count`` SMs, where
    given), else None (for offline tools that replay dispatch)."""
    return _profile_decision(key, profiles, usable, sm_count, rules)[0]


def _rule_split(key: ProblemKey, sm_count: int, rules: Rules) -> tuple | None:
    """How the built-in ``rules`` split ``key``: first strategy, rows a program and chunk
    (warps and stages are what tuning refines within a rule); None if they cannot."""
    try:
        name, overrides, _ = rules(key, sm_count)[0]
    except Exception:  # noqa: BLE001 - an entry the rules cannot place is not reused
        return None
    return name, overrides.get("BLOCK_N"), overrides.get("BLOCK_T")


def nearest_decisions(key: ProblemKey, profiles: Any, usable: dict[str, Strategy],
                      max_distance: float | None = None,
                      adapt: bool = True, reuse_moved: bool = False,
                      sm_count: int | None = None,
                      rules: Rules = heuristic.candidates) -> Iterator[Decision]:
    """Other entries of ``key``'s family within ``max_distance``, nearest first, each as
    the decision that reuses its config, re-validated for ``key``.

    An entry whose config its strategy's ``transfer`` would change for ``key`` (a flat
    tile of another next_pow2(T) span, a one-tile loop turned flat) was tuned in another
    regime and is skipped, as dispatch does, unless ``reuse_moved`` (surveys): then it is
    moved (or, with ``adapt`` False, kept as tuned). H200 head to head (session 16, 12
    keys at 3000x2200 and 25000x34 off the 4096x2048 and 32768x32 entries): moved configs
    within 5% of the best at 5 keys (worst 1.89x), the heuristic at 7 (worst 1.25x).
    With ``sm_count``, so is an entry whose shape the built-in ``rules`` split otherwise
    than ``key`` (another strategy, rows a program or chunk: a regime boundary lies
    between them). H200 head to head (session 19, h2h_vval): V-trace 290x2300 and
    3300x2500 reused the flat rows of the 256x2048 and 4096x2048 entries at 1.11x and 1.26x
    of the best, where the rules' chunk loops were the best; replays of the earlier probes
    gain 5 keys and lose none. So is an entry without NEAREST_MIN_MARGIN over its flat
    baseline.
    ``max_distance`` defaults to :data:`MAX_DISTANCE`."""
    max_distance = MAX_DISTANCE if max_distance is None else max_distance
    text = key.as_text()
    ranked = sorted(
        ((_distance(key, other), other.as_text(), other, other_text)
         for other, other_text in _family_index(profiles).get(key.family(), ())
         if other_text != text),
        key=lambda r: r[:2],
    )
    check_rules = bool(sm_count) and not reuse_moved
    own_split = _rule_split(key, sm_count, rules) if check_rules else None
    for dist, _, other, other_text in ranked:
        if dist > max_distance:
            return
        if check_rules and (own_split is None or
                            _rule_split(other, sm_count, rules) != own_split):
            continue
        other_entry = profiles.entries[other_text]
        impl = usable.get(other_entry.strategy)
        if impl is None or (check_rules and not _has_margin(other_entry)):
            continue
        unmoved = _validated(impl, key, dict(other_entry.params))
        name, params = other_entry.strategy, unmoved
        moved = _moved(impl, other, key, dict(other_entry.params), usable)
        if moved is not None and moved != (name, unmoved):
            if not reuse_moved:
                continue
            if adapt:
                name, params = moved
        if params is not None:
            path = profiles.sources.get(other_text, "?")
            how = "config re-validated" if params is unmoved else \
                f"config moved to this shape (tuned: {other_entry.strategy} {other_entry.params})"
            yield Decision(key, name, params, f"nearest:{other_text}@{path}",
                           f"log2 distance {dist:.2f}, {how}")


def _has_margin(entry: Any) -> bool:
    """Whether ``entry`` beat its ``flat_heuristic`` baseline by NEAREST_MIN_MARGIN (an
    entry without that baseline is kept)."""
    baseline = entry.baselines.get("flat_heuristic")
    return not baseline or entry.device_time_us * (1 + NEAREST_MIN_MARGIN) <= baseline


def _moved(impl: Strategy, source: ProblemKey, key: ProblemKey, params: dict[str, Any],
           usable: dict[str, Strategy]) -> tuple[str, dict[str, Any]] | None:
    """``impl.transfer`` of an entry's config, validated for ``key``; None if unusable."""
    transfer = getattr(impl, "transfer", None)
    if transfer is None:
        return None
    try:
        name, moved = transfer(source, key, params)
    except Exception:  # noqa: BLE001 - a foreign profile's params must never break a call
        return None
    target = usable.get(name)
    valid = None if target is None else _validated(target, key, moved)
    return None if valid is None else (name, valid)


def transfer_alternatives(key: ProblemKey, device: torch.device | str, count: int = 3,
                          max_distance: float = SURVEY_DISTANCE) -> list[Decision]:
    """The configs of the ``count`` tuned entries nearest to ``key`` (within
    ``max_distance``) other than the one dispatch reuses, each moved to ``key``'s shape,
    then the nearest one's config unmoved (source ``unmoved:...``) where ``transfer``
    changed it: for measuring how well tuned entries generalise to other shapes."""
    device = normalize_device(device)
    usable, reason = _candidates(key, device)
    profiles = None if reason is not None else _load_profiles(device_fingerprint(device))
    if profiles is None:
        return []
    chosen, _ = _profile_decision(key, profiles, usable)
    used = None if chosen is None else chosen.source
    survey = list(islice(nearest_decisions(key, profiles, usable, max_distance,
                                           reuse_moved=True), count + 1))
    found = [d for d in survey if d.source != used][:count]
    unmoved = next(nearest_decisions(key, profiles, usable, max_distance, adapt=False,
                                     reuse_moved=True), None)
    if survey and unmoved is not None and unmoved.source == survey[0].source and \
            (unmoved.strategy, unmoved.params) != (survey[0].strategy, survey[0].params):
        found.append(replace(unmoved,
                             source=f"unmoved:{unmoved.source.removeprefix('nearest:')}"))
    return found


def heuristic_decision(key: ProblemKey, fingerprint: dict[str, Any],
                       usable: dict[str, Strategy],
                       rules: Rules = heuristic.candidates) -> Decision | None:
    """The first heuristic candidate for ``key`` that a ``usable`` strategy validates;
    ``rules`` replaces the built-in rules (offline tools replay older ones)."""
    for name, overrides, why in rules(key, int(fingerprint.get("sm_count", 1))):
        impl = usable.get(name)
        params = None if impl is None else _validated(impl, key, overrides)
        if params is not None:
            return Decision(key, name, params, "heuristic", why)
    return None


def _fallback(key: ProblemKey, reason: str, usable: dict[str, Strategy] | None = None) -> Decision:
    impl = (usable or registry.torch_strategies())[FALLBACK]
    return Decision(key, FALLBACK, dict(impl.default_params(key)), f"fallback:{reason}", reason)


def online_enabled() -> bool:
    return os.environ.get("RLTRITON_TUNE_ONLINE", "").strip() not in ("", "0", "false", "no")


def decide(key: ProblemKey, device: torch.device | str, forced: Forced | None = None,
           *, online: bool = False) -> Decision:
    """Choose the implementation for ``key`` on ``device`` (see the module doc for the order).

    ``online=True`` lets a key without an exact entry be tuned now (when
    ``RLTRITON_TUNE_ONLINE`` is set); ``explain`` never tunes.
    """
    device = normalize_device(device)
    if forced is not None:
        decision = _forced_decision(key, device, forced)
        if decision is not None:
            return decision
    usable, reason = _candidates(key, device)
    if reason is not None:
        warn_once("gpu-fallback", f"rltriton-tune: {reason}; using the torch fallback "
                  "(same results, slower)")
        return _fallback(key, reason, usable)
    fingerprint = device_fingerprint(device)
    profiles = _load_profiles(fingerprint)
    sm_count = int(fingerprint.get("sm_count", 0)) or None
    found, had_exact = (None, False) if profiles is None else \
        _profile_decision(key, profiles, usable, sm_count)
    if found is not None and found.source.startswith("profile:"):
        return found
    if online and not had_exact and online_enabled():
        from rltriton_tune.dispatch.online import tune_now

        tuned = tune_now(key, device, fingerprint)
        if tuned is not None:
            impl = usable.get(tuned.strategy)
            params = None if impl is None else _validated(impl, key, dict(tuned.params))
            if params is not None:
                return Decision(key, tuned.strategy, params, "online",
                                f"tuned on first use, {tuned.device_time_us} us")
    if found is not None:
        return found
    if device.type == "cpu":
        return _fallback(key, "cpu", usable)
    decision = heuristic_decision(key, fingerprint, usable)
    if decision is not None:
        return decision
    reason = "no Triton config valid for this key"
    warn_once("gpu-fallback", f"rltriton-tune: {reason} ({key.as_text()}); using the torch "
              "fallback")
    return _fallback(key, reason, usable)
