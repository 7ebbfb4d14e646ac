"""Reading and writing profile files: locked, merged with what is on disk, atomic.

A write takes ``<profile>.json.lock`` (an OS file lock, released if the holder
dies), re-reads the file, merges, writes a temp file, fsyncs it and renames it
over the profile. Readers never take the lock: a rename is atomic, so they see
the old file or the new one, never a mix.

Merging never trusts the ``date`` written in a file: a writer either replaces
the stored entry of a key (the tuner does so only after timing its choice
against the stored one in the same process) or only adds keys that are missing
(``import``).
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

import filelock

from rltriton_tune.tuning_db import state
from rltriton_tune.tuning_db.fingerprint import fingerprint_id, identity_text, same_fingerprint
from rltriton_tune.tuning_db.locations import profile_path, user_dir
from rltriton_tune.tuning_db.schema import (
    MAX_PROFILE_BYTES,
    Entry,
    Profile,
    ProfileError,
    TooLarge,
    UnsupportedVersion,
    canonical_fingerprint,
    dumps,
    profiles_from_text,
    sized_dumps,
    too_large,
    utc_now,
)

#: How long a writer waits for another process's lock before keeping entries in memory.
LOCK_TIMEOUT_S = 60.0


class WriteError(OSError):
    """A profile could not be written; ``reason`` says why (without the path)."""

    def __init__(self, reason: str, path: Path) -> None:
        self.reason = reason
        self.path = path
        super().__init__(f"cannot write {path}: {reason}")


def read_profiles(path: Path) -> list[Profile]:
    """Every profile in a file (a profile file holds one; an export bundle may hold several)."""
    return profiles_from_text(_read_bounded(Path(path)), path)


def _read_regular(path: Path) -> bytes:
    """The bytes of a regular file of at most :data:`MAX_PROFILE_BYTES`: ProfileError for
    anything else, OSError as raised (FileNotFoundError included)."""
    if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block, a device never end
        raise ProfileError("not a regular file", path)
    with open(path, "rb") as f:
        data = f.read(MAX_PROFILE_BYTES + 1)
        if len(data) > MAX_PROFILE_BYTES:
            raise ProfileError(too_large(os.fstat(f.fileno()).st_size), path)
        return data


def _read_bounded(path: Path) -> bytes:
    """The bytes of a regular file of at most :data:`MAX_PROFILE_BYTES`; else ProfileError."""
    try:
        return _read_regular(path)
    except FileNotFoundError:
        raise ProfileError("file not found", path) from None
    except OSError as err:
        raise ProfileError(f"unreadable: {err.strerror or err}", path) from None


def read_profile(path: Path) -> Profile:
    """Read and validate one profile file; raise :class:`ProfileError` if it is truncated,
    corrupt, of a foreign schema or of an unsupported version."""
    profiles = read_profiles(path)
    if len(profiles) != 1:
        raise ProfileError(f"an export bundle of {len(profiles)} profiles, not one profile", path)
    return profiles[0]


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so that a crash at any moment leaves the old or the
    new content: temp file in the same folder, fsync, rename, fsync of the folder. A file
    replaced keeps its permission bits; a new one is readable by all, writable by its
    owner. A symbolic link is written through: its target is replaced, the link kept."""
    path = Path(path)
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mode = 0o644
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def merge_entries(base: dict[str, Entry], incoming: Iterable[Entry],
                  replace: bool = True) -> dict[str, Entry]:
    """``base`` updated with ``incoming``: for a key in both, ``incoming`` wins when
    ``replace`` (the caller has decided, e.g. by a head-to-head timing), else ``base``
    is kept and only missing keys are added. Dates are not compared."""
    merged = dict(base)
    for entry in incoming:
        text = entry.key.as_text()
        if replace or text not in merged:
            merged[text] = entry
    return merged


def record(fp: dict[str, Any], entries: Iterable[Entry], directory: Path | None = None,
           *, replace: bool = True, keep_in_memory: bool = True) -> Path | None:
    """Merge ``entries`` into the profile for ``fp`` in ``directory`` (default: the
    user's folder) and return its path.

    ``replace``: an entry replaces the stored one of its key (the caller compared
    them); when False, keys already stored keep their entry (see :func:`merge_entries`).
    Entries without a date get the current time. If the folder cannot be written
    (read-only, uncreatable, lock timeout, a profile of a newer schema in the way, or
    a profile that would exceed the size readers take), the entries are kept in this
    process's memory, where ``load_profiles`` still finds them, one warning is issued
    per folder, and ``None`` is returned (as it is for no entries); with
    ``keep_in_memory=False`` :class:`WriteError` is raised instead and nothing is kept.
    Bad entries raise :class:`ProfileError` (or ``TypeError`` for non-entries) before
    any I/O.
    """
    canonical_fingerprint(fp)
    canonical = identity_text(fp)
    fresh = _prepare(entries)
    if not fresh:
        return None
    base = Path(directory) if directory is not None else user_dir()
    path = profile_path(fp, base)
    pending = state.overlay_take(canonical, path)  # earlier unwritten entries: retry them
    try:
        _merge_into(path, fp, pending, fresh, replace)
    except (OSError, filelock.Timeout, UnsupportedVersion, TooLarge) as err:
        state.overlay_add(canonical, pending, path)
        reason = err.reason if isinstance(err, ProfileError) else (
            f"{type(err).__name__}: {err.strerror or err}" if isinstance(err, OSError)
            else f"{type(err).__name__}: {err}")
        if not keep_in_memory:
            raise WriteError(reason, path) from None
        state.overlay_add(canonical, fresh, path, replace)
        state.warn_once("unwritable", str(base),
                        f"rltriton-tune: cannot write tuning profile {path} ({reason}); "
                        "keeping new entries in memory for this process only")
        return None
    finally:
        state.invalidate_cache()
    return path


