"""Sibling profiles: which GPU's profile serves a GPU without one, and how they merge."""

import pytest
from tuning_db_helpers import A100, H200, entry

from rltriton_tune.tuning_db import profile_path, record
from rltriton_tune.tuning_db.siblings import find_sibling, serving_profiles

H100 = {"kind": "cuda", "name": "NVIDIA H100 80GB HBM3", "capability": "9.0", "sm_count": 132,
        "abi": 1}
H100_PCIE = {**H100, "name": "NVIDIA H100 PCIe", "sm_count": 114}
GH_114 = {**H200, "name": "NVIDIA 114-SM GPU", "sm_count": 114}
KEY = "gae|none|float32|env|N=4096|T=32"


def test_same_architecture_profile_serves_a_gpu_without_one(shipped, user):
    path = record(H200, [entry(strategy="flat"), entry(n=256, t=8)], shipped)
    served = serving_profiles(H100)
    assert served.entries[KEY].strategy == "flat"
    assert served.sources[KEY] == path
    assert served.sibling_keys == {KEY, "gae|none|float32|env|N=256|T=8"}
    [report] = served.reports
    assert report.used and report.path == path
    assert report.reason.startswith("sibling profile: measured on NVIDIA H200 (same capability "
                                    "9.0 and kernel ABI; 132 SMs against 132 here)")


def test_own_entries_override_the_siblings_key_by_key(shipped, user):
    record(H200, [entry(strategy="flat"), entry(n=256, t=8, strategy="flat")], shipped)
    record(H100, [entry(strategy="split")])
    served = serving_profiles(H100)
    assert served.entries[KEY].strategy == "split"
    assert served.sources[KEY] == profile_path(H100, user)
    assert served.sibling_keys == {"gae|none|float32|env|N=256|T=8"}
    assert {r.path: r.used for r in served.reports} == {
        profile_path(H200, shipped): True, profile_path(H100, user): True}


def test_nearest_sm_count_then_most_entries(shipped, user):
    record(H200, [entry(), entry(n=8)], shipped)
    record(GH_114, [entry()], shipped)
    assert find_sibling(H100_PCIE).fingerprint["name"] == "NVIDIA 114-SM GPU"
    assert find_sibling(H100).fingerprint["name"] == "NVIDIA H200"
    record({**GH_114, "name": "NVIDIA Third", "sm_count": 132}, [entry()], shipped)
    assert find_sibling(H100).fingerprint["name"] == "NVIDIA H200"  # more entries


def test_no_sibling_across_capability_abi_vendor_or_device_kind(shipped, user):
    record(A100, [entry()], shipped)
    record({**H200, "abi": 2}, [entry()], shipped)
    # ROCm reports kind "cuda" too, and an MI250's capability is 9.0
    record({**H200, "name": "AMD Instinct MI250X", "sm_count": 110}, [entry()], shipped)
    assert find_sibling(H100) is None
    assert serving_profiles(H100).entries == {}
    cpu = {"kind": "cpu", "name": "AMD EPYC", "arch": "x86_64", "cores": 2, "abi": 1}
    record({**cpu, "cores": 64}, [entry()], shipped)
    assert find_sibling(cpu) is None


def test_one_folder_for_shipped_and_user_profiles_is_read_once(shipped, monkeypatch):
    from rltriton_tune import dispatch
    from rltriton_tune.tuning_db import locations

    record(H200, [entry(), entry(n=8)], shipped)
    monkeypatch.setenv(locations.DB_ENV, str(shipped))
    dispatch.reset()
    sibling = find_sibling(H100)
    assert (sibling.entries, sibling.paths) == (2, (profile_path(H200, shipped),))


def test_a_gpu_with_a_profile_is_its_own_sibling_never(shipped, user):
    record(H200, [entry(strategy="flat")], shipped)
    assert find_sibling(H200) is None
    assert serving_profiles(H200).sibling_keys == frozenset()


def test_broken_files_are_skipped(shipped, user):
    (shipped / "broken.json").write_text("{not json")
    record(H200, [entry(strategy="flat")], shipped)
    with pytest.warns(RuntimeWarning, match=r"broken\.json: corrupt"):
        assert serving_profiles(H100).entries[KEY].strategy == "flat"


def test_turned_off_by_the_environment(shipped, user, monkeypatch):
    from rltriton_tune import dispatch

    record(H200, [entry(strategy="flat")], shipped)
    monkeypatch.setenv("RLTRITON_TUNE_SIBLINGS", "off")
    dispatch.reset()
    assert serving_profiles(H100).entries == {}
