"""Random, valid inputs for any problem key: shared by tests, the tuner and benchmarks."""

from __future__ import annotations

from typing import Any

import torch

from rltriton_tune.algorithms import STARTS_AT
from rltriton_tune.call import DTYPES_BY_NAME, ProblemKey

#: Scalar arguments used when a caller gives none (non-trivial values, so bugs show).
DEFAULT_SCALARS: dict[str, float] = {
    "gamma": 0.97,
    "lambda_": 0.9,
    "rho_bar": 1.0,
    "c_bar": 1.0,
}

#: Probability that a random termination / truncation / done flag is set.
FLAG_RATE = 0.05


def random_inputs(
    key: ProblemKey,
    device: torch.device | str = "cpu",
    seed: int = 0,
    flag_dtype: torch.dtype = torch.float32,
    on_device: bool = False,
) -> dict[str, Any]:
    """Keyword arguments for the public function of ``key.algorithm``.

    Tensors follow the key's layout (``[T, N]`` when time-major) and dtype; the
    optional inputs present are exactly the key's flags; scalars are included.
    They are drawn on the CPU, the same for a seed on every device, unless
    ``on_device``: then ``device``'s own generator draws them there (other values,
    but gigabytes in milliseconds instead of seconds).
    """
    spec = key.spec
    dtype = DTYPES_BY_NAME[key.dtype]
    where = torch.device(device) if on_device else torch.device("cpu")
    gen = torch.Generator(device=where).manual_seed(seed)
    n, t, a = key.n, key.t, key.a
    shape = (t, n) if key.time_major else (n, t)
    flags = key.flag_set

    def normal(*size: int) -> torch.Tensor:
        return torch.randn(*size, generator=gen, dtype=torch.float32, device=where)

    def flag() -> torch.Tensor:
        return (torch.rand(*shape, generator=gen, device=where) < FLAG_RATE).to(flag_dtype)

    kwargs: dict[str, Any] = {}
    for name in key.passed_tensors:
        if name in spec.flags_inputs:
            value = flag()
        elif name in spec.per_env:
            value = normal(n)
        elif name == "action_probs_target":
            value = torch.softmax(normal(*shape, a), dim=-1)
        elif name == "next_q_values_all":
            value = normal(*shape, a)
        elif name == "action_probs_behavior":
            value = torch.rand(*shape, generator=gen, device=where) * 0.9 + 0.1
        elif name == "actions":
            value = torch.randint(0, max(a, 1), shape, generator=gen, device=where)
        elif name == "beta":  # an adjoint scan's decay: in [0, 1) like γλ(1 - done)
            value = torch.rand(*shape, generator=gen, device=where)
        elif name in ("log_pi_target", "log_pi_behavior"):
            value = normal(*shape) * 0.5 - 1.0
        else:
            value = normal(*shape)
        if value.is_floating_point() and name not in spec.flags_inputs:
            value = value.to(dtype)
        kwargs[name] = value.to(device)
    for name in spec.scalars:
        kwargs[name] = DEFAULT_SCALARS[name]
    if key.algorithm == "episodic_prefix_sum":
        kwargs["boundary"] = "starts_at" if STARTS_AT in flags else "ends_at"
    kwargs["time_major"] = key.time_major
    return kwargs


def data_bytes(key: ProblemKey, flag_itemsize: int = 4) -> int:
    """Bytes an ideal kernel moves for ``key``: each input read once, each output written once.

    Flags count ``flag_itemsize`` bytes per step (float32, as :func:`random_inputs` makes
    them by default)."""
    spec = key.spec
    elem = DTYPES_BY_NAME[key.dtype].itemsize
    nt = key.n * key.t
    total = 0
    for name in key.passed_tensors:
        if name in spec.per_env:
            total += key.n * elem
        elif name in spec.per_action:
            total += nt * key.a * elem
        elif name in spec.flags_inputs:
            total += nt * flag_itemsize
        elif name in spec.integer:
            total += nt * 8
        else:
            total += nt * elem
    return total + nt * elem * len(spec.outputs)
