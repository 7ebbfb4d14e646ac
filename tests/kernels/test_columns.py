"""The ``columns`` strategy: the look-back core over wide column blocks of time-major inputs.

Under the interpreter programs run one after another; with inclusive values off every
chunk composes its predecessors' aggregates a few windows at a time (a window of 2 here),
the path concurrent programs take on a GPU.
"""

import pytest

from rltriton_tune.call import ProblemKey
from rltriton_tune.kernels import columns, lookback, strategies
from rltriton_tune.strategy import InvalidConfig

from .cases import FLAG_SETS, LAYOUTS, check_outputs, expected, make_call

pytestmark = pytest.mark.skipif(not strategies(), reason="Triton is not installed")

FLAG_CASES = [(algorithm, flags) for algorithm, sets in FLAG_SETS.items() for flags in sets]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(("algorithm", "flags"), FLAG_CASES)
def test_every_flag_path_from_aggregates(algorithm, flags, layout, monkeypatch):
    monkeypatch.setattr(lookback, "PUBLISH_INCLUSIVE", False)
    monkeypatch.setattr(lookback, "LOOK_WINDOW", 2)  # 7 chunks: looked back 2 at a time
    key = ProblemKey(algorithm, 6, 13, "float32", layout, flags,
                     a=3 if algorithm == "retrace" else 0)
    call, kwargs = make_call(key, seed=7)
    params = {"BLOCK_N": 4, "BLOCK_T": 2, "num_warps": 1}  # 2 column blocks x 7 chunks
    impl = columns.ColumnsStrategy()
    assert impl.window(key, impl.validate(key, params)) == 2
    outs = impl.prepare(key, params)(call)
    check_outputs(outs, expected(algorithm, kwargs), call, f"columns {key.as_text()}")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("algorithm", ["vtrace", "episodic_prefix_sum"])
def test_inclusive_values_and_16_bit_inputs(algorithm, dtype):
    key = ProblemKey(algorithm, 9, 40, dtype, "time", FLAG_SETS[algorithm][-1])
    call, kwargs = make_call(key, seed=11)
    outs = strategies()["columns"].prepare(key, {"BLOCK_N": 8, "BLOCK_T": 1, "num_warps": 1})(call)
    check_outputs(outs, expected(algorithm, kwargs), call, f"columns {key.as_text()}")


def test_window_shrinks_as_the_block_widens():
    impl = columns.ColumnsStrategy()
    key = ProblemKey("gae", 32768, 2048, "float32", "time", "none")
    window = {(bn, w): impl.window(key, {"BLOCK_N": bn, "BLOCK_T": 8, "num_warps": w})
              for bn, w in [(32, 1), (128, 1), (256, 2), (512, 1), (1024, 1)]}
    assert window == {(32, 1): 16, (128, 1): 4, (256, 2): 4, (512, 1): 1, (1024, 1): 1}


