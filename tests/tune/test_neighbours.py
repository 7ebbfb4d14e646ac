"""An entry's config is chosen for its key and the off-grid companions it will serve."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.fallback import STRATEGIES
from rltriton_tune.pow2 import next_pow2
from rltriton_tune.tune import neighbours
from rltriton_tune.tune.space import Candidate

CPU = torch.device("cpu")
KEY = ProblemKey("gae", 128, 32)
USABLE = {"torch": STRATEGIES["torch"]}
MODES = ("doubling", "loop", "chunked")


@pytest.mark.parametrize(("key", "want"), [
    (ProblemKey("gae", 128, 32), [(77, 19), (161, 29), (129, 39)]),
    (ProblemKey("vtrace", 8, 8, "bfloat16", "time", "last_value"), [(5, 5), (11, 7), (9, 9)]),
    (ProblemKey("retrace", 512, 128, a=8), [(307, 77), (641, 115), (513, 153)]),
    (ProblemKey("vtrace", 32768, 2048), [(19661, 1229), (40961, 1843), (32769, 2457)]),
    # none beyond where the shipped grid has steps in the next span (512, 8)
    (ProblemKey("gae", 4096, 256), [(2457, 153), (5121, 231)]),
    (ProblemKey("gae", 1, 4), [(1, 3)]),   # the one above would be the same shape
])
def test_companions_are_odd_sized_neighbours_of_the_same_kind_on_either_side(key, want):
    others = neighbours.companions(key)
    assert [(other.n, other.t) for other in others] == want
    for other in others:
        assert (other.algorithm, other.dtype, other.layout, other.flags, other.a) == (
            key.algorithm, key.dtype, key.layout, key.flags, key.a)


def test_companions_below_and_above_stay_in_the_keys_span_of_steps():
    """Dispatch reads steps by their power-of-two span. The companion above always stays
    in the key's; the one below does where the key's steps are a power of two (grid
    keys); the one beyond lies in the next span up there, partly filled."""
    from rltriton_tune.dispatch import lookup

    for n, t in ((128, 32), (4096, 256), (64, 8), (512, 2048), (300, 130), (300, 129),
                 (300, 257), (40, 5)):
        key = ProblemKey("gae", n, t)
        below, above, *beyond = neighbours.companions(key)
        assert next_pow2(above.t) == next_pow2(t), (key, above)
        if t == next_pow2(t):
            assert next_pow2(below.t) == next_pow2(t), (key, below)
        for other in beyond:
            assert other.n == n | 1 and other.t > t
            if t == next_pow2(t):
                assert next_pow2(other.t) == 2 * t and lookup.partial_span(other.t)
        if t == next_pow2(t):  # none beyond exactly where the shipped grid has 2t steps
            assert (not beyond) == (2 * t in (8, 32, 128, 512, 2048, 8192, 32768, 65536))


def test_the_span_beyond_a_grid_point_4x_apart_in_steps_borrows_its_entry():
    """The companion beyond stands for calls dispatch serves from the key's entry where
    the next grid point is 4x the steps (the shipped grid): both spans are as near, and
    the key's steps are nearer."""
    from rltriton_tune.dispatch import lookup

    key, next_point = ProblemKey("vtrace", 32768, 2048), ProblemKey("vtrace", 32768, 8192)
    beyond = neighbours.companions(key)[2]
    assert lookup.distance(beyond, key) == lookup.distance(beyond, next_point)
    assert lookup.fine_distance(beyond, key) < lookup.fine_distance(beyond, next_point)


def test_keys_too_short_for_a_companion_below_or_above_have_none_there():
    assert neighbours.companions(ProblemKey("gae", 8, 2)) == [ProblemKey("gae", 9, 3)]
    assert neighbours.companions(ProblemKey("gae", 1, 1)) == []


def test_no_companion_beyond_where_the_grid_has_a_point_in_that_span():
    """32768 and 65536 steps are both shipped grid points (up to 4096 environments, the
    size limit): calls of 32769-65536 steps are served by the 65536-step entry."""
    assert len(neighbours.companions(ProblemKey("gae", 2048, 32768))) == 2
    beyond = neighbours.companions(ProblemKey("gae", 8192, 32768))[2]
    assert (beyond.n, beyond.t) == (8193, 39321)


