"""kernels/native_launch.py: the direct C call passes Triton's launch function exactly what
the installed Triton's own ``CudaLauncher.__call__`` passes it, and anything unknown goes
through ``run``."""

from __future__ import annotations

import inspect

import pytest

from rltriton_tune.kernels.native_launch import launcher_layout, native_launch


def _real_launcher(monkeypatch, log, **overrides):
    """The installed Triton's ``CudaLauncher`` without a compiled module: ``launch``
    records its arguments."""
    nvidia = pytest.importorskip("triton.backends.nvidia.driver")
    from triton.runtime import driver

    # Triton 3.8+ reads the active driver at the top of ``__call__``; a CPU has none.
    monkeypatch.setattr(driver, "_active", object())
    run = object.__new__(nvidia.CudaLauncher)
    attributes = {"launch": lambda *args: log.append(args), "num_ctas": 1,
                  "global_scratch_size": 0, "global_scratch_align": 1,
                  "profile_scratch_size": 0, "profile_scratch_align": 1,
                  "launch_cooperative_grid": False, "launch_pdl": True,
                  "arg_annotations": ("annotations",), "kernel_signature": b"sig",
                  "gsan_enabled": False, **overrides}
    for name, value in attributes.items():
        setattr(run, name, value)
    return run


def test_the_direct_call_matches_the_installed_launcher(monkeypatch):
    log: list[tuple] = []
    run = _real_launcher(monkeypatch, log)
    if launcher_layout(run) is None:
        pytest.skip("this Triton's launcher layout is not one native_launch knows")
    args = (1024, None, 2048, 7, 300, 1.5, 64)
    run(5, 2, 1, 77, "fn", "meta", None, None, None, *args)  # what the generic path calls
    launch, native = native_launch(run, (5, 2, 1), "fn", "meta")
    launch(77, args)
    assert native and len(log) == 2 and log[0] == log[1]


@pytest.mark.parametrize("override", [{"global_scratch_size": 128},
                                      {"profile_scratch_size": 64},
                                      {"gsan_enabled": True}])
def test_scratch_buffers_and_the_sanitizer_go_through_run(monkeypatch, override):
    nvidia = pytest.importorskip("triton.backends.nvidia.driver")
    run = _real_launcher(monkeypatch, [], **override)
    params = tuple(inspect.signature(nvidia.CudaLauncher.__call__).parameters)
    if "gsan_enabled" in override and "kernel_metadata" not in params:
        pytest.skip("this Triton has no sanitizer arguments")
    assert launcher_layout(run) is None


class Foreign:
    """A launcher of another backend: same call layout, not NVIDIA's module."""

    launch = staticmethod(lambda *args: None)
    global_scratch_size = profile_scratch_size = 0

    def __init__(self):
        self.calls = []

    def __call__(self, gridX, gridY, gridZ, stream, function, *args):
        self.calls.append((gridX, gridY, gridZ, stream, function, *args))


def test_an_unknown_launcher_is_called_as_the_generic_path_would():
    run = Foreign()
    assert launcher_layout(run) is None
    launch, native = native_launch(run, (3, 1, 1), "fn", "meta")
    launch(9, (11, 12))
    assert not native
    assert run.calls == [(3, 1, 1, 9, "fn", "meta", None, None, None, 11, 12)]


def test_only_the_triton_versions_read_are_launched_natively(monkeypatch):
    """A launcher of the right shape under a Triton version not read (a later one may keep
    the signature and launch another way), or under a version of the other layout, goes
    through ``run``."""
    import triton

    run = _real_launcher(monkeypatch, [])
    installed = launcher_layout(run)
    if installed is None:
        pytest.skip("this Triton's launcher layout is not one native_launch knows")
    assert launcher_layout(run, version=triton.__version__) == installed
    assert launcher_layout(run, version="3.99.0") is None
    other = "3.8.0" if installed == "starred" else "3.6.0"
    assert launcher_layout(run, version=other) is None


def test_describe_says_which_launch_path_a_version_takes():
    from rltriton_tune.kernels.native_launch import describe

    assert describe("3.6.0").startswith("direct: Triton's C launch function")
    assert "Triton 3.9 is known" in describe("3.9.1+git")
    assert "Python launcher (Triton 3.99's layout is not one" in describe("3.99.0")
