"""CUDA-graph safety (issue 4, item 4): every estimator, captured through the public
function, replays correctly after new data is copied into the static inputs."""

from __future__ import annotations

from contextlib import nullcontext

import pytest
import torch

from rltriton_tune import dispatch
from rltriton_tune.algorithms import ESTIMATOR_NAMES
from rltriton_tune.call import ProblemKey
from rltriton_tune.dispatch import memo
from rltriton_tune.estimators import ESTIMATORS
from rltriton_tune.problems import random_inputs
from rltriton_tune.reference import reference

KEYS = {
    "gae": ProblemKey("gae", 300, 40, flags="trunc"),
    "vtrace": ProblemKey("vtrace", 129, 33, flags="last_value"),
    "retrace": ProblemKey("retrace", 64, 20, flags="trunc", a=5),
    "lambda_returns": ProblemKey("lambda_returns", 100, 70, flags="bootstrap+trunc"),
    "discounted_returns": ProblemKey("discounted_returns", 33, 300),
    "eligibility_traces": ProblemKey("eligibility_traces", 77, 50, flags="seed"),
    "episodic_prefix_sum": ProblemKey("episodic_prefix_sum", 50, 64, flags="starts_at"),
}

#: None = dispatch's own choice; then each Triton strategy forced (split and lookback with
#: short chunks so they really split, and the look-back's zeroed flags must be part of the
#: graph; sequential on time-major inputs).
CHOICES = [None, ("flat", {}), ("tiled", {}), ("split", {"CHUNK_T": 16, "BLOCK_T": 16}),
           ("sequential", {}), ("lookback", {"BLOCK_T": 16})]


def as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


@pytest.mark.gpu
@pytest.mark.parametrize("choice", CHOICES, ids=lambda c: "dispatch" if c is None else c[0])
@pytest.mark.parametrize("algorithm", ESTIMATOR_NAMES)
def test_capture_and_replay_with_new_data(algorithm, choice):
    key = KEYS[algorithm]
    if choice is not None and choice[0] == "sequential":
        key = ProblemKey(key.algorithm, key.n, key.t, key.dtype, "time", key.flags, key.a)
    fn = ESTIMATORS[algorithm]
    static = random_inputs(key, device="cuda", seed=0)
    forcing = dispatch.force(*choice[:1], **choice[1]) if choice else None
    with forcing if forcing is not None else nullcontext():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up: decision, compile, memo
            for _ in range(2):
                fn(**static)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = as_tuple(fn(**static))
    decision = memo.decisions()[(key, torch.device("cuda", torch.cuda.current_device()))]
    if choice is not None:
        assert decision.strategy == choice[0]
    for seed in (1, 2):
        fresh = random_inputs(key, device="cuda", seed=seed)
        for name, value in fresh.items():
            if isinstance(value, torch.Tensor):
                static[name].copy_(value)
        graph.replay()
        torch.cuda.synchronize()
        want = as_tuple(reference(algorithm, **fresh))
        for got, expected in zip(captured, want, strict=True):
            torch.testing.assert_close(got.cpu().double(), expected, rtol=1e-4, atol=1e-4)

