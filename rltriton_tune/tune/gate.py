"""Correctness gate: a candidate is timed only after it reproduces the reference.

Each check runs the candidate on fresh random inputs (a rotating pool of seeds
the timing inputs never use, with every flag in every row and the clip levels
unequal) and compares with ``reference.py`` at the test suite's tolerance. Keys too big
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
#: Relative tolerance per output dtype (scaled by the output's magnitude): the kernel
#: tests' own (tests/kernels/cases.py), so a config the tuner ships is as exact as the
#: kernels are tested to be. A float32 error of 1e-4 of the outputs' scale fails.
TOLERANCE = {"float64": 1e-9, "float32": 2e-5, "float16": 2e-3, "bfloat16": 1.6e-2}
#: Against a trusted strategy instead of the float64 reference both sides carry the
#: dtype's rounding: the tolerance is this many times wider.
TRUSTED_SLACK = 2.0
#: Seeds of the gate's inputs (timing inputs use seed 0).
GATE_SEEDS = (1001, 1002)
#: Scalar arguments of the gate's inputs, one set per seed (those an estimator takes):
#: the clip levels unequal, away from 1 and in both orders, so a config that mixes
#: them up fails at every check; gamma and lambda off their defaults.
GATE_SCALARS = ({"rho_bar": 1.7, "c_bar": 0.6, "gamma": 0.9, "lambda_": 0.8},
                {"rho_bar": 0.6, "c_bar": 1.7, "gamma": 0.8, "lambda_": 0.6})


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
            dtype: str, what: str, slack: float = 1.0) -> None:
    """Raise :class:`GateFailure` unless ``outputs`` match ``expected`` within ``dtype``'s
    tolerance (times ``slack``): ``|out - ref| <= tol * (max(1, max|ref|) + |ref|)``."""
    if len(outputs) != len(expected):
        raise GateFailure(f"{what}: {len(outputs)} outputs, expected {len(expected)}")
    tol = TOLERANCE.get(dtype, TOLERANCE["float32"]) * slack
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
        for seed, scalars in zip(GATE_SEEDS, GATE_SCALARS, strict=True):
            cpu_kwargs = self._inputs(self.small, "cpu", seed, scalars)
            expected = _as_tuple(reference(self.small.algorithm, **cpu_kwargs))
            kwargs = self._inputs(self.small, self.device, seed, scalars)
            cases.append((prepare_call(self.small.algorithm, **kwargs), expected))
        return cases

    @staticmethod
    def _inputs(key: ProblemKey, device: torch.device | str, seed: int,
                scalars: dict[str, float], on_device: bool = False) -> dict:
        """``random_inputs`` with every flag in every row and the given scalars."""
        kwargs = random_inputs(key, device, seed, on_device=on_device, every_flag=True)
        kwargs.update({k: v for k, v in scalars.items() if k in key.spec.scalars})
        return kwargs

    def _full_case(self) -> tuple[Call, tuple[torch.Tensor, ...]]:
        from rltriton_tune.estimators import prepare_call

        if self._trusted is None:
            from rltriton_tune.fallback import STRATEGIES

            torch_strategy = STRATEGIES["torch"]
            self._trusted = (torch_strategy, torch_strategy.default_params(self.key))
        strategy, params = self._trusted
        kwargs = self._inputs(self.key, self.device, GATE_SEEDS[0], GATE_SCALARS[0],
                              on_device=True)
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
        compare(out, full_expected, self.key.dtype, "vs trusted strategy at full size",
                TRUSTED_SLACK)
