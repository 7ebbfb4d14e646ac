"""Strategy protocol: parameter spaces, validity rules, defaults, availability, edge cases."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from fractions import Fraction

import pytest
import torch

from rltriton_tune.call import Call, ProblemKey
from rltriton_tune.kernels import STRATEGY_NAMES, strategies
from rltriton_tune.pow2 import next_pow2
from rltriton_tune.reference import reference
from rltriton_tune.strategy import InvalidConfig

from .cases import check_outputs, make_call

pytestmark = pytest.mark.skipif(not strategies(), reason="Triton is not installed")

KEYS = [
    ProblemKey("gae", 1, 1),
    ProblemKey("gae", 32768, 8, "bfloat16"),
    ProblemKey("vtrace", 16, 32768, "float16", "time", "trunc"),
    ProblemKey("retrace", 4096, 512, "float32", "env", "trunc", a=18),
    ProblemKey("episodic_prefix_sum", 3, 1000, flags="seed+starts_at"),
]
HUGE = [ProblemKey("gae", 2**20, 8), ProblemKey("gae", 1, 2**20), ProblemKey("gae", 2**20, 2**20)]


def test_registry():
    assert list(strategies()) == list(STRATEGY_NAMES)
    for name, strategy in strategies().items():
        assert strategy.name == name


@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_space_and_defaults(name):
    strategy = strategies()[name]
    for key in KEYS:
        space = strategy.space(key)
        assert space and all(space.values()), (name, key)
        default = strategy.validate(key, strategy.default_params(key))
        assert set(default) == set(space)
        assert strategy.validate(key, {}) == default     # missing params are completed
        # Every config of the space is either valid or rejected with InvalidConfig.
        valid = 0
        size = math.prod(len(v) for v in space.values())
        for values in itertools.islice(itertools.product(*space.values()), 0, None,
                                       7 if size > 200 else 1):
            try:
                strategy.validate(key, dict(zip(space, values, strict=True)))
                valid += 1
            except InvalidConfig:
                pass
        assert valid, (name, key)


@pytest.mark.parametrize("t", [1, 100, 32768, 32769, 40000, 65536])
@pytest.mark.parametrize("algorithm", ["gae", "discounted_returns"])
def test_flat_default_is_valid_wherever_a_row_fits_the_tile(algorithm, t):
    """Up to 65536 steps a whole row fits flat's tile: the default config (what
    ``force("flat")`` runs without parameters) must pass validation there too."""
    from rltriton_tune.kernels.launch import MAX_ELEMS_PER_THREAD

    flat = strategies()["flat"]
    key = ProblemKey(algorithm, 3, t)
    params = flat.validate(key, {})
    assert params["BLOCK_N"] == 1
    assert next_pow2(t) // (32 * params["num_warps"]) <= MAX_ELEMS_PER_THREAD


@pytest.mark.parametrize("name", ["tiled", "split", "sequential"])
def test_looping_strategies_have_no_size_limit(name):
    strategy = strategies()[name]
    for key in HUGE:
        strategy.validate(key, strategy.default_params(key))


def test_flat_rejects_tiles_over_budget():
    flat = strategies()["flat"]
    flat.validate(ProblemKey("gae", 4, 2**16), {"BLOCK_N": 1, "num_warps": 32})
    with pytest.raises(InvalidConfig, match="tile budget"):
        flat.validate(ProblemKey("gae", 4, 2**16 + 1), {"BLOCK_N": 1, "num_warps": 32})
    with pytest.raises(InvalidConfig, match="BLOCK_N"):
        flat.validate(ProblemKey("gae", 64, 4096), {"BLOCK_N": 32})


def test_register_pressure_rule_counts_elements_per_thread():
    tiled = strategies()["tiled"]
    key = ProblemKey("gae", 4096, 4096)
    tiled.validate(key, {"BLOCK_N": 2, "BLOCK_T": 1024, "num_warps": 1})       # 64 per thread
    with pytest.raises(InvalidConfig, match="per thread"):
        tiled.validate(key, {"BLOCK_N": 4, "BLOCK_T": 1024, "num_warps": 1})   # 128 per thread
    tiled.validate(key, {"BLOCK_N": 4, "BLOCK_T": 1024, "num_warps": 2})


def test_searches_skip_tiles_with_fewer_elements_than_threads():
    tiled = strategies()["tiled"]
    key = ProblemKey("gae", 4096, 512)
    idle = tiled.validate(key, {"BLOCK_N": 1, "BLOCK_T": 64, "num_warps": 4})  # still valid
    assert tiled.skip_reason(key, idle) == "128 threads for a 64-element tile"
    assert tiled.skip_reason(key, dict(idle, num_warps=2)) is None  # 64 threads, 64 elements
    flat = strategies()["flat"]  # flat's tile is next_pow2(T) steps per row
    assert flat.skip_reason(ProblemKey("gae", 4096, 12), {"BLOCK_N": 1, "num_warps": 1})
    assert flat.skip_reason(ProblemKey("gae", 4096, 12),
                            {"BLOCK_N": 2, "num_warps": 1, "num_stages": 1}) is None


@pytest.mark.parametrize(("name", "params", "match"), [
    ("tiled", {"BLOCK_T": 24}, "power of two"),
    ("tiled", {"BLOCK_X": 4}, "unknown parameter"),
    ("tiled", {"BLOCK_N": "x"}, "not an integer"),
    ("tiled", {"BLOCK_N": 2.5}, "BLOCK_N=2.5 is not an integer"),   # not truncated to 2
    ("tiled", {"num_warps": 1.99}, "num_warps=1.99 is not an integer"),
    ("flat", {"DESCEND": 0.5}, "DESCEND=0.5 is not an integer"),
    ("tiled", {"BLOCK_N": float("inf")}, "BLOCK_N=inf is not an integer"),  # int() overflows
    ("tiled", {"BLOCK_N": Fraction(5, 2)}, "is not an integer"),
    ("tiled", {"num_warps": 64}, "num_warps"),
    ("tiled", {"BLOCK_N": 256, "BLOCK_T": 1024}, "tile budget"),
    ("split", {"CHUNK_T": 64, "BLOCK_T": 128}, "multiple of BLOCK_T"),
    ("split", {"CHUNK_T": 16, "BLOCK_T": 16}, "chunks"),
    ("sequential", {"BLOCK_N": 8192}, "BLOCK_N"),
])
def test_invalid_configs(name, params, match):
    with pytest.raises(InvalidConfig, match=match):
        strategies()[name].validate(ProblemKey("gae", 8, 2**17), params)


def test_integral_floats_are_accepted():
    """A profile's JSON may hold 2.0 for 2: the same config."""
    tiled = strategies()["tiled"]
    key = ProblemKey("gae", 8, 2**17)
    assert tiled.validate(key, {"BLOCK_N": 2.0, "num_warps": 4.0}) == \
        tiled.validate(key, {"BLOCK_N": 2, "num_warps": 4})


