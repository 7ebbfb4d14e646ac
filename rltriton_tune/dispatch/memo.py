"""Per-shape memo of prepared launchers, and the (locked) miss path that fills it.

The hit path lives in ``dispatch.run``: one tuple built from plain ``Call``
fields, one ``dict.get``, one launcher call; no locks, logging, environment
reads or ``ProblemKey`` hashing. Everything else happens here, once per
(shape, device, forced choice), under a re-entrant lock (the online tuner may
call estimators while a miss is being resolved).
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

import torch

from rltriton_tune.call import Call, ProblemKey
from rltriton_tune.dispatch import forcing, registry
from rltriton_tune.dispatch.decide import FALLBACK, Decision, decide, mark_failed, warn_once
from rltriton_tune.dispatch.fingerprint import normalize_device
from rltriton_tune.strategy import Launcher

ENV_LOG = "RLTRITON_TUNE_LOG"

_log = logging.getLogger("rltriton_tune")
_lock = threading.RLock()

#: memo key (see :func:`memo_key`) -> prepared launcher. Read without the lock:
#: dict reads are atomic, and entries are only ever added whole.
table: dict[tuple, Launcher] = {}
_decisions: dict[tuple[ProblemKey, torch.device], Decision] = {}
_logged: set[tuple[ProblemKey, torch.device, str, str]] = set()


def memo_key(call: Call, ctx: forcing.Forced | None) -> tuple:
    """The memo key of ``call`` under the context-forced choice ``ctx``.

    Must equal the tuple ``dispatch.run`` builds inline (tests check it).
    """
    tensors = call.tensors
    return (call.algorithm, call.n, call.t, call.out_dtype, call.time_major, call.a,
            call.starts_at, *tensors, next(iter(tensors.values())).device, ctx)


def _prepare(decision: Decision) -> Launcher:
    impl = registry.all_strategies()[decision.strategy]
    return impl.prepare(decision.key, dict(decision.params))


def _note(decision: Decision, device: torch.device) -> None:
    _decisions[(decision.key, device)] = decision
    if os.environ.get(ENV_LOG, "").strip().lower() != "debug":
        return
    marker = (decision.key, device, decision.strategy, decision.source)
    if marker in _logged:
        return
    _logged.add(marker)
    if _log.level == logging.NOTSET or _log.level > logging.DEBUG:
        _log.setLevel(logging.DEBUG)
    if not _log.handlers and not logging.getLogger().handlers:
        _log.addHandler(logging.StreamHandler())
    _log.debug("rltriton-tune: %s on %s -> %s %s (%s; %s)", decision.key.as_text(), device,
               decision.strategy, decision.params, decision.source, decision.detail)


def miss(call: Call, mk: tuple, ctx: forcing.Forced | None) -> tuple[torch.Tensor, ...]:
    """Decide, prepare, run once (catching a Triton failure), memoise, return the outputs."""
    with _lock:
        launcher = table.get(mk)
        if launcher is not None:
            return launcher(call)
        key = call.key
        device = normalize_device(call.device)
        decision = decide(key, device, forcing.effective(ctx), online=True)
        try:
            launcher = _prepare(decision)
            out = launcher(call)
        except Exception as exc:
            if decision.strategy == FALLBACK or decision.source == "forced":
                raise
            reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            mark_failed(key, device, reason)
            # Same topic as decide's own fallback warning: one GPU-fallback warning per process.
            warn_once("gpu-fallback", f"rltriton-tune: Triton strategy {decision.strategy} "
                      f"failed for {key.as_text()} ({reason}); using the torch fallback "
                      "for that shape")
            decision = decide(key, device, None)
            launcher = _prepare(decision)
            out = launcher(call)
        table[mk] = launcher
        _note(decision, device)
        return out


def lookup(call: Call) -> Launcher | None:
    """The memoised launcher for ``call`` in the current force context (None if not yet run)."""
    return table.get(memo_key(call, forcing.current()))


def decisions() -> dict[tuple[ProblemKey, torch.device], Any]:
    """Decisions taken by calls in this process, by (key, device)."""
    with _lock:
        return dict(_decisions)


def clear() -> None:
    """Empty the memo and the record of decisions/logs."""
    with _lock:
        table.clear()
        _decisions.clear()
        _logged.clear()
