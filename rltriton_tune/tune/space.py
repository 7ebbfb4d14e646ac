"""The tuner's define-by-run search space: a strategy, then that strategy's parameters.

The strategy is an Optuna categorical over the strategies that can run on the
device (the Triton scan cores on CUDA, the torch CPU modes on CPU); each
strategy's parameters are suggested only when that strategy is chosen, named
``"<strategy>.<param>"`` so conditional parameters never collide. Invalid
combinations are rejected by the strategy's own ``validate`` before anything
compiles.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import optuna
import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.strategy import InvalidConfig, Params, Strategy

#: torch modes never searched on CPU: compiling costs seconds per shape and
#: is the CUDA baseline, not a CPU strategy.
CPU_EXCLUDED_MODES = ("compile", "compile_doubling")


@dataclass(frozen=True)
class Candidate:
    """One configuration to try: a strategy name and its validated parameters."""

    strategy: str
    params: Params

    def label(self) -> str:
        inner = ", ".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return f"{self.strategy}({inner})"

    @classmethod
    def from_label(cls, text: str) -> Candidate:
        """The candidate ``label()`` wrote (integer parameters, as every strategy has)."""
        name, _, inner = text.strip().removesuffix(")").partition("(")
        if not name or not _:
            raise ValueError(f"not a candidate label: {text!r}")
        params = {k.strip(): int(v) for k, v in (kv.split("=") for kv in inner.split(",")
                                                 if kv.strip())}
        return cls(name, params)


def search_strategies(device: torch.device) -> dict[str, Strategy]:
    """The strategies the tuner chooses among on ``device``."""
    from rltriton_tune.dispatch.registry import torch_strategies, triton_strategies

    if device.type == "cuda":
        found = {n: s for n, s in triton_strategies().items()
                 if getattr(s, "searchable", True) and s.available(device)}
        if found:
            return found
    return {n: s for n, s in torch_strategies().items() if s.available(device)}


def _sm_count(device: torch.device) -> int | None:
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    from rltriton_tune.dispatch.devices import device_fingerprint

    count = device_fingerprint(device).get("sm_count")
    return int(count) if count else None


class SearchSpace:
    """The search space of one problem key on one device."""

    def __init__(self, key: ProblemKey, device: torch.device,
                 strategies: dict[str, Strategy] | None = None,
                 sm_count: int | None = None) -> None:
        self.key = key
        self.device = torch.device(device)
        #: Multiprocessors of the device, for skip rules about filling it: given, else
        #: read from a present CUDA device, else unknown (those rules then keep configs).
        self.sm_count = sm_count if sm_count is not None else _sm_count(self.device)
        self.strategies = dict(strategies) if strategies is not None else search_strategies(
            self.device)
        if not self.strategies:
            raise RuntimeError(f"no strategy can run on device {self.device}")
        self._spaces: dict[str, dict[str, list[Any]]] = {}
        for name, strategy in self.strategies.items():
            space = {p: list(c) for p, c in strategy.space(key).items()}
            if self.device.type != "cuda" and "mode" in space:
                space["mode"] = [m for m in space["mode"] if m not in CPU_EXCLUDED_MODES]
            self._spaces[name] = {p: c for p, c in space.items() if c}
        self._names: list[str] | None = None
        #: Whether the strategies' skip rules apply (off for keys so small that they
        #: would leave nothing, e.g. N = T = 1, where every tile has idle threads).
        self._skipping = True

    def names(self) -> list[str]:
        """The strategies searched for this key: those with at least one config that is
        valid and not skipped (a strategy whose every config is skipped, like ``split``
        on env-major keys, would only spend trials on pruned suggestions)."""
        if self._names is None:
            self._names = [n for n in sorted(self.strategies) if self._searches(n)]
            if not self._names:  # the skip rules left nothing: search every valid config
                self._skipping = False
                self._names = [n for n in sorted(self.strategies) if self._searches(n)]
            if not self._names:
                raise RuntimeError(f"no valid config for {self.key.as_text()} on "
                                   f"{self.device}")
        return self._names

    def _searches(self, name: str) -> bool:
        return next(self._searched(name), None) is not None

    def _searched(self, name: str) -> Iterator[Candidate]:
        """Every valid candidate of ``name`` the skip rules keep (labels may repeat)."""
        space = self._spaces[name]
        for combo in itertools.product(*space.values()):
            try:
                cand = self.validate(name, dict(zip(space, combo, strict=True)))
            except InvalidConfig:
                continue
            if self._skip(cand) is None:
                yield cand

    def params_of(self, strategy: str) -> dict[str, list[Any]]:
        """The candidate values of each parameter of ``strategy`` for this key."""
        return self._spaces[strategy]

    def suggest(self, trial: optuna.trial.BaseTrial) -> Candidate:
        """Suggest a candidate; raise :class:`InvalidConfig` if the strategy rejects it or
        leaves it out of searches (:meth:`skip_reason`)."""
        name = trial.suggest_categorical("strategy", self.names())
        raw: Params = {}
        for p, choices in self._spaces[name].items():
            # A parameter that cannot take effect with those drawn before it is not drawn
            # (the strategy's default fills it): its other values would only be refused.
            if self._applies(name, p, raw):
                raw[p] = trial.suggest_categorical(f"{name}.{p}", choices)
        cand = self.validate(name, raw)
        reason = self.skip_reason(cand)
        if reason is not None:
            raise InvalidConfig(f"{name}: not searched: {reason}")
        return cand

    def skip_reason(self, candidate: Candidate) -> str | None:
        """Why searches leave out this valid candidate (``None``: searched). Seeds such as
        the heuristic's choice are tried regardless."""
        self.names()  # settles whether the skip rules apply to this key
        return self._skip(candidate)

    def _skip(self, candidate: Candidate) -> str | None:
        if not self._skipping:
            return None
        return self.strategies[candidate.strategy].skip_reason(self.key, candidate.params,
                                                               self.sm_count)

    def validate(self, strategy: str, params: Params) -> Candidate:
        """Normalise ``params`` through the strategy (raises :class:`InvalidConfig`)."""
        if strategy not in self.strategies:
            raise InvalidConfig(f"strategy {strategy!r} is not searched on {self.device}")
        return Candidate(strategy, dict(self.strategies[strategy].validate(self.key, params)))

    def trial_params(self, candidate: Candidate) -> dict[str, Any]:
        """Optuna parameter dict that makes ``suggest`` return ``candidate`` (for enqueueing)."""
        space = self._spaces[candidate.strategy]
        out: dict[str, Any] = {"strategy": candidate.strategy}
        drawn: Params = {}
        for p, choices in space.items():
            if not self._applies(candidate.strategy, p, drawn):
                continue
            if p in candidate.params and candidate.params[p] in choices:
                out[f"{candidate.strategy}.{p}"] = drawn[p] = candidate.params[p]
        return out

    def _applies(self, strategy: str, param: str, drawn: Params) -> bool:
        """Whether ``suggest`` draws ``param`` of ``strategy`` after ``drawn`` (the
        strategy's ``applies``, where it has one; every parameter otherwise)."""
        applies = getattr(self.strategies[strategy], "applies", None)
        return applies is None or applies(self.key, param, drawn)

    def size(self) -> int:
        """Number of raw points in the space (before validation)."""
        total = 0
        for space in self._spaces.values():
            count = 1
            for choices in space.values():
                count *= len(choices)
            total += count
        return total

    def enumerate(self) -> list[Candidate]:
        """Every valid, searched candidate, deduplicated (for exhaustive sweeps)."""
        found: dict[str, Candidate] = {}
        for name in self.names():
            for cand in self._searched(name):
                found.setdefault(cand.label(), cand)
        return list(found.values())

    def starting_points(self, heuristic: Candidate | None, extra: int = 3,
                        seed: int = 0, related: Sequence[Candidate] = ()) -> list[Candidate]:
        """Configs to enqueue first: the heuristic's choice, the ``related`` configs
        (winners of sibling keys), each strategy's default, and ``extra`` random
        valid configs (seeded), deduplicated; invalid ones are dropped."""
        points: list[Candidate] = []
        for known in ([heuristic] if heuristic is not None else []) + list(related):
            if known.strategy not in self.names():  # not a choice of the study's categorical
                continue
            try:
                points.append(self.validate(known.strategy, known.params))
            except InvalidConfig:
                pass
        for name in self.names():
            try:
                points.append(self.validate(name, self.strategies[name].default_params(self.key)))
            except InvalidConfig:
                continue
        rng = random.Random(seed)
        randoms = 0
        for _ in range(extra * 10):
            if randoms >= extra:
                break
            name = rng.choice(self.names())
            raw = {p: rng.choice(c) for p, c in self._spaces[name].items()}
            try:
                cand = self.validate(name, raw)
            except InvalidConfig:
                continue
            if self.skip_reason(cand) is None:
                points.append(cand)
                randoms += 1
        unique: dict[str, Candidate] = {}
        for point in points:
            unique.setdefault(point.label(), point)
        return list(unique.values())


