"""Where profiles live: shipped with the package, and the user's own folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import platformdirs

from rltriton_tune.tuning_db.fingerprint import fingerprint_id

#: Environment variable naming the user's profile folder (overrides the platform default).
DB_ENV = "RLTRITON_TUNE_DB"


def user_dir() -> Path:
    """The user's profile folder: ``$RLTRITON_TUNE_DB`` if set, else the platform's user
    data folder for ``rltriton-tune`` (e.g. ``~/.local/share/rltriton-tune``)."""
    configured = os.environ.get(DB_ENV, "").strip()
    if configured:
        return Path(configured).expanduser()
    return Path(platformdirs.user_data_dir("rltriton-tune"))


_SHIPPED = Path(__file__).resolve().parent / "profiles"


def shipped_dir() -> Path:
    """Profiles shipped inside the package (reviewed like code)."""
    return _SHIPPED


def profile_path(fp: dict[str, Any], directory: Path | None = None) -> Path:
    """``<directory>/<fingerprint_id(fp)>.json``; ``directory`` defaults to :func:`user_dir`."""
    base = Path(directory) if directory is not None else user_dir()
    return base / f"{fingerprint_id(fp)}.json"
