"""Loading the entries that apply to one device: shipped, then user, then in-memory.

Dispatch calls :func:`load_profiles` lazily, once per process and fingerprint;
the result is cached until something is recorded, imported or cleared. A bad
file never raises here: it is reported (for ``doctor``), warned about once per
process, and skipped, so a training run keeps going.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rltriton_tune.tuning_db import locations, state
from rltriton_tune.tuning_db.fingerprint import describe_mismatch, identity_text
from rltriton_tune.tuning_db.schema import Entry, ProfileError
from rltriton_tune.tuning_db.store import read_profiles


@dataclass
class FileReport:
    """One profile file seen while loading, and whether (and why not) it was used."""

    path: Path
    used: bool
    reason: str


@dataclass
class ProfileSet:
    """The merged entries for one fingerprint, where each came from, and what was seen.

    ``in_memory`` names the keys that exist only in this process (their folder
    could not be written); their ``sources`` path is the file they were meant for.
    Shared through the cache: treat it as read-only.
    """

    entries: dict[str, Entry]
    sources: dict[str, Path]
    reports: list[FileReport]
    in_memory: set[str] = field(default_factory=set)
    #: Borrowing evidence of the profiles read (a later folder's overrides an earlier's).
    borrowing: dict[str, float] = field(default_factory=dict)
    #: Keys served by a sibling GPU's profile (see ``tuning_db.siblings``), not this one's,
    #: and that sibling (a ``siblings.Sibling``; None without one).
    sibling_keys: frozenset[str] = frozenset()
    sibling: Any = None
    #: Lookup indexes dispatch builds once per loaded set (see ``dispatch.lookup``).
    index: dict[Any, Any] = field(default_factory=dict, repr=False)


def load_profiles(fp: dict[str, Any]) -> ProfileSet:
    """Entries for fingerprint ``fp`` from every ``*.json`` in :func:`shipped_dir` and
    then :func:`user_dir` (user entries override shipped ones), then the entries
    this process could not write. Files for other fingerprints are reported, not
    used. Cached per (fingerprint, folders) until :func:`invalidate_cache`."""
    canonical = identity_text(fp)
    cache_key = (canonical, str(locations.shipped_dir()), str(locations.user_dir()))
    found = state.cached(cache_key)
    if found is not None:
        return found
    loaded = _load(fp, canonical, profile_folders())
    state.cache(cache_key, loaded)
    return loaded


def profile_folders() -> list[Path]:
    """The folders profiles are read from, in precedence order: shipped, then the user's
    (once when they are the same folder)."""
    ship, user = locations.shipped_dir(), locations.user_dir()
    return [ship] if same_dir(ship, user) else [ship, user]


def read_profiles_cached(path: Path) -> list[Any]:
    """:func:`store.read_profiles` of ``path``, parsed once per process while the file is
    unchanged (same inode, size and modification time; writes replace files by rename).
    Loading the profiles of several fingerprints, and looking for a sibling GPU's, reads
    every file; a shipped profile takes milliseconds to parse. ProfileError as the reader
    raises it (bad files are not kept)."""
    try:
        st = os.stat(path)
    except OSError:
        return read_profiles(path)  # raises the reader's ProfileError
    cache_key = ("file", str(path), st.st_ino, st.st_size, st.st_mtime_ns)
    found = state.cached(cache_key)
    if found is None:
        found = read_profiles(path)
        state.cache(cache_key, found)
    return found


#: The name the design uses for the once-per-process load; the same cached call.
loaded_once = load_profiles


def load_many(fps: list[dict[str, Any]]) -> list[ProfileSet]:
    """:func:`load_profiles` of each of ``fps``, reading each folder once (not cached, and
    without file reports): listing every known device (``show --all-devices``) with one
    load per fingerprint read every file once per fingerprint, quadratic in the number of
    files (3000 profiles of other devices in one folder: over 5 minutes)."""
    folders = profile_folders()
    scanned = [_scan(folder, []) for folder in folders]
    return [_load(fp, identity_text(fp), folders, scanned) for fp in fps]


def folder_keys(fp: dict[str, Any], folder: Path) -> set[str]:
    """The keys that readable files of ``folder`` hold for ``fp`` (any file name: a copied
    export serves its keys as the device's own file does)."""
    canonical = identity_text(fp)
    keys: set[str] = set()
    for _, read in _scan(Path(folder), []):
        if not isinstance(read, ProfileError):
            for text, profile in read:
                if text == canonical:
                    keys.update(profile.entries)
    return keys


#: A profile file as read: its path and its profiles, each beside its identity text, or
#: the ProfileError that makes it unusable.
Scanned = tuple[Path, list[tuple[str, Any]] | ProfileError]


def _scan(folder: Path, reports: list[FileReport]) -> list[Scanned]:
    """Every ``*.json`` of ``folder``, read (see :func:`profile_files` for ``reports``)."""
    scanned: list[Scanned] = []
    for path in profile_files(folder, reports):
        try:
            profiles = read_profiles_cached(path)
        except ProfileError as err:
            scanned.append((path, err))
            continue
        scanned.append((path, [(identity_text(p.fingerprint), p) for p in profiles]))
    return scanned


def _load(fp: dict[str, Any], canonical: str, folders: list[Path],
          scanned: list[list[Scanned]] | None = None) -> ProfileSet:
    """The merged entries of ``fp``; ``scanned`` holds the folders already read (then no
    file is reported), else each folder is read and every file reported."""
    entries: dict[str, Entry] = {}
    sources: dict[str, Path] = {}
    reports: list[FileReport] = []
    borrowing: dict[str, float] = {}
    for i, folder in enumerate(folders):
        # Within one folder the fingerprint's own file (<fingerprint_id>.json) wins; other
        # files holding this fingerprint only add keys it lacks, first file name first.
        # Dates written in files are not compared.
        own_name = locations.profile_path(fp, folder).name
        tier: dict[str, Entry] = {}
        tier_sources: dict[str, Path] = {}
        files = _scan(folder, reports) if scanned is None else scanned[i]
        for path, read in files:
            usable = _usable_profiles(path, read, fp, canonical,
                                      reports if scanned is None else [])
            for profile in usable:
                borrowing.update(profile.borrowing)
                for text, entry in profile.entries.items():
                    if path.name == own_name or text not in tier:
                        tier[text] = entry
                        tier_sources[text] = path
        entries.update(tier)  # a later folder (the user's) overrides an earlier one
        sources.update(tier_sources)
    in_memory = set()
    for text, (entry, path) in state.overlay_entries(canonical).items():
        if not any(same_dir(path.parent, folder) for folder in folders):
            continue  # meant for a folder this load does not read
        entries[text] = entry
        sources[text] = path
        in_memory.add(text)
    for path in sorted({sources[t] for t in in_memory}):
        count = sum(1 for t in in_memory if sources[t] == path)
        reports.append(FileReport(path, True, f"{count} entries kept in memory only "
                                  "(the file could not be written)"))
    return ProfileSet(entries=entries, sources=sources, reports=reports, in_memory=in_memory,
                      borrowing=borrowing)


def profile_files(folder: Path, reports: list[FileReport]) -> list[Path]:
    """Every ``*.json`` in ``folder``: anything but a readable regular file among them
    (a FIFO, a folder, a broken link) is reported and warned about by the reader."""
    try:
        return sorted(folder.glob("*.json")) if folder.is_dir() else []
    except OSError as err:
        reports.append(FileReport(folder, False, f"folder unreadable: {err.strerror or err}"))
        return []


def _usable_profiles(path: Path, read: list[tuple[str, Any]] | ProfileError,
                     fp: dict[str, Any], canonical: str,
                     reports: list[FileReport]) -> list[Any]:
    """The profiles of ``path`` that hold ``canonical``; a bad file warned about (once per
    process), and the file reported in ``reports``."""
    if isinstance(read, ProfileError):
        reports.append(FileReport(path, False, read.reason))
        state.warn_once("bad-file", str(path),
                        f"rltriton-tune: ignoring tuning profile {path}: {read.reason}")
        return []
    usable = [p for text, p in read if text == canonical]
    if usable:
        reports.append(FileReport(path, True, "matches this device"))
    else:
        reports.append(FileReport(path, False, describe_mismatch(read[0][1].fingerprint, fp)
                                  if read else "holds no profile"))
    return usable


def same_dir(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False
