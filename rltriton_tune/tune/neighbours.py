"""Choose an entry's config for the calls it will serve, not for its grid point alone.

An entry is looked up exactly by the one key it was tuned at and borrowed by every
call near it that has no entry of its own (``dispatch.lookup``): shapes between grid
points, with odd sizes whose rows start at unaligned addresses. Configs within a few
percent of each other at a grid key can differ by far more there. On the H200 (float32
GAE, device time), 16 rows a program on 8 warps was the fastest config tuned at 128x32,
and at 77x24 it took 1.46 µs against 1.25 µs for one row a program (rl-triton: 1.24);
at 512x128 four rows a program on 4 warps won, and at 777x77 it took 2.64 µs against
2.24 µs for one row a program.

So the finalists of a key, measured at the key, are also timed at its *companions*:
off-grid neighbours on either side, and one with the key's environments whose steps lie
in the next power-of-two span up (:func:`companions`), each config moved there the way
dispatch moves a borrowed config. Among the fastest at the key and those within
:data:`KEY_MARGIN` of it, the config recorded is the one with the least geometric mean
of its slowdowns against the fastest at the key and at each companion; its companion
times are kept in the entry beside its own.

A companion above is needed as well as one below. On the H200 and the H100 (float32
GAE, device time), the config chosen at 4096x256 with a companion below it alone
(2457x153), one row a program on 2 warps, served 5000x230 at 0.82-0.89x of rl-triton.

The key's shape with each other flag set real calls carry (:func:`flag_companions`) is a
companion too: a profile without entries of those flag sets serves them from this one.
On the H100 (torch 2.11, Triton 3.6, device time), the config chosen for V-trace at
512x128 without flags and with shape companions alone, one row a program on one warp,
ran V-trace with bootstrap values and truncations at 700x120 at 0.63x of rl-triton.
A flag set that has an entry of its own is a companion all the same: which entries a
profile holds changes as it is tuned, and :data:`KEY_MARGIN` bounds what serving it can
cost the key. An off-grid shape whose steps fill part of their span (the companion below,
where the key's steps are a power of two) with each of those flag sets is a companion too
(:func:`flagged_companions`): calls of other shapes whose steps fill part of their
power-of-two span take the entry's off-grid config where it records one
(:func:`off_grid_choice`), whatever their flags. (The companion beyond is timed with the
key's flag set alone, each flag set costing a compile and a timing of the finalists
kept: on the H100, V-trace's tiled config chosen beyond 32768x2048 served 27665x2425
with bootstrap values and truncations at 1.50x of rl-triton.) That config answers to
those calls alone, so its time at the key bars nothing: every finalist is screened at
the first partly filled companion of each shape (where the key's steps are a power of
two, the one below and the one beyond where there is one; otherwise the one above can
be one too).
On the H100 (float32 V-trace, device time), the 4096x2048 entry had tiled with
256-step tiles on 4 warps among its contenders and recorded no off-grid config when
only the configs within :data:`KEY_MARGIN` at the key were timed at the companions,
while calls at 4745x1047 that borrow the entry took 72 µs with that config against 105
with the flat one. One screen is not enough: the config that serves the next span up
may be no faster below. The 32768x2048 entry, screened below alone (19661x1229,
where flat on 16 warps took 265 µs), chose flat and recorded no off-grid config; flat
then took 2087 µs at the companion beyond (32769x2457), and calls at 27665x2425 with
bootstrap values and truncations 1233 µs, where the former entry's tiled config with
256-step tiles on 4 warps had taken 828 (rl-triton: 1235-1248). Nor is one config enough
for both sides of the key's steps: each side gets its own (``off_grid`` and
``off_grid_beyond``, see ``dispatch.lookup.OFF_GRID_FIELDS``), chosen at that side's
companions alone.

The geometric mean can trade a loss at one companion for a gain at another. Where the
finalists include a *floor*, the config of the peer users would call instead
(rl-triton's, on CUDA), no other finalist is chosen that is slower than it by more than
:data:`FLOOR_MARGIN` at the key or at any companion both ran at: in the neighbourhood,
the entry does not lose to the peer's own choice. (Where the floor itself cannot be
chosen, having failed at a companion or being more than :data:`KEY_MARGIN` slower at the
key, and every other config loses to it somewhere, the floor is set aside.) On the H100
(torch 2.11, Triton 3.6, device time), the geometric mean chose one row a program on 2
warps for discounted returns at 4096x256 (0.6% faster at the key than rl-triton's one
row on 4 warps with steps held last to first); at 5000x230 it took 6.82 µs against
6.33 µs for rl-triton's config, and 10.22 against 9.65 with bootstrap values and
truncations (rl-triton itself: 6.55 and 9.82).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.dispatch import lookup
from rltriton_tune.pow2 import next_pow2

_log = logging.getLogger("rltriton_tune.tune")

#: Where the companions lie, as fractions of the key's (environments, steps). Below:
#: between this grid point and the next smaller one, nearer this one where grid points
#: are 4x apart (the shipped grid, but for its largest sizes). Above: more environments,
#: nearer this point than the next larger one of a grid 2x apart, with steps in the key's
#: power-of-two span (which dispatch reads as the same steps, see
#: ``dispatch.lookup.distance``). Beyond: the key's environments with more steps, in the
#: next span up where the key's steps are a power of two, partly filled. Where grid
#: points are 4x apart in steps, no entry has that span, and dispatch serves its calls
#: from this one (the spans on either side are as near; the nearer steps decide,
#: ``dispatch.lookup.fine_distance``), moving the config to twice the tile; where the
#: shipped grid has a point in that span (32768 and 65536 steps), there is no companion
#: beyond. On the H100 (torch 2.11, Triton 3.6, float32 V-trace, device time),
#: the 32768x2048 entry's flat config, refreshed without this companion, served
#: 27665x2425 at 0.61-0.69x of rl-triton where its former tiled config had served it at
#: 1.35-1.47x.
COMPANION_FRACTIONS = ((0.6, 0.6), (1.25, 0.9), (1.0, 1.2))
#: Most a config chosen for the neighbourhood may be slower at the key itself than the
#: fastest there: the key is a call too.
KEY_MARGIN = 0.10
#: Most a chosen config may be slower than the floor's (rl-triton's config) at the key or
#: at a companion: about the spread of repeated timings of a kernel of a few µs.
FLOOR_MARGIN = 0.02


def _odd(x: float) -> int:
    return max(1, int(x)) | 1


def companions(key: ProblemKey) -> list[ProblemKey]:
    """The off-grid neighbours ``key``'s entry is also chosen for (see
    :data:`COMPANION_FRACTIONS`): odd numbers of environments and of steps (so that
    neither axis is vector-aligned in either layout), everything else the same. A key too
    small for one has none on that side, and one that would repeat another is left out."""
    out = []
    for fn, ft in COMPANION_FRACTIONS:
        n, t = _odd(key.n * fn), _odd(key.t * ft)
        if fn > 1 and next_pow2(t) != next_pow2(key.t):
            # Above: the key's own span of steps (T = 130 would give 117, read as 128).
            t = key.t | 1 if next_pow2(key.t | 1) == next_pow2(key.t) else key.t
        if ft > 1 and _grid_point_in_span(key.n, next_pow2(t)):
            continue  # beyond: that span's calls are served by its own entry
        if (n, t) != (key.n, key.t) and t >= 3 and (n, t) not in [(o.n, o.t) for o in out]:
            out.append(ProblemKey(key.algorithm, n, t, key.dtype, key.layout, key.flags,
                                  key.a))
    return out


def _grid_point_in_span(n: int, span: int) -> bool:
    """Whether a grid of the shipped grid's steps and size limit has a point of ``span``
    steps at ``n`` environments."""
    from rltriton_tune.tune.keys import SHIP_MAX_ELEMS, SHIP_STEPS

    return span in SHIP_STEPS and n * span <= SHIP_MAX_ELEMS


def flag_companions(key: ProblemKey) -> list[ProblemKey]:
    """``key``'s shape with each other flag set that real calls of its algorithm carry
    (``tune.keys.COMMON_FLAGS``)."""
    from rltriton_tune.tune.keys import COMMON_FLAGS

    return [ProblemKey(key.algorithm, key.n, key.t, key.dtype, key.layout, flags, key.a)
            for flags in COMMON_FLAGS.get(key.algorithm, ()) if flags != key.flags]


def flagged_companions(key: ProblemKey) -> list[ProblemKey]:
    """The first of :func:`companions` whose steps fill part of their span
    (``dispatch.lookup.partial_span``; the one below where the key's steps are a power of
    two), else the first, with each other flag set real calls carry: a call of another
    shape whose steps fill part of their span, with another flag set, borrows the entry's
    off-grid config (see :func:`off_grid_choice`), which must hold with flags as well
    (the one below; the one beyond is timed with the key's flags alone).
    One shape: each companion costs a compile and a timing of every finalist."""
    shapes = companions(key)
    if not shapes:
        return []
    base = next((c for c in shapes if lookup.partial_span(c.t)), shapes[0])
    return [ProblemKey(key.algorithm, base.n, base.t, key.dtype, key.layout, other.flags,
                       key.a) for other in flag_companions(key)]


def neighbourhood(key: ProblemKey) -> list[ProblemKey]:
    """Every companion ``key``'s entry is chosen for: off-grid shapes, flag sets at the
    key's shape, then flag sets off the grid."""
    return companions(key) + flag_companions(key) + flagged_companions(key)


def neighbourhood_texts(key: ProblemKey) -> list[str]:
    """:func:`neighbourhood` as key texts: what a refreshed entry records in its
    ``neighbourhood`` field, and what ``tune --refresh --missing-only`` compares it with."""
    return [other.as_text() for other in neighbourhood(key)]


@dataclass(frozen=True)
class Choice:
    """The finalist chosen (its index in the finalists), and the evidence."""

    index: int
    #: The companions timed (key texts), and at each the device time of every finalist
    #: (None: failed or not moved there).
    companions: tuple[str, ...] = ()
    companion_us: tuple[tuple[float | None, ...], ...] = ()
    #: Whether a floor was given and the choice was held to it (see :func:`choose`).
    floor_held: bool = False
    #: The finalists that calls of other shapes filling part of their span of steps take,
    #: where they are not ``index`` (see :func:`off_grid_choice`): with at most the key's
    #: steps (``off_grid``), and with more (``off_grid_beyond``).
    off_grid: OffGrid | None = None
    off_grid_beyond: OffGrid | None = None
    #: Whether a companion with more steps than the key's was timed: where none was (the
    #: next span has an entry of its own), ``off_grid`` serves those calls too.
    beyond_timed: bool = False

    def extra(self) -> dict[str, Any]:
        """What an entry records of the choice: the chosen config's time at each companion
        where it ran, and where there is an off-grid config, that of each side
        (``dispatch.lookup.OFF_GRID_FIELDS``; None where that side's calls take the
        entry's own). ``off_grid_beyond`` is left out where no companion beyond was
        timed: ``off_grid``, the one measured, then serves those calls too."""
        times = {text: round(float(us[self.index]), 3)
                 for text, us in zip(self.companions, self.companion_us, strict=True)
                 if us[self.index] is not None}
        out: dict[str, Any] = {"companions": times} if times else {}
        below, beyond = lookup.OFF_GRID_FIELDS
        if self.off_grid is not None or self.off_grid_beyond is not None:
            out[below] = None if self.off_grid is None else self.off_grid.record()
            if self.beyond_timed:
                out[beyond] = None if self.off_grid_beyond is None else \
                    self.off_grid_beyond.record()
        return out


@dataclass(frozen=True)
class OffGrid:
    """An off-grid config of a :class:`Choice`: the finalist's index, its config (strategy,
    parameters) and its time at each companion of its side."""

    index: int
    config: tuple[str, dict[str, Any]]
    us: tuple[tuple[str, float], ...]

    def record(self) -> dict[str, Any]:
        strategy, params = self.config
        return {"strategy": strategy, "params": dict(params),
                "companions": {text: round(us, 3) for text, us in self.us}}


def choose(key: ProblemKey, finalists: Sequence[Any], key_us: Sequence[float],
           device: torch.device, usable: dict[str, Any], budget_s: float | None,
           evaluator_for: Any, others: Sequence[ProblemKey] | None = None,
           floor: int | None = None,
           prefetch: Callable[[ProblemKey, list[Any]], None] | None = None) -> Choice:
    """The finalist (``Candidate``s timed at ``key`` in ``key_us``) that serves ``key`` and
    its companions (``others``, default :func:`neighbourhood`) best (see the module doc).
    ``evaluator_for(key)`` makes an evaluator for another key (closed here). ``floor``:
    the index of the finalist no choice may be slower than by more than
    :data:`FLOOR_MARGIN` anywhere it was timed (rl-triton's config), or None. Only the
    finalists that can be chosen and the floor are timed at the companions, every
    finalist at the first partly filled companion of each shape that runs
    (:func:`_partly_filled_shapes`), and at the other partly filled ones those
    :func:`_kept` at any of those. With one finalist or no companion timed, the fastest
    at ``key`` is chosen. ``prefetch(other, candidates)``, where given, is told first of
    every companion's candidates (moved there) that will be timed, so that their
    compiles can start at once rather than companion by companion."""
    fastest = min(range(len(finalists)), key=lambda i: key_us[i])
    if len(finalists) < 2:
        return Choice(fastest, floor_held=floor is not None)
    best_key = min(key_us)
    # The finalists that can be chosen: the fastest, and those within KEY_MARGIN of it at
    # the key. Only they and the floor, which bounds them, are timed at the companions
    # for the entry's own config: the others' times there would decide nothing, and each
    # costs a compile and a timing (but for the off-grid screen below). The fastest is
    # timed there even alone: the entry keeps its companion times.
    choosable = [i for i in range(len(finalists))
                 if i == fastest or key_us[i] <= best_key * (1 + KEY_MARGIN)]
    timing = {*choosable, *([] if floor is None else [floor])}
    # The off-grid config serves only the partly filled calls, so its time at the key
    # bars nothing: every finalist is timed at the first partly filled companion of each
    # shape that runs (the screens), and those faster at any of them than all of
    # ``timing`` by more than FLOOR_MARGIN are timed at the other partly filled ones too
    # and compete for it (``off_grid_choice``).
    others = neighbourhood(key) if others is None else others
    shapes = _partly_filled_shapes(key, others)
    everyone = set(range(len(finalists)))
    if prefetch is not None:
        firsts = [group[0] for group in shapes]
        for other in others:
            wanted = everyone if other in firsts else timing
            ahead = [c for c in _moved(key, other, finalists, usable, wanted) if c is not None]
            if ahead:
                prefetch(other, ahead)
    results: dict[str, tuple[float | None, ...] | None] = {}
    screened = set(timing)
    for group in shapes:  # where nothing ran at a shape's first, its next one screens
        for other in group:
            there = _times_at(key, other, finalists, usable, budget_s, evaluator_for,
                              everyone)
            results[other.as_text()] = there
            if there is not None:
                screened |= _kept(there, timing)
                break
    for text, there in results.items():  # the screens keep the times of those kept anywhere
        results[text] = _only(there, screened)
    for other in others:
        if other.as_text() not in results:
            wanted = screened if _partly_filled(key, other) else timing
            results[other.as_text()] = _times_at(key, other, finalists, usable, budget_s,
                                                 evaluator_for, wanted)
    timed, times, timed_keys = [], [], []
    for other in others:  # in the neighbourhood's order
        there = results[other.as_text()]
        if there is not None:
            timed.append(other.as_text())
            times.append(there)
            timed_keys.append(other)
    # Slowdowns at a companion count against the fastest of ``timing`` there: the configs
    # only the off-grid screen kept must not move the entry's own choice.
    best_there = [min((t for i, t in enumerate(there) if t is not None and i in timing),
                      default=None) for there in times]

    def cost(i: int) -> float:
        # The fastest at the key may have no time at a companion (not movable there, or it
        # failed): it is judged without it, dispatch would serve that companion from
        # another entry.
        return math.log(key_us[i] / best_key) + sum(
            math.log(there[i] / best) for there, best in zip(times, best_there, strict=True)
            if there[i] is not None and best is not None)

    # Another than the fastest must have run at every companion timed: one that failed at
    # a companion must not win through the others (dispatch would borrow it there).
    eligible = [i for i in choosable
                if i == fastest or (times and all(there[i] is not None for there in times))]

    def above_floor(i: int) -> bool:
        return floor is not None and i != floor and (
            key_us[i] > key_us[floor] * (1 + FLOOR_MARGIN)
            or _slower_than_floor(i, floor, times))

    # Where every eligible config loses to the floor somewhere (the floor itself not
    # eligible: failed at a companion, or far slower at the key), the floor decides nothing.
    guarded = [i for i in eligible if not above_floor(i)]
    chosen = min(guarded or eligible, key=lambda i: (cost(i), key_us[i]))
    # The companions of other shapes than the key's whose steps fill part of their span,
    # with its flags or others: the calls that take an off-grid config
    # (``dispatch.lookup.configs_for``), one for each side of the key's steps. The others
    # serve calls that take the entry's own.
    below: list[tuple[str, tuple[float | None, ...]]] = []
    beyond: list[tuple[str, tuple[float | None, ...]]] = []
    for text, there, other in zip(timed, times, timed_keys, strict=True):
        if _partly_filled(key, other):
            (beyond if other.t > key.t else below).append((text, there))

    def off_grid_of(shaped: list[tuple[str, tuple[float | None, ...]]]) -> OffGrid | None:
        # The floor and every finalist the screens kept compete for it: only those calls
        # take the off-grid config, so their times at the key do not bar them.
        off = off_grid_choice(chosen, [there for _, there in shaped], key_us,
                              sorted(screened), floor)
        if off is None:
            return None
        return OffGrid(off, (finalists[off].strategy, dict(finalists[off].params)),
                       tuple((text, float(there[off])) for text, there in shaped))

    return Choice(chosen, tuple(timed), tuple(times),
                  floor_held=floor is not None and bool(guarded),
                  off_grid=off_grid_of(below), off_grid_beyond=off_grid_of(beyond),
                  beyond_timed=bool(beyond))


def off_grid_choice(chosen: int, shape_times: Sequence[Sequence[float | None]],
                    key_us: Sequence[float], choosable: Sequence[int],
                    floor: int | None) -> int | None:
    """The finalist that calls of other shapes than the key's whose steps fill part of
    their power-of-two span (``dispatch.lookup.partial_span``), on one side of the key's
    steps, should take, where it is not ``chosen``: the one with the least geometric mean
    of slowdowns at that side's companions of such shapes alone (``shape_times``: per
    companion, every finalist's time or None),
    among the ``choosable`` finalists that ran at all of them (:func:`choose` passes
    those its screen kept, the floor among them), held to the floor there as
    :func:`choose` holds its choice (where every one loses to the floor somewhere and the
    floor did not run at all of them, it is set aside), and faster than ``chosen`` there
    by more than :data:`FLOOR_MARGIN` on that mean, or ``chosen`` did not run at all of
    them. None where there is no such finalist.

    ``chosen`` also answers to the key, to the other flag sets at the key's shape and to
    the companions that fill their span (the one above, where the key's steps are a power
    of two), and the floor guard at the key can keep it from the config that serves the
    partly filled shapes best. On the H100 (torch 2.11, Triton 3.6, device time),
    V-trace at 4096x2048 ran flat at 80.3 µs and tiled at 83.0 (3.4% slower, past
    FLOOR_MARGIN of rl-triton's flat config), while at the odd shapes that borrow the
    entry tiled took 47 against 59 µs (2457x1229), 72 against 105 (4745x1047) and 402
    against 760 (11077x2799; rl-triton 507)."""
    if not shape_times:
        return None
    best = [min((t for t in there if t is not None), default=None) for there in shape_times]
    if any(b is None for b in best):
        return None

    def mean_cost(i: int) -> float:
        return sum(math.log(there[i] / b) for there, b in zip(shape_times, best, strict=True)
                   ) / len(shape_times)

    ran = [i for i in choosable if all(there[i] is not None for there in shape_times)]
    if not ran:
        return None
    held = [i for i in ran if floor is None or i == floor
            or not _slower_than_floor(i, floor, shape_times)]
    off = min(held or ran, key=lambda i: (mean_cost(i), key_us[i]))
    if off == chosen:
        return None
    if chosen in ran and mean_cost(chosen) - mean_cost(off) <= math.log(1 + FLOOR_MARGIN):
        return None
    return off


def _partly_filled(key: ProblemKey, other: ProblemKey) -> bool:
    """Whether companion ``other`` is of another shape than ``key`` and its steps fill part
    of their span (``dispatch.lookup.partial_span``): a call the off-grid config serves."""
    return (other.n, other.t) != (key.n, key.t) and lookup.partial_span(other.t)


def _partly_filled_shapes(key: ProblemKey, others: Sequence[ProblemKey]
                          ) -> list[list[ProblemKey]]:
    """The partly filled companions (:func:`_partly_filled`) among ``others``, grouped by
    shape in their order: below the key's span and beyond it where the key's steps are a
    power of two (the one above too where they are not). The first of each group that
    runs is a screen: every finalist is timed there (see :func:`choose`)."""
    groups: dict[tuple[int, int], list[ProblemKey]] = {}
    for other in others:
        if _partly_filled(key, other):
            groups.setdefault((other.n, other.t), []).append(other)
    return list(groups.values())


def _kept(there: tuple[float | None, ...], timing: set[int]) -> set[int]:
    """Of every finalist's time at a screen (``there``), ``timing``'s indices and those
    faster than all of ``timing``'s there by more than :data:`FLOOR_MARGIN` (every one
    that ran, where none of ``timing`` did)."""
    ran = [there[i] for i in timing if there[i] is not None]
    bar = min(ran) / (1 + FLOOR_MARGIN) if ran else math.inf
    return timing | {i for i, us in enumerate(there) if us is not None and us < bar}


def _only(there: tuple[float | None, ...] | None, kept: set[int]
          ) -> tuple[float | None, ...] | None:
    """``there`` with the times of finalists not in ``kept`` set to None; None where none
    is left."""
    if there is None:
        return None
    out = tuple(us if i in kept else None for i, us in enumerate(there))
    return out if any(us is not None for us in out) else None


def _slower_than_floor(i: int, floor: int,
                       times: Sequence[Sequence[float | None]]) -> bool:
    """Whether finalist ``i`` is slower than the ``floor`` finalist by more than
    :data:`FLOOR_MARGIN` at any companion of ``times`` (per companion, every finalist's
    time or None) where both ran: the guard :func:`choose` and :func:`off_grid_choice`
    hold their choices to."""
    limit = 1 + FLOOR_MARGIN
    return any(there[i] is not None and there[floor] is not None
               and there[i] > there[floor] * limit for there in times)


def _times_at(key: ProblemKey, other: ProblemKey, finalists: Sequence[Any],
              usable: dict[str, Any], budget_s: float | None,
              evaluator_for: Any, timing: set[int]) -> tuple[float | None, ...] | None:
    """Each finalist's device time at ``other``, moved there as dispatch would (None where
    it cannot move or failed, or its index is not in ``timing``); None where no finalist
    ran there."""
    moved = _moved(key, other, finalists, usable, timing)
    runnable = [c for c in moved if c is not None]
    if not runnable:
        return None
    try:
        evaluator = evaluator_for(other)
        try:
            outcomes = iter(evaluator.evaluate(runnable, budget_s=budget_s, gate=True))
        finally:
            evaluator.close()
    except Exception as exc:  # noqa: BLE001 - e.g. no memory for the companion's inputs
        _log.warning("%s: companion %s not timed (%s); judged without it",
                     key.as_text(), other.as_text(), exc)
        return None
    times = tuple(None if c is None else _time(next(outcomes)) for c in moved)
    return times if any(t is not None for t in times) else None


def _moved(key: ProblemKey, other: ProblemKey, finalists: Sequence[Any],
           usable: dict[str, Any], wanted: set[int]) -> list[Any]:
    """Each finalist moved from ``key`` to ``other`` as dispatch moves a borrowed config
    (None where it cannot move there, or its index is not in ``wanted``)."""
    moved: list[Any] = []
    for i, cand in enumerate(finalists):
        impl = usable.get(cand.strategy) if i in wanted else None
        name, params = (None, None) if impl is None else lookup.moved(
            impl, key, other, dict(cand.params), usable)
        moved.append(None if params is None else type(cand)(name, params))
    return moved


def _time(outcome: Any) -> float | None:
    return outcome.timing.device_us if outcome.ok and outcome.timing is not None else None