class FakeEvaluator:
    """Times each candidate at a companion as ``times`` says (None: it fails)."""

    def __init__(self, times, seen):
        self.times, self.seen, self.closed = times, seen, False

    def evaluate(self, cands, budget_s=None, gate=True):
        self.seen.extend(cands)
        out = []
        for c in cands:
            t = self.times[c.params["mode"]]
            out.append(SimpleNamespace(ok=t is not None, candidate=c,
                                       timing=None if t is None else SimpleNamespace(
                                           device_us=t)))
        return out

    def close(self):
        self.closed = True


#: The tests of ``choose``'s rules time two companions, the ones below and above.
PAIR = neighbours.companions(KEY)[:2]
BELOW, ABOVE = (other.as_text() for other in PAIR)


def _choose(key_us, below_us, above_us=None, finalists=MODES):
    """Choose among ``finalists`` timed ``key_us`` at KEY, ``below_us`` at its companion
    below and ``above_us`` at the one above (each None where it fails; all failing where
    ``above_us`` is None)."""
    seen, made = [], []
    above_us = above_us or [None] * len(finalists)

    def evaluator_for(other):
        times = below_us if other.as_text() == BELOW else above_us
        evaluator = FakeEvaluator(dict(zip(finalists, times, strict=True)), seen)
        made.append((other, evaluator))
        return evaluator

    cands = [Candidate("torch", {"mode": m}) for m in finalists]
    choice = neighbours.choose(KEY, cands, key_us, CPU, USABLE, 0.01, evaluator_for,
                               PAIR)
    return choice, made, seen


def _choose_at(key, others, times_at, key_us=(1.0, 1.3, 1.4), floor=None):
    """Choose among MODES timed ``key_us`` at ``key`` and ``times_at(other)`` at each of
    ``others`` (held to the ``floor``-th); return the choice and the candidates timed at
    each companion."""
    seen: dict[str, list[Candidate]] = {}

    def evaluator_for(other):
        return FakeEvaluator(dict(zip(MODES, times_at(other), strict=True)),
                             seen.setdefault(other.as_text(), []))

    cands = [Candidate("torch", {"mode": m}) for m in MODES]
    return neighbours.choose(key, cands, list(key_us), CPU, USABLE, 0.01, evaluator_for,
                             others, floor=floor), seen


def test_the_config_serving_the_neighbourhood_best_wins_over_a_near_tie_at_the_key():
    # 3% slower at the key, 15% faster at the companion below: the geometric mean decides.
    choice, made, seen = _choose([1.00, 1.03, 1.50], [1.15, 1.00, 1.60])
    assert choice.index == 1
    assert [other.as_text() for other, _ in made] == [BELOW, ABOVE]
    assert all(evaluator.closed for _, evaluator in made)
    # moved there and timed: all three at the partly filled companion below (the screen
    # for the off-grid config); above, only the two within KEY_MARGIN at the key: the
    # third, 50% slower there and no faster below, could not be chosen
    assert [c.params["mode"] for c in seen] == [*MODES, *MODES[:2]]
    assert choice.extra() == {"companions": {BELOW: 1.0}}


def test_the_companion_above_counts_like_the_one_below():
    # Tied at the key and below; 20% faster above.
    choice, _, _ = _choose([1.00, 1.01, 1.50], [1.00, 1.00, 1.60], [1.20, 1.00, 1.70])
    assert choice.index == 1
    assert choice.extra() == {"companions": {BELOW: 1.0, ABOVE: 1.0}}
    # Faster above, slower below by as much: the key decides.
    choice, _, _ = _choose([1.00, 1.01, 1.50], [1.00, 1.20, 1.60], [1.20, 1.00, 1.70])
    assert choice.index == 0


