"""The correctness gate is as strict as the tests: a config off by 1e-4 never ships.

(The gate's search-space neighbours and small-key rules are tested in
test_space_gate_measure.py.)
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from rltriton_tune.call import Call, ProblemKey
from rltriton_tune.fallback import STRATEGIES
from rltriton_tune.kernels import strategies
from rltriton_tune.strategy import Launcher, Params
from rltriton_tune.tune import gate as gate_mod
from rltriton_tune.tune.gate import Gate, GateFailure, compare

CPU = torch.device("cpu")
TORCH = STRATEGIES["torch"]

#: The kernel tests' tolerance per dtype (tests/kernels/cases.py): the gate's may not be wider.
TEST_TOLERANCE = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 1.6e-2}


class Off:
    """The torch strategy with its outputs moved by ``rel`` of their scale: everywhere
    (``where="all"``: each output times 1 + rel) or at one element (by rel x max|out|)."""

    name = "torch"

    def __init__(self, rel: float, where: str = "all") -> None:
        self.rel, self.where = rel, where

    def validate(self, key: ProblemKey, params: Params) -> Params:
        return TORCH.validate(key, params)

    def prepare(self, key: ProblemKey, params: Params) -> Launcher:
        inner = TORCH.prepare(key, params)

        def launch(call: Call) -> tuple[torch.Tensor, ...]:
            outs = tuple(o.clone() for o in inner(call))
            for out in outs:
                if self.where == "all":
                    out.mul_(1 + self.rel)
                else:   # the last element: the end of the last row
                    flat = out.view(-1)
                    flat[-1] += self.rel * float(out.abs().max())
            return outs

        return launch


class SwapsClips:
    """The torch strategy run with ``rho_bar`` and ``c_bar`` exchanged."""

    name = "torch"

    def validate(self, key: ProblemKey, params: Params) -> Params:
        return TORCH.validate(key, params)

    def prepare(self, key: ProblemKey, params: Params) -> Launcher:
        inner = TORCH.prepare(key, params)

        def launch(call: Call) -> tuple[torch.Tensor, ...]:
            s = call.scalars
            return inner(replace(call, scalars=dict(s, rho_bar=s["c_bar"], c_bar=s["rho_bar"])))

        return launch


def _key(algorithm: str, dtype: str = "float32", layout: str = "env") -> ProblemKey:
    """A small key (checked against the reference) with the algorithm's richest flags."""
    flags = {"retrace": "trunc", "episodic_prefix_sum": "seed+starts_at",
             "eligibility_traces": "seed"}.get(algorithm, "bootstrap+trunc")
    return ProblemKey(algorithm, 6, 20, dtype, layout, flags, a=4 if algorithm == "retrace" else 0)


ALGORITHMS = ["gae", "vtrace", "retrace", "lambda_returns", "discounted_returns",
              "eligibility_traces", "episodic_prefix_sum"]


def test_gate_tolerance_is_no_wider_than_the_tests():
    for dtype, tol in TEST_TOLERANCE.items():
        assert gate_mod.TOLERANCE[dtype] <= tol, dtype


@pytest.mark.parametrize("where", ["all", "one"])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_float32_config_off_by_1e4_is_rejected(algorithm, where):
    gate = Gate(_key(algorithm), CPU)
    for _ in gate_mod.GATE_SEEDS:   # every case of the rotation rejects it
        with pytest.raises(GateFailure, match="vs reference"):
            gate.check(Off(1e-4, where), {"mode": "doubling"})


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_config_off_by_a_few_tolerances_is_rejected(dtype):
    """Off by 5x the tests' tolerance (1% in float16, 8% in bfloat16): rejected, though
    the gate's earlier tolerances (1e-2 and 3e-2 of twice the scale) let both through."""
    gate = Gate(_key("vtrace", dtype), CPU)
    for _ in gate_mod.GATE_SEEDS:
        with pytest.raises(GateFailure):
            gate.check(Off(5 * TEST_TOLERANCE[dtype]), {"mode": "doubling"})


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_correct_configs_pass(algorithm, dtype):
    """Every eager mode of the torch strategy passes, on every case of the rotation."""
    gate = Gate(_key(algorithm, dtype, "time" if dtype == "float16" else "env"), CPU)
    for mode in ("loop", "chunked", "doubling"):
        for _ in gate_mod.GATE_SEEDS:
            gate.check(TORCH, {"mode": mode})
    gate.check(Off(TEST_TOLERANCE[dtype] / 20), {"mode": "doubling"})   # within tolerance


