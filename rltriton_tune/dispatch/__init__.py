"""Dispatch: choose and run an implementation for each call (the single seam).

Every public estimator hands its validated :class:`~rltriton_tune.call.Call` to
:func:`run`; nothing else launches work. A memo hit costs one tuple, one dict
lookup and the launcher call; decisions (profiles, borrowing, rules, fallback,
online tuning) happen once per shape in :mod:`rltriton_tune.dispatch.memo`.
"""

from __future__ import annotations

import torch

from rltriton_tune import state
from rltriton_tune.call import Call
from rltriton_tune.dispatch import forcing, memo
from rltriton_tune.dispatch.decide import Decision, FallbackWarning
from rltriton_tune.dispatch.devices import current_cuda_device, device_fingerprint
from rltriton_tune.dispatch.explain import explain, problem_key
from rltriton_tune.dispatch.forcing import force

__all__ = ["run", "force", "explain", "Decision", "FallbackWarning",
           "device_fingerprint", "problem_key", "reset"]

_STATE = state.STATE
_current_forced = forcing.current
_miss = memo.miss


def run(call: Call) -> tuple[torch.Tensor, ...]:
    """Compute the outputs of ``call`` with the implementation chosen for its key."""
    tensors = call.tensors
    device = call._device  # Call.device, inlined: the validator's Calls carry it
    if device is None:
        device = next(iter(tensors.values())).device
    if device.type == "cuda" and device.index != current_cuda_device():
        # Kernels launch on the current device: run on the tensors' own, as torch does.
        with torch.cuda.device(device):
            return run(call)
    # Same tuple as memo.memo_key, inlined: this is the per-call hot path.
    mk = (call.algorithm, call.n, call.t, call.out_dtype, call.time_major, call.a,
          call.starts_at, *tensors, device, _current_forced())
    launcher = _STATE.table.get(mk)
    if launcher is None:
        return _miss(call, mk, mk[-1])
    return launcher(call)


def reset() -> None:
    """Forget memoised launchers, decisions, warnings and loaded profiles, and read the
    environment again (tests, tools); where ``RLTRITON_TUNE_ONLINE`` is on now, plug the
    online tuner in, as the import does."""
    from rltriton_tune.tuning_db import invalidate_cache
    from rltriton_tune.tuning_db import state as db_state

    state.reset()
    invalidate_cache()
    db_state.forget_warnings()
    if _STATE.online_installer is not None:  # RLTRITON_TUNE_ONLINE may be on now
        _STATE.online_installer()