def test_a_config_much_slower_at_the_key_is_not_chosen_for_its_companions():
    choice, _, _ = _choose([1.00, 1.60, 1.70], [1.10, 1.00, 1.00])
    assert choice.index == 0
    # 20% slower at the key is past the margin, however much it wins at the companions
    assert neighbours.KEY_MARGIN < 0.2
    choice, _, _ = _choose([1.00, 1.20, 1.50], [2.00, 1.00, 1.00], [2.00, 1.00, 1.00])
    assert choice.index == 0


def test_a_config_without_a_companion_time_is_judged_without_it():
    # The fastest failed at the companions (dispatch would serve them from another entry):
    # it stays, whatever the others do there.
    choice, _, _ = _choose([1.00, 5.00, 9.00], [None, 1.00, 1.20])
    assert choice.index == 0
    choice, _, _ = _choose([1.00, 1.01, 1.50], [None, 1.00, 1.20])
    assert choice.index == 0
    # calls of other shapes get the one that ran there (see off_grid_choice); no companion
    # beyond was timed, so it serves calls with more steps too (no off_grid_beyond field)
    assert choice.extra() == {"off_grid": {"strategy": "torch", "params": {"mode": "loop"},
                                           "companions": {BELOW: 1.0}}}
    # one that failed there cannot win through the companion
    choice, _, _ = _choose([1.00, 1.05, 1.08], [1.30, None, 1.00])
    assert choice.index == 2
    # nor through the other one: failing above must not spare it its cost there
    choice, _, _ = _choose([1.00, 1.08, 1.05], [1.30, 1.00, 1.00], [1.00, 1.05, 1.05])
    assert choice.index == 2
    choice, _, _ = _choose([1.00, 1.08, 1.05], [1.30, 1.00, 1.00], [1.00, None, 1.05])
    assert choice.index == 2
    choice, _, _ = _choose([1.00, 1.01, 1.50], [None, None, None])
    assert choice.index == 0 and choice.extra() == {}


def test_only_finalists_that_can_be_chosen_and_the_floor_are_timed_at_companions():
    """A finalist past KEY_MARGIN at the key is not moved to the companions, unless it is
    the floor, whose times there bound the others, or the companion is the first partly
    filled one of its shape (an off-grid screen), where it is dropped again unless faster
    than those; the fastest is timed there even alone, for the entry's record of its
    companion times."""
    seen = []

    def evaluator_for(other):
        return FakeEvaluator(dict(zip(MODES, [1.0, 1.0, 1.0], strict=True)), seen)

    cands = [Candidate("torch", {"mode": m}) for m in MODES]
    companions = PAIR
    choice = neighbours.choose(KEY, cands, [1.0, 1.5, 1.6], CPU, USABLE, 0.01,
                               evaluator_for, companions, floor=2)
    assert [c.params["mode"] for c in seen] == [*MODES, MODES[0], MODES[2]]
    assert choice.index == 0 and choice.floor_held
    assert all(us[1] is None for us in choice.companion_us)
    seen.clear()
    choice = neighbours.choose(KEY, cands, [1.0, 1.5, 1.6], CPU, USABLE, 0.01,
                               evaluator_for, companions)
    assert [c.params["mode"] for c in seen] == [*MODES, MODES[0]]
    assert choice.index == 0 and choice.extra() == {
        "companions": {other.as_text(): 1.0 for other in companions}}