#: Small blocks: several programs and tiles at 3 x 12, and quick in the interpreter.
TRITON_PARAMS = {
    "flat": {"BLOCK_N": 2, "num_warps": 1},
    "tiled": {"BLOCK_N": 2, "BLOCK_T": 4, "num_warps": 1},
    "split": {"BLOCK_N": 2, "CHUNK_T": 4, "BLOCK_T": 2, "CARRY_BLOCK": 2, "num_warps": 1},
    "sequential": {"BLOCK_N": 2, "num_warps": 1},
    "lookback": {"BLOCK_N": 2, "BLOCK_T": 4, "num_warps": 1},
    "columns": {"BLOCK_N": 2, "BLOCK_T": 4, "num_warps": 1},
}


@pytest.mark.skipif(not strategies(), reason="Triton is not installed")
@pytest.mark.parametrize(("algorithm", "dtype"), [("vtrace", "float32"), ("retrace", "bfloat16")])
def test_triton_configs_pass_under_the_interpreter(algorithm, dtype):
    """Real Triton kernels pass the gate at its tolerance (the strategies take turns on
    the rotation's cases)."""
    key = ProblemKey(algorithm, 3, 12, dtype, "env", "trunc", a=3 if algorithm == "retrace"
                     else 0)
    gate = Gate(key, CPU)
    assert sorted(TRITON_PARAMS) == sorted(strategies())
    for name, strategy in strategies().items():   # each on one case of the rotation
        gate.check(strategy, TRITON_PARAMS[name])


@pytest.mark.parametrize("algorithm", ["vtrace", "retrace"])
def test_swapped_clip_levels_fail_every_check(algorithm):
    gate = Gate(_key(algorithm), CPU)
    for _ in gate_mod.GATE_SEEDS:
        with pytest.raises(GateFailure):
            gate.check(SwapsClips(), {"mode": "doubling"})


def test_gate_inputs_hold_every_flag_and_the_unequal_clips():
    gate = Gate(_key("vtrace"), CPU)
    cases = gate._make_cases()
    assert len(cases) == len(gate_mod.GATE_SEEDS)
    clips = set()
    for call, _ in cases:
        for name in ("terminateds", "truncateds"):
            assert bool((call.tensors[name].float().sum(1) >= 1).all()), name
        clips.add((call.scalars["rho_bar"], call.scalars["c_bar"]))
    assert clips == {(1.7, 0.6), (0.6, 1.7)}


def test_trusted_comparisons_allow_both_sides_rounding():
    """Against a trusted strategy (both in float32) twice the tolerance; against the
    float64 reference the tolerance itself."""
    ref = (torch.full((2, 3), 1.0, dtype=torch.float64),)
    # The bound is 2e-5 x (max(1, max|ref|) + |ref|) = 4e-5 here, 8e-5 against a trusted one.
    near = (torch.full((2, 3), 1.0 + 6e-5),)
    with pytest.raises(GateFailure, match="tolerance 2e-05"):
        compare(near, ref, "float32", "x")
    compare(near, ref, "float32", "x", slack=gate_mod.TRUSTED_SLACK)
    with pytest.raises(GateFailure):
        compare((torch.full((2, 3), 1.0 + 1e-4),), ref, "float32", "x",
                slack=gate_mod.TRUSTED_SLACK)


@pytest.mark.parametrize(("algorithm", "flags"), [
    ("gae_grad", "next+trunc"), ("gae_grad", "trunc"), ("lambda_returns_grad", "trunc"),
    ("discounted_returns_grad", "trunc"), ("eligibility_traces_grad", "none"),
    ("episodic_prefix_sum_grad", "starts_at")])
def test_grad_algorithms_are_gated_like_the_estimators(algorithm, flags):
    """The backward passes' own problems can be tuned: correct configs pass the gate,
    one off by 1e-4 is rejected."""
    gate = Gate(ProblemKey(algorithm, 6, 20, "float32", "env", flags), CPU)
    gate.check(TORCH, {"mode": "doubling"})
    with pytest.raises(GateFailure, match="vs reference"):
        gate.check(Off(1e-4), {"mode": "doubling"})
