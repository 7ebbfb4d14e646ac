"""Every (estimator, strategy, flags, layout, dtype) against the float64 reference.

Runs in the Triton interpreter on CPU (tests/conftest.py sets TRITON_INTERPRET=1).
Shapes are tiny and odd, block sizes small, so that several programs, several
tiles per program and several split chunks (with a multi-step carry
composition) are really exercised.
"""

from __future__ import annotations

import pytest

from rltriton_tune.call import ProblemKey
from rltriton_tune.kernels import STRATEGY_NAMES, launch, strategies

from .cases import DTYPES, FLAG_SETS, LAYOUTS, check_outputs, expected, make_call, small_params

pytestmark = pytest.mark.skipif(not strategies(), reason="Triton is not installed")

#: (N, T) cycled over the combinations (long T only with one row, to keep the interpreter fast).
#: Sizes with power-of-two factors (12, 20; 8, 12 rows) take the alignment-hint path.
SHAPES = [(3, 7), (1, 33), (5, 7), (3, 1), (1, 7), (5, 12), (8, 20), (12, 6)]


CASES = [
    (algorithm, flags, layout, dtype)
    for algorithm, flag_sets in FLAG_SETS.items()
    for flags in flag_sets
    for layout in LAYOUTS
    for dtype in DTYPES
]


def _key(i: int, algorithm: str, flags: str, layout: str, dtype: str) -> ProblemKey:
    n, t = SHAPES[i % len(SHAPES)]
    return ProblemKey(algorithm, n, t, dtype, layout, flags, a=5 if algorithm == "retrace" else 0)


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
@pytest.mark.parametrize(("i", "algorithm", "flags", "layout", "dtype"),
                         [(i, *case) for i, case in enumerate(CASES)],
                         ids=["-".join(case) for case in CASES])
def test_matches_reference(strategy, i, algorithm, flags, layout, dtype):
    key = _key(i + STRATEGY_NAMES.index(strategy), algorithm, flags, layout, dtype)
    call, kwargs = make_call(key, seed=i)
    params = small_params(strategy, key.t)
    outs = strategies()[strategy].prepare(key, params)(call)
    check_outputs(outs, expected(algorithm, kwargs), call, f"{strategy} {params} {key.as_text()}")


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
@pytest.mark.parametrize(("layout", "dtype", "n", "t", "a"), [
    ("env", "float32", 5, 13, 3), ("time", "float32", 3, 33, 6), ("env", "bfloat16", 1, 7, 8),
    ("time", "float16", 6, 5, 1)])
def test_retrace_action_pre_pass_matches_reference(strategy, layout, dtype, n, t, a):
    """``REDUCE_A=1``: the ``[N, T, A]`` inputs reduced by the pre-pass, then the scan
    reading the reductions, on odd action counts (a single action too) and sizes."""
    if strategy == "columns" and layout == "env":
        layout = "time"   # columns serves time-major keys only
    key = ProblemKey("retrace", n, t, dtype, layout, "trunc", a=a)
    call, kwargs = make_call(key, seed=n * t + a)
    params = {**small_params(strategy, key.t), "REDUCE_A": 1}
    outs = strategies()[strategy].prepare(key, params)(call)
    check_outputs(outs, expected("retrace", kwargs), call, f"{strategy} {params} {key.as_text()}")


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(("algorithm", "flags", "a"), [("retrace", "trunc", 4),
                                                       ("vtrace", "none", 0)])
def test_neighbour_value_across_tiles_and_chunks(strategy, layout, algorithm, flags, a):
    """Retrace's finish and V-trace's exact one (``c_bar = inf``, which the division
    finish does not serve) read y[t+1] from the core (``next_value``): at the edge of
    every tile, chunk and look-back chunk it must be the carry coming in (V-trace without
    truncations or bootstrap values uses it up to t = T-2)."""
    from rltriton_tune.kernels.builders import BUILDERS

    builder = BUILDERS[algorithm]
    scalars = {}
    if builder.exact is not None:
        scalars = {"c_bar": float("inf")}
        assert not builder.serves(0.99, 1.0, scalars["c_bar"])
        builder = builder.exact
    assert builder.next_value
    key = ProblemKey(algorithm, 3, 33, "float32", layout, flags, a=a)
    call, kwargs = make_call(key, seed=33, **scalars)
    params = small_params(strategy, key.t)
    outs = strategies()[strategy].prepare(key, params)(call)
    check_outputs(outs, expected(algorithm, kwargs), call, f"{strategy} {params}")


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
@pytest.mark.parametrize("algorithm", ["vtrace", "retrace", "episodic_prefix_sum"])
def test_int64_offsets(strategy, algorithm, monkeypatch):
    """The int64 offset path (taken when N*T*A nears 2^31) computes the same numbers."""
    monkeypatch.setattr(launch, "INT32_LIMIT", 0)
    key = ProblemKey(algorithm, 3, 7, "float32", "time", FLAG_SETS[algorithm][-1],
                     a=3 if algorithm == "retrace" else 0)
    call, kwargs = make_call(key, seed=7)
    strategy_ = strategies()[strategy]
    launcher = strategy_.prepare(key, small_params(strategy, key.t))
    assert launch.Packer(key, 1, 1).constexprs["BIG"]
    check_outputs(launcher(call), expected(algorithm, kwargs), call, f"{strategy} int64")


