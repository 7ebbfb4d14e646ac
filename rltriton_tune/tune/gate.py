"""Correctness gate: a candidate is timed only after it reproduces the reference.

Each check runs the candidate on fresh random inputs (a rotating pool of seeds
the timing inputs never use) and compares with ``reference.py``. Keys too big
for the float64 Python reference are checked on a small copy of the key (same
algorithm, flags, dtype and layout at a capped size) and, at the real shape,
against a trusted strategy (the torch fallback) on the same device.
"""

from __future__ import annotations

import math
import threading
from dataclasses import replace

import torch

from rltriton_tune.call import Call, ProblemKey
from rltriton_tune.problems import random_inputs
from rltriton_tune.strategy import InvalidConfig, Params, Strategy

#: Largest N*T checked directly against the float64 reference.
CAP_ELEMS = 1 << 16
#: Longest T of the small copy of a huge key.
T_CAP = 2048
#: Relative tolerance per output dtype (scaled by the output's magnitude).
TOLERANCE = {"float64": 1e-9, "float32": 1e-3, "float16": 1e-2, "bfloat16": 3e-2}
#: Seeds of the gate's inputs (timing inputs use seed 0).
GATE_SEEDS = (1001, 1002)


class GateFailure(Exception):
    """A candidate produced wrong results (the message says where)."""


#: A capped size keeps the original's residue modulo this (16 for the row axis, 256
#: for the contiguous one; see :func:`small_key`).
ROW_RESIDUE, CONTIGUOUS_RESIDUE = 16, 256


def _capped(size: int, cap: int, modulus: int) -> int:
    """The largest size up to ``cap`` congruent to ``size`` modulo ``modulus`` (and not 1
    unless ``size`` is), else ``cap``: ``size`` itself when it fits."""
    if size <= cap:
        return size
    best = cap - (cap - size) % modulus
    return best if best >= 2 else max(1, cap)


def small_key(key: ProblemKey) -> ProblemKey:
    """``key`` itself if the reference can check it quickly, else a capped copy.

    The copy keeps the sizes' residues where it can: modulo 16 for the row axis and 256
    for the contiguous one (T env-major, N time-major). Triton specialises a kernel on
    integers divisible by 16 and the launchers divide the contiguous axis by its
    power-of-two part up to 16, so the copy's launch then compiles the same binary as
    the key's own, and a gate compiles each config once instead of twice.
    """
    if key.n * key.t <= CAP_ELEMS:
        return key
    t_mod, n_mod = ((ROW_RESIDUE, CONTIGUOUS_RESIDUE) if key.time_major
                    else (CONTIGUOUS_RESIDUE, ROW_RESIDUE))
    t = _capped(key.t, T_CAP, t_mod)
    n = _capped(key.n, max(1, CAP_ELEMS // t), n_mod)
    return replace(key, n=n, t=t)


def _as_tuple(x: torch.Tensor | tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    return x if isinstance(x, tuple) else (x,)


def compare(outputs: tuple[torch.Tensor, ...], expected: tuple[torch.Tensor, ...],
            dtype: str, what: str) -> None:
    """Raise :class:`GateFailure` unless ``outputs`` match ``expected`` within tolerance."""
    if len(outputs) != len(expected):
        raise GateFailure(f"{what}: {len(outputs)} outputs, expected {len(expected)}")
    tol = TOLERANCE.get(dtype, 1e-3)
    for i, (out, ref) in enumerate(zip(outputs, expected, strict=False)):
        if tuple(out.shape) != tuple(ref.shape):
            raise GateFailure(f"{what}: output {i} has shape {tuple(out.shape)}, "
                              f"expected {tuple(ref.shape)}")
        got = out.detach().to(torch.float64)  # compared on the output's device
        want = ref.detach().to(got.device, torch.float64)
        if got.numel() == 0:
            continue
        scale = max(1.0, float(want.abs().max()))
        err = (got - want).abs()
        bad = ~(err <= tol * (scale + want.abs()))  # NaN counts as bad
        if bool(bad.any()):
            worst = float(err[~torch.isnan(err)].max()) if not bool(torch.isnan(err).all()) \
                else math.nan
            raise GateFailure(f"{what}: output {i} differs at {int(bad.sum())} of "
                              f"{got.numel()} elements (max error {worst:.3g}, "
                              f"tolerance {tol:g} x {scale:.3g})")


class Gate:
    """Checks candidates of one key on one device against the reference."""

    def __init__(self, key: ProblemKey, device: torch.device,
                 trusted: tuple[Strategy, Params] | None = None) -> None:
        self.key = key
        self.device = torch.device(device)
        self.small = small_key(key)
        self._trusted = trusted
        self._lock = threading.Lock()
        self._cases: list[tuple[Call, tuple[torch.Tensor, ...]]] | None = None
        self._full: tuple[Call, tuple[torch.Tensor, ...]] | None = None
        self._turn = 0

    def _make_cases(self) -> list[tuple[Call, tuple[torch.Tensor, ...]]]:
        from rltriton_tune.estimators import prepare_call
        from rltriton_tune.reference import reference

        cases = []
        for seed in GATE_SEEDS:
            cpu_kwargs = random_inputs(self.small, "cpu", seed)
            expected = _as_tuple(reference(self.small.algorithm, **cpu_kwargs))
            kwargs = random_inputs(self.small, self.device, seed)
            cases.append((prepare_call(self.small.algorithm, **kwargs), expected))
        return cases

    def _full_case(self) -> tuple[Call, tuple[torch.Tensor, ...]]:
        from rltriton_tune.estimators import prepare_call

        if self._trusted is None:
            from rltriton_tune.fallback import STRATEGIES

            torch_strategy = STRATEGIES["torch"]
            self._trusted = (torch_strategy, torch_strategy.default_params(self.key))
        strategy, params = self._trusted
        kwargs = random_inputs(self.key, self.device, GATE_SEEDS[0], on_device=True)
        call = prepare_call(self.key.algorithm, **kwargs)
        expected = tuple(o.clone() for o in strategy.prepare(self.key, params)(call))
        return call, expected

    def forget_full(self) -> None:
        """Drop the full-size inputs and expected outputs (rebuilt by the next check)."""
        with self._lock:
            self._full = None

    def check(self, strategy: Strategy, params: Params) -> None:
        """Raise :class:`GateFailure` (wrong results) or any error the candidate raises."""
        with self._lock:
            if self._cases is None:
                self._cases = self._make_cases()
            call, expected = self._cases[self._turn % len(self._cases)]
            self._turn += 1
        if self.small == self.key:
            out = _as_tuple(strategy.prepare(self.key, params)(call))
            compare(out, expected, self.key.dtype, "vs reference")
            return
        try:
            small_params = strategy.validate(self.small, params)
        except InvalidConfig:
            small_params = None  # the config only exists at full size: full check only
        if small_params is not None:
            out = _as_tuple(strategy.prepare(self.small, small_params)(call))
            compare(out, expected, self.key.dtype,
                    f"vs reference at N={self.small.n} T={self.small.t}")
        with self._lock:
            if self._full is None:
                self._full = self._full_case()
            full_call, full_expected = self._full
        out = _as_tuple(strategy.prepare(self.key, params)(full_call))
        compare(out, full_expected, self.key.dtype, "vs trusted strategy at full size")