#: SM count assumed by :func:`builtin_choice` when no GPU is at hand (an H200's).
DEFAULT_SM_COUNT = 132


def device_sm_count(device: torch.device) -> int:
    """The multiprocessor count of a CUDA ``device`` (:data:`DEFAULT_SM_COUNT` elsewhere)."""
    return _sm_count(torch.device(device)) or DEFAULT_SM_COUNT


def builtin_choice(key: ProblemKey, space: SearchSpace,
                   sm_count: int = DEFAULT_SM_COUNT) -> Candidate | None:
    """The built-in rules' first valid config for ``key`` in ``space``, ignoring
    profiles and needing no GPU (what a study starts from on a fresh machine)."""
    from rltriton_tune.dispatch.decide import rules_decision

    decision = rules_decision(key, sm_count, space.strategies)
    return None if decision is None else Candidate(decision.strategy, dict(decision.params))


#: Most seeds a study takes from other estimators' entries (see :func:`related_choices`):
#: enqueued configs spend the trial budget before the sampler does.
MAX_SIBLING_SEEDS = 3


def related_choices(key: ProblemKey, device: torch.device,
                    space: SearchSpace | None = None) -> list[Candidate]:
    """Seeds for a study of ``key`` from the tuned entries on this device (empty when
    there are none or no profile loads). With ``space``, each seed is validated there
    first (so defaults are filled in before duplicates are dropped, and configs the
    space rejects are left out). In this order:

    * winners, runners-up and off-grid configs of the same algorithm and shape in
      another dtype, layout or flag set: the same kernels at the same sizes;
    * winners of other estimators at the same shape, dtype and layout (at most
      :data:`MAX_SIBLING_SEEDS` distinct configs, from the estimators the most alike
      first: with or without an action axis, then the same scan direction). Every
      estimator runs the same scan cores, so the best tile for one is a good guess for
      another: on the H200, time-major 128x2048 V-trace found a look-back config
      (8.6 µs) where four estimators' 12-trial studies stopped at flat (9.5-10.9 µs);
    * winners of the same key at the nearest shape on each side (fewer environments,
      more, fewer steps, more: :func:`nearest_on_each_side`; distinct configs, nearest
      in log N + log T first), each followed by its off-grid configs where it records
      them: a shape between two tuned ones often wants one of their strategies, where the
      borrowed config (one neighbour's, rescaled) may be the other's. On the H200,
      time-major GAE 1024x8192 borrowed ``tiled`` from 2048x8192 (117.7 µs) while its
      512x32768 neighbour's ``lookback`` family held the best config found there (63.3
      µs). The nearest two shapes can lie on one side: on the H100, V-trace's 4096x2048
      had them at 4096x512 (flat) and 4096x8192 (tiled, 1024 steps a tile), while the
      config that served the odd shapes below it (tiled, 256 steps a tile on 4 warps: 72
      against 105 µs at 4745x1047) was 32768x2048's, the nearest with more environments,
      first as its winner, later as its off-grid config (the config for calls whose
      steps fill part of their span, which a key chooses at such companions:
      ``tune.neighbours``).
    """
    try:
        from rltriton_tune.dispatch.devices import device_fingerprint
        from rltriton_tune.tuning_db.siblings import serving_profiles

        entries = serving_profiles(device_fingerprint(device)).entries.values()
    except Exception:  # noqa: BLE001 - seeds are optional
        return []
    def checked(candidate: Candidate) -> Candidate | None:
        if space is None:
            return candidate
        try:
            return space.validate(candidate.strategy, candidate.params)
        except (InvalidConfig, KeyError):
            return None

    out: list[Candidate] = []
    siblings = []
    neighbours = []
    for e in entries:
        k = e.key
        if k == key:
            continue
        if (k.n, k.t) != (key.n, key.t):
            if (k.algorithm, k.a, k.dtype, k.layout, k.flags) == (
                    key.algorithm, key.a, key.dtype, key.layout, key.flags):
                distance = abs(math.log2(max(k.n, 1) / max(key.n, 1))) + abs(
                    math.log2(max(k.t, 1) / max(key.t, 1)))
                neighbours.append(((distance, k.n, k.t), _with_off_grid(e)))
            continue
        if (k.algorithm, k.a) == (key.algorithm, key.a):
            out.append(Candidate(e.strategy, dict(e.params)))
            if e.runner_up:
                out.append(Candidate(e.runner_up["strategy"], dict(e.runner_up["params"])))
            out.extend(_with_off_grid(e)[1:])
        elif (k.dtype, k.layout) == (key.dtype, key.layout) and k.algorithm != key.algorithm:
            likeness = ((k.a > 0) != (key.a > 0), k.spec.direction != key.spec.direction,
                        k.flags != key.flags, k.algorithm)
            siblings.append((likeness, [Candidate(e.strategy, dict(e.params))]))
    out = [c for c in map(checked, out) if c is not None]
    seen = {c.label() for c in out}
    # The neighbours are bounded by their sides (at most four), the siblings by a count.
    for ranked, most in ((siblings, MAX_SIBLING_SEEDS),
                         (nearest_on_each_side(key, neighbours), None)):
        added = 0
        for _, raws in sorted(ranked, key=lambda item: item[0]):
            for raw in raws:
                if added == most:
                    break
                candidate = checked(raw)
                if candidate is not None and candidate.label() not in seen:
                    seen.add(candidate.label())
                    out.append(candidate)
                    added += 1
    return out