def test_a_config_too_slow_at_the_key_can_still_serve_partly_filled_calls():
    """The off-grid config answers only to calls whose steps fill part of their span: a
    finalist 30% slower at the key (past KEY_MARGIN) but 25% faster at the partly filled
    companion below becomes it, and is timed at the other partly filled companions (the
    key's other flag sets there) to be judged; one that is not faster below is timed
    nowhere else. On the H100 (float32 V-trace, device time), tiled with 256-step tiles
    took 72 µs at 4745x1047 where the flat config of the 4096x2048 entry took 105."""
    key = ProblemKey("vtrace", 128, 32)
    others = neighbours.neighbourhood(key)
    partly = [o for o in others if (o.n, o.t) != (key.n, key.t)
              and neighbours.lookup.partial_span(o.t)]
    # below and beyond, and the key's other flag sets below
    assert len(partly) == 2 + len(neighbours.flag_companions(key))
    choice, seen = _choose_at(key, others, lambda other: [1.0, 0.75, 1.0] if other in partly
                              else [1.0, 1.3, 1.3])
    assert choice.index == 0
    # one config for each side of the key's steps: here the same
    for off, side in ((choice.off_grid, [o for o in partly if o.t < key.t]),
                      (choice.off_grid_beyond, [o for o in partly if o.t > key.t])):
        assert off.index == 1 and off.config == ("torch", {"mode": "loop"})
        assert dict(off.us) == {o.as_text(): 0.75 for o in side}
    screens = partly[:2]  # the first of each shape: below, then beyond
    assert [(o.n, o.t) for o in screens] == [(77, 19), (129, 39)]
    for other in others:
        modes = [c.params["mode"] for c in seen[other.as_text()]]
        want = list(MODES) if other in screens else \
            ["doubling", "loop"] if other in partly else ["doubling"]
        assert modes == want, other.as_text()


def test_a_config_faster_beyond_the_span_alone_becomes_the_off_grid_config():
    """Each shape of partly filled companion is a screen: a finalist no faster below
    but far faster beyond (in the next span up) is kept, timed at the key's other flag
    sets below, and chosen for the partly filled calls; one faster nowhere is timed at no
    other partly filled companion. On the H100 (float32 V-trace, device time), the
    32768x2048 entry screened below alone recorded flat on 16 warps and no off-grid
    config; flat then took 2087 µs at 32769x2457, and calls at 27665x2425 1233 µs where
    tiled with 256-step tiles had taken 828."""
    key = ProblemKey("vtrace", 32768, 2048)
    others = neighbours.neighbourhood(key)
    below, _, beyond = neighbours.companions(key)
    partly = [o for o in others if neighbours._partly_filled(key, o)]

    def times_at(other):
        # doubling: fastest at the key and below; loop: 15% slower below, 2.4x faster
        # beyond; chunked: slower everywhere
        return ([1.0, 1.15, 1.3] if (other.n, other.t) == (below.n, below.t) else
                [2.0, 0.83, 2.5] if other == beyond else [1.0, 1.1, 1.3])

    choice, seen = _choose_at(key, others, times_at)
    assert choice.index == 0
    # the calls beyond take it; those below keep the entry's own config
    assert choice.off_grid is None
    assert choice.off_grid_beyond.config == ("torch", {"mode": "loop"})
    assert dict(choice.off_grid_beyond.us) == {beyond.as_text(): 0.83}
    for other in partly:
        modes = [c.params["mode"] for c in seen[other.as_text()]]
        want = list(MODES) if other in (below, beyond) else ["doubling", "loop"]
        assert modes == want, other.as_text()
    # screened below alone, it would have been timed nowhere else and not chosen
    alone, _ = _choose_at(key, [o for o in others if o != beyond], times_at)
    assert alone.off_grid is None and alone.off_grid_beyond is None


def test_each_side_of_the_keys_steps_gets_its_own_off_grid_config():
    """Calls below the key's steps and beyond them take an off-grid config each, held to
    the floor on their side alone. On the H100 (float32 V-trace, device time), the
    32768x2048 entry's flat config (also rl-triton's, the floor, within noise) took 267
    µs at 19661x1229, where tiled was no faster, and 2083 at 32769x2457; with one config
    for both sides, tiled lost to the floor below and was barred from serving beyond."""
    key = ProblemKey("vtrace", 32768, 2048)
    others = neighbours.neighbourhood(key)
    beyond = neighbours.companions(key)[2]

    def times_at(other):
        # doubling (the floor) is fastest at the key and below; loop is 10% slower below
        # and 2.5x faster beyond
        return [2.0, 0.8, 2.5] if other == beyond else [1.0, 1.1, 1.3]

    choice, _ = _choose_at(key, others, times_at, key_us=(1.0, 1.3, 1.4), floor=0)
    assert choice.index == 0 and choice.floor_held
    assert choice.off_grid is None
    assert choice.off_grid_beyond.config == ("torch", {"mode": "loop"})
    assert choice.extra()["off_grid"] is None
    assert choice.extra()["off_grid_beyond"]["companions"] == {beyond.as_text(): 0.8}


