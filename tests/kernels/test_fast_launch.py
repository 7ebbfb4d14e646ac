"""The direct-launch path of :class:`FastLaunch` gives the same results as Triton's generic one."""

from __future__ import annotations

import pytest
import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.kernels import STRATEGY_NAMES, strategies
from rltriton_tune.kernels.launch import POINTER_ARGS, _aligned

from .cases import check_outputs, expected, make_call


def test_alignment_check_sees_misaligned_views():
    base = torch.zeros(64)
    pointers = [base] * POINTER_ARGS
    assert _aligned([*pointers, 3, 0.5])
    assert not _aligned([*pointers[:-1], base[1:], 3])


@pytest.mark.gpu
@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
@pytest.mark.parametrize("algorithm", ["gae", "vtrace", "retrace", "eligibility_traces"])
def test_repeated_launches_use_fresh_data(algorithm, strategy):
    """Calls after the first take the direct path: each must compute on its own inputs."""
    key = ProblemKey(algorithm, 300, 700, "float32", "env",
                     "trunc" if algorithm == "retrace" else "none",
                     a=5 if algorithm == "retrace" else 0)
    launcher = strategies()[strategy].prepare(key, {})
    for seed in range(3):
        call, kwargs = make_call(key, device="cuda", seed=seed)
        check_outputs(launcher(call), expected(algorithm, kwargs), call,
                      f"{strategy} call {seed}")


@pytest.mark.gpu
def test_misaligned_input_takes_the_generic_path():
    key = ProblemKey("gae", 64, 33, "float32", "env", "none")
    launcher = strategies()["tiled"].prepare(key, {})
    call, kwargs = make_call(key, device="cuda", seed=0)
    check_outputs(launcher(call), expected("gae", kwargs), call, "aligned")
    # Same values, but rewards now starts 4 bytes into its allocation.
    rewards = call.tensors["rewards"]
    shifted = torch.empty(rewards.numel() + 1, device="cuda")[1:].view_as(rewards)
    shifted.copy_(rewards)
    assert shifted.data_ptr() % 16
    call.tensors["rewards"] = shifted
    check_outputs(launcher(call), expected("gae", kwargs), call, "misaligned")
