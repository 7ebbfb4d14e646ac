"""Shared fixtures for the tuning-database tests.

The helper module lives next to this file and is put on ``sys.path`` so that
spawned worker processes can import it by name.
"""

import sys
from pathlib import Path

import pytest

from rltriton_tune import state as process
from rltriton_tune.dispatch import reset as _reset_runtime

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rltriton_tune.tuning_db import locations, state  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_process_state():
    """Each test starts with no cached profiles, no in-memory entries, no warn-once memory."""
    def reset():
        state.invalidate_cache()
        state.forget_warnings()
        with process.STATE.lock:
            process.STATE.overlay.clear()

    reset()
    yield
    reset()


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    """A temporary stand-in for the package's shipped-profile folder."""
    folder = tmp_path / "shipped"
    folder.mkdir()
    monkeypatch.setattr(locations, "shipped_dir", lambda: folder)
    return folder


@pytest.fixture
def user(monkeypatch, tmp_path):
    """The user's profile folder (already isolated per test by tests/conftest.py)."""
    folder = tmp_path / "user"
    monkeypatch.setenv(locations.DB_ENV, str(folder))
    _reset_runtime()
    return folder
