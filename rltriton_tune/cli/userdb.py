"""The user's profile folder as the verbs use it: writable before work starts, results
that could not be saved put somewhere safe, and the keys a resumed run still lacks."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from rltriton_tune.cli.args import PROG, CLIError


def writable_db() -> Path:
    """The user's profile folder, created if missing; :class:`CLIError` (before any
    work) when it is a file or cannot be written."""
    from rltriton_tune.tuning_db import DB_ENV, user_dir

    folder = user_dir()
    hint = f"set {DB_ENV} to a writable folder"
    if folder.exists() and not folder.is_dir():
        raise CLIError(f"profile folder {folder} is not a folder; {hint}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise CLIError(f"profile folder {folder} cannot be written "
                       f"({exc.strerror or exc}); {hint}") from None
    return folder


def save_unsaved(device: Any) -> str | None:
    """Entries of this run that only live in memory (their folder refused the write):
    write them to a new file in the temporary folder and return the line telling the
    user where they are and how to keep them (None when everything was saved)."""
    from rltriton_tune.dispatch.devices import device_fingerprint
    from rltriton_tune.tuning_db import DB_ENV, Profile, load_profiles
    from rltriton_tune.tuning_db.schema import dumps

    fp = device_fingerprint(device)
    loaded = load_profiles(fp)
    if not loaded.in_memory:
        return None
    entries = {t: loaded.entries[t] for t in loaded.in_memory}
    where = next(iter({loaded.sources[t] for t in entries}))
    fd, name = tempfile.mkstemp(prefix="rltriton-tune-unsaved-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(dumps(Profile(fp, entries).to_json()))
    return (f"could not save {len(entries)} tuned entries to {where}; they are in {name}: "
            f"set {DB_ENV} to a writable folder and run `{PROG} import {name}`")


def missing_keys(keys: list, device: Any) -> list:
    """``keys`` without an entry measured with this torch and Triton in the user's profile."""
    from rltriton_tune.dispatch.devices import device_fingerprint
    from rltriton_tune.tuning_db import load_profiles, user_dir
    from rltriton_tune.tuning_db.fingerprint import software_versions

    profiles = load_profiles(device_fingerprint(device))
    here = software_versions()
    done = {text for text, entry in profiles.entries.items()
            if entry.software == here and _inside(profiles.sources.get(text), user_dir())}
    return [k for k in keys if k.as_text() not in done]


def _inside(path: Any, folder: Path) -> bool:
    try:
        return path is not None and Path(path).resolve().parent == folder.resolve()
    except OSError:
        return False
