"""All mutable process state of the runtime, in one object.

Dispatch's memo of prepared launchers, the decisions taken, warnings given,
configs that failed to compile, per-device fingerprints, the loaded-profile
cache, the online-tuning plug-in and the workload recorder live in
:data:`STATE`. Tests make it fresh with :func:`reset`. Locks are re-created in
a forked child (``os.register_at_fork``), so a child never waits on a lock a
parent thread held at the moment of the fork; what the child inherits is
consistent because every table is only ever updated whole.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable
from typing import Any

from rltriton_tune.settings import Settings


class FallbackWarning(RuntimeWarning):
    """A GPU path was expected but the torch fallback runs instead."""


class RuntimeState:
    """The runtime's process state. One instance, :data:`STATE`; see the module doc."""

    def __init__(self, settings: Settings | None = None, *, defer_errors: bool = False) -> None:
        error = None
        if settings is None:
            try:
                settings = Settings.from_environ()
            except ValueError as exc:  # a junk variable
                if not defer_errors:
                    raise
                settings, error = Settings(), str(exc)
        self._settings = settings
        #: Why the environment could not be read at import (``defer_errors``): reading
        #: :attr:`settings` raises it, so importing works (the CLI can report it in one
        #: line) and every call or ``explain`` raises it.
        self.settings_error: str | None = error
        #: Guards every table below on the miss path (re-entrant: online tuning runs
        #: estimator calls while a miss is being resolved).
        self.lock = threading.RLock()
        #: memo key -> prepared launcher. Read without the lock on the hot path: dict reads
        #: are atomic and entries are only ever added whole.
        self.table: dict[tuple, Callable] = {}
        #: memo key -> the usual call's whole launch bound to its launcher
        #: (``hot_path``; ``FastLaunch.bind``), or False where the launcher offers none.
        self.bound: dict[tuple, Any] = {}
        #: (key, device) -> Decision taken by a call in this process.
        self.decisions: dict[tuple, Any] = {}
        #: (key, device, strategy, source) already logged.
        self.logged: set[tuple] = set()
        #: warn-once topics already warned about.
        self.warned: set[str] = set()
        #: (device, strategy, params) that failed to compile or launch in this process.
        self.failed_configs: dict[tuple, str] = {}
        #: device -> fingerprint dict.
        self.fingerprints: dict[Any, dict[str, Any]] = {}
        #: (key, device) pairs online tuning has tried.
        self.online_attempted: set[tuple] = set()
        #: Installed by the tooling (``rltriton_tune.tune.online``): tunes one key.
        self.online_tuner: Callable | None = None
        #: Set by the package's facade: installs :attr:`online_tuner` where the environment
        #: asks for online tuning (called at import and by ``dispatch.reset``).
        self.online_installer: Callable[[], None] | None = None
        #: The forced choice parsed from ``RLTRITON_TUNE_FORCE`` (parsed on first use).
        self.env_forced: Any = None
        self.env_forced_parsed = False
        #: The workload recorder when ``RLTRITON_TUNE_RECORD`` is set (made on first miss).
        self.recorder: Any = None
        #: (fingerprint identity, shipped dir, user dir) -> loaded ProfileSet.
        self.profile_cache: dict[tuple, Any] = {}
        #: fingerprint identity -> key text -> (entry, the profile path it was meant for):
        #: entries this process measured but could not write.
        self.overlay: dict[str, dict[str, tuple[Any, Any]]] = {}

    @property
    def settings(self) -> Settings:
        """The environment as read; ValueError naming the variable if it could not be."""
        check_environment(self)
        return self._settings

    def forget_profile_launchers(self) -> None:
        """Drop the memoised launchers whose decision read the profiles (every one not made
        under ``force()``), so the next call of their keys decides again from the profiles
        as they are now: after an entry is recorded, imported or cleared in this process,
        calls and ``explain`` agree. Failed configs, warnings and online attempts stay."""
        with self.lock:
            # The memo key's last element is the ``force()`` context; a forced choice never
            # reads a profile. New dicts, assigned whole: the hot path reads them unlocked.
            self.bound = {k: v for k, v in self.bound.items() if k[-1] is not None}
            self.table = {k: v for k, v in self.table.items() if k[-1] is not None}

    def after_fork_in_child(self) -> None:
        """New locks in a forked child; the recorder forgets the parent's counts."""
        self.lock = threading.RLock()
        if self.recorder is not None:
            self.recorder.after_fork_in_child()


STATE = RuntimeState(defer_errors=True)


def reset(settings: Settings | None = None) -> RuntimeState:
    """Make the process state fresh, re-reading the environment (tests, tools).

    The online tuner a tool installed (and its installer), and entries this process
    measured but could not write, stay.
    """
    tuner, installer = STATE.online_tuner, STATE.online_installer
    recorder = STATE.recorder
    if recorder is not None:
        recorder.close()
    with STATE.lock:
        overlay = STATE.overlay
        STATE.__init__(settings)
        STATE.online_tuner, STATE.online_installer = tuner, installer
        STATE.overlay = overlay  # unwritten measurements stay for the process
    return STATE


def check_environment(state: RuntimeState | None = None) -> None:
    """Raise the ValueError of a junk environment variable found at import, if any: every
    call that is not memoised, and ``explain``, check before deciding anything."""
    error = (state or STATE).settings_error
    if error is not None:
        raise ValueError(error)


def warn_once(topic: str, message: str, category: type[Warning] = FallbackWarning,
              stacklevel: int = 4) -> bool:
    """Issue ``message`` at most once per process per ``topic``; whether it was issued."""
    with STATE.lock:
        if topic in STATE.warned:
            return False
        STATE.warned.add(topic)
    warnings.warn(message, category, stacklevel=stacklevel)
    return True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: STATE.after_fork_in_child())
