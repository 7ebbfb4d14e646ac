"""The normalised description of one estimator call, shared by every layer.

``estimators`` builds a :class:`Call` after validation; ``dispatch`` turns its
:class:`ProblemKey` into a decision; a strategy's launcher computes the outputs
from it. Nothing here touches the device.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from rltriton_tune.algorithms import ALGORITHMS, FLAG_NAMES, STARTS_AT, AlgorithmSpec

DTYPE_NAMES: dict[torch.dtype, str] = {
    torch.float32: "float32",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float64: "float64",
}
DTYPES_BY_NAME: dict[str, torch.dtype] = {name: dt for dt, name in DTYPE_NAMES.items()}

LAYOUTS = ("env", "time")


def flags_string(flags: frozenset[str] | set[str] | tuple[str, ...]) -> str:
    """Canonical text form of a flag set: sorted names joined by '+', or 'none'."""
    return "+".join(sorted(flags)) if flags else "none"


def parse_flags(text: str) -> frozenset[str]:
    """Inverse of :func:`flags_string`."""
    if text in ("", "none"):
        return frozenset()
    return frozenset(text.split("+"))


@dataclass(frozen=True)
class ProblemKey:
    """Everything that decides which kernel configuration is best (and valid).

    ``n``/``t`` are environments and steps whatever the layout; ``a`` is the
    action count for Retrace and 0 otherwise; ``flags`` is :func:`flags_string`.
    """

    algorithm: str
    n: int
    t: int
    dtype: str = "float32"
    layout: str = "env"
    flags: str = "none"
    a: int = 0

    @property
    def spec(self) -> AlgorithmSpec:
        return ALGORITHMS[self.algorithm]

    @property
    def flag_set(self) -> frozenset[str]:
        return parse_flags(self.flags)

    @property
    def time_major(self) -> bool:
        return self.layout == "time"

    @property
    def passed_tensors(self) -> tuple[str, ...]:
        """The tensor arguments a call of this key passes, in canonical order: the spec's,
        less the optional ones its flags say are absent."""
        spec, flags = self.spec, self.flag_set
        return tuple(name for name in spec.tensors
                     if name not in spec.optional or FLAG_NAMES[name] in flags)

    def family(self) -> tuple[str, str, str, str, int]:
        """The part of the key that must match exactly for a nearest-entry lookup."""
        return (self.algorithm, self.flags, self.dtype, self.layout, self.a)

    def as_text(self) -> str:
        """Stable, human-readable identifier used in profiles and logs."""
        text = f"{self.algorithm}|{self.flags}|{self.dtype}|{self.layout}|N={self.n}|T={self.t}"
        return text + (f"|A={self.a}" if self.a else "")

    @classmethod
    def from_text(cls, text: str) -> ProblemKey:
        parts = text.split("|")
        if len(parts) not in (6, 7):
            raise ValueError(f"malformed problem key {text!r}")
        algorithm, flags, dtype, layout, n, t = parts[:6]
        a = int(parts[6].removeprefix("A=")) if len(parts) == 7 else 0
        if algorithm not in ALGORITHMS or layout not in LAYOUTS or dtype not in DTYPES_BY_NAME:
            raise ValueError(f"malformed problem key {text!r}")
        spec, flag_set = ALGORITHMS[algorithm], parse_flags(flags)
        if not spec.required_flags <= flag_set <= spec.possible_flags:
            raise ValueError(f"problem key {text!r}: {algorithm} takes flags from "
                             f"{sorted(spec.possible_flags)} and always "
                             f"{sorted(spec.required_flags) or 'none'}, got {flags!r}")
        return cls(algorithm, int(n.removeprefix("N=")), int(t.removeprefix("T=")),
                   dtype, layout, flags, a)


@dataclass
class Call:
    """One validated call: inputs by canonical name, scalars, and derived facts.

    ``tensors`` holds only the inputs the caller gave, in the caller's layout
    (``[T, N]`` when ``time_major``) and never modified. ``[N, T]``-type inputs
    all share one stride pattern (contiguous in their layout). Launchers return
    outputs in the same layout, with dtype ``out_dtype``.

    ``shape`` is the caller's ``[*B, T]`` (``[T, *B]``) shape when it had other than
    one batch dim (``tensors`` then hold flattened views); the public functions
    reshape the outputs to it. ``scalars`` are floats, except 0-d tensors on the
    inputs' (non-CPU) device, which ``tensor_scalars`` flags: only the torch
    implementation reads those (without a device sync).

    The validator builds one per estimator call with positional arguments (cheaper than
    keywords), so the order of the fields is part of that contract.
    """

    algorithm: str
    tensors: dict[str, torch.Tensor]
    scalars: dict[str, float | torch.Tensor]
    n: int
    t: int
    time_major: bool = False
    a: int = 0
    starts_at: bool = False
    out_dtype: torch.dtype = torch.float32
    shape: tuple[int, ...] | None = None
    tensor_scalars: bool = False
    # Derived, so not init fields: ``dataclasses.replace`` (other tensors) starts without.
    #: The inputs' device when the builder knows it already (the validator does): read by
    #: :attr:`device` and the dispatcher's memo key instead of asking a tensor again.
    _device: torch.device | None = field(default=None, init=False, repr=False, compare=False)
    #: :attr:`key`, once computed.
    _key: ProblemKey | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def spec(self) -> AlgorithmSpec:
        return ALGORITHMS[self.algorithm]

    @property
    def device(self) -> torch.device:
        device = self._device
        return next(iter(self.tensors.values())).device if device is None else device

    def logical(self, x: torch.Tensor) -> torch.Tensor:
        """A tensor in the caller's layout (``[T, N]``, ``[T, N, A]`` when time-major) as
        logical ``[N, T]`` (``[N, T, A]``): a transposed view, its own inverse; per-env
        ``[N]`` tensors and env-major calls' tensors as they are."""
        return x.transpose(0, 1) if self.time_major and x.dim() > 1 else x

    @property
    def compute_dtype(self) -> torch.dtype:
        """float64 where any value input is float64 (SPEC: float64 inputs accumulate in
        float64, whatever the outputs' dtype), float32 otherwise (SPEC: accumulate in >=
        float32). Flags hold 0 or 1 in any dtype: a float64 mask (numpy's) asks for
        nothing more precise."""
        if self.out_dtype == torch.float64:
            return torch.float64
        spec = self.spec
        skip = (*spec.flags_inputs, *spec.integer)
        if any(x is not None and x.dtype == torch.float64 and name not in skip
               for name, x in self.tensors.items()):
            return torch.float64
        return torch.float32

    @property
    def flags(self) -> frozenset[str]:
        keyed = self.spec.keyed_inputs
        found = {FLAG_NAMES[name] for name in self.tensors if name in keyed}
        if self.starts_at:
            found.add(STARTS_AT)
        return frozenset(found)

    @property
    def key(self) -> ProblemKey:
        if self._key is None:
            self._key = ProblemKey(
                algorithm=self.algorithm,
                n=self.n,
                t=self.t,
                dtype=DTYPE_NAMES[self.out_dtype],
                layout="time" if self.time_major else "env",
                flags=flags_string(self.flags),
                a=self.a,
            )
        return self._key
