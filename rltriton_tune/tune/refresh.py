"""``tune --refresh``: re-time the entries this device uses, on this software stack.

Each entry's stored config is gated and timed again beside its stored runner-up,
what dispatch chooses for the key now (the stored config, unless it no longer
validates), the built-in rules' config for this device's multiprocessor count (what a
kernel change may have made the better one), on CUDA rl-triton's config (the flat
heuristic), the stored config with each other setting of a switch parameter
(:data:`SWITCHES`: Retrace's action pre-pass, flat's tile order and register cap), and
the configs the device's related entries chose (``tune.space.related_choices``: the
same shape in other dtypes, layouts and flag sets, other estimators at the shape, the
nearest shape on each side), on the same inputs in one process, and at the key's
off-grid companions (``tune.neighbours``); the config that serves them all best, never slower than
rl-triton's config beyond a noise margin (``tune.neighbours.FLOOR_MARGIN``), is recorded
with its fresh time and the installed software (so the stored config stays only if it
still wins). An entry none of whose configs works here, or whose refresh fails, is left
as it is and reported.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import torch

from rltriton_tune.algorithms import ALGORITHMS
from rltriton_tune.call import ProblemKey, flags_string
from rltriton_tune.dispatch.lookup import OFF_GRID_FIELDS, off_grid_configs, validated
from rltriton_tune.kernels import strategies
from rltriton_tune.kernels.actions import reduce_actions_space
from rltriton_tune.kernels.launch import tile_order_space, two_blocks_space
from rltriton_tune.tune.compile_pool import CompilePool
from rltriton_tune.tune.evaluate import describe
from rltriton_tune.tune.neighbours import neighbourhood_texts
from rltriton_tune.tune.space import (
    Candidate,
    SearchSpace,
    builtin_choice,
    device_sm_count,
    heuristic_choice,
    related_choices,
)
from rltriton_tune.tune.study import (
    choice_extra,
    choose_for_neighbourhood,
    chosen_and_runner_up,
    fingerprint_of,
    make_evaluator,
    rl_triton_finalist,
    runner_up_record,
    stored_params,
)

#: What an entry's ``refreshed`` field records: the version of the refresh that re-timed
#: it, so that ``tune --refresh --missing-only`` refreshes again an entry an earlier one
#: chose (``true`` in files written before versions: 1). 2: the related contenders
#: include the nearest entry on each side of the key (``tune.space.related_choices``),
#: and the off-grid config is chosen for calls whose steps fill part of their span. 3:
#: the related contenders include related entries' off-grid configs, every contender is
#: screened for the off-grid config (``tune.neighbours.choose``), and flat configs of 8
#: warps or more are timed with the register cap too (``TWO_BLOCKS``). 4: the screen for
#: the off-grid config is made at the first partly filled companion of each shape, not
#: the first alone (the companion beyond the span came under 3). 5: an off-grid config
#: for each side of the key's steps (``dispatch.lookup.OFF_GRID_FIELDS``).
REFRESH_VERSION = 5

#: Parameters that turn a kernel path on or off, by the function giving a key's settings:
#: a refresh times the stored config with each other setting, so it finds where a path
#: added after the entry was tuned pays without a new search.
SWITCHES: dict[str, Callable[[ProblemKey], dict[str, list[int]]]] = {
    "REDUCE_A": reduce_actions_space,
    "DESCEND": tile_order_space,
    "TWO_BLOCKS": two_blocks_space,
}


def switch_variants(key: ProblemKey, stored: Candidate) -> list[Candidate]:
    """``stored`` with each other setting of every switch its key and strategy offer and
    its config can take (Triton strategies only: the torch fallback takes none)."""
    if stored.strategy == "torch":
        return []
    impl = strategies().get(stored.strategy)
    if impl is None:  # not available here (no Triton): nothing to switch
        return []
    offered = impl.space(key)
    out = []
    for name, settings_of in SWITCHES.items():
        if name not in offered:
            continue
        for value in settings_of(key).get(name, ()):
            if stored.params.get(name, 0) != value:
                variant = {**stored.params, name: value}
                if validated(impl, key, variant) is not None:  # else no cap to set, say
                    out.append(Candidate(stored.strategy, variant))
    return out


@dataclass
class Refreshed:
    """The outcome of refreshing one entry."""

    key: ProblemKey
    old: Any
    new: Any = None
    error: str | None = None
    #: Wall time the refresh of the entry took (compiles, timings at the key and at its
    #: companions); what a run's ``--max-seconds`` is spent on.
    seconds: float | None = None

    @property
    def replaced(self) -> bool:
        """Whether another config beat the stored one."""
        return self.new is not None and (self.new.strategy, self.new.params) != (
            self.old.strategy, self.old.params)


def entries_to_refresh(device: torch.device, algorithms: Iterable[str],
                       wanted: Callable[[Any], bool] | None = None) -> list[Any]:
    """The entries this device uses now (user over shipped over a sibling GPU's) for
    ``algorithms`` that ``wanted`` accepts (all of them without it), in the order a
    refresh cut short (``--max-seconds``) is most useful in: ``tune.keys.coverage_order``
    over the keys, the algorithms ranked as ``algorithms`` lists them, each one's plain
    flag set and float32 first. A sibling GPU's entry comes without its trials, baselines
    and other evidence, which were measured there: a refresh records its config with what
    it measures here."""
    from rltriton_tune.tune.keys import coverage_order
    from rltriton_tune.tuning_db.siblings import serving_profiles

    rank = {name: i for i, name in enumerate(dict.fromkeys(algorithms))}
    profiles = serving_profiles(fingerprint_of(device))
    entries = {text: replace(e, baselines={}, trials=0, extra={})
               if text in profiles.sibling_keys else e
               for text, e in profiles.entries.items()
               if e.key.algorithm in rank and (wanted is None or wanted(e))}
    # coverage_order ranks algorithms, flag sets and dtypes by first appearance; an
    # algorithm's plain flag set is its required flags (Retrace's truncations).
    def plain(algorithm: str) -> str:
        return flags_string(ALGORITHMS[algorithm].required_flags)

    first = sorted(entries.values(), key=lambda e: (
        rank[e.key.algorithm], e.key.flags != plain(e.key.algorithm),
        e.key.dtype != "float32", e.key.as_text()))
    return [entries[key.as_text()] for key in coverage_order([e.key for e in first])]


def refresh_entry(entry: Any, device: torch.device, *, isolate: bool = False,
                  seed: int = 0, budget_s: float | None = None,
                  pool: CompilePool | None = None) -> Refreshed:
    """Time ``entry``'s config against its runner-up, dispatch's, the rules' and rl-triton's
    choices, at its key and companions; return the entry to record (``new``: the winner
    with fresh times) or why there is none. With ``pool``, the contenders are compiled
    and gated in its worker processes, in parallel (timing stays here)."""
    from rltriton_tune.tuning_db.fingerprint import software_versions
    from rltriton_tune.tuning_db.schema import utc_now

    key = entry.key
    stored = Candidate(entry.strategy, dict(entry.params))
    contenders = [stored, *switch_variants(key, stored)]
    if entry.runner_up:
        contenders.append(Candidate(entry.runner_up["strategy"],
                                    dict(entry.runner_up.get("params", {}))))
    # partly filled calls take them: they defend their places
    contenders.extend(Candidate(*off) for off in off_grid_configs(entry))
    space = SearchSpace(key, device)
    rules = builtin_choice(key, space, device_sm_count(device))
    floor = rl_triton_finalist(key, device, space)
    if floor is not None:
        floor = Candidate(floor.strategy, stored_params(key, floor))
    for other in (heuristic_choice(key, device), rules, floor):
        if other is not None:
            contenders.append(other)
    # Other strategies than the stored one's: a config within a few percent of the
    # fastest at the key can serve its off-grid companions far better, and the stored
    # config, its runner-up and the rules' choice are often one strategy. On the H100
    # (torch 2.11, Triton 3.6, device time), V-trace's 4096x2048 entry kept flat (80.3
    # µs; tiled 83.0) with no tiled config among its contenders; at 4745x1047 and
    # 11077x2799 it ran 105 and 760 µs where tiled took 72 and 402 (rl-triton: 67, 507).
    related = related_choices(key, device, space)
    # Completed first, so that a config stored before a parameter existed (an old
    # runner-up) and the same config with that parameter's default are timed once.
    def completed(candidates: list[Candidate]) -> dict[str, Candidate]:
        return {c.label(): c for c in (Candidate(c.strategy, stored_params(key, c))
                                       for c in candidates)}

    own = completed(contenders)
    added = {label: c for label, c in completed(related).items() if label not in own}
    contenders = [*own.values(), *added.values()]
    evaluator = make_evaluator(key, device, space, isolate=isolate, seed=seed, pool=pool)
    try:
        budget = budget_s if budget_s is not None else 2 * getattr(evaluator, "time_budget_s",
                                                                   0.1)
        outcomes = evaluator.evaluate(contenders, budget_s=budget, gate=True)
    finally:
        evaluator.close()
    ok = sorted((o for o in outcomes if o.ok), key=lambda o: o.timing.device_us)
    if not ok:
        reasons = "; ".join(f"{o.candidate.label()}: {o.error}" for o in outcomes)
        return Refreshed(key, entry, error=f"no config works here ({reasons})"[:500])
    choice = choose_for_neighbourhood(key, ok, device, space, budget, isolate=isolate,
                                      seed=seed, pool=pool, floor=floor)
    best, runner = chosen_and_runner_up(ok, choice.index)
    extra = {k: v for k, v in entry.extra.items()
             if k not in ("companion", "companion_us", "companions", "floor",
                          *OFF_GRID_FIELDS)}
    # The companions the choice was made for (``neighbours.neighbourhood_texts``), so that
    # ``--missing-only`` refreshes again an entry chosen for another neighbourhood (one
    # refreshed before flag companions existed, say).
    # ``floor``: the config the choice was held to; None where there was none (off CUDA,
    # rl-triton's config not valid or failing here) or it was set aside (see
    # ``neighbours.choose``).
    # ``related``: how many of the profile's related configs joined the contenders;
    # ``off_grid``, ``off_grid_beyond``: the configs calls of other shapes filling part
    # of their span take, with at most the key's steps and with more, None where they
    # take the entry's own (``off_grid_beyond`` only where a companion beyond was timed,
    # see ``neighbours.Choice.extra``).
    extra.update({"host_us": round(best.timing.host_us, 3), "refreshed": REFRESH_VERSION,
                  "neighbourhood": neighbourhood_texts(key), "related": len(added),
                  "floor": floor.label() if floor is not None and choice.floor_held else None,
                  OFF_GRID_FIELDS[0]: None, **choice_extra(key, choice)})
    new = replace(entry, strategy=best.candidate.strategy, params=dict(best.candidate.params),
                  device_time_us=round(best.timing.device_us, 3),
                  runner_up=runner_up_record(runner, key),
                  date=utc_now(), software=software_versions(), extra=extra)
    return Refreshed(key, entry, new=new)


def refresh(device: torch.device, algorithms: Iterable[str], *, isolate: bool = False,
            seed: int = 0, budget_s: float | None = None,
            wanted: Callable[[Any], bool] | None = None,
            on_entry: Callable[[Refreshed], None] | None = None,
            deadline: float | None = None,
            pool: CompilePool | None = None) -> list[Refreshed]:
    """Refresh every entry of ``algorithms`` this device uses (that ``wanted`` accepts)
    and record each winner as it is found (it replaces its entry: it won a head-to-head),
    so that a run cut short keeps what it measured. No entry is started once
    ``time.monotonic()`` passes ``deadline``. Returns one result per entry refreshed."""
    from rltriton_tune.tuning_db import record

    results = []
    for entry in entries_to_refresh(device, algorithms, wanted):
        if deadline is not None and time.monotonic() > deadline:
            break
        started = time.monotonic()
        try:
            done = refresh_entry(entry, device, isolate=isolate, seed=seed, budget_s=budget_s,
                                 pool=pool)
        except Exception as exc:  # noqa: BLE001 - one entry's failure leaves the rest to do
            done = Refreshed(entry.key, entry, error=f"refresh failed: {describe(exc)}"[:500])
        done = replace(done, seconds=time.monotonic() - started)
        results.append(done)
        if done.new is not None:
            record(fingerprint_of(device), [done.new])
        if on_entry is not None:
            on_entry(done)
    return results
