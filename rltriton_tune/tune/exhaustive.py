"""Exhaustive sweep of one key's search space: the ground truth the tuner is judged by.

Every valid config is gated and timed (compiled in a :class:`CompilePool` when
given). The table is cached as JSON and written after every batch, so an
interrupted sweep resumes where it stopped.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.problems import data_bytes
from rltriton_tune.tune.compile_pool import CompilePool
from rltriton_tune.tune.evaluate import Evaluator
from rltriton_tune.tune.space import Candidate, SearchSpace
from rltriton_tune.tune.study import all_strategies_for

#: Seconds of timing per config: one quick round (input copies capped, no host time);
#: the bench re-measures the best configs in full (``finalists``).
SWEEP_BUDGET_S = 0.01
#: Configs per batch without a compile pool (the table is saved after each batch).
BATCH = 16
#: Configs per batch with a compile pool, per worker: enough that the workers rarely
#: idle at a batch's tail while they wait for the next one to be handed out.
POOL_BATCH_PER_WORKER = 8
#: Share of free device memory the workers' gates may fill with one key's inputs.
GATE_MEMORY_SHARE = 0.5


def gate_limit(key: ProblemKey, device: torch.device, workers: int) -> int:
    """How many workers may gate ``key`` at once: each holds a full-size copy of a big
    key's inputs and outputs (about three times its data), within
    :data:`GATE_MEMORY_SHARE` of the device's free memory."""
    if device.type != "cuda":
        return workers
    free, _total = torch.cuda.mem_get_info(device)
    return max(1, min(workers, int(GATE_MEMORY_SHARE * free // max(1, 3 * data_bytes(key)))))


def sweep(key: ProblemKey, device: torch.device, cache: Path, pool: CompilePool | None = None,
          log: bool = True, max_seconds: float | None = None,
          stats: dict[str, float] | None = None) -> dict[str, dict[str, Any]]:
    """label -> {"strategy", "params", "device_us" (None if it failed), "error"}.

    With ``max_seconds``, stops after the batch that passes it and returns the partial
    table (``cache`` is then not written: a later call resumes the sweep). Configs are
    swept in a seeded random order, so a partial table samples every strategy. With a
    pool, the workers compile and gate the next batch while this one is timed. ``stats``
    receives where the time went: ``gate_wait_s`` (waiting for the pool's verdicts) and
    ``timing_s`` (timing the batch, and gating it too without a pool), so a slow sweep
    says which side limits it.
    """
    if cache.exists():
        return json.loads(cache.read_text())
    cache.parent.mkdir(parents=True, exist_ok=True)
    partial = cache.with_suffix(".partial.json")
    table: dict[str, dict[str, Any]] = json.loads(partial.read_text()) if partial.exists() else {}
    space = SearchSpace(key, device)
    todo = [c for c in space.enumerate() if c.label() not in table]
    random.Random(0).shuffle(todo)
    evaluator = Evaluator(key, device, all_strategies_for(device, space), rounds=1, quick=True,
                          time_budget_s=SWEEP_BUDGET_S, workers=1, pool=pool)
    step = POOL_BATCH_PER_WORKER * pool.workers if pool is not None else BATCH
    batches = [todo[i:i + step] for i in range(0, len(todo), step)]
    limit = gate_limit(key, device, pool.workers) if pool is not None else None
    pending = pool.start(key, device, batches[0], limit) if pool is not None and batches \
        else None
    started = time.perf_counter()
    spent = {"gate_wait_s": 0.0, "timing_s": 0.0}
    try:
        for b, batch in enumerate(batches):
            gated = None
            mark = time.perf_counter()
            if pending is not None:
                gated = pending.results()
                pending = pool.start(key, device, batches[b + 1], limit) \
                    if b + 1 < len(batches) else None
            spent["gate_wait_s"] += time.perf_counter() - mark
            mark = time.perf_counter()
            outcomes = evaluator.evaluate(batch, gated=gated)
            spent["timing_s"] += time.perf_counter() - mark
            for out in outcomes:
                table[out.candidate.label()] = {
                    "strategy": out.candidate.strategy, "params": out.candidate.params,
                    "device_us": out.timing.device_us if out.ok else None, "error": out.error}
            partial.write_text(json.dumps(table))
            if max_seconds is not None and time.perf_counter() - started > max_seconds \
                    and b + 1 < len(batches):
                return table
            if log:
                left = sum(len(x) for x in batches[b + 1:])
                print(f"  {key.as_text()}: {len(table)} configs done, {left} left "
                      f"({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    finally:
        evaluator.close()
        if stats is not None:
            stats.update({k: round(v, 1) for k, v in spent.items()})
    cache.write_text(json.dumps(table, indent=1))
    partial.unlink(missing_ok=True)
    return table


def best_of(table: dict[str, dict[str, Any]], k: int = 1) -> list[Candidate]:
    """The ``k`` fastest configs of a sweep table."""
    timed = sorted((v for v in table.values() if v.get("device_us") is not None),
                   key=lambda v: (v["device_us"], v["strategy"], sorted(v["params"].items())))
    return [Candidate(v["strategy"], dict(v["params"])) for v in timed[:k]]


#: Finalists re-measured in full (``finalists``): every config within this factor of the
#: sweep's best, at least FINALISTS_MIN and at most FINALISTS_MAX of them. A quick timing
#: taken while the workers gate the next batch strays up to ~15% on 3 us kernels (H200,
#: eligibility traces 20000x28: a config 1.17x the sweep's best in the quick pass was
#: 1.015x when both were re-measured), so the margin is wider than that.
FINALISTS_MARGIN = 1.25
FINALISTS_MIN = 8
FINALISTS_MAX = 32


def finalists(table: dict[str, dict[str, Any]]) -> list[Candidate]:
    """The configs of a sweep worth re-measuring in full to find its true best."""
    ranked = best_of(table, FINALISTS_MAX)
    if not ranked:
        return []
    top = table[ranked[0].label()]["device_us"]
    return [c for i, c in enumerate(ranked)
            if i < FINALISTS_MIN or table[c.label()]["device_us"] <= FINALISTS_MARGIN * top]


def cache_name(key: ProblemKey, device: torch.device) -> str:
    """File name of ``key``'s sweep table (one folder per device kind)."""
    text = key.as_text().replace("|", "_").replace("=", "")
    return f"exhaustive_{text}_{device.type}.json"


def key_of_cache_name(name: str) -> ProblemKey:
    """Inverse of :func:`cache_name` (``.partial.json`` names too): the table's key."""
    stem = name.removesuffix(".json").removesuffix(".partial").removeprefix("exhaustive_")
    parts = stem.split("_")[:-1]  # the device type is last
    if len(parts) < 6:
        raise ValueError(f"not a sweep table name: {name!r}")
    count = 3 if parts[-1].startswith("A") else 2  # N, T and, per action, A
    head, sizes = parts[:-count], [f"{s[0]}={s[1:]}" for s in parts[-count:]]
    algorithm, flags, dtype, layout = "_".join(head[:-3]), *head[-3:]
    return ProblemKey.from_text("|".join([algorithm, flags, dtype, layout, *sizes]))
