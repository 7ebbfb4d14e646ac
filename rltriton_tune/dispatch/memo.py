"""Per-shape memo of prepared launchers, and the (locked) miss path that fills it.

The hit path lives in ``dispatch.run``: one tuple built from plain ``Call``
fields, one ``dict.get``, one launcher call; no locks, logging, environment
reads or ``ProblemKey`` hashing. Everything else happens here, once per
(shape, device, forced choice), under the process state's re-entrant lock (the
online tuner may call estimators while a miss is being resolved).
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from rltriton_tune.call import Call
from rltriton_tune.dispatch import forcing, registry
from rltriton_tune.dispatch.decide import FALLBACK, Decision, decide, mark_failed
from rltriton_tune.dispatch.devices import device_fingerprint, normalize_device
from rltriton_tune.state import STATE, check_environment, warn_once
from rltriton_tune.strategy import Launcher

_log = logging.getLogger("rltriton_tune")

#: Configs tried for one key before the torch fallback takes over.
MAX_ATTEMPTS = 8


def memo_key(call: Call, ctx: forcing.Forced | None) -> tuple:
    """The memo key of ``call`` under the context-forced choice ``ctx``.

    Must equal the tuple ``dispatch.run`` builds inline (tests check it).
    """
    tensors = call.tensors
    return (call.algorithm, call.n, call.t, call.out_dtype, call.time_major, call.a,
            call.starts_at, *tensors, call.device, ctx)


def _prepare(decision: Decision) -> Launcher:
    impl = registry.all_strategies()[decision.strategy]
    return impl.prepare(decision.key, dict(decision.params))


def _note(decision: Decision, device: torch.device) -> None:
    STATE.decisions[(decision.key, device)] = decision
    if not STATE.settings.log_decisions:
        return
    marker = (decision.key, device, decision.strategy, decision.source)
    if marker in STATE.logged:
        return
    STATE.logged.add(marker)
    if _log.level == logging.NOTSET or _log.level > logging.DEBUG:
        _log.setLevel(logging.DEBUG)
    if not _log.handlers and not logging.getLogger().handlers:
        _log.addHandler(logging.StreamHandler())
    _log.debug("rltriton-tune: %s on %s -> %s %s (%s; %s)", decision.key.as_text(), device,
               decision.strategy, decision.params, decision.source, decision.detail)


def _recorded(launcher: Launcher, decision: Decision, device: torch.device) -> Launcher:
    """``launcher``, counted in the workload record when recording is on and the key
    missed the database."""
    path = STATE.settings.record_path
    if path is None or decision.origin in ("profile", "forced"):
        return launcher
    if STATE.recorder is None:
        from rltriton_tune.dispatch.record import Recorder

        STATE.recorder = Recorder(path)
    return STATE.recorder.wrap(launcher, decision.key, device_fingerprint(device),
                               decision.origin)


def miss(call: Call, mk: tuple, ctx: forcing.Forced | None) -> tuple[torch.Tensor, ...]:
    """Decide, prepare, run once, memoise, return the outputs.

    A config that fails to compile or launch is dropped for the process and the next
    choice is tried (the key's decision order continues), ending with the torch fallback.
    """
    check_environment()
    with STATE.lock:
        launcher = STATE.table.get(mk)
        if launcher is not None:
            return launcher(call)
        key = call.key
        device = normalize_device(call.device)
        forced = forcing.effective(ctx)
        for _ in range(MAX_ATTEMPTS):
            decision = decide(key, device, forced, online=True)
            try:
                launcher = _prepare(decision)
                out = launcher(call)
                break
            except Exception as exc:
                if decision.strategy == FALLBACK or decision.origin == "forced":
                    raise
                reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
                mark_failed(device, decision.strategy, decision.params, reason)
                warn_once(f"failed:{decision.strategy}:{sorted(decision.params.items())}",
                          f"rltriton-tune: {decision.strategy} {decision.params} failed for "
                          f"{key.as_text()} ({reason}); not using it again in this process")
        else:
            impl = registry.torch_strategies()[FALLBACK]
            decision = Decision(key, FALLBACK, dict(impl.default_params(key)), "fallback",
                                f"{MAX_ATTEMPTS} Triton configs failed")
            launcher = _prepare(decision)
            out = launcher(call)
        STATE.table[mk] = _recorded(launcher, decision, device)
        _note(decision, device)
        return out


def lookup(call: Call) -> Launcher | None:
    """The memoised launcher for ``call`` in the current force context (None if not yet run)."""
    return STATE.table.get(memo_key(call, forcing.current()))


def decisions() -> dict[tuple, Any]:
    """Decisions taken by calls in this process, by (key, device)."""
    with STATE.lock:
        return dict(STATE.decisions)