def test_a_shape_whose_first_companion_runs_nothing_screens_at_its_next():
    """Where nothing runs at a shape's first partly filled companion (no memory for its
    inputs, say), the next one of that shape (another flag set) is its screen."""
    key = ProblemKey("vtrace", 32768, 2048)
    others = neighbours.neighbourhood(key)
    below = neighbours.companions(key)[0]
    flagged = neighbours.flagged_companions(key)
    assert (flagged[0].n, flagged[0].t) == (below.n, below.t)
    choice, seen = _choose_at(key, others, lambda other: (
        [None] * 3 if other == below else [1.2, 0.8, 1.3] if other == flagged[0]
        else [1.0, 1.1, 1.3]))
    assert [c.params["mode"] for c in seen[flagged[0].as_text()]] == list(MODES)
    assert [c.params["mode"] for c in seen[flagged[1].as_text()]] == ["doubling", "loop"]
    assert choice.off_grid.config == ("torch", {"mode": "loop"})
    assert below.as_text() not in choice.companions


def test_a_config_only_the_screen_kept_does_not_move_the_entrys_own_choice():
    """A finalist past KEY_MARGIN at the key, fastest at the partly filled companion,
    becomes the off-grid config; the entry's own choice is the one it would be without
    it (slowdowns there count against the fastest config that can be chosen)."""
    with_it, _, _ = _choose([1.0, 1.05, 1.5], [None, 1.0, 0.5], [1.2, 1.0, 1.7])
    without, _, _ = _choose([1.0, 1.05, 1.5], [None, 1.0, None], [1.2, 1.0, 1.7])
    assert with_it.index == without.index == 1
    assert with_it.off_grid.index == 2 and without.off_grid is None


def test_every_companions_candidates_are_prefetched_before_any_is_timed():
    """``prefetch`` hears of every companion's moved candidates before the first companion
    is timed (a compile pool then compiles them all at once): every finalist at the first
    partly filled companion of each shape (the screens), the choosable ones and the floor
    elsewhere."""
    events = []

    def evaluator_for(other):
        events.append(("timed", other.as_text()))
        return FakeEvaluator(dict(zip(MODES, [1.0, 1.0, 1.0], strict=True)), [])

    cands = [Candidate("torch", {"mode": m}) for m in MODES]
    neighbours.choose(KEY, cands, [1.0, 1.5, 1.6], CPU, USABLE, 0.01, evaluator_for,
                      PAIR, floor=2,
                      prefetch=lambda other, ahead: events.append(
                          ("ahead", other.as_text(), [c.params["mode"] for c in ahead])))
    assert events == [("ahead", BELOW, list(MODES)), ("ahead", ABOVE, [MODES[0], MODES[2]]),
                      ("timed", BELOW), ("timed", ABOVE)]


def test_every_screen_is_prefetched_with_every_finalist():
    key = ProblemKey("vtrace", 32768, 2048)
    others = neighbours.neighbourhood(key)
    below, _, beyond = neighbours.companions(key)
    ahead = {}
    cands = [Candidate("torch", {"mode": m}) for m in MODES]
    neighbours.choose(key, cands, [1.0, 1.5, 1.6], CPU, USABLE, 0.01,
                      lambda other: FakeEvaluator(dict.fromkeys(MODES, 1.0), []), others,
                      prefetch=lambda other, c: ahead.__setitem__(
                          other, [x.params["mode"] for x in c]))
    assert ahead == {other: list(MODES) if other in (below, beyond) else ["doubling"]
                     for other in others}


def test_one_finalist_or_no_companion_needs_no_companion_timing():
    choice, made, _ = _choose([2.0], [1.0], finalists=("loop",))
    assert choice.index == 0 and not made
    cands = [Candidate("torch", {"mode": m}) for m in MODES]
    lone = ProblemKey("retrace", 1, 1, flags="trunc", a=8)  # no shape or flag companion
    choice = neighbours.choose(lone, cands, [3.0, 1.0, 2.0], CPU, USABLE,
                               0.01, lambda other: pytest.fail("no companion to time"))
    assert choice.index == 1 and choice.extra() == {}


