"""Measure what borrowing costs: how well one entry's config serves a neighbouring key.

Dispatch serves a key without an entry of its own with the config of the entry
expected to cost the least (``dispatch.lookup``), from one factor per key
dimension. This module measures those factors on this device: for pairs of
entries that differ in exactly one dimension (flag set, dtype, layout, action
count) or only in shape (within :data:`MAX_SHAPE_DISTANCE`), it times the config
dispatch would take from the neighbour (its off-grid one at another shape whose steps
fill part of their span, where it records one that serves), moved to the key as
dispatch would move it, head to head with the key's own config on the same inputs. A
dimension's factor is the mean slowdown over its pairs, the expected cost of borrowing
across it (for shape, per unit of log2 distance). ``rltriton-tune tune --borrowing``
stores them in the profile, where the lookup reads them.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.dispatch import lookup

#: Shape neighbours further apart than this (log2 units) are not compared.
MAX_SHAPE_DISTANCE = 2.5


@dataclass(frozen=True)
class Pair:
    """The entry of ``target`` and the neighbour entry ``source``, differing in ``dimension``."""

    target: str
    source: str
    dimension: str
    distance: float


def pairs(profiles: Any, per_dimension: int | None = None) -> list[Pair]:
    """Pairs of entries that differ in one dimension, at most ``per_dimension`` of each
    (spread over the algorithms), in a stable order."""
    found: dict[str, list[Pair]] = {}
    texts = sorted(profiles.entries)
    for target in texts:
        key = profiles.entries[target].key
        for source in texts:
            other = profiles.entries[source].key
            if source == target or other.algorithm != key.algorithm:
                continue
            _, differs = lookup.expected_slowdown(key, other, lookup.DEFAULT_FACTORS)
            dist = lookup.distance(key, other)
            if len(differs) != 1 or (differs == ("shape",) and dist > MAX_SHAPE_DISTANCE):
                continue
            found.setdefault(differs[0], []).append(Pair(target, source, differs[0], dist))
    out = []
    for dimension in sorted(found):
        group = sorted(found[dimension], key=lambda p: (p.target.split("|")[0], p.target,
                                                        p.source))
        if per_dimension is not None and len(group) > per_dimension:
            step = len(group) / per_dimension
            group = [group[int(i * step)] for i in range(per_dimension)]
        out += group
    return out


def measure(profiles: Any, device: torch.device, usable: dict[str, Any],
            per_dimension: int = 12, budget_s: float | None = None) -> list[dict[str, Any]]:
    """Time each pair head to head; one row per pair that both configs ran for."""
    from rltriton_tune.tune.evaluate import Evaluator
    from rltriton_tune.tune.space import Candidate

    rows = []
    for pair in pairs(profiles, per_dimension):
        own = profiles.entries[pair.target]
        source = profiles.entries[pair.source]
        key: ProblemKey = own.key
        if own.strategy not in usable:
            continue
        mine = lookup.validated(usable[own.strategy], key, dict(own.params))
        # The config a call of the key takes from the neighbour, as dispatch picks it: its
        # off-grid one at another shape whose steps fill part of their span, where it
        # records one that serves, else its own.
        served = lookup.serving_config(source, key, usable)
        if served is None or mine is None:
            continue
        name, moved = served[:2]
        evaluator = Evaluator(key, device, usable, workers=1)
        try:
            outcomes = evaluator.evaluate([Candidate(own.strategy, mine), Candidate(name, moved)],
                                          budget_s)
        finally:
            evaluator.close()
        if not all(o.ok for o in outcomes):
            continue
        mine_us, moved_us = (o.timing.device_us for o in outcomes)
        rows.append({"target": pair.target, "source": pair.source,
                     "dimension": pair.dimension, "distance": round(pair.distance, 3),
                     "own_us": round(mine_us, 3), "borrowed_us": round(moved_us, 3),
                     "slowdown": round(max(1.0, moved_us / mine_us), 4)})
    return rows


def factors(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Mean slowdown per dimension (per unit of distance for shape), at least 1."""
    by_dim: dict[str, list[float]] = {}
    for row in rows:
        slowdown = row["slowdown"]
        if row["dimension"] == "shape":
            slowdown = math.exp(math.log(slowdown) / max(row["distance"], 1e-9))
        by_dim.setdefault(row["dimension"], []).append(slowdown)
    return {dim: round(max(1.0, statistics.fmean(values)), 4)
            for dim, values in sorted(by_dim.items())}
