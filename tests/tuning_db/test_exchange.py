"""Export, import and clear: round trips between folders and machines."""

import json
from pathlib import Path

import pytest
from tuning_db_helpers import A100, H200, entry

from rltriton_tune.dispatch import reset as _reset_runtime
from rltriton_tune.tuning_db import (
    SCHEMA,
    ProfileError,
    WriteError,
    clear,
    export_profiles,
    import_profiles,
    load_profiles,
    profile_path,
    read_profile,
    record,
)


def test_export_import_clear_round_trip(shipped, user, tmp_path):
    record(H200, [entry(n=8, strategy="flat")], shipped)
    record(H200, [entry(n=8, strategy="tiled"), entry(n=16)])
    record(A100, [entry(n=32, strategy="split")])
    bundle = tmp_path / "all.json"
    assert export_profiles(bundle) == 3  # H200 (2 keys, user over shipped) + A100 (1)
    assert len(json.loads(bundle.read_text())["profiles"]) == 2

    removed = clear()
    assert sorted(removed) == sorted([profile_path(H200), profile_path(A100)])
    assert set(load_profiles(H200).entries) == {"gae|none|float32|env|N=8|T=32"}  # shipped only
    assert load_profiles(A100).entries == {}

    assert import_profiles(bundle) == 3
    h200 = load_profiles(H200)
    assert h200.entries["gae|none|float32|env|N=8|T=32"].strategy == "tiled"
    assert len(h200.entries) == 2
    assert load_profiles(A100).entries["gae|none|float32|env|N=32|T=32"].strategy == "split"


@pytest.mark.filterwarnings("ignore:rltriton-tune. ignoring tuning profile")
def test_clear_deletes_only_files_this_package_wrote_and_their_locks(user):
    record(H200, [entry()])
    record(A100, [entry()])
    (user / "notes.json").write_text('{"mine": true}')
    (user / "run-1701500000.json").write_text('{"step": 1}')  # named like a profile id
    (user / "copy-of-h200.json").write_text(profile_path(H200).read_text())  # a user's export
    fake = user / profile_path(A100).name.replace(".json", "-0123456789.json")
    fake.write_text(profile_path(H200).read_text())  # a profile under another device's id
    assert clear(H200) == [profile_path(H200)]
    assert not Path(f"{profile_path(H200)}.lock").exists()
    assert len(load_profiles(A100).entries) == 1
    assert clear() == [profile_path(A100)]
    assert not Path(f"{profile_path(A100)}.lock").exists()
    for kept in ("notes.json", "run-1701500000.json", "copy-of-h200.json", fake.name):
        assert (user / kept).exists(), kept  # not written by this package: never deleted


def test_import_adds_missing_keys_and_never_replaces_by_date(user, tmp_path):
    record(H200, [entry(strategy="tiled", date="2025-05-01T00:00:00Z")])
    other = tmp_path / "other"
    record(H200, [entry(strategy="flat", date="9999-12-31T00:00:00Z"),  # "newer": still kept out
                  entry(n=8, strategy="split", date="2025-06-01T00:00:00Z")], other)
    assert import_profiles(profile_path(H200, other)) == 1
    stored = read_profile(profile_path(H200)).entries
    assert stored["gae|none|float32|env|N=4096|T=32"].strategy == "tiled"
    assert stored["gae|none|float32|env|N=8|T=32"].strategy == "split"


def test_import_keeps_a_key_served_by_another_file_of_the_folder(user, tmp_path):
    """A copied export in the folder serves its keys like the device's own file: an
    import must not override them through the own file (which wins within a folder)."""
    copied = user / "my-export.json"
    record(H200, [entry(strategy="tiled")], tmp_path / "a")
    user.mkdir(parents=True, exist_ok=True)
    copied.write_text(profile_path(H200, tmp_path / "a").read_text())
    record(H200, [entry(strategy="flat"), entry(n=8, strategy="split")], tmp_path / "b")
    assert import_profiles(profile_path(H200, tmp_path / "b")) == 1
    served = load_profiles(H200).entries
    assert served["gae|none|float32|env|N=4096|T=32"].strategy == "tiled"
    assert served["gae|none|float32|env|N=8|T=32"].strategy == "split"
    assert "gae|none|float32|env|N=4096|T=32" not in read_profile(profile_path(H200)).entries


def test_bundle_import_blocked_by_a_newer_profile_writes_nothing(user, tmp_path):
    """Every device's target is checked before the first is written: a bundle whose
    second device has a profile of a newer schema in the folder adds nothing at all."""
    user.mkdir(parents=True, exist_ok=True)
    newer = {"schema": SCHEMA, "version": 2, "fingerprint": H200, "entries": []}
    profile_path(H200, user).write_text(json.dumps(newer))
    bundle = tmp_path / "bundle.json"
    bundle.write_text(json.dumps({"schema": SCHEMA, "version": 1, "profiles": [
        {"fingerprint": A100, "entries": [entry(n=30).to_json()]},
        {"fingerprint": H200, "entries": [entry(n=31).to_json()]}]}))
    with pytest.raises(WriteError, match="schema version 2 unsupported"):
        import_profiles(bundle)
    assert sorted(p.name for p in user.iterdir()) == [profile_path(H200).name]
    assert json.loads(profile_path(H200).read_text()) == newer


def test_import_into_an_unwritable_folder_raises_and_keeps_nothing(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    src = tmp_path / "src"
    record(H200, [entry()], src)
    monkeypatch.setenv("RLTRITON_TUNE_DB", str(blocker / "db"))
    _reset_runtime()
    with pytest.raises(WriteError, match="cannot write"):
        import_profiles(profile_path(H200, src))
    assert load_profiles(H200).entries == {} and blocker.read_text() == "x"


def test_import_into_an_explicit_folder(tmp_path):
    src = tmp_path / "src"
    record(H200, [entry()], src)
    dest = tmp_path / "dest"
    assert import_profiles(profile_path(H200, src), dest) == 1
    assert read_profile(profile_path(H200, dest)).entries == read_profile(
        profile_path(H200, src)).entries


@pytest.mark.parametrize("text, message", [
    ("{", "truncated"),
    ('{"schema": "other", "version": 1}', "foreign schema 'other'"),
    (json.dumps({"schema": SCHEMA, "version": 7, "fingerprint": H200, "entries": []}),
     "schema version 7 unsupported"),
    (json.dumps({"schema": SCHEMA, "version": 1, "profiles": [
        {"fingerprint": H200, "entries": []},
        {"fingerprint": A100, "entries": [{"algorithm": "gae", "N": 1}]}]}),
     "profile 1: entry 0: entry is missing field 'T'"),
])
def test_import_of_an_invalid_file_raises_and_imports_nothing(user, tmp_path, text, message):
    src = tmp_path / "bad.json"
    src.write_text(text)
    with pytest.raises(ProfileError, match=message) as info:
        import_profiles(src)
    assert str(src) in str(info.value)
    assert not user.exists() or list(user.iterdir()) == []


def test_import_of_a_missing_file_names_it(tmp_path):
    with pytest.raises(ProfileError, match="file not found"):
        import_profiles(tmp_path / "nope.json")


def test_export_with_nothing_known_writes_an_empty_valid_file(shipped, user, tmp_path):
    dest = tmp_path / "empty.json"
    assert export_profiles(dest, H200) == 0
    assert read_profile(dest).entries == {}
