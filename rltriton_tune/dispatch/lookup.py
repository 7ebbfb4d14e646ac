"""What the tuning database says for a key: its exact entry, else the entry to borrow.

A key without an entry of its own borrows the config of the measured entry expected
to serve it best. Every entry of the same algorithm is a candidate; each is ranked
by the slowdown its config is expected to cost at this key, the product of one
factor per unit of shape distance (log2 N, and log2 of the power-of-two span of T:
see :func:`distance`) and one per other dimension that differs: flag set, dtype,
layout, action count. The factors are the profile's own measurements (its
``borrowing`` section, written by ``rltriton-tune tune --borrowing``, which times
entries' configs at their neighbours' keys), else :data:`DEFAULT_FACTORS`. The
config is moved to the key's shape by its strategy (``Strategy.transfer``) and
validated for the key before it is used. A call of another shape than the entry's whose
steps fill part of their power-of-two span (:func:`partial_span`) takes the entry's
off-grid config for its side where it records one (see :func:`configs_for` and
``tune.neighbours.off_grid_choice``); other calls, at the entry's shape or with steps
that fill their span, take the entry's own.

The layout is a partition, not a factor: entries of the key's own layout always rank
first, and the other layout's are offered only where the algorithm has none of this
one. Which rows a program reads contiguously differs between the layouts, so a config
can be good in one and many times slower in the other, whatever a few measured pairs
say. On the H200 (``benchmarks/results/h200/peers.jsonl``, float32), time-major cells
served by env-major configs ran 5.1x slower than env-major at the same shape (geomean
of 179 cells; 1.23x of rl-triton, 79 cells below 0.97x), against 2.0x slower when
served by time-major entries (135 cells; 2.67x of rl-triton, 6 below 0.97x), while the
profile's measured layout factor was 1.017.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rltriton_tune.call import ProblemKey
from rltriton_tune.pow2 import next_pow2
from rltriton_tune.strategy import InvalidConfig, Strategy
from rltriton_tune.tuning_db.state import warn_once

#: Expected slowdown of a borrowed config, per unit of each difference, where the
#: profile has no measurement of its own. Chosen so that a nearby entry of another flag
#: set or dtype wins over a distant one of the same, and another layout (which changes
#: which strategies can win) is borrowed only when nothing else is there.
DEFAULT_FACTORS: dict[str, float] = {
    "shape": 1.15,    # per unit of Euclidean (log2 N, T span) distance
    "flags": 1.03,    # another flag set
    "dtype": 1.05,    # another dtype
    "layout": 3.0,    # the other layout
    "actions": 1.10,  # per doubling of the action count
}

DIMENSIONS = tuple(DEFAULT_FACTORS)

#: Calls whose steps fill less than this share of their power-of-two span take an entry's
#: off-grid config (see :func:`partial_span`). It lies midway between the shares of the
#: shape companions an entry is chosen for (``tune.neighbours.COMPANION_FRACTIONS``) where
#: the key's steps are a power of two and fill their span: the one below and the one
#: beyond (in the next span up) fill about 0.6 of theirs, the one above 0.9.
PARTIAL_SPAN = 0.75


def partial_span(t: int) -> bool:
    """Whether ``t`` steps fill less than :data:`PARTIAL_SPAN` of their power-of-two span.

    A one-tile kernel (``flat``) holds next_pow2(T) steps a row and idles the rest, so such
    calls can want another config than the full-span key their entry was tuned at. On the
    H100 (torch 2.11, Triton 3.6, device time, float32), GAE's 32768x2048 entry chose
    flat (344 µs); at 19661x1229 (0.6 of the span) its config took 209 µs and tiled 155,
    at 40961x1843 (0.9) 472 and 476."""
    return t < PARTIAL_SPAN * next_pow2(t)


def sibling_factor(factors: dict[str, float]) -> float:
    """Expected slowdown of an entry of a sibling GPU's profile (``tuning_db.siblings``),
    on top of its other differences: the geometric mean of another flag set or dtype
    (the larger) and one shape step, so that a sibling's entry at the key itself ranks
    below this GPU's own entry of another flag set or dtype at the same shape and above
    its own entry a shape step away. Where the factors cannot order the three (another
    flag set or dtype measured no cheaper than a shape step, or a measured factor beside
    a default one), half a shape step: the sibling's entry at the key then ranks above
    every own entry of another shape.

    A fixed factor does not scale with the measurements: with the H200's measured
    factors (a shape step 1.011), a fixed 1.10 ranked an H100's own entry 6.8 shape
    units away (4096x512, time-major) above the sibling's entry 1.1 away (128x4096); at
    60x3000 it ran at 0.24-0.39x of rl-triton."""
    other = max(factors["flags"], factors["dtype"])
    shape = factors["shape"]
    return math.sqrt(other * shape) if other < shape else math.sqrt(shape)


@dataclass(frozen=True)
class Found:
    """A config the database offers for a key: from ``entry`` (key text) in ``path``."""

    strategy: str
    params: dict[str, Any]
    entry: str
    path: str
    exact: bool
    expected_slowdown: float = 1.0
    differs: tuple[str, ...] = ()
    tuned: tuple[str, dict[str, Any]] | None = None  # the config as tuned, when moved
    off_grid: str = ""  # the entry's off-grid field that served (OFF_GRID_FIELDS), if any
    beyond: bool = False  # the call has more steps than the entry (the off-grid side)

    def describe(self) -> str:
        if self.exact:
            return f"exact entry {self.entry}"
        moved = "" if self.tuned is None else \
            f"; config moved from {self.tuned[0]} {self.tuned[1]}"
        whose = " of a sibling GPU's profile" if "gpu" in self.differs else ""
        side = "calls with more steps" if self.beyond else "calls with at most its steps"
        which = f"; its off-grid config for {side} ({self.off_grid})" if self.off_grid else ""
        return (f"borrowed from {self.entry}{whose} (differs in {', '.join(self.differs)}; "
                f"expected within {self.expected_slowdown:.2f}x{which}{moved})")


def validated(impl: Strategy, key: ProblemKey, params: dict[str, Any]) -> dict[str, Any] | None:
    """``params`` completed and checked by ``impl`` for ``key``, or None if invalid."""
    try:
        return dict(impl.validate(key, {**impl.default_params(key), **params}))
    except InvalidConfig:
        return None
    except Exception:  # noqa: BLE001 - a foreign profile's params must never break a call
        return None


def factors_of(profiles: Any) -> dict[str, float]:
    """The borrowing factors: the profile's measured ones over the defaults."""
    measured = getattr(profiles, "borrowing", None) or {}
    return {name: float(measured.get(name, default)) for name, default in
            DEFAULT_FACTORS.items()}


