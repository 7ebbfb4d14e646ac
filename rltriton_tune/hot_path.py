"""The usual call's fast path: one generated function per estimator and argument pattern.

A training loop calls an estimator with the same kind of arguments every step: plain
contiguous ``[N, T]`` tensors of one device (on a GPU, the current one) and accepted
dtypes, Python-float scalars, no gradient, a decision already memoised. For such a call
the validator's general loop (``estimators._build``), the ``Call`` plumbing and the
dispatcher's wrappers cost more than the checks themselves. This module generates, per
estimator and per pattern of given inputs (which optional tensors are present, the
layout, the boundary of episodic prefix sums), one flat function that makes exactly the
checks the general path would make for that pattern and hands the inputs to the memoised
launcher. A launcher of one Triton kernel offers its whole launch as one function of the
inputs (``bind``: ``kernels.launch.FastLaunch.bind``), bound once per memo key, which
makes no ``Call`` (the workload recorder's counting wrapper offers the bound launch of
the launcher it wraps, counting its launches); any other launcher (the torch
implementations, a strategy of several kernels), and a bound launch that declines a
call, gets a ``Call`` (so failed configs and the fallback chain stay the dispatcher's).

Anything else returns None and the call takes the general path, which gives the
errors, copies non-contiguous inputs, flattens ``[*B, T]`` shapes, converts
integers and 0-d tensors, records autograd, or decides and memoises: the fast path
never raises for a bad argument and never decides. Retrace's ``[N, T, A]`` inputs get
the same shape checks, and on a CPU its actions the same range check (the general path
checks the range on CPU tensors only: elsewhere it would wait for the device).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from rltriton_tune.call import Call
from rltriton_tune.codegen import generated_function
from rltriton_tune.dispatch import forcing
from rltriton_tune.dispatch.devices import current_cuda_device
from rltriton_tune.state import STATE

#: A pattern's function: ``(values, scalar_values)`` to the outputs, or None.
Express = Callable[[tuple[Any, ...], tuple[Any, ...]], Any]


#: Shape rules of :class:`HotPath` entries: ``[N, T]``, ``[N]``, ``[N, T, A]`` (``[T, N]``
#: and ``[T, N, A]`` time-major).
SAME, ENV, ACTION = "same", "env", "action"


def _bind(key: tuple, names: tuple[str, ...], scalars: tuple[str, ...], like: str,
          single: bool) -> Callable[..., Any] | bool | None:
    """The bound launch of the memoised launcher of ``key`` (``FastLaunch.bind``), stored
    in the process state: False where the launcher offers none (a torch
    implementation, a strategy of several kernels, a recording wrapper), None (not
    stored) where the key is not memoised (yet, or any more: a reset came between)."""
    launcher = STATE.table.get(key)
    if launcher is None:
        return None
    bind = getattr(launcher, "bind", None)
    device = key[-2]  # the memo key's device: the bound launch runs on it alone
    index = device.index if device.type == "cuda" else None
    go = (bind(names, scalars, like, single, device_index=index) if bind is not None
          else None) or False
    with STATE.lock:  # not across a reset: the launcher must still be the key's
        if STATE.table.get(key) is not launcher:
            return None
        STATE.bound[key] = go
    return go


def _never(values: tuple[Any, ...], scalar_values: tuple[Any, ...]) -> None:
    return None


class HotPath:
    """The fast path of one estimator: a generated function per argument pattern.

    ``entries``: per tensor argument in canonical order ``(name, rule, accepted dtypes,
    optional)``, where ``rule`` is :data:`SAME` for ``[N, T]`` inputs, :data:`ENV` for the
    one-per-environment ones and :data:`ACTION` for ``[N, T, A]`` ones; ``actions``: the
    position of the integer action input whose range a CPU call checks, or None;
    ``check_exclusive(values)`` raises for a pattern the general path refuses.
    :meth:`function` returns what the public call runs: a generated dispatcher that picks
    the pattern's function, generating it on first use.
    """

    __slots__ = ("algorithm", "entries", "scalars", "source", "first_float", "single",
                 "check_exclusive", "actions", "_by_pattern")

    def __init__(self, algorithm: str, entries: tuple[tuple[str, str, frozenset, bool], ...],
                 scalars: tuple[str, ...], source: int, first_float: int, single: bool,
                 check_exclusive: Callable[[tuple[Any, ...]], None],
                 actions: int | None = None) -> None:
        self.algorithm = algorithm
        self.entries = entries
        self.scalars = scalars
        self.source = source
        self.first_float = first_float
        self.single = single
        self.check_exclusive = check_exclusive
        self.actions = actions
        self._by_pattern: dict[tuple[bool, ...], Express] = {}

    def function(self) -> Callable[[tuple[Any, ...], tuple[Any, ...], bool, bool], Any]:
        """``hot(values, scalar_values, time_major, starts_at)``: the outputs of the call,
        or None where it must take the general path. Generated: the pattern is read
        without a loop (which optional inputs are None; a required one that is None
        fails the pattern function's type check)."""
        optional = [i for i, entry in enumerate(self.entries) if entry[3]]
        lines = ["def hot(values, scalar_values, time_major, starts_at):",
                 # a bool, not 1 or 0: they would hash like True and False below
                 "    if time_major is not True and time_major is not False:",
                 "        return None",
                 "    pattern = (time_major, starts_at, "
                 + "".join(f"values[{i}] is None, " for i in optional) + ")",
                 "    express = by_pattern.get(pattern)",
                 "    if express is None:",
                 "        express = by_pattern[pattern] = generate(pattern)",
                 "    return express(values, scalar_values)"]
        return generated_function(lines, "hot", f"<rltriton_tune hot path {self.algorithm}>",
                                  {"by_pattern": self._by_pattern, "generate": self._generate})

    def _generate(self, pattern: tuple[bool, ...]) -> Express:
        time_major, starts_at = pattern[0], pattern[1]
        absent = [False] * len(self.entries)
        for i, missing in zip((i for i, e in enumerate(self.entries) if e[3]), pattern[2:],
                              strict=True):
            absent[i] = missing
        given = [i for i, missing in enumerate(absent) if not missing]
        if absent[self.first_float]:
            return _never
        try:
            self.check_exclusive(tuple(None if missing else True for missing in absent))
        except ValueError:
            return _never
        source = self.source
        lines = ["def express(values, scalar_values):",
                 f"    {', '.join(f'x{i}' for i in range(len(absent)))}, = values",
                 "    if " + " or ".join(f"type(x{i}) is not Tensor" for i in given) + ":",
                 "        return None",
                 # Inside try: a tensor of another layout may raise before its layout is
                 # read (a sparse CSR tensor's shape is fine, its is_contiguous raises);
                 # the general path then names the argument.
                 "    try:",
                 f"        shape = x{source}.shape",
                 "        if len(shape) != 2:",
                 "            return None",
                 f"        {'t, n' if time_major else 'n, t'} = shape",
                 "        if not n or not t:",
                 "            return None",
                 f"        device = x{source}.device",
                 "        env = (n,)"]
        per_action = [i for i in given if self.entries[i][1] == ACTION]
        if per_action:
            # A is read from the first [N, T, A] input; the others must have its shape.
            # Unpacked: a shape of another length raises, and the except below declines.
            lines += [f"        actions_shape = x{per_action[0]}.shape",
                      "        lead0, lead1, a = actions_shape",
                      f"        if lead0 != {'t' if time_major else 'n'} or "
                      f"lead1 != {'n' if time_major else 't'} or not a:",
                      "            return None"]
        expected_shape = {SAME: "shape", ENV: "env", ACTION: "actions_shape"}
        checks = []
        for i in given:
            if i != source:
                if not (per_action and i == per_action[0]):  # its shape is checked above
                    checks.append(f"x{i}.shape != {expected_shape[self.entries[i][1]]}")
                checks.append(f"x{i}.device != device")
            # Each dtype is read once: the memo key and the bound launch take it from here.
            checks.append(f"(d{i} := x{i}.dtype) not in accepted{i}")
            checks.append(f"not x{i}.is_contiguous()")
        # The layout is read on a CPU alone: elsewhere every other layout fails a check
        # above (sparse COO is never contiguous; compressed sparse layouts and strided
        # nested tensors raise on is_contiguous() or shape, jagged ones are another type),
        # and the one that passes them, mkldnn, lives on the CPU. 50 ns an input.
        layouts = " or ".join(f"x{i}.layout is not strided" for i in given)
        lines += ["        if " + " or ".join(checks) + ":",
                  "            return None",
                  "        on_cpu = device.type == 'cpu'",
                  f"        if on_cpu and ({layouts}):",
                  "            return None",
                  "    except Exception:",
                  "        return None",
                  "    if grad_enabled() and (" +
                  " or ".join(f"x{i}.requires_grad" for i in given) + "):",
                  "        return None"]
        if self.scalars:
            # One unpacking: every caller gathers scalar_values from the plan's scalars.
            lines += [f"    {''.join(f's{j}, ' for j in range(len(self.scalars)))}= scalar_values",
                      "    if " + " or ".join(f"type(s{j}) is not float or s{j} != s{j}"
                                             for j in range(len(self.scalars))) + ":",
                      "        return None"]
        if self.actions is not None and per_action:
            # The general path's range check, which it makes on CPU tensors only.
            lines += ["    if on_cpu:",
                      f"        low, high = aminmax(x{self.actions})",
                      "        if int(low) < 0 or int(high) >= a:",
                      "            return None"]
        a = "a" if per_action else "0"
        names = [self.entries[i][0] for i in given]
        tensors = ", ".join(f"{name!r}: x{i}" for name, i in zip(names, given, strict=True))
        scalars = ", ".join(f"{name!r}: s{j}" for j, name in enumerate(self.scalars))
        # The bound launch's arguments: the tensors, the scalars, then the dtypes read
        # above of every tensor but the first float one (the key's dtype, which the bound
        # launch knows), so that it reads none of them again.
        inputs = ", ".join([*(f"x{i}" for i in given),
                            *(f"s{j}" for j in range(len(self.scalars))),
                            *(f"d{i}" for i in given if i != self.first_float)])
        lines += [f"    dtype = d{self.first_float}",
                  # dispatch.run's memo key
                  f"    key = ({self.algorithm!r}, n, t, dtype, {time_major}, {a}, "
                  f"{starts_at}, {''.join(f'{name!r}, ' for name in names)}device, forced())",
                  "    go = state.bound.get(key)",
                  "    if go is None:",
                  "        go = bind(key)",
                  "    if go:",
                  f"        out = go({inputs})",
                  "        if out is not None:",
                  "            return out",
                  # Tensors on a CUDA device other than the current one (the bound
                  # launch declines them for free): the general path launches under a
                  # device guard (dispatch.run).
                  "    if device.type == 'cuda' and device.index != current_cuda_device():",
                  "        return None",
                  "    launcher = state.table.get(key)",
                  "    if launcher is None:",
                  "        return None",
                  f"    call = Call({self.algorithm!r}, {{{tensors}}}, {{{scalars}}}, n, t, "
                  f"{time_major}, {a}, {starts_at}, dtype, None, False)",
                  "    call._device = device",
                  f"    return launcher(call){'[0]' if self.single else ''}"]
        bind = partial(_bind, names=tuple(names), scalars=self.scalars,
                       like=self.entries[self.first_float][0], single=self.single)
        namespace: dict[str, Any] = {
            "Tensor": torch.Tensor, "Call": Call, "state": STATE, "strided": torch.strided,
            "bind": bind,
            "forced": forcing.current, "grad_enabled": torch.is_grad_enabled,
            "aminmax": torch.aminmax, "current_cuda_device": current_cuda_device,
            **{f"accepted{i}": self.entries[i][2] for i in given}}
        return generated_function(lines, "express",
                                  f"<rltriton_tune hot path {self.algorithm} {pattern}>",
                                  namespace)
