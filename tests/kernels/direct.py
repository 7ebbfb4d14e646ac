"""Triton's direct launch path on the CPU: the real kernels, run by the interpreter behind
the compiled-launch interface that :class:`~rltriton_tune.kernels.launch.FastLaunch`
calls on a GPU, so that its direct path and the bound launches of the usual call's fast
path (``FastLaunch.bind``) run in CPU tests with the real argument lists."""

from __future__ import annotations

import importlib

import torch

from rltriton_tune.kernels import STRATEGY_NAMES
from rltriton_tune.kernels import launch as launch_module
from rltriton_tune.kernels.launch import POINTER_ARGS, FastLaunch

#: Tensors by address: the direct path passes addresses, the interpreter needs tensors.
TENSORS_BY_ADDRESS: dict[int, torch.Tensor] = {}


def _register(*tensors: object) -> None:
    TENSORS_BY_ADDRESS.update((x.data_ptr(), x) for x in tensors if isinstance(x, torch.Tensor))


class InterpretedBinary:
    """A real kernel behind Triton's compiled-launch interface, run by the interpreter:
    ``run`` takes the direct path's positional arguments and binds them to the kernel's
    parameter names, so an argument out of place shows as wrong numbers or an error."""

    function, packed_metadata = "fn", "meta"

    def __init__(self, kernel, options, log):
        self.kernel, self.options, self.log = kernel, options, log

    def run(self, gx, gy, gz, stream, function, metadata, launch_metadata, enter, exit_,
            *args):
        assert (stream, function, metadata) == (0, "fn", "meta")
        assert (launch_metadata, enter, exit_) == (None, None, None)
        self.log.append("direct")
        args = [*(None if a is None else TENSORS_BY_ADDRESS[a] for a in args[:POINTER_ARGS]),
                *args[POINTER_ARGS:]]
        named = dict(zip(self.kernel.arg_names, args, strict=True))
        self.kernel[(gx, gy, gz)](**named, **self.options)


class Interpreted:
    """A JIT kernel whose generic launch runs in the interpreter and returns a binary."""

    def __init__(self, kernel, log):
        self.kernel, self.log = kernel, log
        self.arg_names = kernel.arg_names

    def __getitem__(self, grid):
        def generic(*args, **consts):
            self.log.append("generic")
            self.kernel[grid](*args, **consts)
            options = {k: v for k, v in consts.items() if k not in self.arg_names}
            return InterpretedBinary(self.kernel, options, self.log)
        return generic


def install_direct_on_cpu(monkeypatch) -> list[list[str]]:
    """Make every strategy's FastLaunch take its direct path on CPU tensors (the kernels
    run in the interpreter either way); returns the launch log of each FastLaunch made
    ("generic" or "direct" per launch)."""
    logs: list[list[str]] = []

    class DirectOnCpu(FastLaunch):
        def __init__(self, kernel, grid, consts, pointers=None, slots=None, **kwargs):
            logs.append([])
            interpreting = launch_module.interpreting
            launch_module.interpreting = lambda: False   # only while deciding the path
            try:
                super().__init__(Interpreted(kernel, logs[-1]), grid, consts, pointers, slots,
                                 **kwargs)
            finally:
                launch_module.interpreting = interpreting
            assert self._direct, "the kernel's constexprs are not the signature's tail"

        def __call__(self, args):
            _register(*args[:POINTER_ARGS])
            super().__call__(args)

        def bind(self, *args, **kwargs):
            go = super().bind(*args, **kwargs)
            if go is None:
                return None

            def registered(*inputs):
                _register(*inputs)
                return go(*inputs)

            return registered

    for name in STRATEGY_NAMES:
        module = importlib.import_module(f"rltriton_tune.kernels.{name}")
        if hasattr(module, "FastLaunch"):  # columns launches through lookback's launcher
            monkeypatch.setattr(module, "FastLaunch", DirectOnCpu)
    # A bound launch allocates its outputs itself (empty_like or new_empty of an input).
    new_empty, empty_like = torch.Tensor.new_empty, torch.empty_like

    def registered_new_empty(self, *args, **kwargs):
        out = new_empty(self, *args, **kwargs)
        _register(out)
        return out

    def registered_empty_like(*args, **kwargs):
        out = empty_like(*args, **kwargs)
        _register(out)
        return out

    monkeypatch.setattr(torch.Tensor, "new_empty", registered_new_empty)
    monkeypatch.setattr(torch, "empty_like", registered_empty_like)
    monkeypatch.setattr(launch_module, "current_stream", lambda device: 0)
    monkeypatch.setattr(launch_module, "current_device", lambda: 0)
    return logs