def distance(a: ProblemKey, b: ProblemKey) -> float:
    """Euclidean distance of two keys' shapes in (log2 N, log2 of T's power-of-two span).

    Steps count by span because every kernel covers T with power-of-two tiles, masked
    past T: T = 150 runs 256-step tiles, like T = 256 and unlike T = 128, so a config
    tuned at 128 steps needs another tile there. On the H200 (``peers.jsonl``), cells
    served from an entry one span down by plain log2 T nearness (333x150 from 256x128,
    1500x180 and 2500x250 from 2048x128) ran at 0.82-0.93x of rl-triton; 2500x250 ran at
    0.98-1.21x (14 cells) once served from 2048x256."""
    return math.hypot(math.log2(max(a.n, 1)) - math.log2(max(b.n, 1)),
                      math.log2(next_pow2(a.t)) - math.log2(next_pow2(b.t)))


def fine_distance(a: ProblemKey, b: ProblemKey) -> float:
    """Euclidean distance in (log2 N, log2 T): among entries :func:`distance` finds
    equally near (spans one apart on either side), the one nearer in T."""
    return math.hypot(math.log2(max(a.n, 1)) - math.log2(max(b.n, 1)),
                      math.log2(max(a.t, 1)) - math.log2(max(b.t, 1)))


def expected_slowdown(key: ProblemKey, other: ProblemKey,
                      factors: dict[str, float]) -> tuple[float, tuple[str, ...]]:
    """Expected slowdown of ``other``'s config at ``key``, and the dimensions that differ."""
    differs = [name for name, field in (("flags", "flags"), ("dtype", "dtype"),
                                         ("layout", "layout"))
               if getattr(key, field) != getattr(other, field)]
    log_cost = sum(math.log(factors[name]) for name in differs)
    if (key.n, key.t) != (other.n, other.t):
        differs.append("shape")
        log_cost += distance(key, other) * math.log(factors["shape"])
    if key.a != other.a:
        differs.append("actions")
        log_cost += abs(math.log2(max(key.a, 1)) - math.log2(max(other.a, 1))) * \
            math.log(factors["actions"])
    return math.exp(log_cost), tuple(differs)


def _by_algorithm(profiles: Any) -> dict[str, list[tuple[ProblemKey, str]]]:
    """Entries grouped by algorithm (built once per loaded profile set)."""
    index = profiles.index.get("by_algorithm")
    if index is None:
        index = {}
        for text, entry in profiles.entries.items():
            index.setdefault(entry.key.algorithm, []).append((entry.key, text))
        profiles.index["by_algorithm"] = index
    return index


