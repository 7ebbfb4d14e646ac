"""Shared helpers for the fallback tests: valid flag sets, calls, comparisons."""

from __future__ import annotations

import torch

from rltriton_tune.call import DTYPES_BY_NAME, ProblemKey
from rltriton_tune.estimators import prepare_call
from rltriton_tune.problems import random_inputs
from rltriton_tune.reference import reference

#: Every valid combination of optional inputs / options, per algorithm.
FLAG_SETS: dict[str, tuple[str, ...]] = {
    "gae": ("none", "trunc", "bootstrap", "bootstrap+trunc", "last_value", "next",
            "next+trunc"),
    "vtrace": ("none", "trunc", "bootstrap", "bootstrap+trunc", "last_value", "next",
               "next+trunc"),
    "retrace": ("trunc",),
    "lambda_returns": ("none", "trunc", "bootstrap", "bootstrap+trunc"),
    "discounted_returns": ("none", "trunc", "bootstrap", "bootstrap+trunc"),
    "eligibility_traces": ("none", "seed"),
    "episodic_prefix_sum": ("none", "seed", "starts_at", "seed+starts_at"),
}

CASES = [(alg, flags) for alg, sets in FLAG_SETS.items() for flags in sets]

#: (rtol, atol) per input dtype; SPEC targets: 2e-5 float32, 1e-9 float64, 3e-2 bfloat16.
TOLERANCES = {
    "float32": (2e-5, 2e-5),
    "float64": (1e-9, 1e-9),
    "bfloat16": (3e-2, 3e-2),
    "float16": (5e-3, 5e-3),
}


def make_key(algorithm: str, n: int, t: int, flags: str = "none", layout: str = "env",
             dtype: str = "float32") -> ProblemKey:
    return ProblemKey(algorithm, n, t, dtype=dtype, layout=layout, flags=flags,
                      a=4 if algorithm == "retrace" else 0)


def make_case(key: ProblemKey, seed: int = 0, **overrides):
    """(kwargs, call) for ``key``: random valid inputs, each flag in every row, and the
    validated call."""
    kwargs = random_inputs(key, seed=seed, every_flag=True)
    kwargs.update(overrides)
    return kwargs, prepare_call(key.algorithm, **kwargs)


def expected(algorithm: str, kwargs: dict) -> tuple[torch.Tensor, ...]:
    out = reference(algorithm, **kwargs)
    return out if isinstance(out, tuple) else (out,)


def assert_matches(outputs, wanted, dtype: str, scale: float | None = None) -> None:
    """Outputs agree with the float64 reference within the dtype's tolerance.

    Tolerances are relative to the reference's magnitude (max(|ref|, 1)), as
    for a low-precision output only relative error is meaningful.
    """
    rtol, atol = TOLERANCES[dtype]
    assert len(outputs) == len(wanted)
    for out, ref in zip(outputs, wanted, strict=True):
        assert out.dtype == DTYPES_BY_NAME[dtype]
        assert out.shape == ref.shape
        finite = ref[torch.isfinite(ref)]
        mag = scale if scale is not None else max(1.0, finite.abs().max().item()
                                                  if finite.numel() else 1.0)
        torch.testing.assert_close(out.double(), ref, rtol=rtol, atol=atol * mag,
                                   equal_nan=True)
