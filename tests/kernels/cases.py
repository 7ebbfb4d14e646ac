"""Shared case generation for the kernel tests: inputs, reference and comparison."""

from __future__ import annotations

from typing import Any

import torch

from rltriton_tune.call import Call, ProblemKey
from rltriton_tune.estimators import prepare_call
from rltriton_tune.problems import random_inputs
from rltriton_tune.reference import reference

#: Every valid flag set of each estimator (last_value with truncateds, and next_values with
#: last_value or bootstrap_values, are errors). The last is the richest (tests use it).
FLAG_SETS: dict[str, list[str]] = {
    "gae": ["none", "trunc", "bootstrap", "last_value", "next", "next+trunc",
            "bootstrap+trunc"],
    "vtrace": ["none", "trunc", "bootstrap", "last_value", "next", "next+trunc",
               "bootstrap+trunc"],
    "retrace": ["trunc"],
    "lambda_returns": ["none", "trunc", "bootstrap", "bootstrap+trunc"],
    "discounted_returns": ["none", "trunc", "bootstrap", "bootstrap+trunc"],
    "eligibility_traces": ["none", "seed"],
    "episodic_prefix_sum": ["none", "seed", "starts_at", "seed+starts_at"],
    "adjoint_scan_forward": ["none"],
    "adjoint_scan_backward": ["none"],
}

#: The flag sets of the grad algorithms (the estimators' fused backward passes): those their
#: kernels read, and the boundary inputs whose gradients they write; the richest last.
GRAD_FLAG_SETS: dict[str, list[str]] = {
    "gae_grad": ["none", "trunc", "next", "next+trunc", "last_value", "bootstrap",
                 "bootstrap+trunc"],
    "vtrace_grad": ["none", "trunc", "last_value", "bootstrap", "bootstrap+trunc", "next",
                    "next+trunc"],
    "lambda_returns_grad": ["none", "trunc", "bootstrap", "bootstrap+trunc"],
    "discounted_returns_grad": ["none", "trunc", "bootstrap", "bootstrap+trunc"],
    "eligibility_traces_grad": ["none", "seed"],
    "episodic_prefix_sum_grad": ["none", "starts_at", "seed", "seed+starts_at"],
}

DTYPES = ("float32", "float16", "bfloat16")
LAYOUTS = ("env", "time")

#: Flag tensors come in several dtypes too (SPEC: float, bool or integer).
FLAG_DTYPE = {"float32": torch.float32, "float16": torch.bool, "bfloat16": torch.int32}

#: Output tolerance per input dtype (outputs are stored in the input dtype).
TOLERANCE = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 1.6e-2}


def small_params(strategy: str, t: int) -> dict[str, int]:
    """Block sizes that force several programs / tiles / chunks at the tests' tiny shapes."""
    if strategy == "flat":
        return {"BLOCK_N": 2, "num_warps": 1}
    if strategy == "tiled":
        return {"BLOCK_N": 2, "BLOCK_T": 16 if t > 16 else 4, "num_warps": 1}
    if strategy == "split":
        if t > 16:   # 5 chunks, carry composed 2 at a time
            return {"BLOCK_N": 2, "CHUNK_T": 8, "BLOCK_T": 8, "CARRY_BLOCK": 2, "num_warps": 1}
        return {"BLOCK_N": 2, "CHUNK_T": 4, "BLOCK_T": 2, "CARRY_BLOCK": 2, "num_warps": 1}
    if strategy in ("lookback", "columns"):  # 5 chunks (1 x 33), or 4 (x 7): look-backs
        return {"BLOCK_N": 2, "BLOCK_T": 8 if t > 16 else 2, "num_warps": 1}
    return {"BLOCK_N": 8 if t > 16 else 2, "num_warps": 1}


def make_call(key: ProblemKey, device: str = "cpu", seed: int = 0, **scalars: float
              ) -> tuple[Call, dict[str, Any]]:
    """A validated Call for ``key`` on ``device`` and the public kwargs it came from.

    Every row holds each of the key's flags (``every_flag``): a case named "trunc" has
    truncations, and every row group of a kernel sees an episode boundary. ``scalars``
    replace the default scalar arguments."""
    kwargs = random_inputs(key, device=device, seed=seed, flag_dtype=FLAG_DTYPE[key.dtype],
                           every_flag=True)
    if key.algorithm == "retrace":
        kwargs["gamma"] = 0.95
    kwargs.update(scalars)
    call = prepare_call(key.algorithm, **kwargs)
    assert call is not None and call.key == key, (call and call.key, key)
    return call, kwargs


def expected(algorithm: str, kwargs: dict[str, Any]) -> tuple[torch.Tensor, ...]:
    """float64 reference outputs on the CPU, always as a tuple."""
    cpu = {k: (v.cpu() if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()}
    out = reference(algorithm, **cpu)
    return out if isinstance(out, tuple) else (out,)


def check_outputs(outs: tuple[torch.Tensor, ...], ref: tuple[torch.Tensor, ...], call: Call,
                  what: str) -> None:
    """Outputs have the call's dtype, layout and shape, and match the reference."""
    assert len(outs) == len(ref), what
    tol = TOLERANCE[call.key.dtype]
    for out, want in zip(outs, ref, strict=True):
        assert out.dtype == call.out_dtype, what
        assert out.shape == want.shape, (what, out.shape, want.shape)
        scale = 1.0 + want.nan_to_num(0, 0, 0).abs().max().item() if want.numel() else 1.0
        torch.testing.assert_close(out.double().cpu(), want, rtol=tol, atol=tol * scale,
                                   equal_nan=True, msg=lambda m: f"{what}: {m}")