def owned_profiles(directory: Path | None = None) -> list[tuple[Path, dict[str, Any]]]:
    """The profile files this package wrote in ``directory`` (default: the user's
    folder), with their fingerprints: regular files holding exactly one valid profile
    and named ``<fingerprint_id>.json`` after that profile's own fingerprint. Exports,
    bundles, corrupt files and anything else are not listed."""
    base = Path(directory) if directory is not None else user_dir()
    owned = []
    try:
        candidates = sorted(base.glob("*.json")) if base.is_dir() else []
    except OSError:
        return []
    for path in candidates:
        if path.is_symlink() or not path.is_file():
            continue
        try:
            profiles = read_profiles(path)
        except ProfileError:
            continue
        if len(profiles) == 1 and path.name == f"{fingerprint_id(profiles[0].fingerprint)}.json":
            owned.append((path, profiles[0].fingerprint))
    return owned


def remove_profile(path: Path) -> list[Path]:
    """Delete one profile file (under its write lock) and its lock file; returns what
    was removed. Raises OSError when the folder cannot be written."""
    path = Path(path)
    lock = Path(f"{path}.lock")
    removed = []
    with filelock.FileLock(str(lock), timeout=LOCK_TIMEOUT_S):
        if path.exists():
            path.unlink()
            removed.append(path)
            state.invalidate_cache()  # the next load reads the folder without it
    with suppress(FileNotFoundError):
        lock.unlink()
        removed.append(lock)
    return removed


def clear(fp: dict[str, Any] | None = None, directory: Path | None = None) -> list[Path]:
    """Delete the profiles this package wrote in ``directory`` (default: the user's
    folder; see :func:`owned_profiles`): the one for ``fp``, or all of them when
    ``fp`` is None, with their lock files. Other files are never touched. Returns
    the profile paths removed; in-memory entries for the same folder are forgotten."""
    canonical = canonical_fingerprint(fp) if fp is not None else None
    base = Path(directory) if directory is not None else user_dir()
    removed: list[Path] = []
    for path, found in owned_profiles(base):
        if canonical is None or canonical_fingerprint(found) == canonical:
            if path in remove_profile(path):
                removed.append(path)
    state.overlay_drop(canonical, base)
    state.invalidate_cache()
    return removed


def _prepare(entries: Iterable[Entry]) -> list[Entry]:
    """Stamp missing dates and check each entry survives the JSON round trip."""
    prepared = []
    for entry in entries:
        if not isinstance(entry, Entry):
            raise TypeError(f"entries must hold Entry objects, got {type(entry).__name__}")
        if not entry.date:
            entry = replace(entry, date=utc_now())
        try:
            Entry.from_json(entry.to_json())  # field checks first: clearer messages
            text = dumps(entry.to_json())
            text.encode("utf-8")  # e.g. lone surrogates in a param name cannot be stored
            prepared.append(Entry.from_json(json.loads(text)))
        except (TypeError, ValueError) as err:
            raise ProfileError(f"entries: cannot store {entry.key.as_text()}: {err}") from None
    return prepared


def _merge_into(path: Path, fp: dict[str, Any], pending: list[Entry], incoming: list[Entry],
                replace: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(f"{path}.lock", timeout=LOCK_TIMEOUT_S):
        for stale in path.parent.glob(f".{path.name}.*.tmp"):
            with suppress(OSError):  # left by a writer that died: only writers make these
                stale.unlink()
        current = _on_disk(path, fp)
        merged = merge_entries(merge_entries(current.entries, pending), incoming, replace)
        write_atomic(path, sized_dumps(Profile(fp, merged, borrowing=current.borrowing,
                                               extra=current.extra).to_json(), path))


def record_borrowing(fp: dict[str, Any], factors: dict[str, float],
                     directory: Path | None = None) -> Path:
    """Store measured borrowing factors (``tune/borrowing.py``) in the profile for ``fp``."""
    canonical_fingerprint(fp)
    base = Path(directory) if directory is not None else user_dir()
    path = profile_path(fp, base)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with filelock.FileLock(f"{path}.lock", timeout=LOCK_TIMEOUT_S):
            current = _on_disk(path, fp)
            write_atomic(path, sized_dumps(Profile(
                fp, current.entries, borrowing=dict(factors), extra=current.extra).to_json(),
                path))
    finally:
        state.invalidate_cache()
    return path


def _on_disk(path: Path, fp: dict[str, Any]) -> Profile:
    """What the profile holds now; a corrupt or foreign file is moved aside, not lost."""
    try:
        profiles = profiles_from_text(_read_regular(path), path)
        if len(profiles) == 1 and same_fingerprint(profiles[0].fingerprint, fp):
            return profiles[0]
        problem = "holds another fingerprint"
    except FileNotFoundError:
        return Profile(fp)
    except UnsupportedVersion:
        raise
    except ProfileError as err:  # also a FIFO or device there: never opened, moved aside
        problem = err.reason
    aside = path.with_name(f"{path.name}.bad-{utc_now().replace(':', '')}")
    os.replace(path, aside)
    state.warn_once("moved", str(path),
                    f"rltriton-tune: profile {path} is unusable ({problem}); "
                    f"moved it to {aside.name} and started a new one")
    return Profile(fp)


def _fsync_dir(directory: Path) -> None:
    with suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
