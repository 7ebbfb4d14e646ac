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
    *,
    every_flag: bool = False,
) -> dict[str, Any]:
    """Keyword arguments for the public function of ``key.algorithm``.

    Tensors follow the key's layout (``[T, N]`` when time-major) and dtype; the
    optional inputs present are exactly the key's flags; scalars are included.
    They are drawn on the CPU, the same for a seed on every device, unless
    ``on_device``: then ``device``'s own generator draws them there (other values,
    but gigabytes in milliseconds instead of seconds).

    Flags are set at random (:data:`FLAG_RATE`), so a small problem may have none.
    With ``every_flag`` each row also gets set flags of its own (see
    :func:`_plant_flags`): a termination and an effective truncation (when the key has
    truncations), hence an episode boundary, some on the first and last steps. These
    are drawn after everything else, so the other inputs stay those of the seed.
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
    if every_flag:
        _plant_flags(kwargs, key, gen, where)
    for name in spec.scalars:
        kwargs[name] = DEFAULT_SCALARS[name]
    if STARTS_AT in spec.options:
        kwargs["boundary"] = "starts_at" if STARTS_AT in flags else "ends_at"
    kwargs["time_major"] = key.time_major
    return kwargs


def _plant_flags(kwargs: dict[str, Any], key: ProblemKey, gen: torch.Generator,
                 where: torch.device) -> None:
    """Set a flag in every row of each flag input of ``kwargs`` (in place).

    The first flag input (terminations, or the forward estimators' ``dones``) gets one
    at step 0 of rows 0, 3, 6..., at step T-1 of rows 1, 4, 7... and at a random step of
    the others; truncations go to another step of the same row (T-1, 0 and random), and
    the termination there is cleared so that the truncation counts. With T = 1 and both
    inputs the rows take turns: terminations in even rows, truncations in odd ones.
    """
    names = [name for name in key.passed_tensors if name in key.spec.flags_inputs]
    n, t = key.n, key.t
    if not names or n == 0 or t == 0:
        return
    rows = torch.arange(n, device=where)
    if t == 1:   # one step: a truncation there would be no truncation in the same row
        steps = torch.zeros(2, n, dtype=torch.long, device=where)
        chosen = [rows % len(names) == 0, rows % 2 == 1]
    else:
        edge = rows % 3
        first = torch.where(edge == 0, 0, torch.where(edge == 1, t - 1, torch.randint(
            0, t, (n,), generator=gen, device=where)))
        shift = torch.where(edge == 0, t - 1, torch.where(edge == 1, 1, torch.randint(
            1, t, (n,), generator=gen, device=where)))
        steps = torch.stack([first, (first + shift) % t])
        chosen = [rows >= 0, rows >= 0]
    by_row = {name: kwargs[name].t() if key.time_major else kwargs[name]   # [N, T] views
              for name in names}
    for i, name in enumerate(names):
        device = kwargs[name].device
        at_rows, at_steps = rows[chosen[i]].to(device), steps[i][chosen[i]].to(device)
        by_row[name][at_rows, at_steps] = 1
        for earlier in names[:i]:   # a truncation where no termination is
            by_row[earlier][at_rows, at_steps] = 0


def data_bytes(key: ProblemKey, flag_itemsize: int = 4) -> int:
    """Bytes an ideal kernel moves for ``key``: each input read once, each output written once.

    Flags count ``flag_itemsize`` bytes per step (float32, as :func:`random_inputs` makes
    them by default). A grad algorithm's boundary input is not read, but its gradient, of
    the same size, is written: counted once as the input (twice where the grad algorithm
    reads it too, V-trace's)."""
    spec = key.spec
    elem = DTYPES_BY_NAME[key.dtype].itemsize
    nt = key.n * key.t
    total = 0
    boundary_reads = {name for name in spec.boundary_grads if spec.reads_boundary}
    for name in key.passed_tensors:
        if name in boundary_reads:                       # read, and its gradient written
            total += key.n * elem if name in spec.per_env else nt * elem
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
