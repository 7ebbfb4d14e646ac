"""The profiles shipped in the package parse, and every entry is valid for today's kernels."""

from __future__ import annotations

import pytest

from rltriton_tune.kernels import strategies
from rltriton_tune.kernels.abi import KERNEL_ABI
from rltriton_tune.tuning_db import read_profile
from rltriton_tune.tuning_db.locations import PACKAGE_PROFILES

pytestmark = pytest.mark.skipif(not strategies(), reason="Triton is not installed")

SHIPPED = sorted(PACKAGE_PROFILES.glob("*.json"))


def test_some_profile_is_shipped():
    assert SHIPPED, f"no profile in {PACKAGE_PROFILES}"


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_entries_validate(path):
    profile = read_profile(path)
    assert profile.fingerprint["abi"] == KERNEL_ABI, "shipped profile is for another kernel ABI"
    impls = strategies()
    for text, entry in profile.entries.items():
        impl = impls[entry.strategy]
        assert impl.validate(entry.key, entry.params) == entry.params, text
        assert entry.device_time_us > 0, text
