"""Functions generated from source text: the per-key argument packer
(``kernels.launch.Packer``) and the usual call's fast path (``hot_path``).

Both run on every call, so they are written out flat for what is fixed per key or per
argument pattern, and compiled once."""

from __future__ import annotations

import linecache
from collections.abc import Callable
from typing import Any


def generated_function(lines: list[str], name: str, filename: str,
                       namespace: dict[str, Any]) -> Callable[..., Any]:
    """Function ``name`` defined by ``lines``, with ``namespace`` as its globals. Its source
    is registered with linecache under ``filename`` (a ``<...>`` name), so a traceback
    through it shows its lines."""
    source = "\n".join(lines) + "\n"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - from package data alone
    return namespace[name]
