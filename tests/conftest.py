"""Shared test setup: run Triton kernels in the interpreter when no GPU is present."""

import os

import pytest
import torch

try:  # property tests draw the same examples on every run (no seed, no example database)
    from hypothesis import settings

    settings.register_profile("reproducible", derandomize=True, database=None)
    settings.load_profile("reproducible")
except ImportError:  # hypothesis is a test extra; the tests that need it import it
    pass

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Parallel workers (pytest -n) share the cores: one intra-op thread each. The float64
    # references run on the CPU, and N workers of one thread per core each oversubscribe it.
    torch.set_num_threads(1)

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    # Must be set before triton is imported anywhere: kernels then run on CPU tensors.
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(autouse=True, scope="session")
def _calls_keep_the_packers_contract():
    """Every launch in the suite checks what ``Packer.args`` assumes when it passes each
    key's strides as constants: a Call's inputs are contiguous (see ``call.Call``)."""
    from rltriton_tune.kernels.launch import Packer

    compile_args = Packer._compile_args

    def checked(self):
        args = compile_args(self)

        def checked_args(call):
            loose = [name for name, x in call.tensors.items() if not x.is_contiguous()]
            assert not loose, f"{call.algorithm}: Call inputs {loose} are not contiguous"
            return args(call)

        return checked_args

    Packer._compile_args = checked
    yield
    Packer._compile_args = compile_args


@pytest.fixture(autouse=True)
def _isolated_profile_dir(tmp_path_factory, monkeypatch):
    """Every test writes profiles to its own folder, never the user's real one, and sees
    no shipped profiles unless it asks for them (tests/tuning_db/test_shipped.py)."""
    monkeypatch.setenv("RLTRITON_TUNE_DB", str(tmp_path_factory.mktemp("profiles")))
    monkeypatch.setenv("RLTRITON_TUNE_SHIPPED_DB", str(tmp_path_factory.mktemp("shipped")))
    for name in ("RLTRITON_TUNE_FORCE", "RLTRITON_TUNE_ONLINE", "RLTRITON_TUNE_RECORD",
                 "RLTRITON_TUNE_LOG", "RLTRITON_TUNE_ONLINE_BUDGET", "RLTRITON_TUNE_SIBLINGS"):
        monkeypatch.delenv(name, raising=False)
    from rltriton_tune import dispatch

    dispatch.reset()  # the runtime reads its environment once; read this test's
    yield
    dispatch.reset()


@pytest.fixture
def join_or_unblock():
    """``join(thread, fifo, timeout, message)``: join a thread that may block opening the
    FIFO ``fifo``; past ``timeout`` seconds, open the FIFO's other end so the thread can
    end, and fail the test with ``message``."""
    def join(thread, fifo, timeout: float, message: str) -> None:
        thread.join(timeout)
        if thread.is_alive():
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            thread.join(10)
            pytest.fail(message)
    return join