def test_a_companion_that_cannot_be_timed_is_left_out(caplog):
    def broken(other):
        raise MemoryError("no room for the companion's inputs")

    cands = [Candidate("torch", {"mode": m}) for m in MODES]
    choice = neighbours.choose(KEY, cands, [2.0, 1.0, 3.0], CPU, USABLE, 0.01, broken)
    assert choice.index == 1 and choice.extra() == {}
    assert "not timed" in caplog.text


def test_the_other_flag_sets_real_calls_carry_are_companions_too():
    """A profile without entries of the other common flag sets serves them from this
    entry: a config much slower with bootstrap values and truncations loses to one
    nearly as fast without them."""
    assert [k.flags for k in neighbours.flag_companions(KEY)] == ["last_value",
                                                                   "bootstrap+trunc"]
    assert neighbours.flag_companions(ProblemKey("retrace", 64, 32, flags="trunc", a=8)) == []
    assert [(k.n, k.t, k.flags) for k in neighbours.flagged_companions(KEY)] == [
        (77, 19, "last_value"), (77, 19, "bootstrap+trunc")]
    assert neighbours.neighbourhood(KEY) == [*neighbours.companions(KEY),
                                             *neighbours.flag_companions(KEY),
                                             *neighbours.flagged_companions(KEY)]
    slow_with_flags = {"bootstrap+trunc": [1.60, 1.00, 1.70]}
    seen = []

    def evaluator_for(other):
        times = slow_with_flags.get(other.flags, [1.00, 1.02, 1.50])
        return FakeEvaluator(dict(zip(MODES, times, strict=True)), seen)

    cands = [Candidate("torch", {"mode": m}) for m in MODES]
    choice = neighbours.choose(KEY, cands, [1.00, 1.03, 1.50], CPU, USABLE, 0.01,
                               evaluator_for)
    assert choice.index == 1
    assert len(choice.companions) == 7
    assert "gae|bootstrap+trunc|float32|env|N=128|T=32" in choice.extra()["companions"]


def _choose_with_floor(key_us, below_us, above_us, floor, held=True):
    """The index chosen with ``floor``; ``held``: whether the choice was held to it."""
    def evaluator_for(other):
        times = below_us if other.as_text() == BELOW else above_us
        return FakeEvaluator(dict(zip(MODES, times, strict=True)), [])

    cands = [Candidate("torch", {"mode": m}) for m in MODES]
    choice = neighbours.choose(KEY, cands, key_us, CPU, USABLE, 0.01, evaluator_for,
                               PAIR, floor=floor)
    assert choice.floor_held == (floor is not None and held)
    return choice.index


def test_no_config_is_chosen_that_loses_to_the_floor_somewhere():
    """The geometric mean would take the first (fastest at the key, 5% faster below); it
    is 7% slower than the floor (the last, rl-triton's config) above, so the floor is
    chosen, and with the guard off the first is."""
    key_us, below, above = [1.00, 1.04, 1.02], [0.95, 1.00, 1.00], [1.07, 1.06, 1.00]
    assert _choose_with_floor(key_us, below, above, floor=None) == 0
    assert _choose_with_floor(key_us, below, above, floor=2) == 2
    # The second is within the margin of the floor everywhere but at the key, where it is
    # 2.5% slower: past FLOOR_MARGIN, so it is out; at 1% slower it is in, and its gain
    # below wins.
    assert neighbours.FLOOR_MARGIN == pytest.approx(0.02)
    assert _choose_with_floor([1.00, 1.025, 1.00], [0.95, 0.90, 1.00], [1.07, 1.00, 1.00],
                              floor=2) == 2
    assert _choose_with_floor([1.00, 1.01, 1.00], [0.95, 0.90, 1.00], [1.07, 1.00, 1.00],
                              floor=2) == 1


