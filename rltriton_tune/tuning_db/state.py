"""Process-wide state: the loaded-profile cache, the in-memory overlay, warn-once.

The overlay holds entries that could not be written (read-only or uncreatable
folder), so this process still uses what it measured.
"""

from __future__ import annotations

import threading
import warnings
from pathlib import Path
from typing import Any

from rltriton_tune.tuning_db.schema import Entry

LOCK = threading.RLock()

#: (canonical fingerprint, shipped dir, user dir) -> ProfileSet
CACHE: dict[tuple[str, str, str], Any] = {}

#: canonical fingerprint -> key text -> (entry, the profile path it was meant for)
OVERLAY: dict[str, dict[str, tuple[Entry, Path]]] = {}

_WARNED: set[tuple[str, str]] = set()


def invalidate_cache() -> None:
    """Forget loaded profiles, so the next ``load_profiles`` reads the files again."""
    with LOCK:
        CACHE.clear()


def warn_once(topic: str, subject: str, message: str) -> bool:
    """Emit ``message`` as a RuntimeWarning once per (topic, subject) per process."""
    with LOCK:
        if (topic, subject) in _WARNED:
            return False
        _WARNED.add((topic, subject))
    warnings.warn(message, RuntimeWarning, stacklevel=3)
    return True


def forget_warnings() -> None:
    """Reset warn-once memory (for tests and long-lived tools that reload on purpose)."""
    with LOCK:
        _WARNED.clear()


def overlay_add(canonical: str, entries: list[Entry], path: Path,
                replace: bool = True) -> None:
    """Hold ``entries`` meant for ``path`` in memory; a later entry for the same key
    replaces the held one unless ``replace`` is False (as in :func:`store.merge_entries`)."""
    with LOCK:
        held = OVERLAY.setdefault(canonical, {})
        for entry in entries:
            text = entry.key.as_text()
            if replace or text not in held:
                held[text] = (entry, path)


def overlay_take(canonical: str, path: Path) -> list[Entry]:
    """Remove and return the overlay entries meant for ``path`` (they are being written)."""
    with LOCK:
        held = OVERLAY.get(canonical, {})
        taken = {text: e for text, (e, p) in held.items() if p == path}
        for text in taken:
            del held[text]
        return list(taken.values())


def overlay_drop(canonical: str | None, directory: Path) -> None:
    """Forget overlay entries meant for files in ``directory`` (for one fingerprint or all)."""
    with LOCK:
        for fp_text, held in OVERLAY.items():
            if canonical is not None and fp_text != canonical:
                continue
            for text in [t for t, (_, p) in held.items() if p.parent == directory]:
                del held[text]


def overlay_entries(canonical: str) -> dict[str, tuple[Entry, Path]]:
    with LOCK:
        return dict(OVERLAY.get(canonical, {}))
