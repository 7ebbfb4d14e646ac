"""What the verbs print: table cells, tables, parameter lists, and the yes/no question."""

from __future__ import annotations

import sys
from typing import Any

from rltriton_tune.cli.args import CLIError
from rltriton_tune.tuning_db.schema import printable

#: Longest text printed in one table cell; longer values end in an ellipsis.
CELL_WIDTH = 40
#: Longest text of the choice column (strategy and parameters).
CHOICE_WIDTH = 64


def params_text(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(params.items()))


def cell(text: Any, limit: int = CELL_WIDTH) -> str:
    """``text`` as one bounded, printable table cell (see ``tuning_db.schema.printable``)."""
    return printable(text, limit)


def table(headers: list[str], rows: list[list[str]]) -> str:
    rows = [[cell(c, CHOICE_WIDTH if h == "choice" else CELL_WIDTH)
             for h, c in zip(headers, r, strict=True)] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out)


def speedup(entry_us: float, base: float | None) -> str:
    return "-" if not base else f"{base / entry_us:.2f}x"


def time_header(device: Any) -> str:
    """What an entry's time is on ``device``: GPU time of the kernels, or host wall time."""
    return "device us" if device.type == "cuda" else "host us"


def ask(question: str, flag: str) -> bool:
    """Ask a yes/no question on the terminal; without one, raise :class:`CLIError`
    naming ``flag``, the option that answers yes."""
    if not sys.stdin or not sys.stdin.isatty():
        raise CLIError(f"not confirmed: no terminal to ask {question!r} on; pass {flag} "
                       "to go ahead")
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")
