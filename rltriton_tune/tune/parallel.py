"""``--devices 0,1``: one worker process per GPU, all running trials on the same studies.

Each worker walks the same list of keys and runs trials on its own GPU until the
study of the key holds the budget; the study storage (journal file or RDB)
hands every worker distinct trials. Key ``j`` belongs to worker ``j % workers``,
which finalizes it (re-measure, baselines, record) right after its trials and
reports a summary to the parent, while the other workers go on with the next
key's trials: finalizing overlaps trials instead of trailing them (on the H200
x2, finalizing every key after all trials left the run at 1.2x one GPU).
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Sequence
from typing import Any

from rltriton_tune.call import ProblemKey

#: Seconds a worker waits for the other workers to finish a key's trials before finalizing.
FINALIZE_WAIT_S = 900.0


def _worker(key_texts: list[str], device: str, index: int, trials: int,
            timeout_s: float | None, storage: str | None, isolate: bool, seed: int,
            compile_workers: int | None, share: int, skip: tuple[str, ...],
            stop_at: float | None, queue: mp.Queue) -> None:
    import torch

    from rltriton_tune.tune.compile_pool import compile_pool_for
    from rltriton_tune.tune.study import run_trials, tightest

    if torch.device(device).type == "cuda":
        torch.cuda.set_device(torch.device(device))  # every launch and allocation on this GPU
    with compile_pool_for(torch.device(device), compile_workers, isolate, share) as pool:
        for position, text in enumerate(key_texts):
            key = ProblemKey.from_text(text)
            left = None if stop_at is None else stop_at - time.time()
            if left is None or left > 0:
                try:
                    run_trials(key, torch.device(device), trials=trials,
                               timeout_s=tightest(left, timeout_s),
                               storage=storage, isolate=isolate, seed=seed, pool=pool,
                               shared=True, on_trial=lambda _t, k=text: queue.put(("trial", k)))
                except Exception as exc:  # noqa: BLE001 - report and go on with the next key
                    queue.put(("error", f"{device} {text}: {type(exc).__name__}: {exc}"))
            queue.put(("key-done", text))
            if position % share == index:  # this worker's key: finalize it now
                queue.put(("finalized", _finalize(text, torch.device(device), trials, timeout_s,
                                                  storage, isolate, seed, skip, pool)))
    queue.put(("worker-done", device))


def _finalize(text: str, device, trials: int, timeout_s: float | None, storage: str | None,
              isolate: bool, seed: int, skip: tuple[str, ...], pool: Any = None) -> dict:
    """Wait while other workers still run trials of the key (up to its budget), then
    re-measure, measure baselines and record; a picklable summary for the parent."""
    from rltriton_tune.tune.study import finalize, finished_trials, in_flight, open_study

    key = ProblemKey.from_text(text)
    try:
        study = open_study(key, device, storage, trials=trials, seed=seed)
        deadline = time.monotonic() + (timeout_s or 0) + FINALIZE_WAIT_S
        while (len(finished_trials(study)) < trials and in_flight(study) > 0
               and time.monotonic() < deadline):
            time.sleep(0.5)  # another worker is still running trials of this key
        done = len(finished_trials(study))
        if done < trials:
            return {"key": text, "incomplete": f"{done} of {trials} trials"}
        result = finalize(study, key, device, isolate=isolate, seed=seed, skip=skip,
                          pool=pool)
    except Exception as exc:  # noqa: BLE001
        return {"key": text, "error": f"{type(exc).__name__}: {exc}"}
    return {"key": text, "entry": None if result.entry is None else result.entry.to_json(),
            "trials": result.trials, "failed": result.failed}


def run_workers(keys: Sequence[ProblemKey], devices: Sequence[str], *, trials: int,
                timeout_s: float | None, storage: str | None, isolate: bool = False,
                seed: int = 0, compile_workers: int | None = None,
                skip: Sequence[str] = (), max_seconds: float | None = None,
                on_event=None) -> list[str]:
    """Tune ``keys`` on every device in parallel; return error messages.

    ``on_event(kind, payload)`` is called in the parent for each ``"trial"``,
    ``"key-done"``, ``"error"`` and ``"finalized"`` event (the payload of the
    last: ``{"key", "entry" (JSON or None), "trials", "failed"}``, ``{"key", "error"}``
    or ``{"key", "incomplete"}``).
    ``skip`` names baselines not to measure; after ``max_seconds`` no new trials start
    and keys short of their budget are reported, not finalized (a later run resumes).
    """
    stop_at = None if max_seconds is None else time.time() + max_seconds
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    texts = [k.as_text() for k in keys]
    # Not daemonic: each worker starts its own compile processes.
    procs = [ctx.Process(target=_worker, args=(texts, d, i, trials, timeout_s, storage, isolate,
                                                seed + i, compile_workers, len(devices),
                                                tuple(skip), stop_at, queue))
             for i, d in enumerate(devices)]
    for p in procs:
        p.start()
    errors: list[str] = []
    running = len(procs)
    try:
        while running:
            try:
                kind, payload = queue.get(timeout=5)
            except Exception:  # noqa: BLE001 - queue.Empty: check for dead workers
                if not any(p.is_alive() for p in procs):
                    break
                continue
            if kind == "worker-done":
                running -= 1
                continue
            if kind == "error":
                errors.append(payload)
            if on_event is not None:
                on_event(kind, payload)
    finally:
        for p in procs:
            p.join(timeout=30 if running == 0 else 0)
            if p.is_alive():  # interrupted, or a worker that would not finish
                p.terminate()
                p.join(timeout=5)
            if p.exitcode not in (0, None):
                errors.append(f"worker for {p.name} exited with status {p.exitcode}")
    return errors
