"""Flags other than 0/1 mean the same on every path: non-zero (NaN included) is true.

SPEC: ``term``, ``trunc`` and ``dones`` are flags of any dtype and "non-zero means
true, on every path". Each strategy (every Triton kernel under the interpreter,
every eager torch mode) and the float64 reference get flags holding -1, 2, 0.5
(float), 2 and -3 (integer) or True (bool) where a 0/1 flag holds 1, and must give
the outputs of the 0/1 flags.
"""

from __future__ import annotations

import pytest
import torch

from rltriton_tune.algorithms import ALGORITHMS, ESTIMATOR_NAMES
from rltriton_tune.call import ProblemKey
from rltriton_tune.estimators import prepare_call
from rltriton_tune.fallback import STRATEGIES as TORCH_STRATEGIES
from rltriton_tune.fallback.torch_strategy import CPU_MODES
from rltriton_tune.kernels import strategies
from rltriton_tune.problems import random_inputs
from rltriton_tune.reference import reference

#: Where the strategies run: the GPU when there is one, else the CPU (Triton kernels in
#: the interpreter, set up by tests/conftest.py).
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

#: A flag set with every flag input of each estimator.
FLAGS = {"gae": "trunc", "vtrace": "trunc", "retrace": "trunc", "lambda_returns": "trunc",
         "discounted_returns": "trunc", "eligibility_traces": "none",
         "episodic_prefix_sum": "starts_at"}

#: Values a set flag takes, per flag dtype (cycled over the set positions). 16-bit float
#: flags come from a rollout buffer cast to half precision as a whole.
ODD_VALUES = {torch.float32: (-1.0, 2.0, 0.5), torch.float16: (-1.0, 2.0, 0.5),
              torch.bfloat16: (-1.0, 2.0, 0.5), torch.int32: (2, -3), torch.bool: (True,)}


def _keys() -> list[ProblemKey]:
    return [ProblemKey(alg, 5, 7, flags=FLAGS[alg], a=3 if alg == "retrace" else 0)
            for alg in ESTIMATOR_NAMES]


def _odd(flag: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``flag`` with each set position replaced by one of ``ODD_VALUES[dtype]``."""
    values = ODD_VALUES[dtype]
    pattern = torch.tensor([values[i % len(values)] for i in range(flag.numel())], dtype=dtype)
    return torch.where(flag != 0, pattern.view(flag.shape), torch.zeros((), dtype=dtype))


def _inputs(key: ProblemKey, dtype: torch.dtype) -> tuple[dict, dict]:
    """(kwargs with 0/1 flags, the same kwargs with odd flag values)."""
    plain = random_inputs(key, seed=3)
    flags = ALGORITHMS[key.algorithm].flags_inputs
    for name in flags:  # dense flags, so every row has several set steps
        plain[name] = (torch.rand(plain[name].shape, generator=torch.Generator().manual_seed(7))
                       < 0.4).to(torch.float32)
    odd = dict(plain)
    for name in flags:
        odd[name] = _odd(plain[name], dtype)
    return plain, odd


def _as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def _paths():
    """(label, launcher maker) of every kernel strategy and eager torch mode."""
    paths = [(name, strategy) for name, strategy in strategies().items()]
    paths += [(f"torch-{mode}", TORCH_STRATEGIES["torch"]) for mode in CPU_MODES]
    return paths


@pytest.mark.parametrize("dtype", list(ODD_VALUES), ids=str)
@pytest.mark.parametrize("key", _keys(), ids=lambda k: k.algorithm)
def test_non_zero_flags_mean_true_on_every_path(key, dtype):
    _check_every_path(key, dtype, DEVICE)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", list(ODD_VALUES), ids=str)
@pytest.mark.parametrize("key", _keys(), ids=lambda k: k.algorithm)
def test_non_zero_flags_mean_true_on_every_path_on_gpu(key, dtype):
    """The same on the GPU's compiled kernels (the suite's ``-m gpu`` run)."""
    _check_every_path(key, dtype, "cuda")


def _check_every_path(key: ProblemKey, dtype: torch.dtype, device: str) -> None:
    plain, odd = _inputs(key, dtype)
    want = _as_tuple(reference(key.algorithm, **plain))
    got_ref = _as_tuple(reference(key.algorithm, **odd))
    for w, g in zip(want, got_ref, strict=True):
        torch.testing.assert_close(g, w, msg=lambda m: f"reference: {m}")
    call = prepare_call(key.algorithm, **{k: v.to(device) if isinstance(v, torch.Tensor) else v
                                          for k, v in odd.items()})
    for label, strategy in _paths():
        params = ({"mode": label.removeprefix("torch-")} if label.startswith("torch-")
                  else strategy.default_params(call.key))
        try:
            params = strategy.validate(call.key, params)
        except Exception:  # noqa: BLE001 - a strategy without a valid config for this key
            continue
        outs = _as_tuple(strategy.prepare(call.key, params)(call))
        for out, w in zip(outs, want, strict=True):
            torch.testing.assert_close(out.double().cpu(), w, rtol=2e-5, atol=2e-5,
                                       msg=lambda m, label=label: f"{label}: {m}")
