"""Online mode (``RLTRITON_TUNE_ONLINE=1``): tune a key on its first use, then persist it.

The tuner is imported only here, lazily, on the first miss, so ordinary calls
never load Optuna. Any failure (tuner missing, timeout, no valid candidate,
unwritable profile folder) falls back to the normal decision order; each key
is tried at most once per process.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

import torch

from rltriton_tune.call import ProblemKey

ENV_BUDGET = "RLTRITON_TUNE_ONLINE_BUDGET"
DEFAULT_BUDGET_S = 2.0

_log = logging.getLogger("rltriton_tune")
_lock = threading.Lock()
_attempted: set[tuple[ProblemKey, torch.device]] = set()


def budget_s() -> float:
    """Seconds allowed per key (``RLTRITON_TUNE_ONLINE_BUDGET``, default 2)."""
    text = os.environ.get(ENV_BUDGET, "").strip()
    if not text:
        return DEFAULT_BUDGET_S
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{ENV_BUDGET}={text!r} is not a number of seconds") from None
    if not value > 0:
        raise ValueError(f"{ENV_BUDGET}={text!r} must be positive")
    return value


def reset() -> None:
    """Forget which keys were tried (tests)."""
    with _lock:
        _attempted.clear()


def tune_now(key: ProblemKey, device: torch.device, fingerprint: dict[str, Any]) -> Any | None:
    """Tune ``key`` within the budget and record the entry; None on any failure."""
    with _lock:
        if (key, device) in _attempted:
            return None
        _attempted.add((key, device))
    from rltriton_tune.dispatch.decide import warn_once

    try:
        from rltriton_tune.tune.online import tune_key

        entry = tune_key(key, device, budget_s())
    except Exception as exc:  # noqa: BLE001 - online tuning must never break a call
        warn_once("online", f"rltriton-tune: online tuning failed ({type(exc).__name__}: {exc});"
                  " using the normal decision order")
        return None
    if entry is None:
        _log.debug("online tuning found nothing for %s", key.as_text())
        return None
    try:
        from rltriton_tune.tuning_db import invalidate_cache, record

        record(fingerprint, [entry])
        invalidate_cache()
    except Exception as exc:  # noqa: BLE001 - keep the result in memory anyway
        warn_once("online-record", f"rltriton-tune: could not save an online-tuned entry ({exc})")
    return entry
