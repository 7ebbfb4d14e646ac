"""The look-back strategy's two ways to a chunk's carry, under the interpreter.

The interpreter runs programs one after another, so each predecessor has already
published its inclusive value; with inclusive values switched off every program
composes all its predecessors' aggregates instead, the path that concurrent
programs on a GPU take.
"""

import pytest

from rltriton_tune.call import ProblemKey
from rltriton_tune.kernels import lookback

from .cases import FLAG_SETS, check_outputs, expected, make_call


@pytest.mark.parametrize("algorithm", sorted(FLAG_SETS))
@pytest.mark.parametrize("layout", ["env", "time"])
def test_carry_from_aggregates_only(algorithm, layout, monkeypatch):
    monkeypatch.setattr(lookback, "PUBLISH_INCLUSIVE", False)
    key = ProblemKey(algorithm, 3, 29, "float32", layout, FLAG_SETS[algorithm][-1],
                     a=4 if algorithm == "retrace" else 0)
    call, kwargs = make_call(key, seed=3)
    params = {"BLOCK_N": 2, "BLOCK_T": 4, "num_warps": 1}  # 8 chunks per row block
    outs = lookback.LookbackStrategy().prepare(key, params)(call)
    check_outputs(outs, expected(algorithm, kwargs), call, f"aggregates only {key.as_text()}")


@pytest.mark.parametrize("publish_inclusive", [True, False])
def test_many_chunks_one_row(publish_inclusive, monkeypatch):
    monkeypatch.setattr(lookback, "PUBLISH_INCLUSIVE", publish_inclusive)
    key = ProblemKey("gae", 1, 1000, "float32", "env", "bootstrap+trunc")
    call, kwargs = make_call(key, seed=5)
    outs = lookback.LookbackStrategy().prepare(key, {"BLOCK_T": 8, "num_warps": 1})(call)
    check_outputs(outs, expected("gae", kwargs), call, "125 chunks")


def test_every_triton_strategy_is_searched():
    import torch

    from rltriton_tune.kernels import STRATEGY_NAMES, strategies
    from rltriton_tune.tune.space import search_strategies

    assert all(s.searchable for s in strategies().values())
    assert set(search_strategies(torch.device("cuda"))) == set(STRATEGY_NAMES)
