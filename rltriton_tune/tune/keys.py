"""Which problem keys a tuning run covers: grids of shapes and variants, or a recorded workload.

``rltriton-tune tune`` builds its keys here: the product of algorithms, shapes,
dtypes, layouts and flag sets, or the keys a training run recorded with
``RLTRITON_TUNE_RECORD=FILE`` (most-called first), or both.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rltriton_tune.algorithms import ALGORITHMS, FLAG_NAMES, GRAD_ALGORITHMS
from rltriton_tune.call import ProblemKey, flags_string, parse_flags

#: The flag sets real calls carry, per algorithm: GAE and V-trace with ``last_value`` (what
#: PPO and IMPALA pass) or truncations with bootstrap values; returns with truncations and
#: bootstrap values; traces and prefix sums with seeds; Retrace always has truncations.
COMMON_FLAGS: dict[str, tuple[str, ...]] = {
    "gae": ("none", "last_value", "bootstrap+trunc"),
    "vtrace": ("none", "last_value", "bootstrap+trunc"),
    "retrace": ("trunc",),
    "lambda_returns": ("none", "bootstrap+trunc"),
    "discounted_returns": ("none", "bootstrap+trunc"),
    "eligibility_traces": ("none", "seed"),
    "episodic_prefix_sum": ("none", "seed"),
}

# The grad algorithms run in the backward passes of those calls, with the flags of each
# set that they keep (truncations; GAE's next_values and the prefix sums' starts_at),
# without and with the boundary input's flag (its gradient needed or not).


def _grad_flag_sets(grad: str, estimator_flags: Sequence[str]) -> tuple[str, ...]:
    spec = ALGORITHMS[grad]
    boundary = {FLAG_NAMES[name] for name in spec.boundary_grads}
    found = []
    for flags in estimator_flags:
        kept = parse_flags(flags) & spec.possible_flags
        found += [flags_string(kept - boundary), flags_string(kept)]
    return tuple(dict.fromkeys(found))


for _estimator, _grad in GRAD_ALGORITHMS.items():
    COMMON_FLAGS[_grad] = _grad_flag_sets(_grad, COMMON_FLAGS[_estimator])

#: The shape grid of a shipped profile: 8 to 262144 environments by 8 to 65536 steps, a
#: factor of 4 apart (but for the largest), up to 2^28 elements (a gigabyte a float32
#: tensor).
SHIP_ENVS = (8, 32, 128, 512, 2048, 8192, 32768, 131072, 262144)
SHIP_STEPS = (8, 32, 128, 512, 2048, 8192, 32768, 65536)
SHIP_MAX_ELEMS = 1 << 28
SHIP_SHAPES: list[tuple[int, int]] = [
    (n, t) for n in SHIP_ENVS for t in SHIP_STEPS if n * t <= SHIP_MAX_ELEMS]


def flag_sets(algorithm: str, requested: Sequence[str]) -> list[str]:
    """The canonical flag sets of ``requested`` that ``algorithm`` takes (its required
    flags added); ``common`` expands to :data:`COMMON_FLAGS` (``none`` for an algorithm
    it does not list)."""
    spec = ALGORITHMS[algorithm]
    out: list[str] = []
    for text in requested:
        if text == "common":
            # Algorithms it does not list (the adjoint scans) have one key: plain.
            out += COMMON_FLAGS.get(algorithm, ("none",))
            continue
        flags = parse_flags(text) | spec.required_flags
        if flags <= spec.possible_flags and not {"last_value", "trunc"} <= flags \
                and not {"last_value", "bootstrap"} <= flags:
            out.append(flags_string(flags))
    return list(dict.fromkeys(out))


def grid_keys(algorithms: Iterable[str], shapes: Iterable[tuple[int, int]],
              dtypes: Iterable[str], layouts: Iterable[str], flags: Sequence[str],
              actions: int) -> list[ProblemKey]:
    """Every valid key of the grid, in algorithm, shape, dtype, layout, flags order."""
    keys = []
    shapes, dtypes, layouts = list(shapes), list(dtypes), list(layouts)
    for alg in algorithms:
        for n, t in shapes:
            for dtype in dtypes:
                for layout in layouts:
                    for flag_set in flag_sets(alg, flags):
                        keys.append(ProblemKey(alg, n, t, dtype, layout, flag_set,
                                               actions if alg == "retrace" else 0))
    return list(dict.fromkeys(keys))


def coarse_to_fine(shapes: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """``shapes`` ordered so that every prefix spreads over the whole grid: each next shape
    is the one farthest, in (log2 N, log2 T), from those already taken (the smallest
    shape first; ties keep the given order)."""
    left = list(dict.fromkeys(shapes))
    if not left:
        return []

    def point(shape: tuple[int, int]) -> tuple[float, float]:
        return math.log2(max(shape[0], 1)), math.log2(max(shape[1], 1))

    order = [min(left, key=lambda s: s[0] * s[1])]
    left.remove(order[0])
    nearest = {s: math.dist(point(s), point(order[0])) for s in left}
    while left:
        far = max(left, key=lambda s: nearest[s])  # first of equals: max keeps it
        order.append(far)
        left.remove(far)
        for s in left:
            nearest[s] = min(nearest[s], math.dist(point(s), point(far)))
    return order


def coverage_order(keys: Sequence[ProblemKey]) -> list[ProblemKey]:
    """``keys`` in the order a run cut short (``--max-seconds``) is most useful in.

    First every algorithm and layout at the first dtype and the first flag set asked
    for, over the shapes coarse to fine (:func:`coarse_to_fine`); then the keys that
    differ from those in flag set or dtype alone, whose configs dispatch borrows at a
    small cost (the profile's measured ``borrowing`` factors); last, those that differ
    in both. Within a tier: shape, then layout, algorithm, flag set and dtype in the
    order given.
    """
    def rank(values: Iterable[object]) -> dict[object, int]:
        return {v: i for i, v in enumerate(dict.fromkeys(values))}

    shapes = rank(coarse_to_fine((k.n, k.t) for k in keys))
    layouts, algorithms = rank(k.layout for k in keys), rank(k.algorithm for k in keys)
    dtypes = rank(k.dtype for k in keys)
    # A flag set's rank within its algorithm: the first one asked for is the plain key.
    flags: dict[tuple[str, str], int] = {}
    for k in keys:
        flags.setdefault((k.algorithm, k.flags),
                         sum(a == k.algorithm for a, _ in flags))

    def order(k: ProblemKey) -> tuple[int, ...]:
        f, d = flags[(k.algorithm, k.flags)], dtypes[k.dtype]
        return ((f > 0) + (d > 0), shapes[(k.n, k.t)], layouts[k.layout],
                algorithms[k.algorithm], f, d)

    return sorted(keys, key=order)


def record_keys(path: Path | str, fingerprint: dict[str, Any]) -> list[ProblemKey]:
    """The keys a workload file recorded for this device, most-called first.

    Raises ``ValueError`` (a :class:`~rltriton_tune.dispatch.record.RecordError`) for a
    file that is not a workload record, and ``OSError`` for one that cannot be read."""
    from rltriton_tune.dispatch.record import read_record
    from rltriton_tune.tuning_db.fingerprint import same_fingerprint

    return list(dict.fromkeys(
        ProblemKey.from_text(row["key"]) for row in read_record(path)
        if same_fingerprint(row["fingerprint"], fingerprint)))