def test_searched_for_time_major_keys_with_whole_columns_per_thread():
    impl = columns.ColumnsStrategy()
    time_major = ProblemKey("gae", 32768, 2048, "float32", "time", "none")
    env_major = ProblemKey("gae", 32768, 2048, "float32", "env", "none")
    wide = {"BLOCK_N": 128, "BLOCK_T": 8, "num_warps": 1}
    assert impl.skip_reason(time_major, wide) is None
    assert "env-major" in impl.skip_reason(env_major, wide)
    # 16-bit inputs: 8 rows a vector, so 128 rows on a warp split each column over lanes.
    half = ProblemKey("gae", 32768, 2048, "bfloat16", "time", "none")
    assert "lanes" in impl.skip_reason(half, wide)
    assert impl.skip_reason(half, {**wide, "BLOCK_N": 256}) is None
    # Warps beyond one warp of vectors take steps, not rows: searched.
    assert impl.skip_reason(time_major, {**wide, "BLOCK_T": 32, "num_warps": 2}) is None
    assert impl.skip_reason(half, {"BLOCK_N": 256, "BLOCK_T": 32, "num_warps": 4}) is None
    assert "lanes" in impl.skip_reason(time_major, {**wide, "BLOCK_N": 64, "num_warps": 2})
    # An odd N allows single-element loads alone: a warp of them, 32 rows, holds whole
    # columns; N = 2 mod 4 allows 8-byte loads: 64 rows.
    odd = ProblemKey("gae", 4745, 1047, "float32", "time", "none")
    assert impl.skip_reason(odd, {**wide, "BLOCK_N": 32, "BLOCK_T": 32}) is None
    assert "< 32" in impl.skip_reason(odd, {**wide, "BLOCK_N": 16})
    even = ProblemKey("gae", 4098, 1047, "float32", "time", "none")
    assert "< 64" in impl.skip_reason(even, {**wide, "BLOCK_N": 32})
    assert impl.skip_reason(even, {**wide, "BLOCK_N": 64}) is None
    # the default keeps 64 values a thread, one environment a lane
    assert impl.default_params(odd) == {"BLOCK_N": 32, "BLOCK_T": 64, "num_warps": 1}
    # Fewer environments than a full block: the narrower block is all there is.
    assert impl.skip_reason(ProblemKey("gae", 20, 4096, "float32", "time", "none"),
                            {"BLOCK_N": 32, "BLOCK_T": 8, "num_warps": 1}) is None
    # Per-action keys lay tiles out by actions: narrow blocks stay searched.
    retrace = ProblemKey("retrace", 4096, 1024, "float32", "time", "trunc", 8)
    assert impl.skip_reason(retrace, {"BLOCK_N": 64, "BLOCK_T": 8, "num_warps": 1}) is None
    # ... unless the action pre-pass reduced them: then they load like any estimator.
    assert "lanes" in impl.skip_reason(retrace, {"BLOCK_N": 64, "BLOCK_T": 8,
                                                 "num_warps": 1, "REDUCE_A": 1})
    # 64 values a thread; 32 where a finish reads the neighbour's value (V-trace).
    assert impl.default_params(time_major) == {**wide, "BLOCK_T": 16}
    assert impl.default_params(half) == {"BLOCK_N": 256, "BLOCK_T": 8, "num_warps": 1}
    vtrace = ProblemKey("vtrace", 32768, 2048, "float32", "time", "none")
    assert impl.default_params(vtrace) == wide
    space = impl.space(time_major)
    assert 128 in space["BLOCK_N"] and space["BLOCK_T"] == [4, 8, 16, 32, 64]
    assert space["num_warps"] == [1, 2, 4]


def test_rejects_more_warps_than_rows():
    key = ProblemKey("gae", 64, 64, "float32", "time", "none")
    with pytest.raises(InvalidConfig, match="row per warp"):
        strategies()["columns"].validate(key, {"BLOCK_N": 2, "BLOCK_T": 4, "num_warps": 4})


@pytest.mark.gpu
@pytest.mark.parametrize(("algorithm", "n", "t", "dtype", "params"), [
    ("gae", 32768, 512, "float32", {"BLOCK_N": 128, "BLOCK_T": 8, "num_warps": 1}),
    ("vtrace", 24000, 300, "bfloat16", {"BLOCK_N": 512, "BLOCK_T": 4, "num_warps": 2}),
    ("eligibility_traces", 1000, 4096, "float32", {"BLOCK_N": 256, "BLOCK_T": 16, "num_warps": 2}),
    ("retrace", 4096, 256, "float32", {"BLOCK_N": 128, "BLOCK_T": 4, "num_warps": 1}),
    # warps along time: the chunk's scan crosses warps
    ("gae", 1000, 8192, "float32", {"BLOCK_N": 128, "BLOCK_T": 64, "num_warps": 4}),
    ("vtrace", 1024, 4099, "float32", {"BLOCK_N": 128, "BLOCK_T": 32, "num_warps": 2}),
])
def test_many_launches_on_gpu(algorithm, n, t, dtype, params):
    """Concurrent chunks on a GPU take every look-back path; repeated launches of one
    launcher reuse its tagged words (epochs)."""
    flags = FLAG_SETS[algorithm][-1]
    key = ProblemKey(algorithm, n, t, dtype, "time", flags, a=6 if algorithm == "retrace" else 0)
    call, kwargs = make_call(key, device="cuda", seed=21)
    want = expected(algorithm, kwargs)
    launcher = strategies()["columns"].prepare(key, params)
    for i in range(5):
        check_outputs(launcher(call), want, call, f"columns launch {i} {key.as_text()}")
