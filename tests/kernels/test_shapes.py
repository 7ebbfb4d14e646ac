"""kernels/shapes.py: configs sized from the shape alone, and the stage-buffer estimate
that keeps shared-memory-bound configs out of searches."""

from __future__ import annotations

import pytest

from rltriton_tune.call import ProblemKey
from rltriton_tune.kernels.shapes import (
    SHARED_BYTES,
    lane_elems,
    stage_buffer_bytes,
    time_major_columns,
)


def _key(text: str) -> ProblemKey:
    return ProblemKey.from_text(text)


@pytest.mark.parametrize(("text", "sm_count", "want"), [
    # one warp of 16-byte vectors of columns: 128 float32, 256 bfloat16
    ("gae|none|float32|time|N=32768|T=2048", None, (128, 8)),
    ("gae|none|bfloat16|time|N=32768|T=2048", None, (256, 8)),
    # two programs per SM: 32768 / 264 = 124 -> 64 rows; 16384 / 264 = 62 -> 32;
    # 8192 / 264 = 31 -> 16; 4096 / 264 = 15 -> 8; 2048 / 264 = 7 -> 8 (at least)
    ("gae|none|float32|time|N=32768|T=2048", 132, (64, 16)),
    ("gae|none|float32|time|N=16384|T=2048", 132, (32, 32)),
    ("gae|none|float32|time|N=8192|T=2048", 132, (16, 32)),
    ("gae|none|float32|time|N=4096|T=2048", 132, (8, 64)),
    ("gae|none|float32|time|N=2048|T=2048", 132, (8, 64)),
    ("gae|none|bfloat16|time|N=4096|T=2048", 132, (8, 64)),
    # small keys: the key's own rows and steps
    ("gae|none|float32|time|N=20|T=5", 132, (8, 8)),
])
def test_time_major_columns(text, sm_count, want):
    params = time_major_columns(_key(text), sm_count)
    assert (params["BLOCK_N"], params["BLOCK_T"]) == want
    assert params["num_warps"] == 1 and params["num_stages"] == 3


@pytest.mark.parametrize(("n", "dtype", "want"), [
    (4096, "float32", 4), (4100, "float32", 4), (4098, "float32", 2), (4745, "float32", 1),
    (4096, "bfloat16", 8), (4100, "bfloat16", 4), (4745, "bfloat16", 1), (1, "float32", 1),
])
def test_lane_elems_is_the_vector_the_environment_count_allows(n, dtype, want):
    """A thread's widest load along a time-major step: a 16-byte vector, capped by the
    power of two dividing N (step t's row starts t * N elements in)."""
    assert lane_elems(_key(f"gae|none|{dtype}|time|N={n}|T=64")) == want


def test_stage_buffers_count_per_step_inputs_and_a_neighbour():
    gae = _key("gae|none|float32|env|N=4096|T=8192")  # rewards, values, terminateds
    assert stage_buffer_bytes(gae, 1024, 1) == 0
    assert stage_buffer_bytes(gae, 1024, 3) == 2 * 1024 * 4 * 4
    # last_value is one value an environment: no per-step buffer
    assert stage_buffer_bytes(_key("gae|last_value|float32|env|N=4096|T=8192"), 1024, 3) == \
        stage_buffer_bytes(gae, 1024, 3)
    # Retrace's two per-action inputs load in an inner loop: 8 passed, 6 counted, + 1
    retrace = _key("retrace|trunc|float32|time|N=4096|T=2048|A=8")
    assert len(retrace.passed_tensors) == 8
    assert stage_buffer_bytes(retrace, 1024, 2) == 1024 * 4 * 7


def test_searches_skip_configs_whose_stage_buffers_exceed_shared_memory():
    from rltriton_tune.kernels import strategies

    triton_strategies = strategies()
    key = _key("gae|none|float32|env|N=4096|T=8192")
    tiled = triton_strategies["tiled"]
    big = {"BLOCK_N": 8, "BLOCK_T": 1024, "num_warps": 16, "num_stages": 3}
    assert stage_buffer_bytes(key, 8 * 1024, 3) > SHARED_BYTES
    assert "shared memory" in tiled.skip_reason(key, tiled.validate(key, big))
    assert tiled.skip_reason(key, tiled.validate(key, {**big, "num_stages": 1})) is None
    split = triton_strategies["split"]
    time_major = _key("vtrace|none|float32|time|N=64|T=32768")
    wide = {"BLOCK_N": 16, "BLOCK_T": 1024, "CHUNK_T": 1024, "CARRY_BLOCK": 16,
            "num_warps": 8, "num_stages": 3}
    assert "shared memory" in split.skip_reason(time_major, split.validate(time_major, wide))
