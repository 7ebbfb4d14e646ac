"""The "torch" strategy: the CPU modes (and the CUDA compile baseline) behind the
:class:`~rltriton_tune.strategy.Strategy` protocol, for dispatch and the tuner."""

from __future__ import annotations

from typing import Any

import torch

from rltriton_tune.call import Call, ProblemKey
from rltriton_tune.fallback import run, scans
from rltriton_tune.fallback.compiled import compile_usable, compiled_launcher
from rltriton_tune.strategy import InvalidConfig, Launcher, Params

#: Modes that run everywhere, in eager torch.
CPU_MODES = ("loop", "chunked", "doubling")
#: Compiled modes (CUDA only): torch.compile of the associative scan, and of the
#: log-depth doubling scan.
COMPILE_MODES = {"compile": "associative", "compile_doubling": "doubling"}
#: All modes.
MODES = (*CPU_MODES, *COMPILE_MODES)

#: Chunk sizes the tuner tries for "chunked" (powers of two below T).
CHUNK_CHOICES = tuple(1 << k for k in range(3, 13))


def _modes() -> tuple[str, ...]:
    return MODES if compile_usable() else CPU_MODES


def default_mode(n: int, t: int) -> str:
    """Eager mode for (N, T), from whole-call timings of GAE (``python -m
    rltriton_tune.tune.cpu_modes --threads 1``, both layouts) on this project's
    2-core CPU, torch 2.13, 2026-11-30 (a shared machine: numbers within ~30%):

    - N <= 256: doubling wins from T = 64 on (N=1, T=16384: 0.3 ms vs chunked
      1.7 ms vs loop 89 ms; N=16, T=8192: 1.0 / 2.1 / 47 ms; N=256, T=128:
      0.22 / 0.34 / 0.52 ms) and ties at T = 8; N=1, T=10^6: doubling 19-29 ms,
      chunked 83-98 ms.
    - N >= 4096: the loop wins or ties while T is short (N=4096, T=32: loop
      0.41 ms, chunked 0.51, doubling 0.53; N=32768, T=8: 0.67 / 0.92 / 0.88;
      N=100000, T=64: 46 / 48 / 52 time-major): doubling's log2(T) whole-tensor
      passes cost more than T cheap steps once each step is large; chunked ties
      the loop (N=4096, T=512: 25-35 vs 28-32 ms) and takes over for long T.

    One thread is also how these modes run below 4M elements per operation
    (:mod:`rltriton_tune.fallback.threads`), so the choice holds when other
    processes share the cores.
    """
    if n >= 2048:
        return "loop" if t <= 1024 else "chunked"
    return "doubling"


class TorchStrategy:
    """Torch implementations of every estimator; ``params = {"mode", "chunk"}``."""

    name = "torch"
    searchable = True

    def available(self, device: torch.device) -> bool:
        return True

    def space(self, key: ProblemKey) -> dict[str, list[Any]]:
        chunks = [c for c in CHUNK_CHOICES if c < key.t] or [scans.default_chunk(key.t)]
        return {"mode": list(_modes()), "chunk": chunks}

    def skip_reason(self, key: ProblemKey, params: Params,
                    sm_count: int | None = None) -> str | None:
        return None

    def validate(self, key: ProblemKey, params: Params) -> Params:
        unknown = set(params) - {"mode", "chunk"}
        if unknown:
            raise InvalidConfig(f"torch strategy: unknown parameter(s) {sorted(unknown)}")
        mode = params.get("mode", self.default_params(key)["mode"])
        if mode not in MODES:
            raise InvalidConfig(f"torch strategy: mode must be one of {MODES}, got {mode!r}")
        if mode in COMPILE_MODES and not compile_usable():
            raise InvalidConfig(f"torch strategy: mode {mode!r} needs CUDA and torch.compile")
        if mode != "chunked":
            return {"mode": mode}
        chunk = params.get("chunk")
        if chunk is None:
            chunk = scans.default_chunk(key.t)
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 2:
            raise InvalidConfig(f"torch strategy: chunk must be an integer >= 2, got {chunk!r}")
        return {"mode": mode, "chunk": chunk}

    def default_params(self, key: ProblemKey) -> Params:
        mode = default_mode(key.n, key.t)
        if mode == "chunked":
            return {"mode": mode, "chunk": scans.default_chunk(key.t)}
        return {"mode": mode}

    def transfer(self, source: ProblemKey, target: ProblemKey,
                 params: Params) -> tuple[str, Params]:
        return self.name, dict(params)  # modes and chunk sizes are re-validated for the target

    def prepare(self, key: ProblemKey, params: Params) -> Launcher:
        p = self.validate(key, params)
        mode = p["mode"]
        if mode == "chunked":
            chunk = p["chunk"]
            return lambda call: run.chunked(call, chunk)
        if mode in COMPILE_MODES:
            return compiled_launcher(key, COMPILE_MODES[mode])
        return _EAGER[mode]


_EAGER: dict[str, Launcher] = {"loop": run.loop, "doubling": run.doubling}


def launch(call: Call, mode: str = "doubling", chunk: int | None = None) -> tuple:
    """Run ``call`` with an eager mode directly (no validation beyond the mode name)."""
    if mode == "chunked":
        return run.chunked(call, chunk)
    if mode not in _EAGER:
        raise ValueError(f"mode must be one of {CPU_MODES}, got {mode!r}")
    return _EAGER[mode](call)
