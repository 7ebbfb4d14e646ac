"""The CPU fallback's thread rule: small phases on one thread, the caller's count restored."""

from __future__ import annotations

import pytest
import torch

from rltriton_tune.fallback import launch, run, scans, threads
from rltriton_tune.fallback.threads import serial_below

from .helpers import make_case, make_key


@pytest.fixture
def two_threads():
    """At least two torch threads for the test, the previous count restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(max(2, before))
    yield torch.get_num_threads()
    torch.set_num_threads(before)


def _recording(monkeypatch, name):
    seen = []
    original = getattr(scans, name)

    def record(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return original(*args, **kwargs)

    monkeypatch.setattr(scans, name, record)
    return seen


@pytest.mark.parametrize(("mode", "scan"), [("doubling", "scan_doubling"),
                                            ("loop", "scan_loop"),
                                            ("chunked", "scan_chunked")])
def test_small_calls_scan_on_one_thread_and_restore(mode, scan, two_threads, monkeypatch):
    seen = _recording(monkeypatch, scan)
    _, call = make_case(make_key("gae", 16, 64, "last_value"))
    launch(call, mode)
    assert seen and set(seen) == {1}
    assert torch.get_num_threads() == two_threads


def test_large_operations_keep_the_thread_count(two_threads, monkeypatch):
    monkeypatch.setattr(threads, "PARALLEL_MIN_ELEMENTS", 16 * 64)
    seen = _recording(monkeypatch, "scan_doubling")
    _, call = make_case(make_key("gae", 16, 64))
    launch(call, "doubling")
    assert seen == [two_threads]
    # The loop's operations are one step of N rows: still below the bound, one thread.
    seen = _recording(monkeypatch, "scan_loop")
    launch(call, "loop")
    assert seen == [1]


def test_thread_count_restored_when_the_call_fails(two_threads, monkeypatch):
    def boom(*args):
        assert torch.get_num_threads() == 1
        raise RuntimeError("scan failed")

    _, call = make_case(make_key("gae", 4, 9))
    with pytest.raises(RuntimeError, match="scan failed"):
        run.compute(call, boom)
    assert torch.get_num_threads() == two_threads


def test_other_devices_are_left_alone(two_threads):
    with serial_below(torch.device("meta"), 1):
        assert torch.get_num_threads() == two_threads
    with serial_below(torch.device("cpu"), 1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == two_threads
