"""``explain``: what dispatch would run for a problem, and why, without running it."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from rltriton_tune.algorithms import ALGORITHMS, FLAG_NAMES
from rltriton_tune.call import DTYPES_BY_NAME, LAYOUTS, ProblemKey, flags_string, parse_flags
from rltriton_tune.dispatch import forcing
from rltriton_tune.dispatch.decide import Decision, decide
from rltriton_tune.state import check_environment

#: Indirection so tests can pretend a GPU exists.
cuda_available = torch.cuda.is_available


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return value


def _flags(algorithm: str, flags: str | Iterable[str] | None) -> str:
    spec = ALGORITHMS[algorithm]
    allowed, required = spec.possible_flags, spec.required_flags
    if flags is None:
        given: frozenset[str] = frozenset()
    elif isinstance(flags, str):
        given = parse_flags(flags.strip())
    else:
        given = frozenset(flags)
    unknown = sorted(f for f in given if f not in allowed)
    if unknown:
        raise ValueError(f"flags {unknown} are not valid for {algorithm!r}; allowed: "
                         f"{', '.join(sorted(allowed)) or 'none'}")
    # The estimators' own rule: last_value stands for bootstrap values, alone.
    last, boot, trunc = (FLAG_NAMES[n] for n in ("last_value", "bootstrap_values", "truncateds"))
    if last in given and boot in given:
        raise ValueError(f"flags: give {last} or {boot}, not both")
    if last in given and trunc in given | required:
        raise ValueError(f"flags: {last} cannot be combined with {trunc}; use {boot} instead")
    return flags_string(given | required)


def problem_key(algorithm: str, N: int, T: int, *, dtype: str | torch.dtype = "float32",
                layout: str = "env", flags: str | Iterable[str] | None = None,
                A: int = 0) -> ProblemKey:
    """Build and validate a :class:`ProblemKey` from user-facing arguments."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; expected one of "
                         f"{', '.join(ALGORITHMS)}")
    n, t = _positive_int("N", N), _positive_int("T", T)
    if isinstance(dtype, torch.dtype):
        names = {v: k for k, v in DTYPES_BY_NAME.items()}
        if dtype not in names:
            raise ValueError(f"dtype {dtype} is not supported")
        dtype = names[dtype]
    if dtype not in DTYPES_BY_NAME:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPES_BY_NAME)}")
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; expected one of {', '.join(LAYOUTS)}")
    if algorithm == "retrace":
        a = _positive_int("A", A)
    elif A:
        raise ValueError(f"A (action count) applies only to 'retrace', got A={A} for "
                         f"{algorithm!r}")
    else:
        a = 0
    return ProblemKey(algorithm, n, t, dtype, layout, _flags(algorithm, flags), a)


def explain(algorithm: str, N: int, T: int, *, dtype: str | torch.dtype = "float32",
            layout: str = "env", flags: str | Iterable[str] | None = None, A: int = 0,
            device: torch.device | str | None = None) -> Decision:
    """The decision dispatch takes for this problem on ``device`` (default: the current
    CUDA device, else CPU), honouring ``force`` and ``RLTRITON_TUNE_FORCE``. Never tunes.

    ``flags`` is text like ``"trunc+bootstrap"`` or an iterable of flag names.
    """
    key = problem_key(algorithm, N, T, dtype=dtype, layout=layout, flags=flags, A=A)
    if device is None:
        device = torch.device("cuda") if cuda_available() else torch.device("cpu")
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device {device!r} is not a valid torch device: {exc}") from None
    if device.type == "cuda" and not cuda_available():
        raise ValueError(f"device {str(device)!r} requested but CUDA is not available")
    check_environment()
    return decide(key, device, forcing.effective(forcing.current()))