@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_float64_is_not_a_triton_dtype(name):
    with pytest.raises(InvalidConfig, match="float64"):
        strategies()[name].validate(ProblemKey("gae", 4, 4, "float64"), {})


def test_available_devices():
    for strategy in strategies().values():
        assert strategy.available(torch.device("cpu"))      # interpreter (conftest)
        assert strategy.available(torch.device("cuda"))
        assert not strategy.available(torch.device("meta"))


def test_rl_triton_params():
    from rltriton_tune.kernels.flat import rl_triton_params

    # rl-triton 0.1.3's tables (ops/gae.py, ops/returns.py, ops/prefix_sum.py): T -> warps,
    # stages, for GAE (and V-trace, Retrace, lambda-returns) and for the lighter three
    table = {8: (2, 1), 100: (2, 1), 128: (2, 1), 256: (4, 1), 512: (4, 1), 1000: (8, 1),
             2048: (16, 2), 4096: (16, 2), 8192: (32, 2), 16384: (32, 2), 32768: (16, 2)}
    light = {8: (2, 1), 200: (4, 1), 512: (8, 1), 1000: (16, 2), 2048: (16, 2),
             10000: (32, 2), 20000: (16, 2)}
    for algorithms, cases in ((("gae", "vtrace", "retrace", "lambda_returns"), table), ((
            "discounted_returns", "eligibility_traces", "episodic_prefix_sum"), light)):
        for algorithm in algorithms:
            for t, (warps, stages) in cases.items():
                assert rl_triton_params(t, algorithm) == {
                    "BLOCK_N": 1, "num_warps": warps, "num_stages": stages}, (algorithm, t)


@pytest.mark.parametrize("reduce_actions", [0, 1])
@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_retrace_action_out_of_range_is_nan(name, reduce_actions):
    """An action outside [0, A) must not fault: NaN where the recurrence uses it, read
    inside the scan or by the action pre-pass."""
    key = ProblemKey("retrace", 3, 7, "float32", "time" if name == "columns" else "env",
                     "trunc", a=4)
    call, kwargs = make_call(key, seed=3)
    actions = call.tensors["actions"].clone()
    at = (lambda row, t: (t, row)) if key.time_major else (lambda row, t: (row, t))
    actions[at(1, 4)] = 4
    actions[at(2, 6)] = -1
    actions[at(0, 0)] = 2**40
    call.tensors["actions"] = actions
    kwargs["actions"] = actions
    before = {k: v.clone() for k, v in call.tensors.items()}
    outs = strategies()[name].prepare(key, {"REDUCE_A": reduce_actions})(call)
    assert all(torch.equal(v, before[k]) for k, v in call.tensors.items())
    q_ret, adv = (y.T for y in outs) if key.time_major else outs   # [N, T] views
    for row, t in ((1, 4), (2, 6), (0, 0)):
        assert torch.isnan(adv[row, t])
    assert torch.isnan(q_ret[1, :4]).all() and torch.isfinite(q_ret[1, 4:]).all()
    check_outputs(outs, reference("retrace", **kwargs), call, f"{name} {reduce_actions}")


