"""Moving profiles between machines: export to one file, import into the user's folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rltriton_tune.tuning_db import locations, state
from rltriton_tune.tuning_db.fingerprint import identity, identity_text
from rltriton_tune.tuning_db.loading import load_profiles
from rltriton_tune.tuning_db.schema import (
    Profile,
    ProfileError,
    bundle_to_json,
    dumps,
)
from rltriton_tune.tuning_db.store import read_profiles, record, write_atomic


def export_profiles(dest: Path, fp: dict[str, Any] | None = None) -> int:
    """Write the merged entries (shipped, overridden by the user's, plus in-memory ones)
    to ``dest`` and return how many entries were written.

    With ``fp``, or when only one fingerprint is known, ``dest`` is a plain profile
    file (it can be dropped into ``profiles/`` to ship it); with ``fp=None`` and
    several fingerprints it is an export bundle holding one profile per fingerprint.
    """
    fingerprints = [fp] if fp is not None else known_fingerprints()
    profiles = [Profile(f, dict(load_profiles(f).entries)) for f in fingerprints]
    if len(profiles) == 1:
        document = profiles[0].to_json()
    else:
        document = bundle_to_json(profiles)
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(dest, dumps(document))
    return sum(len(p.entries) for p in profiles)


def import_profiles(src: Path, directory: Path | None = None) -> int:
    """Validate ``src`` (a profile file or an export bundle) as a whole, then merge each
    profile in it into ``directory`` (default: the user's folder), the newer ``date``
    winning per key. Returns the number of entries imported. Raises
    :class:`ProfileError` naming the problem if any part of ``src`` is invalid (then
    nothing is imported)."""
    profiles = read_profiles(Path(src))
    for profile in profiles:
        record(profile.fingerprint, profile.entries.values(), directory)
    return sum(len(p.entries) for p in profiles)


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
