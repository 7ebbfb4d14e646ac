"""Fixtures for dispatch tests: a clean dispatch state per test, fake strategies and a fake GPU.

Decision logic is tested against fake strategies with simple, checkable
validity rules, so the tests do not depend on which configs the real kernels
accept; end-to-end tests use the real fallback and kernels.
"""

from __future__ import annotations

import sys

import pytest
import torch

from rltriton_tune import dispatch
from rltriton_tune.dispatch import decide as decide_module
from rltriton_tune.dispatch import registry
from rltriton_tune.strategy import InvalidConfig
from rltriton_tune.tuning_db import Entry, record

FAKE_GPU = torch.device("cuda", 0)
FAKE_FP = {"kind": "cuda", "name": "Fake GPU", "capability": "9.0", "sm_count": 132, "abi": 1}


class FakeStrategy:
    """A strategy whose configs are valid iff BLOCK_N <= N (and BLOCK_T <= 4*T when given).

    Launchers delegate to the real torch fallback, so results are correct, and
    record each prepare / launch so tests can count them.
    """

    def __init__(self, name: str, fail: bool = False, on_cpu: bool = False) -> None:
        self.name = name
        self.fail = fail
        self.on_cpu = on_cpu
        self.prepared: list[tuple] = []
        self.launches = 0

    def available(self, device: torch.device) -> bool:
        return device.type == "cuda" or self.on_cpu

    def space(self, key):
        return {"BLOCK_N": [1, 4, 16, 64], "BLOCK_T": [16, 64, 256, 1024], "num_warps": [1, 4]}

    def default_params(self, key):
        return {"BLOCK_N": 1, "num_warps": 4}

    def validate(self, key, params):
        if params["BLOCK_N"] > key.n:
            raise InvalidConfig(f"BLOCK_N={params['BLOCK_N']} > N={key.n}")
        if "BLOCK_T" in params and params["BLOCK_T"] > 4 * key.t:
            raise InvalidConfig("BLOCK_T too large")
        return dict(params)

    def skip_reason(self, key, params, sm_count=None):
        return None

    def prepare(self, key, params):
        self.prepared.append((key, tuple(sorted(params.items()))))
        torch_impl = registry.torch_strategies()["torch"]
        inner = torch_impl.prepare(key, torch_impl.default_params(key))

        def launch(call):
            self.launches += 1
            if self.fail:
                raise RuntimeError("fake compile error")
            return inner(call)

        return launch


@pytest.fixture(autouse=True)
def clean_dispatch():
    """Each test starts with fresh process state: no memoised launchers, decisions,
    warnings, failed configs or cached profiles, and the environment read again."""
    dispatch.reset()
    yield
    dispatch.reset()


@pytest.fixture
def fake_gpu(monkeypatch):
    """Pretend a capable CUDA GPU with Triton strategies flat/tiled/split/sequential exists.

    Returns the fake strategies by name, and the fake device under "device".
    Only ``decide``/``explain`` can use the fake device (nothing can run on it).
    """
    fakes = {name: FakeStrategy(name) for name in registry.TRITON_STRATEGIES}
    monkeypatch.setattr(registry, "triton_strategies", lambda: dict(fakes))
    monkeypatch.setattr(registry, "triton_ok", lambda: True)
    monkeypatch.setattr(decide_module, "device_fingerprint", lambda device: dict(FAKE_FP))
    real_reason = decide_module._gpu_unavailable_reason
    monkeypatch.setattr(decide_module, "_gpu_unavailable_reason",
                        lambda device: None if device == FAKE_GPU else real_reason(device))
    # (the submodule, not the function the package re-exports under the same name)
    monkeypatch.setattr(sys.modules["rltriton_tune.dispatch.explain"], "cuda_available",
                        lambda: True)
    return {**fakes, "device": FAKE_GPU}


class Profiles:
    """Writes synthetic profile entries into the test's RLTRITON_TUNE_DB via tuning_db.record."""

    fake_fp = FAKE_FP

    @staticmethod
    def entry(key, strategy, params, us=1.0):
        return Entry(key=key, strategy=strategy, params=dict(params), device_time_us=us)

    def write(self, fp, entries):
        """Record ``(key, strategy, params)`` triples (or Entries) for ``fp``; return the path."""
        made = [e if isinstance(e, Entry) else self.entry(*e) for e in entries]
        return record(fp, made)


@pytest.fixture
def profiles():
    return Profiles()