@pytest.mark.parametrize(("strategy", "layout", "params"), [
    ("lookback", "env", {"BLOCK_N": 1, "BLOCK_T": 1, "num_warps": 1}),
    ("split", "time", {"BLOCK_N": 2, "BLOCK_T": 1, "CHUNK_T": 1, "CARRY_BLOCK": 2,
                       "num_warps": 1}),
])
def test_chunk_offsets_take_64_bits_when_they_outgrow_the_inputs(strategy, layout, params,
                                                                  monkeypatch):
    """With one-step chunks the per-chunk words (lookback) or aggregates (split), 2 per
    chunk and row, outnumber the inputs: their offsets turn 64-bit by themselves (here at
    a lowered limit), with the same results, in every launch of the strategy."""
    import importlib

    module = importlib.import_module(f"rltriton_tune.kernels.{strategy}")
    seen = []

    class Spy(module.FastLaunch):
        def __init__(self, kernel, grid, consts, pointers=None, slots=None):
            seen.append(consts["BIG"])
            super().__init__(kernel, grid, consts, pointers, slots)

    monkeypatch.setattr(module, "FastLaunch", Spy)
    monkeypatch.setattr(module, "INT32_LIMIT", 2 * 3 * 7)  # 2 words of 7 rows x 3 chunks
    for n_rows, big in ((6, False), (7, True)):  # N * T <= 21: the inputs stay small
        key = ProblemKey("gae", n_rows, 3, "float32", layout, "trunc")
        call, kwargs = make_call(key, seed=n_rows)
        seen.clear()
        # A new strategy object: the shared one may hold a launcher of this key prepared
        # earlier, and would keep this one, built under the lowered limit.
        outs = type(strategies()[strategy])().prepare(key, params)(call)
        check_outputs(outs, expected("gae", kwargs), call, f"{strategy} {n_rows} rows")
        assert seen and all(b is big for b in seen), seen


@pytest.mark.parametrize("hints", [True, False], ids=["hints", "no-hints"])
@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
@pytest.mark.parametrize(("layout", "n", "t"), [("env", 3, 12), ("time", 8, 5), ("env", 2, 40)])
def test_alignment_hints(strategy, layout, n, t, hints, monkeypatch):
    """Sizes divided by their power-of-two part on the host and multiplied back in the
    kernel (``scan.true_sizes``) give the same numbers as the plain sizes."""
    monkeypatch.setattr(launch, "ALIGN_HINTS", hints)
    for algorithm, a in (("gae", 0), ("vtrace", 0), ("episodic_prefix_sum", 0),
                         ("retrace", 8), ("retrace", 6)):
        key = ProblemKey(algorithm, n, t, "float32", layout, FLAG_SETS[algorithm][-1], a)
        pack = launch.Packer(key, 1, 1)
        align = pack.constexprs["ALIGN_N" if layout == "time" else "ALIGN_T"]
        assert align == (launch.pow2_divisor(n if layout == "time" else t) if hints else 1)
        assert pack.constexprs["ALIGN_A"] == (launch.pow2_divisor(a) if hints and a else 1)
        call, kwargs = make_call(key, seed=n * t)
        outs = type(strategies()[strategy])().prepare(key, small_params(strategy, t))(call)
        check_outputs(outs, expected(algorithm, kwargs), call, f"{strategy} {key.as_text()}")


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
@pytest.mark.parametrize(("layout", "n", "t"), [("env", 8, 32), ("time", 8, 32), ("env", 6, 30)])
def test_whole_and_partial_tiles(strategy, layout, n, t):
    """Tiles that fill the problem exactly (8 x 32 with every strategy's small blocks) and
    tiles cut by its edges (6 x 30) give the reference's numbers, boundary values and
    neighbour reads included."""
    params = small_params(strategy, t)
    for algorithm in FLAG_SETS:
        key = ProblemKey(algorithm, n, t, "float32", layout, FLAG_SETS[algorithm][-1],
                         a=6 if algorithm == "retrace" else 0)
        call, kwargs = make_call(key, seed=n + t)
        outs = type(strategies()[strategy])().prepare(key, params)(call)
        check_outputs(outs, expected(algorithm, kwargs), call, f"{strategy} {key.as_text()}")