def exact(key: ProblemKey, profiles: Any, usable: dict[str, Strategy],
          failed: frozenset = frozenset()) -> Found | None:
    """``key``'s own entry, if its strategy is usable, its config valid and not failed. An
    entry of a sibling GPU's profile is never exact: :func:`borrowed` ranks it. An entry
    whose config its strategy refuses is skipped with a warning, once per file."""
    text = key.as_text()
    entry = profiles.entries.get(text)
    if entry is None or entry.strategy not in usable or text in _siblings(profiles):
        return None
    params = validated(usable[entry.strategy], key, dict(entry.params))
    source = str(profiles.sources.get(text, "?"))
    if params is None:
        warn_once("invalid-entry", source,
                  f"rltriton-tune: skipping entries of {source} whose config their strategy "
                  f"refuses (first: {text}: {entry.strategy}({entry.params})); "
                  "`rltriton-tune doctor` lists them")
        return None
    if (entry.strategy, frozen_params(params)) in failed:
        return None
    return Found(entry.strategy, params, text, source, True)


def unusable_entries(profiles: Any, usable: dict[str, Strategy]) -> dict[str, str]:
    """The entries dispatch skips with ``usable`` strategies, by key text: why each is
    skipped (its strategy cannot run here, or refuses its config)."""
    skipped = {}
    for text, entry in profiles.entries.items():
        impl = usable.get(entry.strategy)
        if impl is None:
            skipped[text] = f"strategy {entry.strategy!r} cannot run here"
        elif validated(impl, entry.key, dict(entry.params)) is None:
            skipped[text] = f"{entry.strategy} refuses config {entry.params}"
    return skipped


def unusable_off_grid(profiles: Any, usable: dict[str, Strategy]) -> dict[str, str]:
    """The entries whose recorded off-grid configs cannot serve with ``usable`` strategies
    (calls of other shapes then take the entry's own config), by key text: why (the
    field is malformed, its strategy cannot run here, or refuses it)."""
    out = {}
    for text, entry in profiles.entries.items():
        why = []
        for field in OFF_GRID_FIELDS:
            recorded = entry.extra.get(field)
            if recorded is None:
                continue
            off = _config_field(recorded)
            if off is None:
                why.append(f"malformed {field} field {recorded!r}")
            elif off[0] not in usable:
                why.append(f"{field}: strategy {off[0]!r} cannot run here")
            elif validated(usable[off[0]], entry.key, off[1]) is None:
                why.append(f"{field}: {off[0]} refuses config {off[1]}")
        if why:
            out[text] = "; ".join(why)
    return out


def borrowed(key: ProblemKey, profiles: Any, usable: dict[str, Strategy],
             failed: frozenset = frozenset()) -> Iterator[Found]:
    """Other entries of ``key``'s algorithm, those of its layout first, then the least
    expected slowdown first, each with its config moved to ``key``'s shape and validated
    (invalid or failed ones skipped)."""
    factors = factors_of(profiles)
    gpu = sibling_factor(factors)
    text = key.as_text()
    siblings = _siblings(profiles)
    ranked = []
    for other, other_text in _by_algorithm(profiles).get(key.algorithm, ()):
        sibling = other_text in siblings
        if other_text == text and not sibling:
            continue
        slowdown, differs = expected_slowdown(key, other, factors)
        if sibling:
            slowdown, differs = slowdown * gpu, (*differs, "gpu")
        ranked.append((slowdown, differs, fine_distance(key, other), other_text))
    ranked.sort(key=lambda r: ("layout" in r[1], r[0], r[2], r[3]))
    for slowdown, differs, _, other_text in ranked:
        served = serving_config(profiles.entries[other_text], key, usable, failed)
        if served is None:
            continue
        name, params, strategy, config, off_grid = served
        tuned = None if (name, params) == (strategy, validated(usable[strategy], key, config)) \
            else (strategy, dict(config))
        yield Found(name, params, other_text, str(profiles.sources.get(other_text, "?")),
                    False, slowdown, differs, tuned, off_grid,
                    key.t > profiles.entries[other_text].key.t)