def test_the_floor_decides_nothing_where_it_could_not_be_chosen():
    # The floor failed above: it is not eligible, and the others are judged as before,
    # losing to it only where both ran.
    assert _choose_with_floor([1.00, 1.04, 1.02], [0.95, 1.00, 1.00], [1.07, 1.06, None],
                              floor=2) == 0
    # Slower than the floor below (where both ran) and the floor not eligible (15% slower
    # at the key): every eligible one loses to it somewhere, so the guard is dropped.
    assert _choose_with_floor([1.00, 1.04, 1.15], [1.10, 1.12, 1.00], [1.00, 1.00, 1.00],
                              floor=2, held=False) == 0


def test_calls_of_other_shapes_get_the_config_that_serves_the_shape_companions_best():
    """rl-triton's config (the floor) is fastest at the key, and the second, 3.4% slower
    there, is past the floor's margin: the entry keeps the floor. At both shape
    companions the second is over 20% faster, so the entry also records it as the config
    calls of other shapes whose steps fill part of their span take (``off_grid``, with
    its times at the companion below, the one of such steps)."""
    key_us, below, above = [1.00, 1.034, 1.50], [1.27, 1.00, 1.60], [1.30, 1.00, 1.70]
    assert _choose_with_floor(key_us, below, above, floor=0) == 0

    def evaluator_for(other):
        return FakeEvaluator(dict(zip(MODES, below if other.as_text() == BELOW else above,
                                      strict=True)), [])

    cands = [Candidate("torch", {"mode": m}) for m in MODES]
    choice = neighbours.choose(KEY, cands, key_us, CPU, USABLE, 0.01, evaluator_for,
                               PAIR, floor=0)
    assert (choice.index, choice.off_grid.index) == (0, 1)
    assert choice.extra()["off_grid"] == {"strategy": "torch", "params": {"mode": "loop"},
                                          "companions": {BELOW: 1.0}}
    assert choice.extra()["companions"] == {BELOW: 1.27, ABOVE: 1.30}


def test_the_off_grid_config_is_chosen_where_steps_fill_part_of_their_span():
    """The companion below fills about 0.6 of the key's span of steps, the one above 0.9:
    only the one below, with the calls like it that take the off-grid config, weighs in
    it. A config far faster below and far slower above is recorded; the entry's own
    config answers to the key and the companion above."""
    from rltriton_tune.dispatch import lookup

    below_key, above_key = PAIR
    assert lookup.partial_span(below_key.t) and not lookup.partial_span(above_key.t)
    assert not lookup.partial_span(KEY.t)

    def evaluator_for(other):
        times = [1.30, 1.00, 1.50] if other.as_text() == BELOW else [1.00, 1.60, 1.50]
        return FakeEvaluator(dict(zip(MODES, times, strict=True)), [])

    cands = [Candidate("torch", {"mode": m}) for m in MODES]
    choice = neighbours.choose(KEY, cands, [1.00, 1.01, 1.50], CPU, USABLE, 0.01,
                               evaluator_for, PAIR)
    assert (choice.index, choice.off_grid.index) == (0, 1)
    assert choice.extra()["off_grid"]["companions"] == {BELOW: 1.0}


def test_an_off_grid_config_must_win_by_more_than_noise_and_hold_to_the_floor():
    assert neighbours.off_grid_choice(0, [[1.00, 0.99]], [1.0, 1.0], [0, 1], None) is None
    assert neighbours.off_grid_choice(0, [[1.00, 0.95]], [1.0, 1.0], [0, 1], None) == 1
    # the floor (2) is 10% faster than the second at a companion: not the second
    times = [[1.30, 1.00, 1.20], [1.30, 1.25, 1.10]]
    assert neighbours.off_grid_choice(0, times, [1.0, 1.0, 1.2], [0, 1, 2], 2) == 2
    # only the choosable ones, and only those that ran at every shape companion
    assert neighbours.off_grid_choice(0, [[1.30, 1.00, 0.80]], [1.0, 1.0, 2.0], [0, 1],
                                      None) == 1
    assert neighbours.off_grid_choice(0, [[1.30, 1.00], [1.30, None]], [1.0, 1.0], [0, 1],
                                      None) is None
    # the chosen one failed at a shape companion: any that ran there is better
    assert neighbours.off_grid_choice(0, [[None, 1.00]], [1.0, 1.01], [0, 1], None) == 1
    assert neighbours.off_grid_choice(0, [], [1.0, 1.0], [0, 1], None) is None


