"""Calling the C launch function behind a compiled Triton kernel's launcher.

A compiled kernel's ``run`` is Triton's ``CudaLauncher``: a Python ``__call__`` that
allocates the scratch buffers the kernel declares (none, for the scan cores), then calls
a C function that parses the arguments and launches. That Python frame costs about a
microsecond a launch, more on a slow host, for work that is always the same for one
binary. :func:`native_launch` returns a function that makes the C call itself, for the
launcher layouts this module knows, read from Triton's source:

* as in Triton 3.6: ``__call__(gridX, gridY, gridZ, stream, function, *args)`` calls
  ``launch(gx, gy, gz, stream, function, cooperative, pdl, global_scratch,
  profile_scratch, *args)``, where ``args`` starts with the packed metadata, the launch
  metadata and the two launch hooks;
* as in Triton 3.8 and 3.9: ``__call__(gridX, gridY, gridZ, stream, function, kernel_metadata,
  launch_metadata, launch_enter_hook, launch_exit_hook, *args)`` calls ``launch(gx, gy,
  gz, stream, function, cooperative, pdl, kernel_metadata, launch_metadata, enter, exit,
  global_scratch, profile_scratch, arg_annotations, kernel_signature, args)``, with the
  kernel arguments as one tuple (and sanitizer arguments appended when it is on).

Both the Triton version and the launcher's signature must match: a later Triton keeps
the 3.9 signature but may launch another way (a TVM FFI host stub in Triton's main
branch). Any other launcher (another version, backend or layout, scratch buffers, the
sanitizer) gets a function that calls ``run`` as Triton's generic path would, so a
Triton this module does not know costs the Python frame and nothing else.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import triton

#: ``launch(stream, kernel_args)``: launch the binary on ``stream`` with ``kernel_args``
#: (runtime arguments with tensors as addresses, then the constexprs in signature order).
NativeLaunch = Callable[[int, tuple[Any, ...]], None]

_MODULE = "triton.backends.nvidia.driver"
_HEAD = ("self", "gridX", "gridY", "gridZ", "stream", "function")
#: As in Triton 3.6: packed metadata, launch metadata and hooks lead ``*args``.
STARRED = (*_HEAD, "args")
#: As in Triton 3.8 and 3.9: they are named, and the kernel arguments go in as one tuple.
NAMED = (*_HEAD, "kernel_metadata", "launch_metadata", "launch_enter_hook",
         "launch_exit_hook", "args")
#: The Triton versions (major.minor) whose launchers were read, and their layouts.
KNOWN_VERSIONS = {"3.6": "starred", "3.8": "named", "3.9": "named"}


def _minor(version: str) -> str:
    """``major.minor`` of a Triton version string."""
    return ".".join(version.split(".")[:2])


def describe(version: str = triton.__version__) -> str:
    """How kernel launches reach the GPU under Triton ``version`` (for ``doctor``)."""
    minor = _minor(version)
    if minor in KNOWN_VERSIONS:
        return (f"direct: Triton's C launch function (the launcher layout of Triton {minor} "
                "is known)")
    return (f"direct, through Triton's Python launcher (Triton {minor}'s layout is not one "
            "this version has read; about a microsecond more a launch)")


def launcher_layout(run: Any, version: str = triton.__version__) -> str | None:
    """``"starred"`` or ``"named"`` where ``run`` is NVIDIA's launcher of a Triton
    ``version`` whose layout this module knows and its binary declares no scratch
    buffers; None otherwise."""
    known = KNOWN_VERSIONS.get(_minor(version))
    cls = type(run)
    if known is None or cls.__module__ != _MODULE or not callable(getattr(run, "launch", None)):
        return None
    if getattr(run, "global_scratch_size", 1) or getattr(run, "profile_scratch_size", 1):
        return None
    try:
        params = tuple(inspect.signature(cls.__call__).parameters)
    except (TypeError, ValueError):
        return None
    if known == "starred" and params == STARRED:
        return "starred"
    if known == "named" and params == NAMED and not getattr(run, "gsan_enabled", False) \
            and hasattr(run, "arg_annotations") and hasattr(run, "kernel_signature"):
        return "named"
    return None


def native_launch(run: Any, grid: tuple[int, int, int], function: Any,
                  metadata: Any) -> tuple[NativeLaunch, bool]:
    """A launch of the binary behind ``run`` (its ``function`` and packed ``metadata``)
    on ``grid``, and whether it calls Triton's C function directly (False: through
    ``run``). No launch metadata and no hooks: launches with hooks set take Triton's
    generic path."""
    gx, gy, gz = grid
    layout = launcher_layout(run)
    if layout == "starred":
        launch = run.launch
        after = (function, run.launch_cooperative_grid, run.launch_pdl, None, None,
                 metadata, None, None, None)

        def starred(stream: int, args: tuple[Any, ...]) -> None:
            launch(gx, gy, gz, stream, *after, *args)

        return starred, True
    if layout == "named":
        launch = run.launch
        after = (function, run.launch_cooperative_grid, run.launch_pdl, metadata, None,
                 None, None, None, None, run.arg_annotations, run.kernel_signature)

        def named(stream: int, args: tuple[Any, ...]) -> None:
            launch(gx, gy, gz, stream, *after, args)

        return named, True

    def through_run(stream: int, args: tuple[Any, ...]) -> None:
        run(gx, gy, gz, stream, function, metadata, None, None, None, *args)

    return through_run, False