def serving_config(entry: Any, key: ProblemKey, usable: dict[str, Strategy],
                   failed: frozenset = frozenset()
                   ) -> tuple[str, dict[str, Any], str, dict[str, Any], str] | None:
    """The first of :func:`configs_for` that can serve a call of ``key``: its strategy
    usable, moved to ``key`` and valid there, not ``failed``. Returns (strategy and
    parameters as moved, strategy and parameters as the entry records them, the off-grid
    field it comes from or ""), or None where none can."""
    for strategy, config, off_grid in configs_for(entry, key):
        impl = usable.get(strategy)
        if impl is None:
            continue
        name, params = moved(impl, entry.key, key, dict(config), usable)
        if params is not None and (name, frozen_params(params)) not in failed:
            return name, params, strategy, config, off_grid
    return None


#: The extra fields of an entry's off-grid configs: for partly filled calls with at most
#: the entry's steps (``off_grid``), and with more (``off_grid_beyond``). An entry written
#: before the sides were told apart, or where no companion beyond its steps was timed,
#: has no ``off_grid_beyond`` field, and its ``off_grid`` serves both sides. One config
#: cannot serve both: on the H100 (torch 2.11, Triton 3.6, float32 V-trace, device time),
#: at 32768x2048 flat on 16 warps took 267 µs at 19661x1229, where tiled was no faster,
#: and 2083 µs at 32769x2457 (one flat tile a row holds 4096 steps), where calls at
#: 27665x2425 took 1760 µs with flat and about 720 with tiled (rl-triton: 1141).
OFF_GRID_FIELDS = ("off_grid", "off_grid_beyond")


def configs_for(entry: Any, key: ProblemKey) -> list[tuple[str, dict[str, Any], str]]:
    """The configs ``entry`` offers a call of ``key``, first choice first, each as
    (strategy, parameters, the off-grid field it comes from or "" for the entry's own
    config): at another shape whose steps fill part of their span (:func:`partial_span`),
    the off-grid config of its side (more steps than the entry's or not) first where it
    records a well-formed one (a foreign or broken field is ignored), then its config;
    elsewhere its config."""
    own = (entry.strategy, dict(entry.params), "")
    if (key.n, key.t) == (entry.key.n, entry.key.t) or not partial_span(key.t):
        return [own]
    beyond = key.t > entry.key.t
    off = off_grid_config(entry, beyond)
    return [own] if off is None else [(*off, off_grid_field(entry, beyond)), own]


def off_grid_field(entry: Any, beyond: bool = False) -> str:
    """The field of ``entry`` that holds the off-grid config for partly filled calls with
    more steps than its own (``beyond``) or not: ``off_grid_beyond`` where beyond and the
    entry has that field, else ``off_grid`` (see :data:`OFF_GRID_FIELDS`)."""
    extra = entry.extra if isinstance(entry.extra, dict) else {}
    return OFF_GRID_FIELDS[1] if beyond and OFF_GRID_FIELDS[1] in extra else OFF_GRID_FIELDS[0]


def off_grid_config(entry: Any, beyond: bool = False) -> tuple[str, dict[str, Any]] | None:
    """``entry``'s off-grid config (strategy, parameters) for partly filled calls with more
    steps than its own (``beyond``) or not (see :data:`OFF_GRID_FIELDS`), or None where it
    records none or a malformed one."""
    extra = entry.extra if isinstance(entry.extra, dict) else {}
    return _config_field(extra.get(off_grid_field(entry, beyond)))


def off_grid_configs(entry: Any) -> list[tuple[str, dict[str, Any]]]:
    """Every distinct off-grid config ``entry`` records, the one for calls with at most
    its steps first."""
    out: list[tuple[str, dict[str, Any]]] = []
    for beyond in (False, True):
        off = off_grid_config(entry, beyond)
        if off is not None and off not in out:
            out.append(off)
    return out


def _config_field(off: Any) -> tuple[str, dict[str, Any]] | None:
    if not (isinstance(off, dict) and isinstance(off.get("strategy"), str)
            and isinstance(off.get("params"), dict)):
        return None
    return off["strategy"], dict(off["params"])


def _siblings(profiles: Any) -> frozenset[str]:
    return getattr(profiles, "sibling_keys", frozenset())


def moved(impl: Strategy, source: ProblemKey, key: ProblemKey, params: dict[str, Any],
           usable: dict[str, Strategy]) -> tuple[str, dict[str, Any] | None]:
    """``impl.transfer`` of a config to ``key``, validated; else the config as tuned."""
    try:
        name, moved = impl.transfer(source, key, params)
        target = usable.get(name)
        valid = None if target is None else validated(target, key, moved)
        if valid is not None:
            return name, valid
    except Exception:  # noqa: BLE001 - a foreign profile's params must never break a call
        pass
    return impl.name, validated(impl, key, params)


def frozen_params(params: dict[str, Any]) -> tuple:
    """A hashable form of a config's parameters."""
    return tuple(sorted(params.items()))
