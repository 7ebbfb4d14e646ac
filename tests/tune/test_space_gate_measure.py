"""Search space, correctness gate and CPU timing."""

import pytest
import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.fallback import STRATEGIES
from rltriton_tune.strategy import InvalidConfig
from rltriton_tune.tune.gate import CAP_ELEMS, Gate, GateFailure, compare, small_key
from rltriton_tune.tune.measure import Bench, copies_needed
from rltriton_tune.tune.space import Candidate, SearchSpace

KEY = ProblemKey("gae", 16, 24)


def test_cpu_space_is_the_eager_torch_modes():
    space = SearchSpace(KEY, torch.device("cpu"))
    assert space.names() == ["torch"]
    modes = space.params_of("torch")["mode"]
    assert set(modes) == {"loop", "chunked", "doubling"}  # compile is not searched on CPU
    labels = {c.label() for c in space.enumerate()}
    assert "torch(mode=loop)" in labels and "torch(mode=doubling)" in labels
    assert any(label.startswith("torch(chunk=") for label in labels)


def test_suggest_is_conditional_and_validated(misbehaving):
    import optuna

    space = SearchSpace(KEY, torch.device("cpu"), {"torch": misbehaving})
    study = optuna.create_study()
    study.enqueue_trial({"strategy": "torch", "torch.mode": "chunked", "torch.chunk": 8})
    study.enqueue_trial({"strategy": "torch", "torch.mode": "loop", "torch.chunk": 16})
    with pytest.raises(InvalidConfig, match="chunk=8"):
        space.suggest(study.ask())
    trial = study.ask()
    cand = space.suggest(trial)
    assert cand == Candidate("torch", {"mode": "loop"})
    assert set(trial.params) == {"strategy", "torch.mode", "torch.chunk"}


def test_a_parameter_that_cannot_take_effect_is_not_drawn(misbehaving):
    """A strategy's ``applies``: ``chunk`` only with ``mode=chunked`` here (flat's
    ``TWO_BLOCKS`` only at 8 warps or more). A trial without it leaves it to the default,
    and an enqueued candidate comes back from ``suggest`` as it went in."""
    import optuna

    class ChunkOnlyChunked(type(misbehaving)):
        def applies(self, key, param, drawn):
            return param != "chunk" or drawn.get("mode") == "chunked"

    space = SearchSpace(KEY, torch.device("cpu"), {"torch": ChunkOnlyChunked()})
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(30):
        trial = study.ask()
        try:
            cand = space.suggest(trial)
        except InvalidConfig:  # chunked with chunk=8: drawn, then refused
            assert trial.params["torch.chunk"] == 8
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            continue
        assert ("torch.chunk" in trial.params) == (cand.params["mode"] == "chunked")
        study.tell(trial, 1.0)
    loop = Candidate("torch", {"mode": "loop"})
    assert space.trial_params(loop) == {"strategy": "torch", "torch.mode": "loop"}
    study.enqueue_trial(space.trial_params(loop))
    assert space.suggest(study.ask()) == loop


def test_flat_searches_draw_two_blocks_only_where_it_caps_registers():
    import optuna

    from rltriton_tune.kernels import strategies
    from rltriton_tune.kernels.launch import register_cap

    if not strategies():
        pytest.skip("Triton is not installed")

    key = ProblemKey("vtrace", 4096, 2048)
    space = SearchSpace(key, torch.device("cuda"), {"flat": strategies()["flat"]},
                        sm_count=132)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    drawn = 0
    for _ in range(80):
        trial = study.ask()
        try:
            cand = space.suggest(trial)
        except InvalidConfig as exc:
            assert "TWO_BLOCKS" not in str(exc)
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            continue
        capped = register_cap(cand.params["num_warps"]) is not None
        assert ("flat.TWO_BLOCKS" in trial.params) == capped
        drawn += capped
        study.tell(trial, 1.0)
    assert drawn


def test_skipped_configs_are_left_out_of_searches_but_still_seed_them(misbehaving):
    import optuna

    class SkipsDoubling(type(misbehaving)):
        def skip_reason(self, key, params, sm_count=None):
            return "doubling skipped" if params["mode"] == "doubling" else None

    space = SearchSpace(KEY, torch.device("cpu"), {"torch": SkipsDoubling()})
    labels = {c.label() for c in space.enumerate()}
    assert "torch(mode=loop)" in labels and "torch(mode=doubling)" not in labels
    study = optuna.create_study()
    study.enqueue_trial({"strategy": "torch", "torch.mode": "doubling", "torch.chunk": 16})
    with pytest.raises(InvalidConfig, match="not searched: doubling skipped"):
        space.suggest(study.ask())
    default = Candidate("torch", {"mode": "doubling"})  # the strategy's default: still a seed
    assert default in space.starting_points(None, extra=0)


