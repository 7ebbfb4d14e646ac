"""Where profiles live: shipped with the package, and the user's own folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import platformdirs

from rltriton_tune.settings import ENV_DB, ENV_SHIPPED
from rltriton_tune.state import STATE
from rltriton_tune.tuning_db.fingerprint import fingerprint_id

#: Environment variable naming the user's profile folder (overrides the platform default);
#: read with the rest of the environment (``rltriton_tune.settings``).
DB_ENV = ENV_DB


def user_dir() -> Path:
    """The user's profile folder: ``$RLTRITON_TUNE_DB`` if set (as read at import or the
    last ``dispatch.reset()``), else the platform's user data folder for ``rltriton-tune``
    (e.g. ``~/.local/share/rltriton-tune``)."""
    configured = STATE.settings.db_dir
    if configured is not None:
        return configured
    return Path(platformdirs.user_data_dir("rltriton-tune"))


#: The profiles that ship inside the package (package data, reviewed like code).
PACKAGE_PROFILES = Path(__file__).resolve().parent / "profiles"

#: Environment variable replacing the shipped-profile folder: for tests, and for trying a
#: candidate set of shipped profiles before it goes into the package.
SHIPPED_ENV = ENV_SHIPPED


def shipped_dir() -> Path:
    """The shipped profiles: :data:`PACKAGE_PROFILES`, or ``$RLTRITON_TUNE_SHIPPED_DB``."""
    configured = STATE.settings.shipped_dir
    return configured if configured is not None else PACKAGE_PROFILES


def profile_path(fp: dict[str, Any], directory: Path | None = None) -> Path:
    """``<directory>/<fingerprint_id(fp)>.json``; ``directory`` defaults to :func:`user_dir`."""
    base = Path(directory) if directory is not None else user_dir()
    return base / f"{fingerprint_id(fp)}.json"
