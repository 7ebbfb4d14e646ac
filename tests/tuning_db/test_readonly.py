"""A folder that cannot be written keeps new entries in memory, with one warning."""

import os
import warnings

import pytest
from tuning_db_helpers import H200, entry

from rltriton_tune.dispatch import reset as _reset_runtime
from rltriton_tune.tuning_db import load_profiles, profile_path, read_profile, record

KEY_A = "gae|none|float32|env|N=4096|T=32"
KEY_B = "gae|none|float32|env|N=8|T=32"


def _record_twice_and_load():
    """Two records and two loads; returns (results, profile set, rltriton warnings)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [record(H200, [entry()]), record(H200, [entry(n=8)])]
        loaded = load_profiles(H200)
    found = [w for w in caught
             if issubclass(w.category, RuntimeWarning) and "rltriton-tune" in str(w.message)]
    return results, loaded, found


def test_uncreatable_folder_keeps_entries_in_memory(tmp_path, monkeypatch):
    """Real case that holds even as root: the folder would have to live under a file."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a regular file")
    monkeypatch.setenv("RLTRITON_TUNE_DB", str(blocker / "profiles"))
    _reset_runtime()
    results, loaded, found = _record_twice_and_load()
    assert results == [None, None]
    assert len(found) == 1 and "keeping new entries in memory" in str(found[0].message)
    assert set(loaded.entries) == {KEY_A, KEY_B} == loaded.in_memory
    assert loaded.sources[KEY_A] == profile_path(H200)
    assert any(r.used and "in memory" in r.reason for r in loaded.reports)
    assert blocker.read_text() == "a regular file"


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores folder permissions")
def test_read_only_folder_keeps_entries_in_memory(tmp_path, monkeypatch):
    folder = tmp_path / "ro"
    folder.mkdir()
    monkeypatch.setenv("RLTRITON_TUNE_DB", str(folder))
    _reset_runtime()
    folder.chmod(0o555)
    try:
        results, loaded, found = _record_twice_and_load()
    finally:
        folder.chmod(0o755)
    assert results == [None, None] and len(found) == 1
    assert set(loaded.entries) == {KEY_A, KEY_B} == loaded.in_memory
    assert list(folder.iterdir()) == []


def test_failing_rename_keeps_entries_in_memory_and_retries_later(tmp_path, monkeypatch):
    """Simulated read-only file system: the final rename is refused."""
    user = tmp_path / "user"
    monkeypatch.setenv("RLTRITON_TUNE_DB", str(user))
    _reset_runtime()
    record(H200, [entry(n=1)])
    before = profile_path(H200).read_bytes()

    def refuse(src, dst):
        raise PermissionError(13, "Read-only file system", str(dst))

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", refuse)
        results, loaded, found = _record_twice_and_load()
    assert results == [None, None]
    assert len(found) == 1 and "Read-only file system" in str(found[0].message)
    assert set(loaded.entries) == {KEY_A, KEY_B, "gae|none|float32|env|N=1|T=32"}
    assert loaded.in_memory == {KEY_A, KEY_B}
    assert profile_path(H200).read_bytes() == before  # the old file is intact
    assert not list(user.glob(".*.tmp"))  # no temp file left behind
    # Once writing works again, the in-memory entries are written with the next record.
    assert record(H200, [entry(n=16)]) == profile_path(H200)
    assert len(read_profile(profile_path(H200)).entries) == 4
    assert load_profiles(H200).in_memory == set()


def test_a_profile_past_the_readers_limit_is_not_written(tmp_path, monkeypatch):
    """A write that would take the profile past the size every reader refuses keeps the
    new entries in memory, with one warning, and leaves the file as it was (written, it
    would be unusable and moved aside by the next write). The limit is lowered here."""
    from rltriton_tune.tuning_db import schema

    user = tmp_path / "user"
    monkeypatch.setenv("RLTRITON_TUNE_DB", str(user))
    _reset_runtime()
    record(H200, [entry(n=1)])
    before = profile_path(H200).read_bytes()
    monkeypatch.setattr(schema, "MAX_PROFILE_BYTES", len(before) + 100)
    results, loaded, found = _record_twice_and_load()
    assert results == [None, None]
    assert len(found) == 1 and "too large" in str(found[0].message), found
    assert loaded.in_memory == {KEY_A, KEY_B}
    assert profile_path(H200).read_bytes() == before
    assert [p.name for p in user.iterdir() if ".bad-" in p.name] == []


def test_a_symlinked_profile_is_written_through(tmp_path, monkeypatch):
    """A profile that is a symbolic link (to a file kept elsewhere) stays a link: the
    write replaces its target."""
    user = tmp_path / "user"
    elsewhere = tmp_path / "dotfiles"
    monkeypatch.setenv("RLTRITON_TUNE_DB", str(elsewhere))
    _reset_runtime()
    record(H200, [entry(n=1)])
    target = profile_path(H200)
    user.mkdir()
    link = user / target.name
    link.symlink_to(target)
    monkeypatch.setenv("RLTRITON_TUNE_DB", str(user))
    _reset_runtime()
    assert record(H200, [entry(n=8)]) == link
    assert link.is_symlink() and os.path.realpath(link) == str(target)
    assert set(read_profile(target).entries) == {"gae|none|float32|env|N=1|T=32", KEY_B}
