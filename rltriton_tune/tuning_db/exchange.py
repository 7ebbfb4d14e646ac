"""Moving profiles between machines: export to one file, import into the user's folder."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from rltriton_tune.tuning_db import locations, state
from rltriton_tune.tuning_db.fingerprint import identity, identity_text
from rltriton_tune.tuning_db.loading import folder_keys, load_profiles
from rltriton_tune.tuning_db.schema import (
    Profile,
    ProfileError,
    UnsupportedVersion,
    bundle_to_json,
    sized_dumps,
)
from rltriton_tune.tuning_db.store import WriteError, read_profiles, record, write_atomic


class ExportError(OSError):
    """``export`` refused its destination; the message says why."""


def check_export_destination(dest: Path, overwrite: bool = False) -> None:
    """Raise :class:`ExportError` unless ``dest`` can take an export: it must not be a
    symlink, a folder, a device or anything but a regular file, its folder must be a
    folder (or creatable), and an existing file is replaced only with ``overwrite``."""
    dest = Path(dest)
    try:
        info = os.lstat(dest)
    except FileNotFoundError:
        info = None
    except OSError as err:  # e.g. a path under a regular file
        raise ExportError(f"{dest}: {err.strerror or err}") from None
    if info is not None:
        if stat.S_ISLNK(info.st_mode):
            raise ExportError(f"{dest} is a symbolic link; give the real path")
        if stat.S_ISDIR(info.st_mode):
            raise ExportError(f"{dest} is a folder; give a file name")
        if not stat.S_ISREG(info.st_mode):
            raise ExportError(f"{dest} is not a regular file")
        if not overwrite:
            raise ExportError(f"{dest} already exists")
    for parent in dest.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ExportError(f"{dest}: {parent} is not a folder")
            break


def export_profiles(dest: Path, fp: dict[str, Any] | None = None, *,
                    overwrite: bool = True) -> int:
    """Write the merged entries (shipped, overridden by the user's, plus in-memory ones)
    to ``dest`` and return how many entries were written.

    With ``fp``, or when only one fingerprint is known, ``dest`` is a plain profile
    file (it can be dropped into ``profiles/`` to ship it); with ``fp=None`` and
    several fingerprints it is an export bundle holding one profile per fingerprint.
    ``dest`` must be a regular file or new (see :func:`check_export_destination`); an
    existing file is replaced only with ``overwrite``.
    """
    check_export_destination(dest, overwrite)
    text, count = export_text(fp)
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(dest, text)
    return count


def export_text(fp: dict[str, Any] | None = None) -> tuple[str, int]:
    """What :func:`export_profiles` writes, and how many entries it holds (``export -``
    prints it)."""
    fingerprints = [fp] if fp is not None else known_fingerprints()
    profiles = [Profile(f, dict(load_profiles(f).entries)) for f in fingerprints]
    if len(profiles) == 1:
        document = profiles[0].to_json()
    else:
        document = bundle_to_json(profiles)
    return sized_dumps(document), sum(len(p.entries) for p in profiles)


def import_profiles(src: Path, directory: Path | None = None) -> int:
    """Validate ``src`` (a profile file or an export bundle) as a whole, then add each
    profile's entries to ``directory`` (default: the user's folder). A key that already
    has an entry there keeps it: replacing a measured entry takes a head-to-head timing
    (``rltriton-tune tune --refresh``), not a date. Returns the number of entries added.
    Raises :class:`ProfileError` naming the problem if any part of ``src`` is invalid
    (then nothing is imported), and :class:`~rltriton_tune.tuning_db.store.WriteError`
    if the folder cannot be written (nothing is kept in memory then)."""
    return merge_profiles(read_profiles(Path(src)), directory)


def merge_profiles(profiles: list[Profile], directory: Path | None = None) -> int:
    """Add validated ``profiles`` (as :func:`import_profiles` does, e.g. parsed from
    standard input) to ``directory``; returns the number of entries added.

    A key that any readable file of the folder holds for the profile's device keeps that
    entry (the one dispatch serves: a copied export counts, not only the device's own
    file). Every target file is checked before the first is written, so a profile of a
    newer schema in the way of one of a bundle's devices stops the import with nothing
    written (:class:`WriteError`)."""
    base = Path(directory) if directory is not None else locations.user_dir()
    held: dict[str, set[str]] = {}
    plans = []
    for profile in profiles:
        target = locations.profile_path(profile.fingerprint, base)
        _check_target(target)
        stored = held.setdefault(identity_text(profile.fingerprint),
                                 folder_keys(profile.fingerprint, base))
        new = [e for text, e in profile.entries.items() if text not in stored]
        stored.update(e.key.as_text() for e in new)
        plans.append((profile.fingerprint, new))
    added = 0
    for fp, new in plans:
        if not new:
            continue
        try:
            record(fp, new, base, replace=False, keep_in_memory=False)
        except WriteError as err:
            if added:
                raise WriteError(f"{err.reason} (after {added} entries of the bundle's "
                                 "earlier devices were added)", err.path) from None
            raise
        added += len(new)
    return added


def _check_target(target: Path) -> None:
    """Raise :class:`WriteError` where an import cannot write ``target``: a profile of a
    newer schema is there (a corrupt or foreign one is set aside by the write)."""
    try:
        read_profiles(target)
    except UnsupportedVersion as err:
        raise WriteError(err.reason, target) from None
    except (ProfileError, OSError):
        pass


def known_fingerprints() -> list[dict[str, Any]]:
    """Every fingerprint with a readable profile in the shipped or user folder, or with
    in-memory entries, in a stable order."""
    found: dict[str, dict[str, Any]] = {}
    for folder in (locations.shipped_dir(), locations.user_dir()):
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.json")):
            try:
                profiles = read_profiles(path)
            except ProfileError:
                continue
            for profile in profiles:
                found.setdefault(identity_text(profile.fingerprint), identity(profile.fingerprint))
    for canonical in state.overlay_fingerprints() - found.keys():
        found[canonical] = json.loads(canonical)
    return [found[c] for c in sorted(found)]