@pytest.mark.parametrize(("x", "want"), [(1, 1), (6, 2), (12, 4), (40, 8), (48, 16),
                                         (1024, 16), (0, 16), (7, 1)])
def test_pow2_divisor(x, want):
    assert launch.pow2_divisor(x) == want


#: Tiles of 128-256 steps on one warp: 4-8 steps per thread, so backward scans take the
#: flipped-run path (``scan.scan_pairs``) with several runs per row.
RUN_PARAMS = {
    "flat": {"BLOCK_N": 1, "num_warps": 1},
    "tiled": {"BLOCK_N": 2, "BLOCK_T": 128, "num_warps": 1},
    "split": {"BLOCK_N": 1, "BLOCK_T": 128, "CHUNK_T": 256, "CARRY_BLOCK": 2, "num_warps": 1},
    "lookback": {"BLOCK_N": 1, "BLOCK_T": 256, "num_warps": 1},
}


@pytest.mark.parametrize("flip", [True, False], ids=["runs", "reverse-scan"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("strategy", sorted(RUN_PARAMS))
def test_backward_scan_in_flipped_runs(strategy, dtype, flip, monkeypatch):
    """Backward estimators give the reference's numbers whether a tile is scanned in
    flipped per-thread runs or by Triton's reverse scan, with bootstrap values and
    truncations cutting runs in their middle."""
    monkeypatch.setattr(launch, "FLIP_RUNS", flip)
    params = RUN_PARAMS[strategy]
    for algorithm in ("gae", "vtrace", "retrace", "lambda_returns", "discounted_returns"):
        # 304 steps: two chunks or more for split and lookback, three tiles for tiled;
        # multiples of 8, so rows start on a vector of either dtype (unaligned rows
        # descend instead: test_unaligned_rows_descend)
        key = ProblemKey(algorithm, 3, 304 if strategy != "flat" else 248, dtype, "env",
                         FLAG_SETS[algorithm][-1], a=5 if algorithm == "retrace" else 0)
        impl = type(strategies()[strategy])()
        full = impl.validate(key, params)
        tile = full["BLOCK_N"] * full.get("BLOCK_T", launch.next_pow2(key.t))
        assert launch.scan_run(key, tile, full["num_warps"]) == (
            min(16 // (4 if dtype == "float32" else 2), tile // 32) if flip else 1)
        assert not launch.descend_tiles(key, tile, full["num_warps"])
        call, kwargs = make_call(key, seed=7)
        outs = impl.prepare(key, params)(call)
        check_outputs(outs, expected(algorithm, kwargs), call, f"{strategy} {key.as_text()}")


def _descending_rows_match_reference(strategy, cases, seed):
    """For each (algorithm, T, dtype): 3 env-major rows whose tiles descend, computed
    by ``strategy`` at its RUN_PARAMS, against the reference."""
    params = RUN_PARAMS[strategy]
    for algorithm, t, dtype in cases:
        key = ProblemKey(algorithm, 3, t, dtype, "env", FLAG_SETS[algorithm][-1])
        impl = type(strategies()[strategy])()
        full = impl.validate(key, params)
        tile = full["BLOCK_N"] * full.get("BLOCK_T", launch.next_pow2(key.t))
        assert launch.descend_tiles(key, tile, full["num_warps"])
        call, kwargs = make_call(key, seed=seed)
        outs = impl.prepare(key, params)(call)
        check_outputs(outs, expected(algorithm, kwargs), call, f"{strategy} {key.as_text()}")


@pytest.mark.parametrize("strategy", sorted(RUN_PARAMS))
def test_unaligned_rows_descend(strategy):
    """Env-major rows of an odd length start off vector boundaries, so their accesses are
    scalar in any order: backward scans hold their tiles last to first and scan forward
    (no flipped runs), and give the reference's numbers."""
    _descending_rows_match_reference(strategy, (("gae", 301, "float32"), (
        "vtrace", 297, "float32"), ("lambda_returns", 299, "bfloat16")), seed=3)
    for t, dtype in ((300, "float32"), (298, "float32"), (300, "bfloat16")):
        # even rows load vectors of two elements or more: they keep the runs
        assert not launch.descend_tiles(ProblemKey("gae", 3, t, dtype, "env"), 256, 1)
    assert not launch.descend_tiles(ProblemKey("eligibility_traces", 3, 301), 256, 1)


@pytest.mark.parametrize("strategy", sorted(RUN_PARAMS))
def test_every_backward_tile_descends_with_the_switch(strategy, monkeypatch):
    """``DESCEND_ALWAYS`` (the A/B switch of benchmarks/switches.py): even, aligned rows
    of backward estimators also hold their tiles last to first and give the reference's
    numbers; forward scans never descend."""
    monkeypatch.setattr(launch, "DESCEND_ALWAYS", True)
    _descending_rows_match_reference(strategy, (("gae", 248, "float32"), (
        "vtrace", 304, "bfloat16"), ("discounted_returns", 256, "float32")), seed=5)
    assert not launch.descend_tiles(ProblemKey("eligibility_traces", 3, 256), 256, 1)


@pytest.mark.parametrize("algorithm", ["gae", "vtrace", "retrace", "discounted_returns"])
def test_a_flat_config_asks_for_descending_tiles(algorithm):
    """A flat config's ``DESCEND=1`` holds even, aligned rows last to first (where the
    rule would flip runs of vectors) and gives the reference's numbers; 0 keeps the rule.
    The parameter exists for backward scans of env-major rows only, as a 0/1 switch."""
    a = 5 if algorithm == "retrace" else 0
    key = ProblemKey(algorithm, 3, 248, "float32", "env", FLAG_SETS[algorithm][-1], a=a)
    flat = type(strategies()["flat"])()
    params = {"BLOCK_N": 1, "num_warps": 1, "num_stages": 1}
    tile = launch.next_pow2(key.t)
    assert not launch.descend_tiles(key, tile, 1)
    for descend in (0, 1):
        pack = launch.Packer(key, tile, 1, 0, descend)
        assert pack.constexprs["DESCEND"] is bool(descend)
    call, kwargs = make_call(key, seed=11)
    outs = flat.prepare(key, {**params, "DESCEND": 1})(call)
    check_outputs(outs, expected(algorithm, kwargs), call, f"flat DESCEND=1 {key.as_text()}")
    with pytest.raises(launch.InvalidConfig, match="DESCEND=2 must be 0 or 1"):
        flat.validate(key, {**params, "DESCEND": 2})
    for other in (ProblemKey("eligibility_traces", 3, 248), ProblemKey(algorithm, 3, 248,
                                                                      layout="time", a=a)):
        with pytest.raises(launch.InvalidConfig, match="unknown parameter"):
            flat.validate(other, {**params, "DESCEND": 1})


def test_scan_runs_only_for_env_major_backward_scans(monkeypatch):
    def run(algorithm, layout="env", dtype="bfloat16", a=0, tile=2048, warps=4):
        return launch.scan_run(ProblemKey(algorithm, 4, 64, dtype, layout, "none", a),
                               tile, warps)

    assert run("gae") == 8 and run("gae", dtype="float32") == 4
    assert run("gae", tile=64, warps=1) == 2       # two steps per thread: a run of two
    assert run("gae", tile=16, warps=1) == 1
    assert run("gae", layout="time") == 1
    assert run("eligibility_traces") == 1           # forward scan
    assert run("retrace", a=4) == 8
    monkeypatch.setattr(launch, "FLIP_ACTION_RUNS", False)
    assert run("retrace", a=4) == 1 and run("gae") == 8


#: The grad algorithms' flag sets that change their kernels (GAE's values term with and
#: without next_values, truncations, the prefix sums' boundary, each boundary gradient:
#: per step, and per env at the last or first step; V-trace's with each boundary input it
#: reads), each once per strategy.
GRAD_CASES = [("gae_grad", "trunc"), ("gae_grad", "next"), ("gae_grad", "bootstrap+trunc"),
              ("gae_grad", "last_value"), ("lambda_returns_grad", "trunc"),
              ("lambda_returns_grad", "bootstrap+trunc"), ("discounted_returns_grad", "trunc"),
              ("discounted_returns_grad", "bootstrap"), ("eligibility_traces_grad", "none"),
              ("eligibility_traces_grad", "seed"), ("episodic_prefix_sum_grad", "none"),
              ("episodic_prefix_sum_grad", "starts_at"),
              ("episodic_prefix_sum_grad", "seed+starts_at"), ("vtrace_grad", "none"),
              ("vtrace_grad", "last_value"), ("vtrace_grad", "bootstrap+trunc"),
              ("vtrace_grad", "next+trunc")]


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
@pytest.mark.parametrize(("i", "algorithm", "flags"),
                         [(i, *case) for i, case in enumerate(GRAD_CASES)],
                         ids=["-".join(case) for case in GRAD_CASES])
def test_grad_algorithms_match_reference(strategy, i, algorithm, flags):
    """Each grad algorithm's builder on every strategy, layouts and dtypes taking turns, at
    33 steps (several tiles, chunks and look-back chunks: GAE's finish reads z[t-1] across
    their edges)."""
    k = i + STRATEGY_NAMES.index(strategy)
    key = ProblemKey(algorithm, 3, 33, DTYPES[k % 2], LAYOUTS[k // 2 % 2], flags)
    call, kwargs = make_call(key, seed=i)
    params = small_params(strategy, key.t)
    outs = strategies()[strategy].prepare(key, params)(call)
    check_outputs(outs, expected(algorithm, kwargs), call, f"{strategy} {params} {key.as_text()}")