def _with_off_grid(entry: Any) -> list[Candidate]:
    """``entry``'s winner, then its off-grid configs where it records them."""
    from rltriton_tune.dispatch.lookup import off_grid_configs

    return [Candidate(entry.strategy, dict(entry.params)),
            *(Candidate(*off) for off in off_grid_configs(entry))]


def nearest_on_each_side(key: ProblemKey, ranked: list[tuple[tuple[float, int, int], Any]]
                         ) -> list[tuple[tuple[float, int, int], Any]]:
    """Of ``ranked`` ((distance, N, T), item) at other shapes than ``key``'s, the nearest
    with fewer environments, with more, with fewer steps and with more (an item can be
    the nearest on two sides: it is kept once), nearest first."""
    sides = (lambda n, t: n < key.n, lambda n, t: n > key.n,
             lambda n, t: t < key.t, lambda n, t: t > key.t)
    out = []
    for on_side in sides:
        there = [item for item in ranked if on_side(item[0][1], item[0][2])]
        if there:
            best = min(there, key=lambda item: item[0])
            if best not in out:
                out.append(best)
    return sorted(out, key=lambda item: item[0])


def heuristic_choice(key: ProblemKey, device: torch.device) -> Candidate | None:
    """What dispatch chooses for ``key`` now, its own entry included (None if unknown)."""
    try:
        from rltriton_tune.dispatch import explain
    except ImportError:
        return None
    try:
        decision = explain(key.algorithm, key.n, key.t, dtype=key.dtype, layout=key.layout,
                           flags=key.flags, A=key.a, device=device)
    except Exception:  # noqa: BLE001 - a seed is optional; never stop a study for it
        return None
    return Candidate(decision.strategy, dict(decision.params))
