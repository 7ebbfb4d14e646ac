"""Profile JSON: round trip, forward compatibility, and rejection of bad files."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tuning_db_helpers import A100, H200, entry

from rltriton_tune.algorithms import ALGORITHMS
from rltriton_tune.call import ProblemKey, flags_string
from rltriton_tune.tuning_db import (
    SCHEMA,
    SCHEMA_VERSION,
    Entry,
    Profile,
    ProfileError,
    UnsupportedVersion,
    fingerprint_id,
    profile_path,
    read_profile,
    record,
)
from rltriton_tune.tuning_db.schema import dumps, profiles_from_text


def test_round_trip_preserves_every_field(tmp_path):
    retrace = Entry(ProblemKey("retrace", 256, 128, "bfloat16", "time", "bootstrap+trunc", 18),
                    "split", {"SPLITS": 4}, 7.25, None, {}, 3, "2026-11-29T10:00:00Z")
    written = [entry(), entry(n=32768, t=8, strategy="flat", time_us=20.8), retrace]
    path = record(H200, written, tmp_path)
    assert path == profile_path(H200, tmp_path)
    profile = read_profile(path)
    assert profile.fingerprint == H200
    assert profile.path == path
    assert profile.entries == {e.key.as_text(): e for e in written}


def test_file_is_sorted_readable_and_carries_schema(tmp_path):
    path = record(H200, [entry(n=4096), entry(n=256), entry(algorithm="vtrace", n=8)], tmp_path)
    text = path.read_text()
    doc = json.loads(text)
    assert (doc["schema"], doc["version"]) == (SCHEMA, SCHEMA_VERSION)
    assert [(e["algorithm"], e["N"]) for e in doc["entries"]] == [
        ("gae", 256), ("gae", 4096), ("vtrace", 8)]
    assert text.count("\n") > 40  # indented, one field per line: diffable


def test_unknown_fields_are_kept_through_a_rewrite(tmp_path):
    path = record(H200, [entry(n=1)], tmp_path)
    doc = json.loads(path.read_text())
    doc["entries"][0]["energy_mj"] = 1.5  # a field a newer version might add
    doc["generator"] = "rltriton-tune 9.9"
    path.write_text(json.dumps(doc))
    assert read_profile(path).entries["gae|none|float32|env|N=1|T=32"].extra == {"energy_mj": 1.5}
    record(H200, [entry(n=2)], tmp_path)
    assert json.loads(path.read_text())["entries"][0]["energy_mj"] == 1.5


def test_flags_are_canonicalised(tmp_path):
    path = record(H200, [entry()], tmp_path)
    doc = json.loads(path.read_text())
    doc["entries"][0]["flags"] = "trunc+bootstrap"
    path.write_text(json.dumps(doc))
    assert list(read_profile(path).entries) == ["gae|bootstrap+trunc|float32|env|N=4096|T=32"]


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(schema="someone-else"), "foreign schema 'someone-else'"),
    (lambda d: d.pop("schema"), "foreign schema None"),
    (lambda d: d.update(version=2), "schema version 2 unsupported"),
    (lambda d: d.update(version="1"), "'version' must be a positive integer"),
    # A version of thousands of digits is named by its size, not printed in the warning.
    (lambda d: d.update(version=10**2000), "schema version an integer of 6644 bits unsupported"),
    (lambda d: d.update(version=-10**2000), "positive integer, got an integer of 6644 bits"),
    (lambda d: d.pop("fingerprint"), "missing field 'fingerprint'"),
    (lambda d: d.update(fingerprint={}), "fingerprint must be a non-empty dict"),
    (lambda d: d.update(entries={}), "'entries' must be a list"),
    (lambda d: d["entries"][0].pop("T"), "entry 0: entry is missing field 'T'"),
    (lambda d: d["entries"][0].update(N=0), "'N' must be an integer in [1, 2**40], got 0"),
    (lambda d: d["entries"][0].update(N=True), "'N' must be an integer in [1, 2**40]"),
    # Sizes no tensor has: every size computation (a borrowing distance) stays finite.
    (lambda d: d["entries"][0].update(N=10**2000), "got an integer of 6644 bits"),
    (lambda d: d["entries"][0].update(A=2**41), "'A' must be an integer in [0, 2**40]"),
    (lambda d: d.update(borrowing={"shape": 1e300}),
     "'borrowing.shape' must be a number in [1, 1000], got 1e+300"),
    (lambda d: d.update(borrowing={"flags": 0.5}), "'borrowing.flags' must be a number in"),
    (lambda d: d["entries"][0].update(algorithm="ppo"), "unknown algorithm 'ppo'"),
    (lambda d: d["entries"][0].update(dtype="int8"), "unknown dtype 'int8'"),
    (lambda d: d["entries"][0].update(layout="diag"), "'layout'"),
    (lambda d: d["entries"][0].update(flags="magic"), "unknown flag(s) in 'magic'"),
    (lambda d: d["entries"][0].update(strategy=""), "'strategy' must not be empty"),
    (lambda d: d["entries"][0].update(params=[1]), "'params' must be an object"),
    (lambda d: d["entries"][0].update(device_time_us=-1), "'device_time_us' must be a finite"),
    # Integers no float holds are refused as times, not an OverflowError out of the reader.
    (lambda d: d["entries"][0].update(device_time_us=10**400),
     "'device_time_us' must be a finite time >= 0, got an integer of 1329 bits"),
    (lambda d: d["entries"][0].update(baselines={"torch_loop": -10**400}),
     "'baselines.torch_loop' must be a finite time >= 0, got an integer of 1329 bits"),
    (lambda d: d["entries"][0]["runner_up"].update(device_time_us=10**400),
     "'runner_up.device_time_us' must be a finite time >= 0"),
    (lambda d: d["entries"][0].update(date="yesterday"), "not ISO-8601"),
    (lambda d: d["entries"][0].update(runner_up=3), "'runner_up' must be an object or null"),
    (lambda d: d["entries"].append(dict(d["entries"][0])), "entry 1: duplicate key"),
])
def test_bad_content_raises_profile_error_naming_the_problem(tmp_path, change, message):
    path = record(H200, [entry()], tmp_path)
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(ProfileError) as info:
        read_profile(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("text, message", [
    ("", "empty file"),
    ('{"schema": "rltriton-tune-profile", "version": 1, "entr', "truncated"),
    ("{not json at all}", "corrupt: invalid JSON"),
    ('{"schema": "rltriton-tune-profile", "version": NaN}', "corrupt"),
    ("[1, 2]", "top level is a JSON list"),
])
def test_unparseable_text_is_named(tmp_path, text, message):
    path = tmp_path / "x.json"
    path.write_text(text)
    with pytest.raises(ProfileError, match=message):
        read_profile(path)


@pytest.mark.parametrize("extra, message", [
    ("1e999", "beyond float range"),
    ('"\\ud800"', "lone UTF-16 surrogate"),
    ('{"\\udfff": 1}', "lone UTF-16 surrogate"),
])
def test_values_that_cannot_be_written_back_make_the_file_corrupt(tmp_path, extra, message):
    """A number past float range reads as infinity and a lone surrogate escape as a string
    UTF-8 cannot hold: either, kept in an unknown field, would make every later save of
    the profile fail, so the file is refused when read (and set aside like any corrupt
    one) instead."""
    path = record(H200, [entry()], tmp_path)
    good = path.read_text()
    for where in ("entry", "top"):
        doc = json.loads(good)
        target = doc["entries"][0] if where == "entry" else doc
        target["note"] = "PLACEHOLDER"
        path.write_text(json.dumps(doc).replace('"PLACEHOLDER"', extra))
        with pytest.raises(ProfileError, match=message):
            read_profile(path)
    doc = json.loads(good)
    doc["entries"][0]["note"] = "PLACEHOLDER"
    path.write_text(json.dumps(doc).replace('"PLACEHOLDER"', '"\\ud83d\\ude00 1e300"'))
    loaded = read_profile(path)
    (stored,) = loaded.entries.values()
    assert stored.extra["note"] == "\U0001f600 1e300"  # a whole pair is fine


def test_binary_garbage_is_corrupt(tmp_path):
    path = tmp_path / "x.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ProfileError, match="not UTF-8"):
        read_profile(path)


def test_newer_version_is_its_own_error_type(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"schema": SCHEMA, "version": SCHEMA_VERSION + 1}))
    with pytest.raises(UnsupportedVersion):
        read_profile(path)


def test_entries_that_cannot_be_stored_are_refused_before_any_write(tmp_path):
    with pytest.raises(ProfileError, match="device_time_us"):
        record(H200, [entry(time_us=float("nan"))], tmp_path)
    with pytest.raises(ProfileError, match="cannot store"):
        record(H200, [entry(blob=object())], tmp_path)
    with pytest.raises(TypeError, match="Entry objects"):
        record(H200, [{"N": 1}], tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_fingerprint_id_is_stable_readable_and_distinct():
    ident = fingerprint_id(H200)
    assert ident == fingerprint_id(dict(reversed(list(H200.items()))))  # key order irrelevant
    assert ident.startswith("cuda-nvidia-h200-cc9.0-abi1-")
    # software versions are not the device's identity: another Triton, the same profile
    assert fingerprint_id({**H200, "triton": "3.8"}) == ident
    assert fingerprint_id(A100) != ident
    assert fingerprint_id({**H200, "sm_count": 114}) != ident  # a field not in the slug
    odd = fingerprint_id({"kind": "cpu", "name": "Weird/CPU \\ name: *?"})
    assert all(c.isalnum() or c in ".-" for c in odd)


@pytest.mark.parametrize("bad", [None, {}, [("kind", "cuda")], {"kind": ["nested"]}, {1: "x"}])
def test_bad_fingerprint_is_rejected_naming_the_argument(bad):
    with pytest.raises(ValueError, match="fp"):
        fingerprint_id(bad)


finite_times = st.floats(min_value=0, max_value=1e9, allow_nan=False)
json_scalars = st.one_of(st.integers(-2**40, 2**40), st.booleans(), st.text(max_size=8),
                         finite_times, st.none())


@settings(max_examples=60, deadline=None)
@given(
    algorithm=st.sampled_from(sorted(ALGORITHMS)),
    n=st.integers(1, 2**24), t=st.integers(1, 2**16), a=st.integers(0, 64),
    dtype=st.sampled_from(["float32", "float16", "bfloat16", "float64"]),
    layout=st.sampled_from(["env", "time"]),
    flags=st.sets(st.sampled_from(["trunc", "bootstrap", "last_value", "seed", "starts_at"])),
    params=st.dictionaries(st.text(min_size=1, max_size=8), json_scalars, max_size=4),
    time_us=finite_times,
    baselines=st.dictionaries(st.text(min_size=1, max_size=8), finite_times, max_size=3),
)
def test_any_valid_entry_survives_the_json_round_trip(algorithm, n, t, a, dtype, layout, flags,
                                                      params, time_us, baselines):
    original = Entry(ProblemKey(algorithm, n, t, dtype, layout, flags_string(flags), a),
                     "tiled", params, time_us, None, baselines, 5, "2026-11-30T00:00:00Z")
    text = dumps(Profile(H200, {original.key.as_text(): original}).to_json())
    [profile] = profiles_from_text(text)
    assert profile.entries == {original.key.as_text(): original}


def test_a_rewrite_keeps_fields_this_version_does_not_know(tmp_path):
    """Forward compatibility within version 1: top-level and entry fields a newer writer
    added survive a write by this one."""
    path = record(H200, [entry()], tmp_path)
    doc = json.loads(path.read_text())
    doc["future_section"] = {"kept": [1, 2]}
    doc["entries"][0]["future_field"] = "kept too"
    path.write_text(json.dumps(doc))
    record(H200, [entry(n=16)], tmp_path)
    after = json.loads(path.read_text())
    assert after["future_section"] == {"kept": [1, 2]}
    assert [e.get("future_field") for e in after["entries"] if e["N"] == 4096] == ["kept too"]
    assert list(after)[-1] == "entries" and len(after["entries"]) == 2
