"""The runtime's environment: read once, parsed strictly, the same on every path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import rltriton_tune as R
from rltriton_tune import dispatch
from rltriton_tune.settings import Settings, parse_bool


@pytest.mark.parametrize("text", ["1", "true", "True", "YES", "on", " On "])
def test_true_values(text):
    assert parse_bool("X", text) is True


@pytest.mark.parametrize("text", ["", "0", "false", "False", "no", "OFF", "off "])
def test_false_values(text):
    assert parse_bool("X", text) is False


def test_junk_boolean_names_the_variable():
    with pytest.raises(ValueError, match="RLTRITON_TUNE_ONLINE='maybe' is not a boolean"):
        Settings.from_environ({"RLTRITON_TUNE_ONLINE": "maybe"})


def test_online_false_spellings_leave_online_tuning_off():
    for text in ("False", "off", "no", "0"):
        assert Settings.from_environ({"RLTRITON_TUNE_ONLINE": text}).online is False


def test_relative_db_path_is_resolved_when_read(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = Settings.from_environ({"RLTRITON_TUNE_DB": "profiles"})
    assert settings.db_dir == tmp_path / "profiles"
    monkeypatch.chdir(Path("/"))
    assert settings.db_dir == tmp_path / "profiles"  # unchanged by a later chdir


@pytest.mark.parametrize(("name", "value", "match"), [
    ("RLTRITON_TUNE_ONLINE_BUDGET", "soon", "not a number"),
    ("RLTRITON_TUNE_ONLINE_BUDGET", "-1", "positive"),
    ("RLTRITON_TUNE_ONLINE_BUDGET", "inf", "finite"),
    ("RLTRITON_TUNE_ONLINE_BUDGET", "nan", "finite"),
    ("RLTRITON_TUNE_LOG", "loud", "expected 'debug'"),
    ("RLTRITON_TUNE_SIBLINGS", "sometimes", "not a boolean"),
    # ~user of a user this machine does not have
    ("RLTRITON_TUNE_DB", "~no-such-user-rltriton/db", "not a usable path"),
    ("RLTRITON_TUNE_RECORD", "~no-such-user-rltriton/calls.json", "not a usable path"),
    ("RLTRITON_TUNE_DB", "profiles\0x", "NUL byte"),  # a mapping given to from_environ
])
def test_bad_values_name_the_variable(name, value, match):
    with pytest.raises(ValueError, match=f"{name}.*{match}"):
        Settings.from_environ({name: value})


def test_force_changed_after_import_has_no_effect_until_reset(monkeypatch):
    """Calls and ``explain`` agree: both follow the environment as read at import (or the
    last ``dispatch.reset()``), for shapes seen before and new ones alike."""
    args = (torch.randn(3, 5), torch.randn(3, 5), torch.zeros(3, 5))
    R.compute_gae(*args)
    monkeypatch.setenv("RLTRITON_TUNE_FORCE", "torch:mode=chunked")
    R.compute_gae(*args)
    R.compute_gae(torch.randn(3, 6), torch.randn(3, 6), torch.zeros(3, 6))
    assert {d.origin for d in dispatch.memo.decisions().values()} == {"fallback"}
    assert R.explain("gae", 3, 7, device="cpu").origin == "fallback"
    dispatch.reset()
    R.compute_gae(*args)
    assert [d.origin for d in dispatch.memo.decisions().values()] == ["forced"]
    assert R.explain("gae", 3, 7, device="cpu").origin == "forced"


def test_the_profile_folder_follows_the_settings(tmp_path, monkeypatch):
    from rltriton_tune.tuning_db import user_dir

    monkeypatch.setenv("RLTRITON_TUNE_DB", str(tmp_path / "mine"))
    dispatch.reset()
    assert user_dir() == tmp_path / "mine"


def test_sibling_profiles_are_on_unless_turned_off():
    assert Settings.from_environ({}).siblings
    assert not Settings.from_environ({"RLTRITON_TUNE_SIBLINGS": "off"}).siblings


def test_an_unusable_path_fails_the_calls_not_the_import(tmp_path):
    """The package imports with any environment; its calls then raise the variable's
    error (a training script sees it at its first call, not as an import crash)."""
    code = ("import torch, rltriton_tune\n"
            "try:\n"
            "    rltriton_tune.compute_gae(torch.ones(2, 3), torch.ones(2, 3), torch.zeros(2, 3))\n"
            "except ValueError as err:\n"
            "    print('raised', err)\n")
    env = {**os.environ, "RLTRITON_TUNE_RECORD": "~no-such-user-rltriton/calls.json",
           "RLTRITON_TUNE_DB": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "raised RLTRITON_TUNE_RECORD='~no-such-user-rltriton/calls.json' is not a usable " \
           "path" in done.stdout