def test_strategies_without_a_searched_config_are_no_choice_of_the_study():
    from rltriton_tune.kernels import strategies

    cuda = torch.device("cuda")  # the spaces need no GPU to be listed
    env = SearchSpace(ProblemKey("gae", 16, 32768), cuda, strategies())
    assert "split" not in env.names() and "sequential" not in env.names()
    assert {c.strategy for c in env.enumerate()} == set(env.names())
    seeds = env.starting_points(Candidate("split", {}), extra=0)
    assert seeds and all(p.strategy in env.names() for p in seeds)  # no unsearched seed
    time_major = SearchSpace(ProblemKey("gae", 16, 32768, layout="time"), cuda, strategies())
    assert {"split", "sequential"} <= set(time_major.names())


@pytest.mark.parametrize("n, t", [(1, 1), (2, 2), (1, 3)])
def test_keys_too_small_for_the_skip_rules_search_every_valid_config(n, t):
    from rltriton_tune.kernels import strategies

    space = SearchSpace(ProblemKey("gae", n, t), torch.device("cuda"), strategies())
    found = space.enumerate()  # every tile has idle threads here: nothing is skipped
    assert found and {c.strategy for c in found} == set(space.names())
    assert all(space.skip_reason(c) is None for c in found)


def test_starting_points_include_heuristic_and_defaults():
    space = SearchSpace(KEY, torch.device("cpu"))
    heuristic = Candidate("torch", {"mode": "loop"})
    points = space.starting_points(heuristic, extra=2)
    assert points[0] == heuristic
    assert len({p.label() for p in points}) == len(points) >= 2
    for p in points:
        assert space.trial_params(p)["strategy"] == "torch"


def test_small_key_caps_huge_keys_and_keeps_the_family():
    big = ProblemKey("vtrace", 1 << 16, 4096, "bfloat16", "time", "trunc")
    small = small_key(big)
    assert small.family() == big.family()
    assert small.n * small.t <= CAP_ELEMS
    assert small_key(KEY) == KEY


def test_compare_flags_wrong_and_nan_outputs():
    ref = (torch.ones(4, 5, dtype=torch.float64),)
    compare((torch.ones(4, 5),), ref, "float32", "x")
    with pytest.raises(GateFailure, match="differs"):
        compare((torch.ones(4, 5) * 1.1,), ref, "float32", "x")
    bad = torch.ones(4, 5)
    bad[0, 0] = float("nan")
    with pytest.raises(GateFailure, match="differs at 1 of 20"):
        compare((bad,), ref, "float32", "x")
    with pytest.raises(GateFailure, match="shape"):
        compare((torch.ones(5, 4),), ref, "float32", "x")


@pytest.mark.parametrize("algorithm", ["gae", "vtrace", "retrace", "eligibility_traces",
                                       "episodic_prefix_sum"])
def test_gate_accepts_real_strategy_and_rejects_wrong_one(algorithm, misbehaving):
    key = ProblemKey(algorithm, 8, 12, a=3 if algorithm == "retrace" else 0,
                     flags="trunc" if algorithm == "retrace" else "none")
    gate = Gate(key, torch.device("cpu"))
    gate.check(STRATEGIES["torch"], {"mode": "doubling"})
    with pytest.raises(GateFailure):
        gate.check(misbehaving, {"mode": "chunked", "chunk": 16})


@pytest.mark.parametrize("n, t, layout", [(5, 300000, "env"), (12, 45000, "env"),
                                           (100000, 12, "env"), (17, 100000, "env"),
                                           (100000, 12, "time"), (1, 10**6, "env")])
def test_small_key_keeps_the_residues_that_triton_specialises_on(n, t, layout):
    """Same residue modulo 16 across rows and 256 along the contiguous axis: the small
    copy's launch compiles the key's own binary (no second compile per gated config)."""
    key = ProblemKey("gae", n, t, layout=layout)
    small = small_key(key)
    assert small.n * small.t <= CAP_ELEMS and small != key
    rows, contiguous = (small.t, small.n) if layout == "time" else (small.n, small.t)
    key_rows, key_contiguous = (t, n) if layout == "time" else (n, t)
    assert rows % 16 == key_rows % 16 and (rows == 1) == (key_rows == 1)
    assert contiguous % 256 == key_contiguous % 256