def test_flag_sets_off_the_grid_weigh_in_the_off_grid_config_and_at_the_key_do_not():
    """Calls with other flags at the key's own shape take the entry's config, so those
    companions do not weigh in the off-grid config; calls of other shapes with other
    flags take the off-grid config, so the flagged companion off the grid does."""
    def run(flagged_off_grid):
        def evaluator_for(other):
            if (other.n, other.t) == (KEY.n, KEY.t):  # flags at the key's shape
                times = [1.00, 3.00, 1.50]
            elif other.flags != KEY.flags:
                times = flagged_off_grid
            else:
                times = [1.30, 1.00, 1.50]
            return FakeEvaluator(dict(zip(MODES, times, strict=True)), [])

        cands = [Candidate("torch", {"mode": m}) for m in MODES]
        return neighbours.choose(KEY, cands, [1.00, 1.01, 1.50], CPU, USABLE, 0.01,
                                 evaluator_for)

    choice = run([1.30, 1.00, 1.50])
    assert choice.index == 0 and choice.off_grid.index == choice.off_grid_beyond.index == 1
    below, _, beyond = neighbours.companions(KEY)
    assert set(choice.extra()["off_grid"]["companions"]) == {
        k.as_text() for k in (below, *neighbours.flagged_companions(KEY))}
    assert set(choice.extra()["off_grid_beyond"]["companions"]) == {beyond.as_text()}
    # far slower with flags off the grid: no off-grid config below; beyond, where no
    # flagged companion lies, the same one
    choice = run([1.00, 3.00, 1.50])
    assert choice.off_grid is None and choice.off_grid_beyond.index == 1


def test_the_floor_competes_for_the_off_grid_config_whatever_its_time_at_the_key():
    """rl-triton's config, 20% slower at the key (it cannot be the entry's config), is
    the fastest at both shape companions: calls of other shapes take it."""
    def evaluator_for(other):
        times = [1.30, 1.20, 1.00] if other.flags == KEY.flags else [1.00, 1.00, 1.00]
        return FakeEvaluator(dict(zip(MODES, times, strict=True)), [])

    cands = [Candidate("torch", {"mode": m}) for m in MODES]
    choice = neighbours.choose(KEY, cands, [1.00, 1.05, 1.20], CPU, USABLE, 0.01,
                               evaluator_for, PAIR, floor=2)
    assert choice.index != 2 and choice.off_grid.index == 2
    assert choice.extra()["off_grid"]["params"] == {"mode": "chunked"}


def test_the_companion_beyond_the_span_weighs_like_the_others():
    """A config 4% faster at the key and level below and above, but 60% slower where the
    steps spill into the next span, loses to one that holds there. On the H100 (float32
    V-trace, device time), the 32768x2048 entry's flat config took 606 µs at the key
    against 633 for tiled, and served 27665x2425 at 0.61-0.69x of rl-triton where tiled
    had served it at 1.35-1.47x."""
    below, above, beyond = neighbours.companions(KEY)
    times = {below.as_text(): [1.00, 1.00, 1.50], above.as_text(): [1.00, 1.00, 1.50],
             beyond.as_text(): [1.60, 1.00, 1.70]}

    def evaluator_for(other):
        return FakeEvaluator(dict(zip(MODES, times[other.as_text()], strict=True)), [])

    cands = [Candidate("torch", {"mode": m}) for m in MODES]
    for others, want in (([below, above], 0), ([below, above, beyond], 1)):
        choice = neighbours.choose(KEY, cands, [1.00, 1.04, 1.50], CPU, USABLE, 0.01,
                                   evaluator_for, others)
        assert choice.index == want, others
