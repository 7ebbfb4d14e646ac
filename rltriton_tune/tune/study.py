"""One Optuna study per (problem key, device fingerprint): run trials, then choose.

:func:`run_trials` asks Optuna for candidates (TPE, seeded; the heuristic's
choice and a few diverse configs enqueued first), evaluates them and tells the
results; the study's finished trials count toward the budget, so an interrupted
run resumes and several workers share one budget. :func:`finalize` re-measures
the best few distinct configs and rl-triton's (the flat heuristic), times them at
the key's companions too (``tune.neighbours``: the entry serves the calls near its
key and its other flag sets), measures the baselines and records the entry.

A stored entry for the key (from an earlier run, an import or the shipped
profile) is replaced only after a head-to-head: its config is re-measured beside
the new best ones, on the same inputs in the same process, and whichever serves
the key and its companions best is recorded. A date written in a file never decides.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import optuna
import torch
from optuna.trial import TrialState

from rltriton_tune.call import ProblemKey
from rltriton_tune.dispatch.lookup import OFF_GRID_FIELDS
from rltriton_tune.strategy import InvalidConfig, Strategy
from rltriton_tune.tune.baselines import baseline_candidates, flat_heuristic
from rltriton_tune.tune.compile_pool import CompilePool
from rltriton_tune.tune.evaluate import Evaluator, Outcome, describe
from rltriton_tune.tune.neighbours import Choice, choose
from rltriton_tune.tune.space import (
    Candidate,
    SearchSpace,
    builtin_choice,
    device_sm_count,
    heuristic_choice,
    related_choices,
)
from rltriton_tune.tune.storage import open_storage

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
#: Distinct best configs re-measured before choosing.
TOP_K = 3
#: A running trial older than this (seconds) is treated as abandoned by a dead worker.
STALE_AFTER_S = 600.0

optuna.logging.set_verbosity(optuna.logging.WARNING)
_log = logging.getLogger("rltriton_tune.tune")


def fingerprint_of(device: torch.device) -> dict[str, Any]:
    from rltriton_tune.dispatch.devices import device_fingerprint

    return device_fingerprint(device)


#: Revision of the search spaces: part of every study's name, so a study started with
#: other parameter choices (Optuna refuses to resume one whose categorical choices
#: changed) is left alone and a fresh one starts. 2: env-major keys stopped searching
#: split and sequential, configs with idle threads are skipped. 3: env-major keys with
#: fewer rows than SMs and long T stopped searching tiled. 4: the columns strategy joined
#: time-major keys' searches.
SPACE_REVISION = 4


def study_name(key: ProblemKey, device: torch.device) -> str:
    """``<key text>@<fingerprint id>/s<space revision>``: one study per key, device kind
    and search-space revision."""
    from rltriton_tune.tuning_db.fingerprint import fingerprint_id

    return f"{key.as_text()}@{fingerprint_id(fingerprint_of(device))}/s{SPACE_REVISION}"


def all_strategies_for(device: torch.device, space: SearchSpace) -> dict[str, Strategy]:
    """Searched strategies plus any others (for baselines)."""
    from rltriton_tune.dispatch.registry import all_strategies

    return {**all_strategies(), **space.strategies}


def make_sampler(trials: int, seed: int) -> optuna.samplers.BaseSampler:
    """Seeded TPE with a short random start (the enqueued configs count toward it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(seed=seed,
                                          n_startup_trials=max(2, min(10, trials // 5)),
                                          multivariate=True, group=True, constant_liar=True)


def open_study(key: ProblemKey, device: torch.device, storage: str | None = None,
               *, trials: int = 50, seed: int = 0,
               space: SearchSpace | None = None) -> optuna.Study:
    """Create or load the study of ``key`` on ``device``; a new study gets its seed configs."""
    study = optuna.create_study(study_name=study_name(key, device), storage=open_storage(storage),
                                sampler=make_sampler(trials, seed), direction="minimize",
                                load_if_exists=True)
    if not study.get_trials(deepcopy=False) and not study.user_attrs.get("seeded"):
        study.set_user_attr("seeded", True)
        space = space or SearchSpace(key, device)
        # The rules' choice too: where a profile serves the key, dispatch's choice is the
        # stored entry, and a kernel change can make the rules' shape-based config better.
        rules = builtin_choice(key, space, device_sm_count(device))
        for point in space.starting_points(heuristic_choice(key, device), seed=seed,
                                           related=[*related_choices(key, device, space),
                                                    *([rules] if rules else [])]):
            study.enqueue_trial(space.trial_params(point), skip_if_exists=True)
    return study


def finished_trials(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return study.get_trials(deepcopy=False, states=FINISHED)


def tightest(*limits: float | None) -> float | None:
    """The smallest of the time limits given (``None``: no limit)."""
    return min((x for x in limits if x is not None), default=None)


def in_flight(study: optuna.Study, now: datetime | None = None) -> int:
    """Trials other workers are running now (started within :data:`STALE_AFTER_S`).

    Older running trials belong to a process that died; they do not hold budget,
    so an interrupted run still resumes to the full count.
    """
    now = now or datetime.now()
    return sum(1 for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
               if t.datetime_start is not None
               and (now - t.datetime_start).total_seconds() < STALE_AFTER_S)


def _known(study: optuna.Study) -> dict[str, optuna.trial.FrozenTrial]:
    """Finished trials by candidate label (first occurrence)."""
    found: dict[str, optuna.trial.FrozenTrial] = {}
    for t in finished_trials(study):
        label = t.user_attrs.get("candidate")
        if label and label not in found and t.state != TrialState.PRUNED:
            found[label] = t
    return found


def untried_related(study: optuna.Study, key: ProblemKey, device: torch.device,
                    space: SearchSpace) -> list[Candidate]:
    """The seeds :func:`related_choices` gives ``key`` now that its study never ran.

    A study takes its seeds when it opens, so in a run over several estimators at one
    shape the first ones never try what the later ones find (nor winners at shapes tuned
    after them). On the H200, time-major discounted returns 128x4096 kept ``flat`` at
    18.1 µs while the four estimators tuned after it at that shape found ``lookback`` at
    8.8-10.7 µs; a second run, seeded with their winners, took ``lookback`` at 8.2 µs."""
    tried = set(_known(study))
    return [c for c in related_choices(key, device, space) if c.label() not in tried]


def run_trials(key: ProblemKey, device: torch.device | str, *, trials: int,
               timeout_s: float | None = None, storage: str | None = None,
               study: optuna.Study | None = None, isolate: bool = False, seed: int = 0,
               batch: int | None = None, evaluator: Any = None,
               space: SearchSpace | None = None, pool: CompilePool | None = None,
               shared: bool = False,
               on_trial: Callable[[optuna.trial.FrozenTrial | None], None] | None = None) -> int:
    """Run trials until the study holds ``trials`` finished ones (or ``timeout_s`` passes).

    Returns how many trials this call finished. Failures are recorded as failed
    trials with a ``failure`` user attribute; invalid configs as pruned ones.
    ``shared``: other workers run trials of this study right now, so their running
    trials count toward the budget (off by default: after an interrupted run the
    trials it left running are dead and must not hold budget).
    """
    device = torch.device(device)
    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials}")
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    space = space or SearchSpace(key, device)
    study = study or open_study(key, device, storage, trials=trials, seed=seed, space=space)
    own = evaluator is None
    if evaluator is None:
        evaluator = make_evaluator(key, device, space, isolate=isolate, seed=seed, pool=pool)
    per_batch = batch or min(4, getattr(evaluator, "workers", 1))
    done = 0
    try:
        while True:
            remaining = trials - len(finished_trials(study))
            if shared:
                remaining -= in_flight(study)
            if remaining <= 0 or (deadline is not None and time.monotonic() >= deadline):
                break
            done += _one_batch(study, space, evaluator, min(per_batch, remaining), on_trial)
    finally:
        if own:
            evaluator.close()
    return done


def make_evaluator(key: ProblemKey, device: torch.device, space: SearchSpace, *,
                   isolate: bool = False, seed: int = 0, pool: CompilePool | None = None) -> Any:
    """The evaluator of ``key``: in a child process with ``isolate``, else here
    (compiling in ``pool``'s worker processes when given)."""
    if isolate:
        from rltriton_tune.tune.isolated import IsolatedEvaluator

        return IsolatedEvaluator(key, device, seed=seed)
    return Evaluator(key, device, all_strategies_for(device, space), seed=seed, pool=pool)


def _one_batch(study: optuna.Study, space: SearchSpace, evaluator: Any, size: int,
               on_trial: Callable[[optuna.trial.FrozenTrial | None], None] | None) -> int:
    untold: set[int] = set()  # trials asked and not yet told
    try:
        return _ask_and_tell(study, space, evaluator, size, on_trial, untold)
    except BaseException:
        # Interrupted (Ctrl-C, SIGTERM, a failing evaluator): the trials asked are left
        # running and never told. Those that took an enqueued seed (the rules' choice,
        # rl-triton's, related winners) took it off the queue, and a resumed study asks
        # the sampler instead: queue their seeds again.
        _requeue_seeds(study, untold)
        raise


def _requeue_seeds(study: optuna.Study, numbers: set[int]) -> None:
    """Enqueue again the seed configs (``fixed_params``) of the running trials ``numbers``."""
    if not numbers:
        return
    try:
        for frozen in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            fixed = frozen.system_attrs.get("fixed_params")
            if frozen.number in numbers and fixed:
                study.enqueue_trial(dict(fixed))
    except Exception:  # noqa: BLE001 - the interruption is what the caller must see
        _log.debug("could not queue the seeds of interrupted trials again", exc_info=True)


def _ask_and_tell(study: optuna.Study, space: SearchSpace, evaluator: Any, size: int,
                  on_trial: Callable[[optuna.trial.FrozenTrial | None], None] | None,
                  untold: set[int]) -> int:
    known = _known(study)
    asked: list[tuple[optuna.Trial, Candidate]] = []
    finished = 0

    def tell(trial: optuna.Trial, **kw: Any) -> None:
        nonlocal finished
        frozen = study.tell(trial, **kw)
        untold.discard(trial.number)
        finished += 1
        if on_trial is not None:
            on_trial(frozen)

    for _ in range(size):
        trial = study.ask()
        untold.add(trial.number)
        try:
            cand = space.suggest(trial)
        except InvalidConfig as exc:
            trial.set_user_attr("failure", f"invalid config: {exc}")
            tell(trial, state=TrialState.PRUNED)
            continue
        trial.set_user_attr("candidate", cand.label())
        trial.set_user_attr("strategy", cand.strategy)
        trial.set_user_attr("params", cand.params)
        previous = known.get(cand.label())
        if previous is not None:  # same config again: reuse its result, do not re-run
            trial.set_user_attr("repeat_of", previous.number)
            for attr in ("host_us", "failure"):
                if attr in previous.user_attrs:
                    trial.set_user_attr(attr, previous.user_attrs[attr])
            if previous.state == TrialState.COMPLETE:
                tell(trial, values=previous.values)
            else:
                tell(trial, state=TrialState.FAIL)
            continue
        asked.append((trial, cand))
    outcomes = evaluator.evaluate([c for _, c in asked]) if asked else []
    for (trial, _), outcome in zip(asked, outcomes, strict=False):
        if outcome.ok:
            trial.set_user_attr("host_us", outcome.timing.host_us)
            tell(trial, values=[outcome.timing.device_us])
        else:
            trial.set_user_attr("failure", outcome.error or "unknown failure")
            tell(trial, state=TrialState.FAIL)
    return finished


@dataclass
class StudyResult:
    """The outcome of tuning one key."""

    key: ProblemKey
    study_name: str
    best: Outcome | None
    runner_up: Outcome | None
    baselines: dict[str, float] = field(default_factory=dict)
    trials: int = 0
    failed: int = 0
    entry: Any = None
    #: The config of the entry stored before this run, when it was timed head to head.
    stored: Candidate | None = None
    #: Why the stored config took no part (it fails on this stack), if it did not.
    stored_error: str | None = None
    #: How the finalists served the key's companions (``tune.neighbours``).
    choice: Choice | None = None

    @property
    def kept_stored(self) -> bool:
        """Whether the stored config won the head-to-head (and is recorded again)."""
        return (self.stored is not None and self.best is not None
                and self.best.candidate.label() == self.stored.label())


def best_candidates(study: optuna.Study, k: int = TOP_K) -> list[Candidate]:
    """The ``k`` fastest distinct candidates among the completed trials."""
    best: dict[str, tuple[float, Candidate]] = {}
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        label = t.user_attrs.get("candidate")
        if not label or t.value is None:
            continue
        cand = Candidate(t.user_attrs["strategy"], dict(t.user_attrs["params"]))
        if label not in best or t.value < best[label][0]:
            best[label] = (t.value, cand)
    return [c for _, c in sorted(best.values(), key=lambda vc: vc[0])[:k]]


def finalize(study: optuna.Study, key: ProblemKey, device: torch.device | str, *,
             evaluator: Any = None, space: SearchSpace | None = None, record: bool = True,
             isolate: bool = False, seed: int = 0, remeasure_s: float | None = None,
             measure_baselines: bool = True, skip: Sequence[str] = (),
             neighbourhood: bool = True, extra: Sequence[Candidate] = (),
             pool: CompilePool | None = None) -> StudyResult:
    """Re-measure the top candidates, measure baselines, and record the winner. With
    ``neighbourhood``, the winner is the finalist that serves the key and its
    companions best (:func:`choose_for_neighbourhood`), rl-triton's config among the
    finalists on CUDA; otherwise the fastest at the key. ``extra``: configs from outside
    the study (see :func:`untried_related`) that join the finalists once they pass the
    gate."""
    device = torch.device(device)
    space = space or SearchSpace(key, device)
    own = evaluator is None
    if evaluator is None:
        evaluator = make_evaluator(key, device, space, isolate=isolate, seed=seed, pool=pool)
    trials = finished_trials(study)
    result = StudyResult(key, study.study_name, None, None, trials=len(trials),
                         failed=sum(t.state == TrialState.FAIL for t in trials))
    try:
        top = best_candidates(study)
        budget = remeasure_s if remeasure_s is not None else 2 * getattr(
            evaluator, "time_budget_s", 0.1) or None
        labels = {c.label() for c in top}

        def admit(cand: Candidate) -> str | None:
            """Gate a finalist from outside the study's top and add it if it passes; the
            gate's verdict (None for one already among the finalists)."""
            if cand.label() in labels:
                return None
            verdict = gate_verdict(evaluator, cand, budget)
            if verdict is None:
                top.append(cand)
                labels.add(cand.label())
            return verdict

        if record and top:
            result.stored = stored_candidate(key, device)
        if result.stored is not None:  # head to head with the new best configs
            result.stored_error = admit(result.stored)
        flat = rl_triton_finalist(key, device, space) if neighbourhood else None
        if top:
            for cand in extra:
                admit(cand)
            if flat is not None:
                admit(flat)  # rl-triton's config: a finalist wherever it is valid
        measured = [o for o in evaluator.evaluate(top, budget_s=budget, gate=False) if o.ok]
        measured.sort(key=lambda o: o.timing.device_us)
        if measured:
            index = 0
            if neighbourhood:
                result.choice = choose_for_neighbourhood(key, measured, device, space, budget,
                                                         isolate=isolate, seed=seed, pool=pool,
                                                         floor=flat)
                index = result.choice.index
            result.best, result.runner_up = chosen_and_runner_up(measured, index)
        if measure_baselines and result.best is not None:
            strategies = all_strategies_for(device, space)
            bases = {name: cand for name, cand in
                     baseline_candidates(key, device, strategies).items() if name not in skip}
            names = list(bases)
            outs = evaluator.evaluate([bases[n] for n in names], budget_s=budget, gate=False)
            for name, out in zip(names, outs, strict=True):
                if out.ok:
                    result.baselines[name] = round(out.timing.device_us, 3)
    finally:
        if own:
            evaluator.close()
    if result.best is not None:
        result.entry = make_entry(result)
        if record:
            from rltriton_tune.tuning_db import record as record_entries

            record_entries(fingerprint_of(device), [result.entry])
    return result


def choose_for_neighbourhood(key: ProblemKey, measured: Sequence[Outcome],
                             device: torch.device, space: SearchSpace,
                             budget_s: float | None, *, isolate: bool = False,
                             seed: int = 0, pool: CompilePool | None = None,
                             floor: Candidate | None = None) -> Choice:
    """Which of the ``measured`` finalists (fastest first) serves ``key`` and its off-grid
    companions best (:func:`rltriton_tune.tune.neighbours.choose`), never losing to
    ``floor`` (rl-triton's config) beyond the margin where it is among them. With
    ``pool``, the finalists are compiled and gated at each companion in its worker
    processes, in parallel (each companion key, flag set or shape, is a binary of its
    own). The pool is given every companion's candidates at once, before the first
    companion is timed: it compiles and gates them all in parallel, and each companion's
    timing takes the verdicts (refresh timed companion by companion, compiling each
    batch while the GPU waited). Every one of those checks is done before the first
    companion is timed, and any left over before this returns: the gate runs kernels on
    the device and the workers load its CPUs, so a timing beside them can be disturbed
    (H100, a refresh that timed beside them: V-trace 2048x256 recorded 11.6 µs at the key
    against 6.5-7.1 at its companions, with a host time of 237 µs)."""
    ahead: dict[str, tuple[list[str], Any]] = {}
    verdicts: dict[str, tuple[list[str], list[str | None]]] = {}

    def prefetch(other: ProblemKey, candidates: list[Candidate]) -> None:
        assert pool is not None
        ahead[other.as_text()] = ([c.label() for c in candidates],
                                  pool.start(other, device, candidates))

    def settle() -> None:
        for text, (labels, pending) in list(ahead.items()):  # the workers go idle
            verdicts[text] = (labels, pending.results())
            del ahead[text]

    def evaluator_for(other: ProblemKey) -> Any:
        settle()
        evaluator = make_evaluator(other, device, SearchSpace(other, device),
                                   isolate=isolate, seed=seed, pool=pool)
        checked = verdicts.pop(other.as_text(), None)
        return evaluator if checked is None else Prechecked(evaluator, *checked)

    labels = [o.candidate.label() for o in measured]
    at = labels.index(floor.label()) if floor is not None and floor.label() in labels else None
    choice = choose(key, [o.candidate for o in measured],
                    [o.timing.device_us for o in measured], device,
                    all_strategies_for(device, space), budget_s, evaluator_for, floor=at,
                    prefetch=prefetch if pool is not None and not isolate else None)
    settle()  # checks of companions never timed must not run beside the next timing
    return choice


class Prechecked:
    """An evaluator whose gate verdicts for ``labels`` were made ahead (``verdicts``, as
    :meth:`PendingChecks.results` gives them): it takes them for the candidates they
    were made for and gates only the others (those a screen added, say), then times
    them all together."""

    def __init__(self, evaluator: Any, labels: list[str],
                 verdicts: list[str | None]) -> None:
        self.evaluator = evaluator
        self.known = dict(zip(labels, verdicts, strict=True))

    def evaluate(self, candidates: Sequence[Candidate], budget_s: float | None = None,
                 gate: bool = True) -> list[Outcome]:
        if not gate:
            return self.evaluator.evaluate(candidates, budget_s=budget_s, gate=False)
        missing = [c for c in candidates if c.label() not in self.known]
        fresh = iter(self.evaluator.verdicts(missing) if missing else ())
        gated = [self.known[c.label()] if c.label() in self.known else next(fresh)
                 for c in candidates]
        return self.evaluator.evaluate(candidates, budget_s=budget_s, gated=gated)

    def close(self) -> None:
        self.evaluator.close()


def rl_triton_finalist(key: ProblemKey, device: torch.device,
                       space: SearchSpace) -> Candidate | None:
    """rl-triton's config for ``key`` (the flat heuristic), a finalist on CUDA wherever it
    is valid; None elsewhere."""
    if device.type != "cuda":
        return None
    return flat_heuristic(key, all_strategies_for(device, space))


def chosen_and_runner_up(measured: Sequence[Outcome], index: int
                         ) -> tuple[Outcome, Outcome | None]:
    """The finalist at ``index`` of ``measured`` (fastest first), and the fastest of the
    others: the entry's runner-up."""
    rest = [o for i, o in enumerate(measured) if i != index]
    return measured[index], rest[0] if rest else None


def stored_params(key: ProblemKey, candidate: Candidate) -> dict[str, Any]:
    """``candidate``'s parameters as an entry stores them: completed with its strategy's
    defaults for ``key``. A contender recorded before a parameter existed (a stored
    runner-up, say) ran with the default setting, and the entry says so; a config its
    strategy cannot validate here is stored as it is."""
    from rltriton_tune.dispatch import lookup, registry

    impl = registry.all_strategies().get(candidate.strategy)
    params = None if impl is None else lookup.validated(impl, key, dict(candidate.params))
    return dict(candidate.params) if params is None else params


def runner_up_record(outcome: Outcome | None, key: ProblemKey) -> dict[str, Any] | None:
    """An entry's ``runner_up`` field for a timed finalist of ``key`` (None without one),
    its parameters completed as :func:`stored_params` does."""
    if outcome is None or outcome.timing is None:
        return None
    return {"strategy": outcome.candidate.strategy,
            "params": stored_params(key, outcome.candidate),
            "device_time_us": round(outcome.timing.device_us, 3)}


def stored_candidate(key: ProblemKey, device: torch.device) -> Candidate | None:
    """The config of the entry this device uses for ``key`` now (user, shipped or a sibling
    GPU's), if any."""
    from rltriton_tune.tuning_db.siblings import serving_profiles

    entry = serving_profiles(fingerprint_of(device)).entries.get(key.as_text())
    return None if entry is None else Candidate(entry.strategy, dict(entry.params))


def gate_verdict(evaluator: Any, cand: Candidate, budget_s: float | None) -> str | None:
    """Why ``cand`` fails to compile or gives wrong results here (None: it passes)."""
    check = getattr(evaluator, "check", None)
    if check is None:  # an evaluator in a child process gates while it times
        return evaluator.evaluate([cand], budget_s=budget_s, gate=True)[0].error
    try:
        check(cand)
    except Exception as exc:  # noqa: BLE001 - a stored config may not work on this stack
        return describe(exc)
    return None


def make_entry(result: StudyResult) -> Any:
    """The tuning-database entry for a finished study."""
    from rltriton_tune.tuning_db import Entry
    from rltriton_tune.tuning_db.fingerprint import software_versions
    from rltriton_tune.tuning_db.schema import utc_now

    best = result.best
    assert best is not None and best.timing is not None
    return Entry(key=result.key, strategy=best.candidate.strategy,
                 params=stored_params(result.key, best.candidate),
                 device_time_us=round(best.timing.device_us, 3),
                 runner_up=runner_up_record(result.runner_up, result.key),
                 baselines=dict(result.baselines), trials=result.trials, date=utc_now(),
                 software=software_versions(),
                 extra={"host_us": round(best.timing.host_us, 3), "method": "optuna",
                        **(choice_extra(result.key, result.choice)
                           if result.choice is not None else {})})


def choice_extra(key: ProblemKey, choice: Choice) -> dict[str, Any]:
    """What an entry records of a neighbourhood choice (``Choice.extra``), its off-grid
    configs completed with their strategies' defaults for ``key`` as the entry's own
    config is (:func:`stored_params`), so that a later change of a default does not
    change what they run."""
    extra = choice.extra()
    for name in OFF_GRID_FIELDS:
        off = extra.get(name)
        if off is not None:
            completed = stored_params(key, Candidate(off["strategy"], dict(off["params"])))
            extra[name] = {**off, "params": completed}
    return extra


def tune(key: ProblemKey, device: torch.device | str, *, trials: int,
         timeout_s: float | None = None, storage: str | None = None, isolate: bool = False,
         seed: int = 0, record: bool = True,
         on_trial: Callable[[optuna.trial.FrozenTrial | None], None] | None = None
         ) -> StudyResult:
    """Tune one key: run (or resume) its study, then choose and record."""
    device = torch.device(device)
    space = SearchSpace(key, device)
    study = open_study(key, device, storage, trials=trials, seed=seed, space=space)
    evaluator = make_evaluator(key, device, space, isolate=isolate, seed=seed)
    try:
        run_trials(key, device, trials=trials, timeout_s=timeout_s, study=study,
                   evaluator=evaluator, space=space, on_trial=on_trial)
        return finalize(study, key, device, evaluator=evaluator, space=space, record=record,
                        isolate=isolate, seed=seed)
    finally:
        evaluator.close()
