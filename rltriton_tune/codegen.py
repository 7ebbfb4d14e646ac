"""Functions generated from source text: the per-key argument packer
(``kernels.launch.Packer``), the direct launch (``kernels.launch.FastLaunch``) and the
usual call's fast path (``hot_path``).

All three run on every call, so they are written out flat for what is fixed per key or per
argument pattern, and compiled once."""

from __future__ import annotations

import itertools
import linecache
from collections.abc import Callable
from typing import Any


def generated_function(lines: list[str], name: str, filename: str,
                       namespace: dict[str, Any]) -> Callable[..., Any]:
    """Function ``name`` defined by ``lines``, with ``namespace`` as its globals. Its source
    is registered with linecache under ``filename`` (a ``<...>`` name), so a traceback
    through it shows its lines; a name already registered with other source gets a
    number, so that no traceback shows another function's lines."""
    source = "\n".join(lines) + "\n"
    registered = linecache.cache.get(filename)
    if registered is not None and "".join(registered[2]) != source:
        filename = f"{filename[:-1]} #{next(_NUMBERS)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - from package data alone
    return namespace[name]


_NUMBERS = itertools.count(1)