def test_gate_on_huge_key_checks_small_copy_and_full_shape(monkeypatch, misbehaving):
    import rltriton_tune.tune.gate as gate_mod

    monkeypatch.setattr(gate_mod, "CAP_ELEMS", 64)
    key = ProblemKey("discounted_returns", 32, 16)
    gate = Gate(key, torch.device("cpu"))
    assert gate.small != key
    gate.check(STRATEGIES["torch"], {"mode": "loop"})
    with pytest.raises(GateFailure, match="reference at N="):
        gate.check(misbehaving, {"mode": "chunked", "chunk": 16})


def test_cpu_timing_is_the_median_launch_time_and_ranks_a_slow_launcher_slower(monkeypatch):
    """On a clock that only the launchers move (100 us and 2 ms a launch), CPU timing
    gives exactly their times, and the budget bounds the repetitions."""
    from types import SimpleNamespace

    from rltriton_tune.tune import measure

    now = [0.0]
    monkeypatch.setattr(measure, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    bench = Bench(KEY, torch.device("cpu"))
    assert copies_needed(KEY, torch.device("cpu")) == 1
    real = STRATEGIES["torch"].prepare(KEY, {"mode": "doubling"})
    launches = {"fast": 0, "slow": 0}

    def launcher(name: str, seconds: float):
        def launch(call):
            launches[name] += 1
            now[0] += seconds
            return real(call)
        return launch

    t_fast = bench.time(launcher("fast", 100e-6), 0.02)
    t_slow = bench.time(launcher("slow", 2e-3), 0.02)
    assert t_fast.device_us == pytest.approx(100) and t_slow.device_us == pytest.approx(2000)
    assert 0 < t_fast.device_us < t_slow.device_us
    # One warm-up, then launches until the budget (20 ms) is spent.
    assert launches == {"fast": 1 + 200, "slow": 1 + 10}


def test_cpu_timing_of_a_real_launcher_is_positive_and_finite():
    import math

    timing = Bench(KEY, torch.device("cpu")).time(
        STRATEGIES["torch"].prepare(KEY, {"mode": "doubling"}), 0.01)
    assert 0 < timing.device_us < math.inf


def test_builtin_choice_follows_the_rules_without_a_gpu_or_profile():
    """A study starts from the built-in rules' choice, valid in its space, with no GPU."""
    from rltriton_tune.tune.space import builtin_choice

    cuda = torch.device("cuda")  # the space only needs Triton, not a GPU
    few_rows_long_t = ProblemKey("gae", 16, 32768)
    choice = builtin_choice(few_rows_long_t, SearchSpace(few_rows_long_t, cuda))
    assert (choice.strategy, choice.params["BLOCK_T"]) == ("lookback", 1024)
    time_major = ProblemKey("gae", 24, 12000, layout="time")  # too long for one flat row
    choice = builtin_choice(time_major, SearchSpace(time_major, cuda))
    assert (choice.strategy, choice.params["BLOCK_N"], choice.params["BLOCK_T"]) == \
        ("tiled", 1, 256)
    short = ProblemKey("vtrace", 32768, 8)
    choice = builtin_choice(short, SearchSpace(short, cuda))
    assert (choice.strategy, choice.params["BLOCK_N"], choice.params["num_warps"]) == \
        ("flat", 16, 4)  # whole short rows, 512 elements a program
    cpu_space = SearchSpace(short, torch.device("cpu"))  # GPU rules only: none applies
    assert builtin_choice(short, cpu_space) is None


def test_candidate_label_round_trips_and_rejects_other_text():
    cand = Candidate("split", {"BLOCK_T": 512, "BLOCK_N": 4, "CHUNK_T": 2048, "num_warps": 2})
    assert Candidate.from_label(cand.label()) == cand
    assert Candidate.from_label("lookback:ticket(BLOCK_N=1)").strategy == "lookback:ticket"
    assert Candidate.from_label("torch()") == Candidate("torch", {})
    with pytest.raises(ValueError, match="not a candidate label"):
        Candidate.from_label("flat BLOCK_N=1")


def test_space_drops_tiled_for_few_long_rows_given_the_sm_count():
    cuda = torch.device("cuda")  # the space only needs Triton, not a GPU
    key = ProblemKey("gae", 16, 32768)
    assert "tiled" not in SearchSpace(key, cuda, sm_count=132).names()
    assert "lookback" in SearchSpace(key, cuda, sm_count=132).names()
    assert "tiled" in SearchSpace(key, cuda, sm_count=8).names()   # 16 rows fill 8 SMs


def _record_tuned(strategy, entries):
    """Record ``(key, params)`` pairs, or ``(key, params, extra)`` triples (fields such as
    ``off_grid``), as tuned ``strategy`` entries of this CPU (the rows the seed tests draw
    from)."""
    from rltriton_tune.dispatch.devices import device_fingerprint
    from rltriton_tune.tuning_db import Entry, record

    record(device_fingerprint("cpu"), [
        Entry(key, strategy, params, 5.0, trials=1, date="2026-01-01T00:00:00Z",
              extra=dict(extra[0]) if extra else {})
        for key, params, *extra in entries])


def test_studies_are_seeded_with_sibling_estimators_winners_at_the_same_shape():
    """Related seeds: the same estimator in another dtype first, then other estimators'
    winners at the same shape, dtype and layout, the most alike first, deduplicated and
    at most MAX_SIBLING_SEEDS of them; other layouts and shapes give none."""
    from rltriton_tune.tune.space import MAX_SIBLING_SEEDS, related_choices

    def at(algorithm, params, layout="time", t=2048, dtype="float32", a=0, flags="none"):
        return ProblemKey(algorithm, 128, t, dtype, layout, flags, a), params

    loop, doubling = {"mode": "loop"}, {"mode": "doubling"}
    _record_tuned("torch", [
        at("discounted_returns", {"mode": "chunked", "chunk": 32}, dtype="bfloat16"),
        at("retrace", doubling, a=8, flags="trunc"),        # an action axis: least alike
        at("eligibility_traces", {"mode": "chunked", "chunk": 16}),   # forward scan
        at("vtrace", {"mode": "chunked", "chunk": 64}),
        at("lambda_returns", loop),                          # the same config as GAE's
        at("gae", loop),
        at("gae", {"mode": "chunked", "chunk": 8}, layout="env"),     # another layout
        at("gae", {"mode": "chunked", "chunk": 128}, t=1024),         # another shape
    ])
    key = ProblemKey("discounted_returns", 128, 2048, "float32", "time")
    seeds = [c.label() for c in related_choices(key, torch.device("cpu"))]
    assert MAX_SIBLING_SEEDS == 3
    assert seeds == ["torch(chunk=32, mode=chunked)", "torch(mode=loop)",
                     "torch(chunk=64, mode=chunked)", "torch(chunk=16, mode=chunked)"]


def test_studies_are_seeded_with_the_nearest_shapes_winners_after_the_siblings():
    """Neighbour seeds: the same estimator, dtype, layout and flags at other shapes, the
    nearest (log N + log T) on each side of the key (fewer environments, more, fewer
    steps, more), distinct configs, nearest first, after the sibling estimators' seeds;
    a farther shape on a side already served, another flag set or layout gives none."""
    from rltriton_tune.tune.space import related_choices

    def at(params, n, t, algorithm="gae", layout="time", flags="none"):
        return ProblemKey(algorithm, n, t, "float32", layout, flags), params

    _record_tuned("torch", [
        at({"mode": "chunked", "chunk": 8}, 2048, 8192),     # 1 octave: more envs
        at({"mode": "chunked", "chunk": 16}, 512, 32768),    # 3 octaves: the only fewer envs
        at({"mode": "chunked", "chunk": 8}, 1024, 16384),    # 1 octave, the same config
        at({"mode": "chunked", "chunk": 32}, 1024, 2048),    # 2 octaves: fewer steps
        at({"mode": "chunked", "chunk": 128}, 4096, 8192),   # 2 octaves: more envs, farther
        at({"mode": "loop"}, 1024, 8192, flags="last_value"),  # another flag set: same shape
        at({"mode": "chunked", "chunk": 64}, 2048, 8192, layout="env"),  # another layout
        at({"mode": "doubling"}, 1024, 8192, algorithm="vtrace"),         # a sibling
    ])
    key = ProblemKey("gae", 1024, 8192, "float32", "time")
    seeds = [c.label() for c in related_choices(key, torch.device("cpu"))]
    assert seeds == ["torch(mode=loop)", "torch(mode=doubling)",
                     "torch(chunk=8, mode=chunked)", "torch(chunk=32, mode=chunked)",
                     "torch(chunk=16, mode=chunked)"]


def test_seeds_take_the_off_grid_configs_related_entries_record():
    """An entry's off-grid config (what calls whose steps fill part of their span take)
    seeds a study after that entry's winner: at the key's shape in another flag set, and
    at the nearest shape on a side. A malformed one gives no seed."""
    from rltriton_tune.tune.space import related_choices

    def entry(n, t, params, off, flags="none"):
        return ProblemKey("gae", n, t, "float32", "env", flags), params, {"off_grid": off}

    _record_tuned("torch", [
        entry(1024, 2048, {"mode": "loop"},
              {"strategy": "torch", "params": {"mode": "chunked", "chunk": 256}},
              flags="last_value"),
        entry(8192, 2048, {"mode": "doubling"},
              {"strategy": "torch", "params": {"mode": "chunked", "chunk": 64}}),
        entry(1024, 512, {"mode": "chunked", "chunk": 8}, {"strategy": 3}),  # malformed
    ])
    key = ProblemKey("gae", 1024, 2048, "float32", "env")
    seeds = [c.label() for c in related_choices(key, torch.device("cpu"))]
    # fewer steps (2 octaves) is nearer than more environments (3)
    assert seeds == ["torch(mode=loop)", "torch(chunk=256, mode=chunked)",
                     "torch(chunk=8, mode=chunked)", "torch(mode=doubling)",
                     "torch(chunk=64, mode=chunked)"]


def test_seeds_take_the_off_grid_config_of_each_side_once():
    """An entry with an off-grid config for each side of its steps seeds both after its
    winner, the one below first, and a config both sides share once."""
    from rltriton_tune.tune.space import related_choices

    def off(chunk):
        return {"strategy": "torch", "params": {"mode": "chunked", "chunk": chunk}}

    key = ProblemKey("gae", 1024, 2048, "float32", "env")
    for extra, want in (({"off_grid": None, "off_grid_beyond": off(32)}, ["chunk=32"]),
                        ({"off_grid": off(16), "off_grid_beyond": off(32)},
                         ["chunk=16", "chunk=32"]),
                        ({"off_grid": off(16), "off_grid_beyond": off(16)}, ["chunk=16"])):
        _record_tuned("torch", [(ProblemKey("gae", 1024, 2048, "float32", "env",
                                            "last_value"), {"mode": "loop"}, extra)])
        seeds = [c.label() for c in related_choices(key, torch.device("cpu"))]
        assert seeds == ["torch(mode=loop)",
                         *(f"torch({c}, mode=chunked)" for c in want)], extra


def test_nearest_on_each_side_keeps_an_entry_once_and_orders_by_distance():
    """An entry nearest on two sides (fewer environments and more steps) is kept once;
    a side without entries gives none."""
    from rltriton_tune.tune.space import nearest_on_each_side

    key = ProblemKey("gae", 1024, 1024, "float32", "env")
    diagonal = ((2.0, 512, 2048), "diagonal")
    ranked = [diagonal, ((3.0, 1024, 128), "fewer steps"), ((4.0, 256, 4096), "far")]
    assert nearest_on_each_side(key, ranked) == [diagonal, ((3.0, 1024, 128), "fewer steps")]
    assert nearest_on_each_side(key, []) == []


def test_sibling_seeds_are_compared_as_the_study_would_run_them():
    """With the study's space, seeds are validated before duplicates are dropped: a
    sibling's config that a Retrace key fills in (REDUCE_A=0) to one of its own seeds
    does not take a sibling slot."""
    kernels = pytest.importorskip("rltriton_tune.kernels")
    if not kernels.triton_available():
        pytest.skip("needs Triton")
    from rltriton_tune.tune.space import related_choices

    tile = {"BLOCK_N": 8, "BLOCK_T": 64, "num_warps": 1, "num_stages": 1}
    wide = {"BLOCK_N": 32, "BLOCK_T": 16, "num_warps": 1, "num_stages": 1}

    def at(algorithm, params, dtype="float32", a=0, flags="none"):
        return ProblemKey(algorithm, 128, 2048, dtype, "time", flags, a), params

    _record_tuned("tiled", [
        at("retrace", {**tile, "REDUCE_A": 0}, dtype="bfloat16", a=8, flags="trunc"),
        at("gae", tile), at("vtrace", wide)])
    key = ProblemKey("retrace", 128, 2048, "float32", "time", "trunc", 8)
    space = SearchSpace(key, torch.device("cpu"), {"tiled": kernels.strategies()["tiled"]})
    seeds = related_choices(key, torch.device("cpu"), space)
    assert [c.params for c in seeds] == [{**tile, "REDUCE_A": 0}, {**wide, "REDUCE_A": 0}]
    raw = related_choices(key, torch.device("cpu"))      # without a space: labels as stored
    assert [c.params for c in raw] == [{**tile, "REDUCE_A": 0}, tile, wide]
