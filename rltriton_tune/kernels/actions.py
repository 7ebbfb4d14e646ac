"""Retrace's action pre-pass: the ``[N, T, A]`` inputs reduced to two ``[N, T]`` ones.

Retrace reads ``action_probs_target`` and ``next_q_values_all`` (``[N, T, A]``), for
the expectation ``EQ[t] = sum_a pi[t, a] * next_q[t, a]`` and the ratio
``pi[t, actions[t]] / mu[t]``. Everything else about it is an ``[N, T]`` scan like
V-trace's. Inside a scan those ``A``-wide rows are read by the scan's programs, which
are few for some shapes (time-major keys give one program a block of columns for every
step), so the largest inputs are read with the scan's parallelism. This pass computes
both per step with one program per block of steps, a pointwise job over contiguous
memory in either layout, and stores them in float32; the scan then runs with
``BLOCK_A = 0`` (``builders._retrace_parts``), reading them as ``[N, T]`` inputs.

It costs one write and one read of two ``[N, T]`` float32 arrays (``2 * 8`` bytes a
step) on top of the inputs, against ``A`` times ``2 * itemsize`` bytes a step that the
scan no longer reads. Strategies take it as the ``REDUCE_A`` parameter of Retrace keys
(:func:`reduce_actions_space`), so tuning decides where it pays.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from rltriton_tune.call import ProblemKey
from rltriton_tune.kernels.scan import block_indices
from rltriton_tune.pow2 import next_pow2

#: Elements of one program's ``[steps, actions]`` tile: a pointwise pass over contiguous
#: memory, sized like an elementwise kernel's block.
TILE = 4096
#: Most actions one tile spans; wider rows are summed in chunks of this many.
MAX_BLOCK_A = 128
NUM_WARPS = 4


def reduce_actions_space(key: ProblemKey) -> dict[str, list[int]]:
    """The ``REDUCE_A`` choices of a key: ``[0, 1]`` for keys with an action axis
    (Retrace), none otherwise. 0 reads the ``[N, T, A]`` inputs inside the scan."""
    return {"REDUCE_A": [0, 1]} if key.a else {}


def reads_actions(key: ProblemKey, params: dict[str, Any]) -> bool:
    """Whether the scan of ``params`` reads ``key``'s ``[N, T, A]`` inputs itself (a
    Retrace key without the pre-pass), whose loads lay tiles out by actions."""
    return bool(key.a) and not params.get("REDUCE_A")


def reduce_actions_default(key: ProblemKey) -> dict[str, int]:
    """``REDUCE_A`` off for keys with an action axis: the kernels as they were tuned."""
    return {"REDUCE_A": 0} if key.a else {}


@triton.jit
def expectation_kernel(PI, MU, NQ, ACT, RATIO, EQ, P, A: tl.constexpr, BLOCK_P: tl.constexpr,
                       BLOCK_A: tl.constexpr, BIG: tl.constexpr):
    """For steps ``p`` of the flattened ``[N, T]`` (either layout: the per-action inputs
    are contiguous, ``A`` elements a step): ``RATIO[p] = PI[p, actions[p]] / MU[p]``
    (NaN for an action outside ``[0, A)``, never an out-of-bounds read) and
    ``EQ[p] = sum_a PI[p, a] * NQ[p, a]``, both float32. ``A`` is a constexpr so that the
    compiler sees each ``[BLOCK_P, A]`` tile as contiguous: 16-byte loads (compiled for
    sm_90, float32 A = 8: 68 scalar loads with ``A`` a runtime argument)."""
    p = block_indices(tl.program_id(0), BLOCK_P, BIG)
    m = p < P
    eq = tl.zeros([BLOCK_P], tl.float32)
    for a0 in range(0, A, BLOCK_A):
        ai = a0 + tl.arange(0, BLOCK_A)
        ma = m[:, None] & (ai < A)[None, :]
        off = p[:, None] * A + ai[None, :]
        pi = tl.load(PI + off, mask=ma, other=0).to(tl.float32)
        nq = tl.load(NQ + off, mask=ma, other=0).to(tl.float32)
        eq += tl.sum(pi * nq, axis=1)
    act = tl.load(ACT + p, mask=m, other=0).to(tl.int64)
    inside = (act >= 0) & (act < A)
    pi_a = tl.load(PI + p * A + act, mask=m & inside, other=0)
    pi_a = tl.where(inside, pi_a.to(tl.float32), float("nan"))
    mu = tl.load(MU + p, mask=m, other=1).to(tl.float32)
    tl.store(RATIO + p, pi_a / mu, mask=m)
    tl.store(EQ + p, eq, mask=m)


class ActionPass:
    """The pre-pass of one Retrace key: ``run(tensors)`` returns ``tensors`` with the
    two ``[N, T, A]`` inputs replaced by their ``[N, T]`` reductions (fresh float32
    tensors shaped like ``actions``); the inputs are not modified."""

    def __init__(self, key: ProblemKey, big: bool, launch: Any) -> None:
        """``launch``: the launch class (``launch.FastLaunch``) to run the kernel with."""
        steps = key.n * key.t
        block_a = min(next_pow2(key.a), MAX_BLOCK_A)
        block_p = max(1, min(next_pow2(steps), TILE // block_a))
        self._steps = steps
        self._kernel = launch(expectation_kernel, (triton.cdiv(steps, block_p),),
                              dict(A=key.a, BLOCK_P=block_p, BLOCK_A=block_a, BIG=big,
                                   num_warps=NUM_WARPS, num_stages=1), leading=6)

    def run(self, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        actions = tensors["actions"]
        ratio = torch.empty(actions.shape, dtype=torch.float32, device=actions.device)
        eq = torch.empty(actions.shape, dtype=torch.float32, device=actions.device)
        pi = tensors["action_probs_target"]
        self._kernel([pi, tensors["action_probs_behavior"], tensors["next_q_values_all"],
                      actions, ratio, eq, self._steps])
        return {**tensors, "action_probs_target": ratio, "next_q_values_all": eq}
