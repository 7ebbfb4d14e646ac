"""The configs a tuned result is compared with, measured in the same run.

CUDA: the flat heuristic (rl-triton 0.1.3's one-row-per-program flat kernel)
and torch.compile of the associative scan and of the doubling scan (the
torch.compile baseline is the faster of the two). CPU: the torch step-by-step loop.
"""

from __future__ import annotations

import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.strategy import Strategy
from rltriton_tune.tune.space import Candidate

FLAT = "flat_heuristic"
COMPILE = "torch_compile"
COMPILE_DOUBLING = "torch_compile_doubling"
LOOP = "torch_loop"


def best_compile(baselines: dict[str, float]) -> float | None:
    """The torch.compile baseline: the faster of the associative and doubling scans."""
    times = [baselines[n] for n in (COMPILE, COMPILE_DOUBLING) if baselines.get(n)]
    return min(times) if times else None


def flat_heuristic(key: ProblemKey, strategies: dict[str, Strategy]) -> Candidate | None:
    """The flat kernel with rl-triton 0.1.3's parameters for ``key.t`` and its tile order
    (a backward scan's tiles descend: ``DESCEND``), None if unavailable."""
    flat = strategies.get("flat")
    if flat is None:
        return None
    try:
        from rltriton_tune.kernels.flat import rl_triton_params
        from rltriton_tune.kernels.launch import tile_order_space

        params = {**rl_triton_params(key.t, key.algorithm),
                  **{name: 1 for name in tile_order_space(key)}}
        return Candidate("flat", dict(flat.validate(key, params)))
    except Exception:  # noqa: BLE001 - no baseline rather than no result
        return None


def _torch_mode(key: ProblemKey, strategies: dict[str, Strategy], mode: str) -> Candidate | None:
    impl = strategies.get("torch")
    if impl is None:
        return None
    try:
        params = {**impl.default_params(key), "mode": mode}
        return Candidate("torch", dict(impl.validate(key, params)))
    except Exception:  # noqa: BLE001
        return None


def baseline_candidates(key: ProblemKey, device: torch.device,
                        strategies: dict[str, Strategy]) -> dict[str, Candidate]:
    """Baseline name -> candidate, for the baselines that exist on ``device``."""
    found: dict[str, Candidate | None]
    if torch.device(device).type == "cuda":
        found = {FLAT: flat_heuristic(key, strategies),
                 COMPILE: _torch_mode(key, strategies, "compile"),
                 COMPILE_DOUBLING: _torch_mode(key, strategies, "compile_doubling")}
    else:
        found = {LOOP: _torch_mode(key, strategies, "loop")}
    return {name: cand for name, cand in found.items() if cand is not None}
