"""The entries that serve calls on a device: its own, then a sibling GPU's.

A GPU is also served by the profile of its nearest *sibling*, before the built-in
rules: a GPU of the same vendor, device kind, compute capability and kernel ABI (the
same architecture, so the same strategies and configs compile and the same occupancy
limits apply), the nearest in SM count, then the one with the most entries. The
device's own entries (shipped or user) override the sibling's key by key; dispatch
ranks a sibling's entries with the ones it borrows (``dispatch.lookup``), and
``tune --refresh`` re-times them on this GPU, which turns them into its own.

Measured data transfers better than rules fitted to one GPU. On an H100 80GB HBM3
(132 SMs; torch 2.11, Triton 3.6; ``benchmarks/peers.py`` against rl-triton 0.1.3,
float32), the H200 profile served as a sibling against the built-in rules:
env-major 150 cells at 1.49x of rl-triton (4 cells below 0.97x) against 1.47x (15
below); time-major 72 cells at 3.37x (worst 1.35x) against 2.32x (worst 0.68x, 9
below). Measured with this module serving (``benchmarks/results/h100/``): 405 cells at
2.03x, 5 below 0.97x, all at 5000x230 (the H200's worst shape too).
``RLTRITON_TUNE_SIBLINGS=0`` turns this off.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rltriton_tune.state import STATE
from rltriton_tune.tuning_db import locations, state
from rltriton_tune.tuning_db.fingerprint import identity, identity_text
from rltriton_tune.tuning_db.loading import (
    FileReport,
    ProfileSet,
    load_profiles,
    profile_files,
    profile_folders,
    read_profiles_cached,
)
from rltriton_tune.tuning_db.schema import ProfileError

#: Fingerprint fields two GPUs must share to be siblings (and the vendor: the first word of
#: the name, since ROCm also reports kind "cuda" and capabilities that NVIDIA's reuse).
SIBLING_FIELDS = ("kind", "capability", "abi")


@dataclass(frozen=True)
class Sibling:
    """The sibling profile a device borrows from: its fingerprint and the files holding it."""

    fingerprint: dict[str, Any]
    paths: tuple[Path, ...]
    entries: int

    def describe(self, ours: dict[str, Any]) -> str:
        theirs = self.fingerprint
        return (f"sibling profile: measured on {theirs.get('name', 'another GPU')} (same "
                f"capability {theirs.get('capability')} and kernel ABI; "
                f"{theirs.get('sm_count', '?')} SMs against {ours.get('sm_count', '?')} here); "
                f"serves the keys this device has no entry of its own for")


def find_sibling(fp: dict[str, Any]) -> Sibling | None:
    """The nearest sibling of ``fp`` among the shipped and user profiles, or None."""
    ours = identity(fp)
    if ours.get("kind") != "cuda":
        return None
    canonical = identity_text(fp)
    found: dict[str, tuple[dict[str, Any], list[Path], int]] = {}
    for folder in profile_folders():
        for path in profile_files(folder, []):  # an unreadable folder: load_profiles says so
            try:
                profiles = read_profiles_cached(path)
            except ProfileError:
                continue  # reported (and warned about) by load_profiles
            for profile in profiles:
                theirs = identity(profile.fingerprint)
                text = identity_text(theirs)
                if text == canonical or not profile.entries or any(
                        theirs.get(f) != ours.get(f) for f in SIBLING_FIELDS) \
                        or _vendor(theirs) != _vendor(ours):
                    continue
                _, paths, count = found.get(text, (theirs, [], 0))
                found[text] = (theirs, [*paths, path], count + len(profile.entries))
    if not found:
        return None

    def rank(item: tuple[str, tuple[dict[str, Any], list[Path], int]]) -> tuple:
        text, (theirs, _, count) = item
        gap = abs(_int(theirs.get("sm_count")) - _int(ours.get("sm_count")))
        return gap, -count, text

    _, (theirs, paths, count) = min(found.items(), key=rank)
    return Sibling(theirs, tuple(paths), count)


def serving_profiles(fp: dict[str, Any]) -> ProfileSet:
    """The entries that serve calls on ``fp``: :func:`load_profiles` of ``fp``, over the
    nearest sibling's (when sibling profiles are on). ``sources`` name the sibling's files
    for the keys it serves, and its files are reported as used. Cached like
    :func:`load_profiles`."""
    own = load_profiles(fp)
    if not STATE.settings.siblings:
        return own
    cache_key = ("serving", identity_text(fp), str(locations.shipped_dir()),
                 str(locations.user_dir()))
    found = state.cached(cache_key)
    if found is not None:
        return found
    sibling = find_sibling(fp)
    merged = own if sibling is None else _merged(own, sibling, fp)
    state.cache(cache_key, merged)
    return merged


def _merged(own: ProfileSet, sibling: Sibling, fp: dict[str, Any]) -> ProfileSet:
    theirs = load_profiles(sibling.fingerprint)
    reason = sibling.describe(fp)
    reports = [FileReport(r.path, True, reason) if r.path in sibling.paths and not r.used
               else r for r in own.reports]
    return ProfileSet(entries={**theirs.entries, **own.entries},
                      sources={**theirs.sources, **own.sources},
                      reports=reports, in_memory=set(own.in_memory),
                      borrowing=own.borrowing or theirs.borrowing,
                      sibling_keys=frozenset(set(theirs.entries) - set(own.entries)),
                      sibling=sibling)


def _vendor(fp: dict[str, Any]) -> str:
    """``NVIDIA`` of ``NVIDIA H200``: GPUs of two vendors are never siblings."""
    words = str(fp.get("name", "")).split()
    return words[0].lower() if words else ""


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0
