"""Loading: precedence, fingerprint matching, bad files, caching, and the merge rule."""

import json
import os
import warnings

import pytest
from tuning_db_helpers import A100, H200, entry

from rltriton_tune.tuning_db import (
    SCHEMA,
    Profile,
    export_profiles,
    invalidate_cache,
    load_profiles,
    loaded_once,
    profile_path,
    read_profile,
    record,
)
from rltriton_tune.tuning_db.schema import dumps

KEY = "gae|none|float32|env|N=4096|T=32"


def rltriton_warnings(caught):
    return [w for w in caught
            if issubclass(w.category, RuntimeWarning) and "rltriton-tune" in str(w.message)]


def test_user_entries_override_shipped_ones(shipped, user):
    # The shipped entry is newer, yet the user's wins: precedence is by folder, not date.
    record(H200, [entry(strategy="flat", time_us=3.5, date="2026-12-01T00:00:00Z"),
                  entry(n=256, t=8, strategy="flat")], shipped)
    record(H200, [entry(strategy="tiled", time_us=2.5, date="2026-01-01T00:00:00Z")])
    loaded = load_profiles(H200)
    assert loaded.entries[KEY].strategy == "tiled"
    assert loaded.sources[KEY] == profile_path(H200, user)
    shipped_key = "gae|none|float32|env|N=256|T=8"
    assert loaded.entries[shipped_key].strategy == "flat"  # shipped-only keys still apply
    assert loaded.sources[shipped_key] == profile_path(H200, shipped)
    assert [(r.path, r.used, r.reason) for r in loaded.reports] == [
        (profile_path(H200, shipped), True, "matches this device"),
        (profile_path(H200, user), True, "matches this device"),
    ]


def test_foreign_fingerprint_is_reported_not_used(shipped, user):
    record(A100, [entry(strategy="split")], shipped)
    record(A100, [entry(strategy="sequential")])
    record({**H200, "abi": 2}, [entry(strategy="flat")])  # same GPU, other kernel ABI
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = load_profiles(H200)
    assert loaded.entries == {}
    assert rltriton_warnings(caught) == []  # another device's file is not an error
    reasons = {r.path: r.reason for r in loaded.reports}
    assert all(not r.used for r in loaded.reports) and len(reasons) == 3
    a100 = "fingerprint is for NVIDIA A100-SXM4-80GB (differs in capability, name, sm_count)"
    assert reasons[profile_path(A100, shipped)] == reasons[profile_path(A100)] == a100
    assert reasons[profile_path({**H200, "abi": 2})] == (
        "fingerprint is for NVIDIA H200 (differs in abi)")
    assert load_profiles(A100).entries[KEY].strategy == "sequential"


def _valid_text():
    return json.dumps({"schema": SCHEMA, "version": 1, "fingerprint": H200,
                       "entries": [entry(n=8).to_json()]}, indent=1)