@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_empty_problem(name):
    key = ProblemKey("vtrace", 0, 5)
    empty = torch.empty(0, 5)
    call = Call("vtrace", {n: empty for n in ("log_pi_target", "log_pi_behavior", "values",
                                              "rewards", "terminateds")},
                {"gamma": 0.9, "rho_bar": 1.0, "c_bar": 1.0}, n=0, t=5)
    outs = strategies()[name].prepare(key, {})(call)
    assert [o.shape for o in outs] == [(0, 5), (0, 5)]


def test_prepare_caches_launchers():
    tiled = strategies()["tiled"]
    key = ProblemKey("gae", 5, 7)
    assert tiled.prepare(key, {"BLOCK_T": 4}) is tiled.prepare(key, {"BLOCK_T": 4})


def test_import_without_triton():
    code = ("import sys; sys.modules['triton'] = None\n"
            "import rltriton_tune.kernels as k\n"
            "assert not k.triton_available() and k.strategies() == {}\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_tiled_leaves_few_long_rows_to_the_lookback_scan_when_the_sm_count_is_known():
    tiled = strategies()["tiled"]
    params = {"BLOCK_N": 1, "BLOCK_T": 1024, "num_warps": 4, "num_stages": 1}
    few_long = ProblemKey("gae", 16, 32768)
    assert "look-back" in tiled.skip_reason(few_long, params, sm_count=132)
    assert tiled.skip_reason(few_long, params) is None            # SM count unknown
    assert tiled.skip_reason(ProblemKey("gae", 256, 32768), params, sm_count=132) is None
    assert tiled.skip_reason(ProblemKey("gae", 16, 4096), params, sm_count=132) is None
    assert tiled.skip_reason(ProblemKey("gae", 16, 32768, layout="time"), params,
                             sm_count=132) is None
    per_action = ProblemKey("retrace", 16, 32768, flags="trunc", a=8)
    assert tiled.skip_reason(per_action, params, sm_count=132) is None


def test_tiled_searches_whole_column_blocks_for_retrace_only_with_the_action_pre_pass():
    tiled = strategies()["tiled"]
    key = ProblemKey("retrace", 32768, 128, "float32", "time", "trunc", a=8)
    assert 128 in tiled.space(key)["BLOCK_N"]
    wide = {"BLOCK_N": 128, "BLOCK_T": 16, "num_warps": 1, "num_stages": 3}
    assert "action loads fused" in tiled.skip_reason(key, {**wide, "REDUCE_A": 0})
    assert tiled.skip_reason(key, {**wide, "REDUCE_A": 1}) is None
    assert tiled.skip_reason(key, {**wide, "BLOCK_N": 64, "REDUCE_A": 0}) is None
    assert max(tiled.space(ProblemKey("retrace", 32768, 128, flags="trunc", a=8))
               ["BLOCK_N"]) == 64                                  # env-major: unchanged


def test_two_blocks_caps_registers_so_two_programs_fit_a_multiprocessor(monkeypatch):
    """``TWO_BLOCKS=1`` passes Triton a register cap (``maxnreg``) of the 64K register file
    over two programs: 64 a thread at 16 warps, 128 at 8, 32 at 32; below 8 warps there is
    nothing to cap and the config is refused. The interpreter takes no cap."""
    from rltriton_tune.kernels import flat as flat_module
    from rltriton_tune.kernels.launch import register_cap

    assert [register_cap(w) for w in (1, 2, 4, 8, 16, 32)] == [None, None, None, 128, 64, 32]
    flat = type(strategies()["flat"])()
    key = ProblemKey("vtrace", 2457, 1229)
    params = {"BLOCK_N": 1, "num_warps": 16, "num_stages": 1, "DESCEND": 0, "TWO_BLOCKS": 1}
    assert flat.validate(key, params) == params
    with pytest.raises(InvalidConfig, match="TWO_BLOCKS=1 caps nothing at num_warps=4"):
        flat.validate(key, {**params, "num_warps": 4})
    monkeypatch.setattr(flat_module, "interpreting", lambda: False)
    assert flat._launcher(key, params).kernel._consts["maxnreg"] == 64
    assert "maxnreg" not in flat._launcher(key, {**params, "TWO_BLOCKS": 0}).kernel._consts
    monkeypatch.setattr(flat_module, "interpreting", lambda: True)
    assert "maxnreg" not in flat._launcher(key, params).kernel._consts
