"""The environment variables the runtime honours, read once and parsed strictly.

They are read when the package is imported (and again by
:func:`rltriton_tune.dispatch.reset`), so a variable changed later in the process
has no effect until then, on every path alike: calls, ``explain`` and the
memo agree. Booleans accept what people write (1/0, true/false, yes/no,
on/off, any case); anything else is a ``ValueError`` naming the variable, raised
by every call and ``explain`` (importing still works, so the CLI reports it in one
line) and by ``dispatch.reset``.
Relative paths are made absolute against the working directory at read time.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

#: The user's profile folder (default: the platform's user data folder).
ENV_DB = "RLTRITON_TUNE_DB"
#: A folder replacing the package's shipped profiles (tests, trying a candidate profile).
ENV_SHIPPED = "RLTRITON_TUNE_SHIPPED_DB"
#: ``strategy[:k=v,...]``: force one strategy and config for every call.
ENV_FORCE = "RLTRITON_TUNE_FORCE"
#: Tune a key with no profile entry on its first use (needs the tooling installed).
ENV_ONLINE = "RLTRITON_TUNE_ONLINE"
#: Seconds online tuning may spend on one key.
ENV_ONLINE_BUDGET = "RLTRITON_TUNE_ONLINE_BUDGET"
#: A file recording the keys that missed the tuning database, with call counts.
ENV_RECORD = "RLTRITON_TUNE_RECORD"
#: Off: a GPU without a profile of its own goes to the rules, not a sibling GPU's profile.
ENV_SIBLINGS = "RLTRITON_TUNE_SIBLINGS"
#: ``debug`` logs each new dispatch decision once.
ENV_LOG = "RLTRITON_TUNE_LOG"

_TRUE = frozenset({"1", "true", "yes", "on", "y", "t"})
_FALSE = frozenset({"", "0", "false", "no", "off", "n", "f"})

DEFAULT_ONLINE_BUDGET_S = 2.0


def parse_bool(name: str, text: str) -> bool:
    """``text`` of variable ``name`` as a boolean; ValueError for anything unrecognised."""
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"{name}={text!r} is not a boolean; use 1/0, true/false, yes/no or on/off")


def _path(name: str, text: str) -> Path | None:
    """``text`` of variable ``name`` as an absolute path (``~`` expanded), None if empty;
    ValueError naming the variable where it cannot be made one (``~user`` of an unknown
    user, a NUL byte)."""
    text = text.strip()
    if not text:
        return None
    if "\0" in text:
        raise ValueError(f"{name}={text!r} is not a usable path: it holds a NUL byte")
    try:
        return Path(text).expanduser().absolute()
    except (RuntimeError, OSError, ValueError) as err:
        raise ValueError(f"{name}={text!r} is not a usable path: {err}") from None


def _budget(text: str) -> float:
    text = text.strip()
    if not text:
        return DEFAULT_ONLINE_BUDGET_S
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{ENV_ONLINE_BUDGET}={text!r} is not a number of seconds") from None
    if not 0 < value < math.inf:  # NaN fails both; inf leaves a key's search unbounded in time
        raise ValueError(f"{ENV_ONLINE_BUDGET}={text!r} must be a positive, finite number "
                         "of seconds")
    return value


def _log(text: str) -> bool:
    value = text.strip().lower()
    if value in ("", "0", "off", "warning", "info"):
        return False
    if value == "debug":
        return True
    raise ValueError(f"{ENV_LOG}={text!r}: expected 'debug' or nothing")


@dataclass(frozen=True)
class Settings:
    """The runtime's environment, parsed."""

    db_dir: Path | None = None
    shipped_dir: Path | None = None
    force: str = ""
    online: bool = False
    online_budget_s: float = DEFAULT_ONLINE_BUDGET_S
    record_path: Path | None = None
    log_decisions: bool = False
    siblings: bool = True

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read and validate every variable (``environ`` defaults to ``os.environ``)."""
        env = os.environ if environ is None else environ
        return cls(
            db_dir=_path(ENV_DB, env.get(ENV_DB, "")),
            shipped_dir=_path(ENV_SHIPPED, env.get(ENV_SHIPPED, "")),
            force=env.get(ENV_FORCE, "").strip(),
            online=parse_bool(ENV_ONLINE, env.get(ENV_ONLINE, "")),
            online_budget_s=_budget(env.get(ENV_ONLINE_BUDGET, "")),
            record_path=_path(ENV_RECORD, env.get(ENV_RECORD, "")),
            log_decisions=_log(env.get(ENV_LOG, "")),
            siblings=parse_bool(ENV_SIBLINGS, env.get(ENV_SIBLINGS, "1")),
        )
