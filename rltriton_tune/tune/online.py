"""Online tuning (``RLTRITON_TUNE_ONLINE=1``): tune one key within a small time budget.

The runtime never imports the tuner: :func:`install` plugs :func:`tune_key` into
the process state, and dispatch calls it on the first use of a key without an
entry of its own. ``import rltriton_tune`` installs it when ``RLTRITON_TUNE_ONLINE``
is on at import, and ``rltriton_tune.dispatch.reset()`` when it is on then; a program
can call :func:`install` itself. The study is kept in
memory (nothing to resume for a 2-second search); the result is recorded in the
user's profile. Never raises: any failure returns None and the caller keeps its
normal decision.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import torch

from rltriton_tune.call import ProblemKey

DEFAULT_BUDGET_S = 2.0
#: Upper bound on trials whatever the budget (the space is small; the rest is re-measure).
MAX_TRIALS = 64

_log = logging.getLogger("rltriton_tune.tune")


def install() -> None:
    """Let dispatch tune keys on first use (while ``RLTRITON_TUNE_ONLINE`` is on)."""
    from rltriton_tune.state import STATE

    STATE.online_tuner = tune_and_record


def tune_and_record(key: ProblemKey, device: torch.device, fingerprint: dict[str, Any],
                     budget_s: float) -> Any | None:
    entry = tune_key(key, device, budget_s)
    if entry is not None:
        from rltriton_tune.tuning_db import record

        # keeps it in memory if the folder is not writable; never replaces a stored entry
        record(fingerprint, [entry], replace=False)
    return entry


def tune_key(key: ProblemKey, device: torch.device | str,
             budget_s: float = DEFAULT_BUDGET_S) -> Any | None:
    """Tune ``key`` on ``device`` in about ``budget_s`` seconds.

    Two thirds of the budget go to trials, the rest to re-measuring the best
    configs. Returns the ``Entry`` (not yet recorded), or None.
    """
    try:
        from rltriton_tune.tune.evaluate import Evaluator
        from rltriton_tune.tune.space import SearchSpace
        from rltriton_tune.tune.study import all_strategies_for, finalize, open_study, run_trials

        device = torch.device(device)
        start = time.monotonic()
        space = SearchSpace(key, device)
        study = open_study(key, device, ":memory:", trials=MAX_TRIALS, space=space)
        cuda = device.type == "cuda"
        evaluator = Evaluator(key, device, all_strategies_for(device, space),
                              time_budget_s=min(0.05, budget_s / 40) if cuda else
                              min(0.02, budget_s / 60))
        try:
            run_trials(key, device, trials=MAX_TRIALS, timeout_s=budget_s * 2 / 3, study=study,
                       evaluator=evaluator, space=space)
            left = max(0.01, budget_s - (time.monotonic() - start))
            result = finalize(study, key, device, evaluator=evaluator, space=space,
                              remeasure_s=min(left / 8, 0.1), measure_baselines=False,
                              record=False, neighbourhood=False)  # an exact key, in budget
        finally:
            evaluator.close()
        return result.entry
    except Exception as exc:  # noqa: BLE001 - online tuning must never break a call
        _log.debug("online tuning of %s failed: %s", key.as_text(), exc, exc_info=True)
        return None
