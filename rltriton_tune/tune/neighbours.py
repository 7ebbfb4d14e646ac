"""Choose an entry's config for the calls it will serve, not for its grid point alone.

An entry is looked up exactly by the one key it was tuned at and borrowed by every
call near it that has no entry of its own (``dispatch.lookup``): shapes between grid
points, with odd sizes whose rows start at unaligned addresses. Configs within a few
percent of each other at a grid key can differ by far more there. On the H200 (float32
GAE, device time), 16 rows a program on 8 warps was the fastest config tuned at 128x32,
and at 77x24 it took 1.46 µs against 1.25 µs for one row a program (rl-triton: 1.24);
at 512x128 four rows a program on 4 warps won, and at 777x77 it took 2.64 µs against
2.24 µs for one row a program.

So the finalists of a key, measured at the key, are also timed at its *companion*: an
off-grid neighbour (:func:`companion`), each config moved there the way dispatch moves
a borrowed config. Among the fastest at the key and those within :data:`KEY_MARGIN` of
it that ran at the companion, the config recorded is the one with the least geometric
mean of its slowdowns against the fastest at the two shapes; its companion time is kept
in the entry beside its own.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.dispatch import lookup

_log = logging.getLogger("rltriton_tune.tune")

#: Where a companion lies, as a fraction of the key's sizes: between this grid point and
#: the next smaller one, nearer this one where grid points are 4x apart (the shipped
#: grid, but for its largest sizes).
COMPANION_FRACTION = 0.6
#: Most a config chosen for the neighbourhood may be slower at the key itself than the
#: fastest there: the key is a call too.
KEY_MARGIN = 0.10


def _odd(x: float) -> int:
    return max(1, int(x)) | 1


def companion(key: ProblemKey) -> ProblemKey | None:
    """The off-grid neighbour ``key``'s entry is also chosen for: about 0.6x its number of
    environments and of steps, both odd (so that neither axis is vector-aligned in either
    layout), everything else the same. None when the key is too small to have one."""
    n, t = _odd(key.n * COMPANION_FRACTION), _odd(key.t * COMPANION_FRACTION)
    if (n, t) == (key.n, key.t) or t < 3:
        return None
    return ProblemKey(key.algorithm, n, t, key.dtype, key.layout, key.flags, key.a)


@dataclass(frozen=True)
class Choice:
    """The finalist chosen (its index in the finalists), and the evidence."""

    index: int
    companion: str | None = None
    #: Device time of each finalist at the companion (None: failed or not moved there).
    companion_us: tuple[float | None, ...] = ()

    def extra(self) -> dict[str, Any]:
        """What an entry records of the choice."""
        if self.companion is None or self.companion_us[self.index] is None:
            return {}
        return {"companion": self.companion,
                "companion_us": round(float(self.companion_us[self.index]), 3)}


def choose(key: ProblemKey, finalists: Sequence[Any], key_us: Sequence[float],
           device: torch.device, usable: dict[str, Any], budget_s: float | None,
           evaluator_for: Any) -> Choice:
    """The finalist (``Candidate``s timed at ``key`` in ``key_us``) that serves ``key`` and
    its companion best (see the module doc). ``evaluator_for(key)`` makes an evaluator
    for another key (closed here). With one finalist, no companion, or no finalist that
    runs at the companion, the fastest at ``key`` is chosen."""
    fastest = min(range(len(finalists)), key=lambda i: key_us[i])
    other = companion(key)
    if other is None or len(finalists) < 2:
        return Choice(fastest)
    moved = []
    for cand in finalists:
        impl = usable.get(cand.strategy)
        name, params = (None, None) if impl is None else lookup.moved(
            impl, key, other, dict(cand.params), usable)
        moved.append(None if params is None else type(cand)(name, params))
    runnable = [c for c in moved if c is not None]
    if not runnable:
        return Choice(fastest)
    try:
        evaluator = evaluator_for(other)
        try:
            outcomes = iter(evaluator.evaluate(runnable, budget_s=budget_s, gate=True))
        finally:
            evaluator.close()
    except Exception as exc:  # noqa: BLE001 - e.g. no memory for the companion's inputs
        _log.warning("%s: companion %s not timed (%s); the fastest at the key is recorded",
                     key.as_text(), other.as_text(), exc)
        return Choice(fastest)
    times = tuple(None if c is None else _time(next(outcomes)) for c in moved)
    ran = [t for t in times if t is not None]
    if not ran:
        return Choice(fastest, other.as_text(), times)
    best_key, best_other = min(key_us), min(ran)

    def cost(i: int) -> float:
        # A config with no time at the companion (not movable there, or it failed) is
        # judged at the key alone: dispatch would serve the companion from another entry.
        there = 0.0 if times[i] is None else math.log(times[i] / best_other)
        return math.log(key_us[i] / best_key) + there

    eligible = [i for i in range(len(finalists))
                if i == fastest or (times[i] is not None
                                    and key_us[i] <= best_key * (1 + KEY_MARGIN))]
    chosen = min(eligible, key=lambda i: (cost(i), key_us[i]))
    return Choice(chosen, other.as_text(), times)


def _time(outcome: Any) -> float | None:
    return outcome.timing.device_us if outcome.ok and outcome.timing is not None else None
