"""Large problems within a modest memory budget (slow) and the CUDA-only baselines (gpu)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from rltriton_tune.estimators import prepare_call
from rltriton_tune.fallback import STRATEGIES, compiled_launcher, launch
from rltriton_tune.problems import random_inputs

from .helpers import FLAG_SETS, assert_matches, expected, make_case, make_key


@pytest.mark.slow
def test_chunked_million_steps_one_row():
    kwargs, call = make_case(make_key("gae", 1, 10**6, "bootstrap+trunc"))
    outputs = launch(call, "chunked")
    # A backward scan's last steps depend only on the inputs there: check them exactly
    # against the reference on that suffix, and the whole row against the doubling scan.
    tail = {k: v[:, -5000:] if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    assert_matches(tuple(o[:, -5000:] for o in outputs), expected("gae", tail), "float32")
    torch.testing.assert_close(outputs[0], launch(call, "doubling")[0], rtol=1e-5, atol=1e-4)


@pytest.mark.slow
def test_loop_hundred_thousand_rows():
    kwargs, call = make_case(make_key("vtrace", 100_000, 64, "bootstrap+trunc", "env"))
    assert_matches(launch(call, "loop"), expected("vtrace", kwargs), "float32")


@pytest.mark.slow
@pytest.mark.parametrize("scan", ["doubling", "associative"])
def test_compiled_baselines_on_cpu(scan):
    """torch.compile of the whole call (inductor on CPU; associative in generic mode)."""
    key = make_key("retrace", 3, 29, "trunc", "time")
    kwargs, call = make_case(key)
    assert_matches(compiled_launcher(key, scan)(call), expected("retrace", kwargs), "float32")


@pytest.mark.gpu
@pytest.mark.parametrize("algorithm, flags", [("gae", "bootstrap+trunc"), ("retrace", "trunc"),
                                              ("eligibility_traces", "seed")])
@pytest.mark.parametrize("scan", ["doubling", "associative"])
def test_compiled_baselines_on_cuda(scan, algorithm, flags):
    key = make_key(algorithm, 256, 512, flags)
    kwargs = random_inputs(key, "cuda", seed=1)
    outputs = compiled_launcher(key, scan)(prepare_call(algorithm, **kwargs))
    cpu = {k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    assert_matches(tuple(o.cpu() for o in outputs), expected(algorithm, cpu), "float32")


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["loop", "chunked", "doubling", "compile", "compile_doubling"])
def test_retrace_out_of_range_on_cuda_gives_nan_row(mode):
    key = make_key("retrace", 3, 40, "trunc")
    kwargs, call = make_case(key)
    tensors = {k: v.cuda() for k, v in call.tensors.items()}
    tensors["actions"][1, 5] = 99
    call = dataclasses.replace(call, tensors=tensors)
    q_ret, adv = STRATEGIES["torch"].prepare(key, {"mode": mode})(call)
    assert torch.isnan(q_ret[1]).all() and torch.isnan(adv[1]).all()
    want = expected("retrace", kwargs)
    torch.testing.assert_close(q_ret[0].cpu().double(), want[0][0], rtol=2e-5, atol=2e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["env", "time"])
@pytest.mark.parametrize("algorithm", ["gae", "vtrace", "retrace", "lambda_returns",
                                       "discounted_returns", "eligibility_traces",
                                       "episodic_prefix_sum"])
@pytest.mark.parametrize("mode", ["loop", "chunked", "doubling"])
def test_eager_modes_on_cuda(mode, algorithm, layout):
    """The fallback for GPUs Triton cannot serve: same numbers on CUDA tensors."""
    key = make_key(algorithm, 64, 300, FLAG_SETS[algorithm][-1], layout, "bfloat16")
    kwargs = random_inputs(key, "cuda", seed=2)
    outputs = launch(prepare_call(algorithm, **kwargs), mode)
    assert all(o.is_cuda for o in outputs)
    cpu = {k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    assert_matches(tuple(o.cpu() for o in outputs), expected(algorithm, cpu), "bfloat16")


def test_compiled_baseline_compiles_every_key_past_dynamo_default_limit(monkeypatch):
    """Each key gets its own graph: past dynamo's default recompile limit (8) the
    baseline must not fall back to eager execution (it would be timed as compiled)."""
    from torch._dynamo.utils import counters

    real_compile = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: real_compile(fn, backend="eager", **kw))
    torch._dynamo.reset()
    counters.clear()
    shapes = [(2, t) for t in range(3, 15)]  # 12 keys, one graph each
    for n, t in shapes:
        key = make_key("gae", n, t, "none", "env")
        kwargs, call = make_case(key)
        assert_matches(compiled_launcher(key, "doubling")(call), expected("gae", kwargs), "float32")
    assert counters["stats"]["unique_graphs"] == len(shapes)
    assert not torch._dynamo.config.fail_on_recompile_limit_hit  # patched only inside calls