BAD_FILES = {
    "truncated": (lambda: _valid_text()[: len(_valid_text()) // 2], "truncated"),
    "corrupt": (lambda: "\x00\x13garbage{{", "corrupt"),
    "foreign": (lambda: json.dumps({"schema": "vscode-settings", "version": 1}),
                "foreign schema 'vscode-settings'"),
    "newer": (lambda: _valid_text().replace('"version": 1', '"version": 2'),
              "schema version 2 unsupported"),
    "empty": (lambda: "", "empty file"),
    # A JSON integer no float holds (math.isfinite raised OverflowError, out of the loader).
    "huge time": (lambda: _valid_text().replace('"device_time_us": 2.5',
                                                '"device_time_us": ' + "9" * 400),
                  "'device_time_us' must be a finite time >= 0, got an integer of 1329 bits"),
}


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_bad_file_warns_once_is_reported_and_ignored(shipped, user, kind):
    record(H200, [entry()])  # a good profile next to the bad one
    text, reason = BAD_FILES[kind]
    bad = user / f"{kind}.json"
    bad.write_text(text())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = load_profiles(H200)
        invalidate_cache()
        second = load_profiles(H200)  # re-reads the files: still only one warning
        record(H200, [entry(n=16)])  # a write does not trip over the bad file either
        third = load_profiles(H200)
    found = rltriton_warnings(caught)
    assert len(found) == 1, [str(w.message) for w in found]
    assert str(bad) in str(found[0].message) and reason in str(found[0].message)
    for loaded in (first, second, third):
        assert loaded.entries[KEY].strategy == "tiled"
        report = next(r for r in loaded.reports if r.path == bad)
        assert not report.used and reason in report.reason
    assert bad.read_text() == text()  # a file under another name is left untouched
    assert "gae|none|float32|env|N=16|T=32" in third.entries


@pytest.mark.parametrize("kind", ["folder", "fifo", "link loop"])
def test_a_profile_name_that_is_no_regular_file_is_reported_and_warned(shipped, user, kind):
    """Not silently skipped: a ``*.json`` that is a folder, a FIFO (never opened) or a
    link loop is reported, with one warning, and the good profile beside it serves."""
    if kind == "fifo" and not hasattr(os, "mkfifo"):
        pytest.skip("needs os.mkfifo")
    record(H200, [entry()])
    bad = user / f"{kind.replace(' ', '-')}.json"
    if kind == "folder":
        bad.mkdir()
    elif kind == "fifo":
        os.mkfifo(bad)
    else:
        bad.symlink_to(bad)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = load_profiles(H200)
    found = rltriton_warnings(caught)
    assert len(found) == 1 and str(bad) in str(found[0].message)
    report = next(r for r in loaded.reports if r.path == bad)
    assert not report.used and ("not a regular file" in report.reason
                                or "unreadable" in report.reason)
    assert loaded.entries[KEY].strategy == "tiled"


def test_bad_shipped_file_is_ignored_too(shipped, user):
    (shipped / "broken.json").write_text("{")
    record(H200, [entry()])
    with pytest.warns(RuntimeWarning, match="broken.json"):
        loaded = load_profiles(H200)
    assert list(loaded.entries) == [KEY]


def test_corrupt_file_at_the_profile_path_is_moved_aside_on_write(user):
    path = profile_path(H200)
    user.mkdir()
    path.write_text('{"schema": "rltriton-tune-profile", "vers')
    with pytest.warns(RuntimeWarning, match="moved it to"):
        assert record(H200, [entry()]) == path
    assert list(read_profile(path).entries) == [KEY]
    aside = [p for p in user.iterdir() if ".bad-" in p.name]
    assert len(aside) == 1 and aside[0].read_text().endswith('"vers')


def test_newer_version_file_at_the_profile_path_is_not_overwritten(user):
    path = profile_path(H200)
    user.mkdir()
    newer = _valid_text().replace('"version": 1', '"version": 2')
    path.write_text(newer)
    with pytest.warns(RuntimeWarning, match="schema version 2"):
        assert record(H200, [entry()]) is None
    assert path.read_text() == newer
    with pytest.warns(RuntimeWarning, match="ignoring tuning profile"):
        loaded = load_profiles(H200)
    assert loaded.entries[KEY].strategy == "tiled"  # kept in memory
    assert KEY in loaded.in_memory


def test_load_is_cached_until_something_is_recorded(shipped, user):
    record(H200, [entry()])
    first = load_profiles(H200)
    profile_path(H200).unlink()  # invisible until the cache is invalidated
    assert loaded_once(H200) is first
    record(H200, [entry(n=8)])
    assert set(load_profiles(H200).entries) == {"gae|none|float32|env|N=8|T=32"}


def test_merge_ignores_dates_written_in_files(user):
    """A stored entry dated far in the future blocks nothing: the writer decides
    (the tuner only after a head-to-head), and ``replace=False`` only adds keys."""
    record(H200, [entry(strategy="tiled", date="9999-12-31T00:00:00Z")])
    record(H200, [entry(strategy="flat", date="2025-06-30T11:00:00Z")])
    assert read_profile(profile_path(H200)).entries[KEY].strategy == "flat"
    record(H200, [entry(strategy="split", date="9999-12-31T00:00:00Z"), entry(n=8)],
           replace=False)
    stored = read_profile(profile_path(H200)).entries
    assert stored[KEY].strategy == "flat" and "gae|none|float32|env|N=8|T=32" in stored
    record(H200, [entry(strategy="sequential", date="")])  # undated: stamped now
    stored = read_profile(profile_path(H200)).entries[KEY]
    assert stored.strategy == "sequential" and stored.date.endswith("Z")


def test_within_a_folder_the_fingerprints_own_file_wins_whatever_the_dates(user):
    record(H200, [entry(strategy="tiled", date="2020-01-01T00:00:00Z")])
    other = Profile(H200, {KEY: entry(strategy="flat", date="9999-12-31T00:00:00Z"),
                           "gae|none|float32|env|N=8|T=32": entry(n=8, strategy="flat")})
    (user / "aaa-copy.json").write_text(dumps(other.to_json()))
    (user / "zzz-copy.json").write_text(dumps(other.to_json()))
    loaded = load_profiles(H200)
    assert loaded.entries[KEY].strategy == "tiled"  # the own file, though "older"
    assert loaded.entries["gae|none|float32|env|N=8|T=32"].strategy == "flat"  # added


def test_export_of_a_single_fingerprint_is_a_shippable_profile(shipped, user, tmp_path):
    record(H200, [entry(n=8)], shipped)
    record(H200, [entry(n=16)])
    dest = tmp_path / "out" / "h200.json"
    assert export_profiles(dest, H200) == 2
    (shipped / "h200.json").unlink(missing_ok=True)
    dest.rename(shipped / "exported.json")
    invalidate_cache()
    assert len(load_profiles(H200).entries) == 2


def test_a_removed_profile_is_not_served_from_the_cache(shipped, user):
    from rltriton_tune.tuning_db import remove_profile

    path = record(H200, [entry(strategy="flat")])
    assert load_profiles(H200).entries[KEY].strategy == "flat"
    assert path in remove_profile(path)
    assert load_profiles(H200).entries == {}


def test_a_file_is_parsed_once_while_it_is_unchanged(shipped, user, monkeypatch):
    """Loading several fingerprints (and looking for a sibling GPU's profile) reads every
    file; each is parsed once until it changes or the cache is invalidated."""
    from rltriton_tune.tuning_db import loading

    parsed = []
    real = loading.read_profiles
    monkeypatch.setattr(loading, "read_profiles", lambda path: parsed.append(path) or real(path))
    path = record(H200, [entry(strategy="flat")], shipped)
    load_profiles(H200)
    load_profiles(A100)
    assert parsed == [path]
    record(H200, [entry(n=8, strategy="flat")], shipped)  # a rewrite: parsed again
    assert set(load_profiles(A100).entries) == set()
    assert parsed == [path, path]
    assert len(load_profiles(H200).entries) == 2
