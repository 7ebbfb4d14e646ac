"""The profile side of the process state: loaded-profile cache, in-memory overlay, warnings.

The tables live in the runtime's one process-state object (:mod:`rltriton_tune.state`),
so a test's reset and a fork treat them like the rest. The overlay holds entries that
could not be written (read-only or uncreatable folder), so this process still uses
what it measured.
"""

from __future__ import annotations

from pathlib import Path

from rltriton_tune import state as process
from rltriton_tune.tuning_db.schema import Entry


def invalidate_cache() -> None:
    """Forget loaded profiles, so the next ``load_profiles`` reads the files again, and the
    launchers dispatch memoised from them, so the next calls decide again."""
    with process.STATE.lock:
        process.STATE.profile_cache.clear()
        process.STATE.forget_profile_launchers()


def warn_once(topic: str, subject: str, message: str) -> bool:
    """Emit ``message`` as a RuntimeWarning once per (topic, subject) per process."""
    return process.warn_once(f"{topic}:{subject}", message, RuntimeWarning, stacklevel=4)


def forget_warnings() -> None:
    """Reset warn-once memory (for tests and long-lived tools that reload on purpose)."""
    with process.STATE.lock:
        process.STATE.warned.clear()


def overlay_add(canonical: str, entries: list[Entry], path: Path,
                replace: bool = True) -> None:
    """Hold ``entries`` meant for ``path`` in memory; a later entry for the same key
    replaces the held one unless ``replace`` is False (as in :func:`store.merge_entries`)."""
    with process.STATE.lock:
        held = process.STATE.overlay.setdefault(canonical, {})
        for entry in entries:
            text = entry.key.as_text()
            if replace or text not in held:
                held[text] = (entry, path)


def overlay_take(canonical: str, path: Path) -> list[Entry]:
    """Remove and return the overlay entries meant for ``path`` (they are being written)."""
    with process.STATE.lock:
        held = process.STATE.overlay.get(canonical, {})
        taken = {text: e for text, (e, p) in held.items() if p == path}
        for text in taken:
            del held[text]
        return list(taken.values())


def overlay_drop(canonical: str | None, directory: Path) -> None:
    """Forget overlay entries meant for files in ``directory`` (for one fingerprint or all)."""
    with process.STATE.lock:
        for fp_text, held in process.STATE.overlay.items():
            if canonical is not None and fp_text != canonical:
                continue
            for text in [t for t, (_, p) in held.items() if p.parent == directory]:
                del held[text]


def overlay_entries(canonical: str) -> dict[str, tuple[Entry, Path]]:
    with process.STATE.lock:
        return dict(process.STATE.overlay.get(canonical, {}))


def overlay_fingerprints() -> set[str]:
    """Canonical fingerprints that have in-memory entries."""
    with process.STATE.lock:
        return {c for c, held in process.STATE.overlay.items() if held}


def cached(cache_key: tuple) -> object | None:
    with process.STATE.lock:
        return process.STATE.profile_cache.get(cache_key)


def cache(cache_key: tuple, value: object) -> None:
    with process.STATE.lock:
        process.STATE.profile_cache[cache_key] = value
