"""Fused coefficient builders: one per estimator, shared by every scan core.

Each builder is a pair of ``@triton.jit`` functions with one uniform signature,
passed to the scan cores as constexpr arguments:

* ``coeffs(...) -> (alpha, beta)`` for a tile of ``rows`` x ``ts`` indices
  (broadcastable int tensors, ``[BLOCK_N, 1]`` and ``[1, BLOCK_T]``), in float32,
  with every boundary value (bootstrap, ``last_value``, seed) folded into
  ``alpha`` so that a scan starting from a zero carry is exact. Positions outside
  ``[0, N) x [0, T)`` give ``alpha = beta = 0``.
* ``finish(..., y, y_next)`` stores the output(s) of the tile from the scan value
  ``y`` and, for builders declared ``next_value``, ``y_next``: the scan value at the
  neighbour the carry comes from (``y[t+1]`` backward). Others get ``y_next = y``.

The cores compute ``y[t] = alpha[t] + beta[t] * y[t+1]`` (backward) or
``y[t] = alpha[t] + beta[t] * y[t-1]`` (forward). V-trace and Retrace need
``D[t+1]`` for their second output. Retrace scans ``D`` itself and takes ``D[t+1]`` as
``y_next``; V-trace recovers it from ``D[t]`` by the recurrence where its scalars allow
(:func:`vtrace_finish`) and takes ``y_next`` elsewhere (its builder's ``exact`` variant,
:func:`vtrace_next_finish`). (A shifted recurrence ``E[t] = D[t+1]``, coefficients read
at ``t + 1``, would need no neighbour value, but its loads start one element past a
vector boundary: scalar loads, which left bfloat16 V-trace issue-bound; Retrace's
``delta`` sums ``pi * next_q`` over the ``[N, T, A]`` rows, which it would read twice.)
``finish`` re-reads the per-step inputs it needs (cache hits).

Pointer slots ``P0..P9`` hold the algorithm's tensors in the order of
``ALGORITHMS[name].tensors``, and ``O0..O3`` its outputs; ``S0..S3`` its scalars in
``spec.scalars`` order. An absent optional input and an unused slot are None, a
constexpr: a builder touches such a slot only under the flag that says it is given.
``[N, T]`` inputs share the strides ``(sn, st)``, ``[N]`` inputs use ``se``,
``[N, T, A]`` inputs use ``(san, sat, saa)``, outputs ``(osn, ost)``. Flags:
``F_TRUNC`` (truncateds given), ``F_BOOT`` (bootstrap_values given), ``F_ENV``
(last_value or seed_values given), ``F_STARTS`` (prefix sum with boundary="starts_at"). GAE's and
V-trace's ``next_values`` excludes ``bootstrap_values`` and ``last_value``: the
launcher passes it in the ``bootstrap_values`` slot with ``F_BOOT`` and ``F_ENV``
both set, a pair the other two never make (:func:`_next_given`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import triton
import triton.language as tl

# --------------------------------------------------------------------------- helpers


@triton.jit
def _valid(rows, ts, N, T):
    """Whether (rows, ts) lies inside ``[0, N) x [0, T)``."""
    return (rows < N) & (ts >= 0) & (ts < T)


@triton.jit
def _ld(ptr, rows, ts, sn, st, mask):
    """Load an ``[N, T]`` input at (rows, ts) upcast to float32 (0 where masked)."""
    return tl.load(ptr + rows * sn + ts * st, mask=mask, other=0).to(tl.float32)


@triton.jit
def _ld_next(ptr, rows, ts, T, sn, st, mask):
    """:func:`_ld` at step ``ts + 1`` (0 at the last step): the pointer moves one step, so
    each element's address is its step's plus one stride, computed with it (sm_90, flat
    GAE 333x150: 8 instructions fewer than an index ``ts + 1`` of its own)."""
    return _ld(ptr + st, rows, ts, sn, st, mask & (ts < T - 1))


@triton.jit
def _is_set(ptr, rows, ts, sn, st, mask):
    """Load a flag input as a bool: non-zero (NaN included) means true (SPEC)."""
    return tl.load(ptr + rows * sn + ts * st, mask=mask, other=0) != 0


@triton.jit
def _flag(ptr, rows, ts, sn, st, mask):
    """Load a flag input as float32 0/1 (see :func:`_is_set`). A select, not a cast of
    the bool: the same values, and Triton's interpreter casts the bool of a 16-bit float
    comparison with the wrong element size."""
    return tl.where(_is_set(ptr, rows, ts, sn, st, mask), 1.0, 0.0)


@triton.jit
def _unless(flag, value):
    """``value * (1 - flag)`` for a bool ``flag`` and a scalar or tensor ``value``: one
    select per element instead of a subtraction and a product. ``value * 0.0`` (once a
    program for a scalar) keeps the product's float where the flag is set (NaN for an
    infinite value, as the recurrence says)."""
    return tl.where(flag, value * 0.0, value)


@triton.jit
def _when(flag, value):
    """``value * flag`` for a bool ``flag`` and a scalar ``value`` (see :func:`_unless`)."""
    return tl.where(flag, value, value * 0.0)


@triton.jit
def _ld_env(ptr, rows, se, N):
    """Load a per-env ``[N]`` input as float32, one value a row (``[BLOCK_N, 1]``; callers
    broadcast it over time). Masked by the rows alone: a mask over the tile's steps would
    make a ``[BLOCK_N, BLOCK_T]`` load of one address a row, for which Triton 3.6 picks
    another register layout than the tile's and converts every input tile through shared
    memory (flat GAE 24000x300 with ``last_value``: 11 barriers instead of 1)."""
    return tl.load(ptr + rows * se, mask=rows < N, other=0).to(tl.float32)


@triton.jit
def _clip(x, hi):
    """min(x, hi) that propagates NaN like torch.clamp(max=)."""
    return tl.where(x > hi, hi, x)


@triton.jit
def _store(ptr, rows, ts, osn, ost, value, mask):
    tl.store(ptr + rows * osn + ts * ost, value.to(ptr.dtype.element_ty), mask=mask)


@triton.jit
def _store_env(ptr, rows, ts, step, value, mask):
    """Store a per-env ``[N]`` output from the tile's column at ``step`` (once a row)."""
    tl.store(ptr + rows + ts * 0, value.to(ptr.dtype.element_ty), mask=mask & (ts == step))


@triton.jit
def _next_given(F_BOOT: tl.constexpr, F_ENV: tl.constexpr):
    """GAE / V-trace: whether the bootstrap slot holds ``next_values`` (see the module doc)."""
    return F_BOOT and F_ENV


@triton.jit
def _bootstrap_and_done(P_TRUNC, P_BOOT, P_LAST, rows, ts, N, T, sn, st, se, term, m,
                        F_TRUNC: tl.constexpr, F_BOOT: tl.constexpr, F_ENV: tl.constexpr):
    """(b, done, cut) at ts for the bool ``term``: done (bool) is term or trunc; cut marks
    t == T-1 or trunc[t] (nv = b there). Absent inputs add no work: no truncations, no
    loads or ors; no bootstrap value, zeros.

    Every caller takes ``bootstrap_values`` where cut and nowhere else (``tl.where(cut,
    b, ...)``), so their values at other steps, NaN included, never reach a result.
    Without truncations cut is the last step alone, and b is read there alone (0
    elsewhere): a masked-off load fetches no memory, where a full-tile read would move a
    whole ``[N, T]`` input for one step (H100, the dispatched configs: GAE with bootstrap
    values at 1.02-1.04x the flags-none time, V-trace at 1.00-1.03x, for 1.14-1.25x the bytes).
    With truncations the full tile is read: a mask by them, known only from the data,
    splits each vector load of b into one load an element (time-major flat GAE, 16 rows
    on 4 warps: 144 loads a thread instead of 96) and was slower on the H100 (V-trace
    24000x300 88.5 -> 107.2 µs, 4096x512 time-major 32.3 -> 36.3 µs).
    ``next_values`` (the same slot with F_ENV, :func:`_next_given`) is read at every
    step."""
    last = ts == T - 1
    if F_TRUNC:
        trunc = _is_set(P_TRUNC, rows, ts, sn, st, m)
        done = term | trunc
        cut = last | trunc
    else:
        done = term
        cut = last
    if F_BOOT and not F_ENV and not F_TRUNC:
        b = _ld(P_BOOT, rows, ts, sn, st, m & last)
    elif F_BOOT:
        b = _ld(P_BOOT, rows, ts, sn, st, m)
    elif F_ENV:
        b = tl.where(last, _ld_env(P_LAST, rows, se, N), 0.0)
    else:
        b = tl.zeros(m.shape, tl.float32)
    return b, done, cut


# The finish of every single-output estimator: store the scan value.


@triton.jit
def store_finish(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, rows, ts, y, y_next, N, T,
                 A, sn, st, se, san, sat, saa, osn, ost, S0, S1, S2, S3, F_TRUNC: tl.constexpr,
                 F_BOOT: tl.constexpr, F_ENV: tl.constexpr, F_STARTS: tl.constexpr,
                 BLOCK_A: tl.constexpr):
    _store(O0, rows, ts, osn, ost, y, _valid(rows, ts, N, T))


# --------------------------------------------------------------------------- GAE
# slots: rewards, values, terminateds, truncateds, bootstrap_values, last_value
# scalars: gamma, lambda_


@triton.jit
def gae_coeffs(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, rows, ts, N, T, A, sn, st, se, san, sat, saa,
               S0, S1, S2, S3, F_TRUNC: tl.constexpr, F_BOOT: tl.constexpr, F_ENV: tl.constexpr,
               F_STARTS: tl.constexpr, BLOCK_A: tl.constexpr):
    m = _valid(rows, ts, N, T)
    r = _ld(P0, rows, ts, sn, st, m)
    v = _ld(P1, rows, ts, sn, st, m)
    term = _is_set(P2, rows, ts, sn, st, m)
    b, done, cut = _bootstrap_and_done(P3, P4, P5, rows, ts, N, T, sn, st, se, term, m,
                                       F_TRUNC, F_BOOT, F_ENV)
    if _next_given(F_BOOT, F_ENV):
        nv = b                                     # next_values[t] at every step
    else:
        nv = tl.where(cut, b, _ld_next(P1, rows, ts, T, sn, st, m))
    alpha = r + _unless(term, S0) * nv - v
    beta = _unless(done, S0 * S1)
    return tl.where(m, alpha, 0.0), tl.where(m, beta, 0.0)


# --------------------------------------------------------------------------- V-trace
# slots: log_pi_target, log_pi_behavior, values, rewards, terminateds, truncateds,
#        bootstrap_values, last_value
# scalars: gamma, rho_bar, c_bar


@triton.jit
def _vtrace_parts(P0, P1, P2, P3, P4, P5, P6, P7, rows, ts, N, T, sn, st, se, S0, S1, S2,
                  F_TRUNC: tl.constexpr, F_BOOT: tl.constexpr, F_ENV: tl.constexpr):
    m = _valid(rows, ts, N, T)
    ratio = tl.exp(_ld(P0, rows, ts, sn, st, m) - _ld(P1, rows, ts, sn, st, m))
    rho = _clip(ratio, S1)
    c = _clip(ratio, S2)
    v = _ld(P2, rows, ts, sn, st, m)
    r = _ld(P3, rows, ts, sn, st, m)
    term = _is_set(P4, rows, ts, sn, st, m)
    b, done, cut = _bootstrap_and_done(P5, P6, P7, rows, ts, N, T, sn, st, se, term, m,
                                       F_TRUNC, F_BOOT, F_ENV)
    v_next = _ld_next(P2, rows, ts, T, sn, st, m)
    if _next_given(F_BOOT, F_ENV):
        nv = b           # next_values[t] at every step; finish's vs[t+1] stays v_next + D
    else:
        nv = tl.where(cut, b, v_next)
    delta = rho * (r + _unless(term, S0) * nv - v)
    # c is data (an overflowing ratio is inf): _unless keeps inf * 0 = NaN.
    beta = _unless(done, S0 * c)
    delta = tl.where(m, delta, 0.0)
    beta = tl.where(m, beta, 0.0)
    return delta, beta, rho, c, r, v, v_next, term, b, cut, m


@triton.jit
def vtrace_coeffs(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, rows, ts, N, T, A, sn, st, se, san, sat,
                  saa, S0, S1, S2, S3, F_TRUNC: tl.constexpr, F_BOOT: tl.constexpr,
                  F_ENV: tl.constexpr, F_STARTS: tl.constexpr, BLOCK_A: tl.constexpr):
    # D[t] = vs[t] - values[t] = delta[t] + beta[t] * D[t+1] (the exact finish also
    # gets D[t+1]).
    delta, beta, _, _, _, _, _, _, _, _, _ = _vtrace_parts(
        P0, P1, P2, P3, P4, P5, P6, P7, rows, ts, N, T, sn, st, se, S0, S1, S2,
        F_TRUNC, F_BOOT, F_ENV)
    return delta, beta


@triton.jit
def vtrace_finish(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, rows, ts, y, y_next, N, T,
                  A, sn, st, se, san, sat, saa, osn, ost, S0, S1, S2, S3, F_TRUNC: tl.constexpr,
                  F_BOOT: tl.constexpr, F_ENV: tl.constexpr, F_STARTS: tl.constexpr,
                  BLOCK_A: tl.constexpr):
    # y = D[t]. Where the episode goes on (not cut, not term), the recurrence gives
    # gamma * D[t+1] = (D[t] - delta[t]) / c[t], so the advantage needs no D[t+1] from the
    # core: adv = rho * (r + gamma * (1 - term) * (cut ? b : v_next) - v) + rho * that.
    # Elsewhere beta = 0 and D[t] = delta[t]: the term is 0, set so where D[t] is not
    # finite (cut: the reference takes b, whatever D[t+1] holds; an infinite delta:
    # inf - inf). Where c = 0 the ratio is 0 and so is rho (vtrace_by_division_serves
    # keeps both bars >= 0): rho times the term is 0, or NaN where D[t] is. Exact in real
    # numbers; in float32 the subtraction's rounding is scaled by rho / c <= max(1,
    # rho_bar / c_bar), which the guard bounds.
    delta, _, rho, c, r, v, v_next, term, b, cut, m = _vtrace_parts(
        P0, P1, P2, P3, P4, P5, P6, P7, rows, ts, N, T, sn, st, se, S0, S1, S2,
        F_TRUNC, F_BOOT, F_ENV)
    carried = tl.where(cut | (y == delta), 0.0, y - delta) / tl.where(c > 0, c, 1.0)
    adv = rho * (r + _unless(term, S0) * tl.where(cut, b, v_next) - v + carried)
    _store(O0, rows, ts, osn, ost, v + y, m)
    _store(O1, rows, ts, osn, ost, adv, m)


@triton.jit
def vtrace_next_finish(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, rows, ts, y, y_next,
                       N, T, A, sn, st, se, san, sat, saa, osn, ost, S0, S1, S2, S3,
                       F_TRUNC: tl.constexpr, F_BOOT: tl.constexpr, F_ENV: tl.constexpr,
                       F_STARTS: tl.constexpr, BLOCK_A: tl.constexpr):
    # The advantage from D[t+1] itself (y_next): for bars vtrace_finish does not serve.
    _, _, rho, _, r, v, v_next, term, b, cut, m = _vtrace_parts(
        P0, P1, P2, P3, P4, P5, P6, P7, rows, ts, N, T, sn, st, se, S0, S1, S2,
        F_TRUNC, F_BOOT, F_ENV)
    vs = v + y                                     # y = D[t], y_next = D[t+1]
    nvs = tl.where(cut, b, v_next + y_next)        # vs[t+1] = values[t+1] + D[t+1]
    adv = rho * (r + _unless(term, S0) * nvs - v)
    _store(O0, rows, ts, osn, ost, vs, m)
    _store(O1, rows, ts, osn, ost, adv, m)


#: The largest rho_bar / c_bar that V-trace's division finish serves: its rounding error
#: is at most this many times the error of D[t] itself. Interpreter float32 tests against
#: the float64 reference pass at 16 and fail at 1e5 (1e-3 absolute off).
VTRACE_BAR_RATIO = 16.0
#: The largest float32: a larger c_bar reaches the kernel as inf.
FLOAT32_MAX = 3.4028234663852886e38


def vtrace_by_division_serves(gamma: float, rho_bar: float, c_bar: float) -> bool:
    """Whether :func:`vtrace_finish` serves these scalars: gamma finite (an infinite one
    makes D[t] NaN at every step, where the reference's advantage takes b or v[t+1]),
    c_bar positive and finite in float32 (at c = 0 or inf the division loses D[t+1]),
    rho_bar not negative (a ratio of 0 must give rho = 0) and at most VTRACE_BAR_RATIO
    times c_bar; :func:`vtrace_next_finish` serves the rest. Where gamma * c * D[t+1]
    overflows float32, vs[t] is inf, and the advantage there is inf too rather than the
    reference's finite value."""
    return (math.isfinite(gamma) and 0.0 < c_bar <= FLOAT32_MAX
            and 0.0 <= rho_bar <= VTRACE_BAR_RATIO * c_bar)


# --------------------------------------------------------------------------- Retrace
# slots: action_probs_target, action_probs_behavior, q_values, next_q_values_all,
#        actions, rewards, terminateds, truncateds
# scalars: gamma, lambda_, c_bar, rho_bar
# BLOCK_A == 0: the action pre-pass (``kernels.actions``) has reduced the [N, T, A] inputs:
# P0 holds pi_a / mu and P3 the expectation EQ, both [N, T] with the strides (sn, st).


@triton.jit
def _retrace_ratio(P0, P1, P4, rows, ts, m, A, sn, st, san, sat, saa, BLOCK_A: tl.constexpr):
    """pi_a / mu at ts where ``m`` (NaN for an action outside [0, A); never an
    out-of-bounds read). With ``BLOCK_A == 0`` the action pre-pass has stored it in P0."""
    if BLOCK_A == 0:
        return _ld(P0, rows, ts, sn, st, m)
    act = tl.load(P4 + rows * sn + ts * st, mask=m, other=0).to(tl.int64)
    inside = (act >= 0) & (act < A)
    pi_a = tl.load(P0 + rows * san + ts * sat + act * saa, mask=m & inside, other=0)
    pi_a = tl.where(inside, pi_a.to(tl.float32), float("nan"))
    mu = tl.load(P1 + rows * sn + ts * st, mask=m, other=1).to(tl.float32)
    return pi_a / mu


@triton.jit
def _retrace_parts(P0, P1, P2, P3, P4, P5, P6, P7, rows, ts, N, T, A, sn, st, san, sat, saa,
                   S0, S1, S2, S3, F_TRUNC: tl.constexpr, BLOCK_A: tl.constexpr):
    m = _valid(rows, ts, N, T)
    if BLOCK_A == 0:  # the action pre-pass stored EQ in P3
        eq = _ld(P3, rows, ts, sn, st, m)
    else:
        # EQ[t] = sum_a pi[t, a] * next_q[t, a], over A in chunks of BLOCK_A.
        base = (rows * san + ts * sat)[:, :, None]
        m3 = m[:, :, None]
        eq = tl.zeros(m.shape, tl.float32)
        for a0 in range(0, A, BLOCK_A):
            ai = (a0 + tl.arange(0, BLOCK_A))[None, None, :]
            ma = m3 & (ai < A)
            off = base + ai * saa
            pi = tl.load(P0 + off, mask=ma, other=0).to(tl.float32)
            nq = tl.load(P3 + off, mask=ma, other=0).to(tl.float32)
            eq += tl.sum(pi * nq, axis=2)
    q = _ld(P2, rows, ts, sn, st, m)
    r = _ld(P5, rows, ts, sn, st, m)
    term = _is_set(P6, rows, ts, sn, st, m)
    if F_TRUNC:
        done = term | _is_set(P7, rows, ts, sn, st, m)
    else:
        done = term
    m_next = m & (ts + 1 < T)
    ratio_next = _retrace_ratio(P0, P1, P4, rows, ts + 1, m_next, A, sn, st, san, sat, saa,
                                BLOCK_A)
    c_next = tl.where(m_next, S1 * _clip(ratio_next, S2), 0.0)     # c[T] = 0
    delta = tl.where(m, r + _unless(term, S0) * eq - q, 0.0)
    # c_next is data (mu = 0 makes it inf): _unless keeps inf * 0 = NaN.
    beta = tl.where(m, _unless(done, S0 * c_next), 0.0)
    return delta, beta, q, r, term, m


@triton.jit
def retrace_coeffs(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, rows, ts, N, T, A, sn, st, se, san, sat,
                   saa, S0, S1, S2, S3, F_TRUNC: tl.constexpr, F_BOOT: tl.constexpr,
                   F_ENV: tl.constexpr, F_STARTS: tl.constexpr, BLOCK_A: tl.constexpr):
    # Unshifted (D itself): the per-action rows are read here only; finish gets D[t+1]
    # from the core (``next_value``).
    delta, beta, _, _, _, _ = _retrace_parts(P0, P1, P2, P3, P4, P5, P6, P7, rows, ts, N, T, A,
                                             sn, st, san, sat, saa, S0, S1, S2, S3, F_TRUNC,
                                             BLOCK_A)
    return delta, beta


@triton.jit
def retrace_finish(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, rows, ts, y, y_next, N,
                   T, A, sn, st, se, san, sat, saa, osn, ost, S0, S1, S2, S3, F_TRUNC: tl.constexpr,
                   F_BOOT: tl.constexpr, F_ENV: tl.constexpr, F_STARTS: tl.constexpr,
                   BLOCK_A: tl.constexpr):
    # y = D[t], y_next = D[t+1]: q_ret[t] = q[t] + D[t], q_ret[t+1] = q[t+1] + D[t+1].
    m = _valid(rows, ts, N, T)
    q = _ld(P2, rows, ts, sn, st, m)
    r = _ld(P5, rows, ts, sn, st, m)
    term = _is_set(P6, rows, ts, sn, st, m)
    ratio = _retrace_ratio(P0, P1, P4, rows, ts, m, A, sn, st, san, sat, saa, BLOCK_A)
    q_next = _ld_next(P2, rows, ts, T, sn, st, m)
    adv = _clip(ratio, S3) * (r + _unless(term, S0) * (q_next + y_next) - q)
    _store(O0, rows, ts, osn, ost, q + y, m)
    _store(O1, rows, ts, osn, ost, adv, m)


@triton.jit
def _returns_done(P_TERM, P_TRUNC, rows, ts, sn, st, m, F_TRUNC: tl.constexpr):
    """(done, trunc) as bools for the two returns estimators: done is terminated or
    truncated. Without truncations ``trunc`` is a placeholder (``done``), never read."""
    done = _is_set(P_TERM, rows, ts, sn, st, m)
    if F_TRUNC:
        trunc = _is_set(P_TRUNC, rows, ts, sn, st, m)
        return done | trunc, trunc
    return done, done


@triton.jit
def _returns_boundary(alpha, done, decay, trunc, P_BOOT, rows, ts, T, sn, st, m, gamma,
                      F_TRUNC: tl.constexpr, F_BOOT: tl.constexpr):
    """(alpha, beta) of the two returns estimators from alpha's own terms: beta is
    ``decay * (1 - done)``, and alpha gets gamma * trunc[t] * b[t] and the boundary
    G[T] = b[T-1] (0 without bootstrap values) folded into alpha at t = T-1, where beta
    becomes 0 (so a product of betas counted from T-1 never multiplies an overflow by a
    zero carry). Without bootstrap values the fold adds ``decay * 0.0``, a scalar: NaN
    only for an infinite decay, as ``beta * 0`` would be; without truncations the
    bootstrap term is ``gamma * 0.0 * b``, which keeps a NaN or Inf of ``b`` as the
    recurrence does. Neither loads nor compares anything more per element."""
    beta = _unless(done, decay)
    last = ts == T - 1
    if F_BOOT:
        b = _ld(P_BOOT, rows, ts, sn, st, m)
        if F_TRUNC:
            alpha = alpha + _when(trunc, gamma) * b
        else:
            alpha = alpha + (gamma * 0.0) * b
        alpha = tl.where(last, alpha + beta * b, alpha)
    else:
        alpha = tl.where(last, alpha + decay * 0.0, alpha)
    beta = tl.where(last, 0.0, beta)
    return tl.where(m, alpha, 0.0), tl.where(m, beta, 0.0)


# --------------------------------------------------------------------------- lambda-returns
# slots: rewards, next_values, terminateds, truncateds, bootstrap_values
# scalars: gamma, lambda_


@triton.jit
def lambda_returns_coeffs(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, rows, ts, N, T, A, sn, st, se,
                          san, sat, saa, S0, S1, S2, S3, F_TRUNC: tl.constexpr,
                          F_BOOT: tl.constexpr, F_ENV: tl.constexpr, F_STARTS: tl.constexpr,
                          BLOCK_A: tl.constexpr):
    # alpha = r + gamma*(1-done)*(1-lambda)*nv + gamma*trunc*b, beta = gamma*lambda*(1-done)
    m = _valid(rows, ts, N, T)
    r = _ld(P0, rows, ts, sn, st, m)
    nv = _ld(P1, rows, ts, sn, st, m)
    done, trunc = _returns_done(P2, P3, rows, ts, sn, st, m, F_TRUNC)
    alpha = r + _unless(done, S0 * (1.0 - S1)) * nv
    return _returns_boundary(alpha, done, S0 * S1, trunc, P4, rows, ts, T, sn, st, m, S0,
                             F_TRUNC, F_BOOT)


# --------------------------------------------------------------------------- discounted returns
# slots: rewards, terminateds, truncateds, bootstrap_values
# scalars: gamma


@triton.jit
def discounted_returns_coeffs(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, rows, ts, N, T, A, sn, st, se,
                              san, sat, saa, S0, S1, S2, S3, F_TRUNC: tl.constexpr,
                              F_BOOT: tl.constexpr, F_ENV: tl.constexpr, F_STARTS: tl.constexpr,
                              BLOCK_A: tl.constexpr):
    # alpha = r + gamma*trunc*b, beta = gamma*(1-done)
    m = _valid(rows, ts, N, T)
    r = _ld(P0, rows, ts, sn, st, m)
    done, trunc = _returns_done(P1, P2, rows, ts, sn, st, m, F_TRUNC)
    return _returns_boundary(r, done, S0, trunc, P3, rows, ts, T, sn, st, m, S0, F_TRUNC,
                             F_BOOT)


# --------------------------------------------------------------------------- forward scans
# eligibility traces slots: gradients, dones, seed_values; scalars: gamma, lambda_
# episodic prefix sum slots: inputs, dones, seed_values; no scalars


@triton.jit
def _forward_coeffs(P0, P1, P2, rows, ts, N, T, sn, st, se, decay, F_ENV: tl.constexpr,
                    F_STARTS: tl.constexpr):
    """alpha = x[t], beta = decay*(1 - done[t-1]) (done[t] for starts_at); seed folded at t=0."""
    m = _valid(rows, ts, N, T)
    x = _ld(P0, rows, ts, sn, st, m)
    if F_STARTS:
        done = _is_set(P1, rows, ts, sn, st, m)
    else:
        done = _is_set(P1, rows, ts - 1, sn, st, m & (ts >= 1))     # done[-1] = 0
    beta = _unless(done, decay)
    if F_ENV:
        first = ts == 0
        x = tl.where(first, x + beta * _ld_env(P2, rows, se, N), x)
        beta = tl.where(first, 0.0, beta)
    return tl.where(m, x, 0.0), tl.where(m, beta, 0.0)


@triton.jit
def eligibility_traces_coeffs(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, rows, ts, N, T, A, sn, st, se,
                              san, sat, saa, S0, S1, S2, S3, F_TRUNC: tl.constexpr,
                              F_BOOT: tl.constexpr, F_ENV: tl.constexpr, F_STARTS: tl.constexpr,
                              BLOCK_A: tl.constexpr):
    return _forward_coeffs(P0, P1, P2, rows, ts, N, T, sn, st, se, S0 * S1, F_ENV, False)


@triton.jit
def episodic_prefix_sum_coeffs(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, rows, ts, N, T, A, sn, st,
                               se, san, sat, saa, S0, S1, S2, S3, F_TRUNC: tl.constexpr,
                               F_BOOT: tl.constexpr, F_ENV: tl.constexpr, F_STARTS: tl.constexpr,
                               BLOCK_A: tl.constexpr):
    return _forward_coeffs(P0, P1, P2, rows, ts, N, T, sn, st, se, 1.0, F_ENV, F_STARTS)


# --------------------------------------------------------------------------- adjoint scans
# slots: grads, beta (the estimator's unshifted beta); no scalars. The backward passes of
# the estimators (rltriton_tune.autograd) run these: z[t] = g[t] + beta[t-1] * z[t-1]
# (forward in time) and z[t] = g[t] + beta[t+1] * z[t+1] (backward in time).


@triton.jit
def _adjoint_coeffs(P0, P1, rows, ts, N, T, sn, st, STEP: tl.constexpr):
    m = _valid(rows, ts, N, T)
    g = _ld(P0, rows, ts, sn, st, m)
    beta = _ld(P1, rows, ts + STEP, sn, st, m & (ts + STEP >= 0) & (ts + STEP < T))
    return tl.where(m, g, 0.0), tl.where(m, beta, 0.0)


@triton.jit
def adjoint_scan_forward_coeffs(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, rows, ts, N, T, A, sn, st,
                                se, san, sat, saa, S0, S1, S2, S3, F_TRUNC: tl.constexpr,
                                F_BOOT: tl.constexpr, F_ENV: tl.constexpr, F_STARTS: tl.constexpr,
                                BLOCK_A: tl.constexpr):
    return _adjoint_coeffs(P0, P1, rows, ts, N, T, sn, st, -1)


@triton.jit
def adjoint_scan_backward_coeffs(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, rows, ts, N, T, A, sn, st,
                                 se, san, sat, saa, S0, S1, S2, S3, F_TRUNC: tl.constexpr,
                                 F_BOOT: tl.constexpr, F_ENV: tl.constexpr, F_STARTS: tl.constexpr,
                                 BLOCK_A: tl.constexpr):
    return _adjoint_coeffs(P0, P1, rows, ts, N, T, sn, st, 1)


# --------------------------------------------------------------------------- grad algorithms
# The backward passes of the single-output estimators in one scan each
# (rltriton_tune.algorithms.GRAD_ALGORITHMS): alpha = the output gradient g, beta = the
# estimator's beta read one step over and computed here from the flags, and a finish that
# writes the input gradients from z (and z[t-1], ``next_value``, for GAE's values).
# gae_grad slots: grads, terminateds, truncateds (next_values has no slot: "next" sets
# F_BOOT and F_ENV, as for GAE); lambda_returns_grad and discounted_returns_grad: grads,
# terminateds, truncateds; eligibility_traces_grad and episodic_prefix_sum_grad: grads, dones.


@triton.jit
def _not_done(P_TERM, P_TRUNC, rows, ts, sn, st, m, F_TRUNC: tl.constexpr):
    """1 - max(term, trunc) at ts where ``m`` (1 where masked)."""
    done = _flag(P_TERM, rows, ts, sn, st, m)
    if F_TRUNC:
        done = tl.maximum(done, _flag(P_TRUNC, rows, ts, sn, st, m))
    return 1.0 - done


@triton.jit
def _previous_not_done(P_TERM, P_TRUNC, rows, ts, N, T, sn, st, F_TRUNC: tl.constexpr):
    """(1 - done[t-1], inside): 0 at t = 0 and outside the problem."""
    mp = _valid(rows, ts, N, T) & (ts >= 1)
    return tl.where(mp, _not_done(P_TERM, P_TRUNC, rows, ts - 1, sn, st, mp, F_TRUNC), 0.0)


@triton.jit
def _grad_of_backward(P0, P1, P2, rows, ts, N, T, sn, st, decay, F_TRUNC: tl.constexpr):
    """alpha = g[t], beta = decay * (1 - done[t-1]): the adjoint of a backward-in-time
    estimator whose beta is decay * (1 - done[t])."""
    m = _valid(rows, ts, N, T)
    g = _ld(P0, rows, ts, sn, st, m)
    beta = decay * _previous_not_done(P1, P2, rows, ts, N, T, sn, st, F_TRUNC)
    return tl.where(m, g, 0.0), beta


@triton.jit
def gae_grad_coeffs(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, rows, ts, N, T, A, sn, st, se, san, sat,
                    saa, S0, S1, S2, S3, F_TRUNC: tl.constexpr, F_BOOT: tl.constexpr,
                    F_ENV: tl.constexpr, F_STARTS: tl.constexpr, BLOCK_A: tl.constexpr):
    return _grad_of_backward(P0, P1, P2, rows, ts, N, T, sn, st, S0 * S1, F_TRUNC)


@triton.jit
def _gae_grad_store(P0, P1, P2, P3, P4, O0, O1, O2, rows, ts, y, y_next, N, T, sn, st, osn,
                    ost, S0, F_TRUNC: tl.constexpr, F_BOOT: tl.constexpr,
                    F_ENV: tl.constexpr, BOUNDARY: tl.constexpr):
    # y = z[t], y_next = z[t-1]: values[t] is nv[t-1] unless t-1 is cut (truncated; never
    # T-1), so grad_values[t] = -z[t] + g(1-done[t-1]) z[t-1]. With next_values, nv never
    # reads values (grad -z, left to the host) and O1 takes next_values's gradient.
    m = _valid(rows, ts, N, T)
    _store(O0, rows, ts, osn, ost, y, m)
    if _next_given(F_BOOT, F_ENV):
        _store(O1, rows, ts, osn, ost, S0 * (1.0 - _flag(P1, rows, ts, sn, st, m)) * y, m)
    else:
        grad_values = S0 * _previous_not_done(P1, P2, rows, ts, N, T, sn, st, F_TRUNC) * y_next - y
        _store(O1, rows, ts, osn, ost, grad_values, m)
        if BOUNDARY:
            # nv[t] = b[t] at cut steps (t = T-1, or truncated): its gradient γ(1-term[t])z[t]
            # there; last_value is b[T-1].
            kept = S0 * (1.0 - _flag(P1, rows, ts, sn, st, m)) * y
            if F_BOOT:
                cut = ts == T - 1
                if F_TRUNC:
                    cut = cut | (_flag(P2, rows, ts, sn, st, m) != 0)
                _store(O2, rows, ts, osn, ost, tl.where(cut, kept, 0.0), m)
            else:
                _store_env(O2, rows, ts, T - 1, kept, m)


@triton.jit
def gae_grad_finish(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, rows, ts, y, y_next, N,
                    T, A, sn, st, se, san, sat, saa, osn, ost, S0, S1, S2, S3,
                    F_TRUNC: tl.constexpr, F_BOOT: tl.constexpr, F_ENV: tl.constexpr,
                    F_STARTS: tl.constexpr, BLOCK_A: tl.constexpr):
    _gae_grad_store(P0, P1, P2, P3, P4, O0, O1, O2, rows, ts, y, y_next, N, T, sn, st, osn,
                    ost, S0, F_TRUNC, F_BOOT, F_ENV, False)


@triton.jit
def gae_grad_boundary_finish(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, rows, ts, y,
                             y_next, N, T, A, sn, st, se, san, sat, saa, osn, ost, S0, S1, S2, S3,
                             F_TRUNC: tl.constexpr, F_BOOT: tl.constexpr, F_ENV: tl.constexpr,
                             F_STARTS: tl.constexpr, BLOCK_A: tl.constexpr):
    _gae_grad_store(P0, P1, P2, P3, P4, O0, O1, O2, rows, ts, y, y_next, N, T, sn, st, osn,
                    ost, S0, F_TRUNC, F_BOOT, F_ENV, True)


# vtrace_grad slots: grads (of vs), grad_advantages, vs, log_pi_target, log_pi_behavior, values,
# rewards, terminateds, truncateds, and one slot for the boundary input given (bootstrap_values
# with F_BOOT, last_value with F_ENV read by ``se``, next_values with both); scalars: gamma,
# rho_bar, c_bar. The formulas are in rltriton_tune/algorithms.py.


@triton.jit
def _vtrace_grad_previous(P1, P3, P4, P7, P8, rows, ts, N, T, sn, st, S0, S1, S2,
                          F_TRUNC: tl.constexpr):
    """At t-1 (0 at t = 0 and outside): (γ(1-term)(1-cut)·ρ, g_adv, γ·c·(1-done)), the
    weight of vs[t] in adv[t-1] (and of values[t] in δ[t-1]) per unit g_adv (z), g_adv,
    and β[t-1]. t-1 < T-1, so it is cut only where truncated."""
    mp = _valid(rows, ts, N, T) & (ts >= 1)
    ratio = tl.exp(_ld(P3, rows, ts - 1, sn, st, mp) - _ld(P4, rows, ts - 1, sn, st, mp))
    term = _flag(P7, rows, ts - 1, sn, st, mp)
    done = term
    kept = S0 * (1.0 - term)
    if F_TRUNC:
        trunc = _flag(P8, rows, ts - 1, sn, st, mp)
        done = tl.maximum(term, trunc)
        kept = kept * (1.0 - trunc)
    g_adv = _ld(P1, rows, ts - 1, sn, st, mp)
    return (tl.where(mp, kept * _clip(ratio, S1), 0.0), g_adv,
            tl.where(mp, S0 * _clip(ratio, S2) * (1.0 - done), 0.0))


@triton.jit
def vtrace_grad_coeffs(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, rows, ts, N, T, A, sn, st, se, san,
                       sat, saa, S0, S1, S2, S3, F_TRUNC: tl.constexpr, F_BOOT: tl.constexpr,
                       F_ENV: tl.constexpr, F_STARTS: tl.constexpr, BLOCK_A: tl.constexpr):
    # α[t] = g_vs[t] + (1-cut[t-1])·γ(1-term[t-1])·ρ[t-1]·g_adv[t-1], β[t] = γ·c[t-1]·(1-done[t-1])
    m = _valid(rows, ts, N, T)
    weight, g_adv_prev, beta = _vtrace_grad_previous(P1, P3, P4, P7, P8, rows, ts, N, T, sn, st,
                                                     S0, S1, S2, F_TRUNC)
    alpha = _ld(P0, rows, ts, sn, st, m) + weight * g_adv_prev
    return tl.where(m, alpha, 0.0), beta


@triton.jit
def _vtrace_grad_store(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, rows, ts, y, y_next,
                       N, T, sn, st, se, osn, ost, S0, S1, S2, F_TRUNC: tl.constexpr,
                       F_BOOT: tl.constexpr, F_ENV: tl.constexpr, BOUNDARY: tl.constexpr):
    # y = z[t], y_next = z[t-1].
    m = _valid(rows, ts, N, T)
    ratio = tl.exp(_ld(P3, rows, ts, sn, st, m) - _ld(P4, rows, ts, sn, st, m))
    rho = _clip(ratio, S1)
    g_vs = _ld(P0, rows, ts, sn, st, m)
    g_adv = _ld(P1, rows, ts, sn, st, m)
    v = _ld(P5, rows, ts, sn, st, m)
    r = _ld(P6, rows, ts, sn, st, m)
    term = _is_set(P7, rows, ts, sn, st, m)
    b, done, cut = _bootstrap_and_done(P8, P9, P9, rows, ts, N, T, sn, st, se, term, m,
                                       F_TRUNC, F_BOOT, F_ENV)
    v_next = _ld_next(P5, rows, ts, T, sn, st, m)
    vs_next = _ld_next(P2, rows, ts, T, sn, st, m)
    kept = _unless(term, S0)
    if _next_given(F_BOOT, F_ENV):
        nv = b                                     # next_values[t] at every step
    else:
        nv = tl.where(cut, b, v_next)
    nvs = tl.where(cut, b, vs_next)
    w = rho * (g_adv + y)                          # grad_rewards
    through_rho = g_adv * (r + kept * nvs - v) + y * (r + kept * nv - v)
    through_c = y * _unless(done, S0) * (vs_next - v_next)      # z[t]·γ(1-done)·D[t+1]
    grad_lpt = ratio * (tl.where(ratio <= S1, through_rho, 0.0)
                        + tl.where(ratio <= S2, through_c, 0.0))
    weight, g_adv_prev, _ = _vtrace_grad_previous(P1, P3, P4, P7, P8, rows, ts, N, T, sn, st,
                                                  S0, S1, S2, F_TRUNC)
    if _next_given(F_BOOT, F_ENV):
        carried = g_adv_prev                       # nv never reads values
    else:
        carried = g_adv_prev + y_next
    _store(O0, rows, ts, osn, ost, grad_lpt, m)
    _store(O1, rows, ts, osn, ost, g_vs - w + weight * carried, m)
    _store(O2, rows, ts, osn, ost, w, m)
    if BOUNDARY:
        if _next_given(F_BOOT, F_ENV):
            _store(O3, rows, ts, osn, ost, kept * rho * (y + tl.where(cut, g_adv, 0.0)), m)
        elif F_BOOT:
            _store(O3, rows, ts, osn, ost, tl.where(cut, kept * w, 0.0), m)
        else:
            _store_env(O3, rows, ts, T - 1, kept * w, m)


@triton.jit
def vtrace_grad_finish(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, rows, ts, y, y_next,
                       N, T, A, sn, st, se, san, sat, saa, osn, ost, S0, S1, S2, S3,
                       F_TRUNC: tl.constexpr, F_BOOT: tl.constexpr, F_ENV: tl.constexpr,
                       F_STARTS: tl.constexpr, BLOCK_A: tl.constexpr):
    _vtrace_grad_store(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, rows, ts, y, y_next,
                       N, T, sn, st, se, osn, ost, S0, S1, S2, F_TRUNC, F_BOOT, F_ENV, False)


@triton.jit
def vtrace_grad_boundary_finish(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, rows, ts, y,
                                y_next, N, T, A, sn, st, se, san, sat, saa, osn, ost, S0, S1, S2,
                                S3, F_TRUNC: tl.constexpr, F_BOOT: tl.constexpr,
                                F_ENV: tl.constexpr, F_STARTS: tl.constexpr, BLOCK_A: tl.constexpr):
    _vtrace_grad_store(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, rows, ts, y, y_next,
                       N, T, sn, st, se, osn, ost, S0, S1, S2, F_TRUNC, F_BOOT, F_ENV, True)


@triton.jit
def lambda_returns_grad_coeffs(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, rows, ts, N, T, A, sn, st,
                               se, san, sat, saa, S0, S1, S2, S3, F_TRUNC: tl.constexpr,
                               F_BOOT: tl.constexpr, F_ENV: tl.constexpr, F_STARTS: tl.constexpr,
                               BLOCK_A: tl.constexpr):
    return _grad_of_backward(P0, P1, P2, rows, ts, N, T, sn, st, S0 * S1, F_TRUNC)


@triton.jit
def _returns_bootstrap_grad(P1, P2, O2, rows, ts, y, N, T, sn, st, osn, ost, m, gamma, decay,
                            F_TRUNC: tl.constexpr):
    """A returns estimator's bootstrap gradient: γ·trunc[t]·z[t], plus
    decay·(1-done[T-1])·z[T-1] at T-1 (the folded G[T] = b[T-1])."""
    done = _flag(P1, rows, ts, sn, st, m)
    grad = tl.zeros_like(y)
    if F_TRUNC:
        trunc = _flag(P2, rows, ts, sn, st, m)
        done = tl.maximum(done, trunc)
        grad = gamma * trunc * y
    grad += tl.where(ts == T - 1, decay * (1.0 - done) * y, 0.0)
    _store(O2, rows, ts, osn, ost, grad, m)


@triton.jit
def _lambda_returns_grad_store(P1, P2, O0, O1, O2, rows, ts, y, N, T, sn, st, osn, ost, S0, S1,
                               F_TRUNC: tl.constexpr, BOUNDARY: tl.constexpr):
    # alpha[t] holds g(1-l)(1-done[t]) nv[t].
    m = _valid(rows, ts, N, T)
    not_done = _not_done(P1, P2, rows, ts, sn, st, m, F_TRUNC)
    _store(O0, rows, ts, osn, ost, y, m)
    _store(O1, rows, ts, osn, ost, S0 * (1.0 - S1) * not_done * y, m)
    if BOUNDARY:
        _returns_bootstrap_grad(P1, P2, O2, rows, ts, y, N, T, sn, st, osn, ost, m, S0,
                                S0 * S1, F_TRUNC)


@triton.jit
def lambda_returns_grad_finish(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, rows, ts, y,
                               y_next, N, T, A, sn, st, se, san, sat, saa, osn, ost, S0, S1, S2, S3,
                               F_TRUNC: tl.constexpr, F_BOOT: tl.constexpr, F_ENV: tl.constexpr,
                               F_STARTS: tl.constexpr, BLOCK_A: tl.constexpr):
    _lambda_returns_grad_store(P1, P2, O0, O1, O2, rows, ts, y, N, T, sn, st, osn, ost, S0, S1,
                               F_TRUNC, False)


@triton.jit
def lambda_returns_grad_boundary_finish(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3,
                                        rows, ts, y, y_next, N, T, A, sn, st, se, san, sat, saa,
                                        osn, ost, S0, S1, S2, S3, F_TRUNC: tl.constexpr,
                                        F_BOOT: tl.constexpr, F_ENV: tl.constexpr,
                                        F_STARTS: tl.constexpr, BLOCK_A: tl.constexpr):
    _lambda_returns_grad_store(P1, P2, O0, O1, O2, rows, ts, y, N, T, sn, st, osn, ost, S0, S1,
                               F_TRUNC, True)


@triton.jit
def discounted_returns_grad_coeffs(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, rows, ts, N, T, A, sn,
                                   st, se, san, sat, saa, S0, S1, S2, S3, F_TRUNC: tl.constexpr,
                                   F_BOOT: tl.constexpr, F_ENV: tl.constexpr,
                                   F_STARTS: tl.constexpr, BLOCK_A: tl.constexpr):
    return _grad_of_backward(P0, P1, P2, rows, ts, N, T, sn, st, S0, F_TRUNC)


@triton.jit
def discounted_returns_grad_boundary_finish(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3,
                                            rows, ts, y, y_next, N, T, A, sn, st, se, san, sat, saa,
                                            osn, ost, S0, S1, S2, S3, F_TRUNC: tl.constexpr,
                                            F_BOOT: tl.constexpr, F_ENV: tl.constexpr,
                                            F_STARTS: tl.constexpr, BLOCK_A: tl.constexpr):
    m = _valid(rows, ts, N, T)
    _store(O0, rows, ts, osn, ost, y, m)
    _returns_bootstrap_grad(P1, P2, O2, rows, ts, y, N, T, sn, st, osn, ost, m, S0, S0,
                            F_TRUNC)


@triton.jit
def _grad_of_forward(P0, P1, rows, ts, N, T, sn, st, decay, F_STARTS: tl.constexpr):
    """alpha = g[t], beta = decay * (1 - done[t]) (done[t+1] with ``F_STARTS``) for t < T-1,
    0 at T-1: the adjoint of a forward-in-time estimator whose beta is
    decay * (1 - done[t-1]) (done[t])."""
    m = _valid(rows, ts, N, T)
    g = _ld(P0, rows, ts, sn, st, m)
    inside = m & (ts + 1 < T)
    if F_STARTS:
        done = _flag(P1, rows, ts + 1, sn, st, inside)
    else:
        done = _flag(P1, rows, ts, sn, st, inside)
    return tl.where(m, g, 0.0), tl.where(inside, decay * (1.0 - done), 0.0)


@triton.jit
def eligibility_traces_grad_coeffs(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, rows, ts, N, T, A, sn,
                                   st, se, san, sat, saa, S0, S1, S2, S3, F_TRUNC: tl.constexpr,
                                   F_BOOT: tl.constexpr, F_ENV: tl.constexpr,
                                   F_STARTS: tl.constexpr, BLOCK_A: tl.constexpr):
    return _grad_of_forward(P0, P1, rows, ts, N, T, sn, st, S0 * S1, False)


@triton.jit
def episodic_prefix_sum_grad_coeffs(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, rows, ts, N, T, A, sn,
                                    st, se, san, sat, saa, S0, S1, S2, S3, F_TRUNC: tl.constexpr,
                                    F_BOOT: tl.constexpr, F_ENV: tl.constexpr,
                                    F_STARTS: tl.constexpr, BLOCK_A: tl.constexpr):
    return _grad_of_forward(P0, P1, rows, ts, N, T, sn, st, 1.0, F_STARTS)


@triton.jit
def eligibility_traces_grad_boundary_finish(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3,
                                            rows, ts, y, y_next, N, T, A, sn, st, se, san, sat, saa,
                                            osn, ost, S0, S1, S2, S3, F_TRUNC: tl.constexpr,
                                            F_BOOT: tl.constexpr, F_ENV: tl.constexpr,
                                            F_STARTS: tl.constexpr, BLOCK_A: tl.constexpr):
    # The seed is y[-1]: its gradient β[0]·z[0] = γλ·z[0].
    m = _valid(rows, ts, N, T)
    _store(O0, rows, ts, osn, ost, y, m)
    _store_env(O2, rows, ts, 0, S0 * S1 * y, m)


@triton.jit
def episodic_prefix_sum_grad_boundary_finish(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3,
                                             rows, ts, y, y_next, N, T, A, sn, st, se, san, sat,
                                             saa, osn, ost, S0, S1, S2, S3, F_TRUNC: tl.constexpr,
                                             F_BOOT: tl.constexpr, F_ENV: tl.constexpr,
                                             F_STARTS: tl.constexpr, BLOCK_A: tl.constexpr):
    # The seed is C[-1]: its gradient β[0]·z[0], β[0] = 1 (1 - done[0] with starts_at).
    m = _valid(rows, ts, N, T)
    _store(O0, rows, ts, osn, ost, y, m)
    if F_STARTS:
        seed = (1.0 - _flag(P1, rows, ts, sn, st, m & (ts == 0))) * y
    else:
        seed = y
    _store_env(O2, rows, ts, 0, seed, m)


# --------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class Builder:
    """The jit functions a scan core calls for one estimator, and its scan direction."""

    coeffs: object
    finish: object
    reverse: bool
    #: ``finish`` reads ``y_next``, the scan value at the neighbour the carry comes from
    #: (cores then scan an extra pair; others get ``y_next = y`` for free).
    next_value: bool = False
    #: Grad algorithms: the finish that also writes a boundary input's gradient to ``O2``
    #: (:attr:`rltriton_tune.algorithms.AlgorithmSpec.boundary_grads`).
    boundary_finish: object = None
    #: The builder for calls whose scalars ``serves`` refuses (``serves(*scalars)``, in
    #: the algorithm's scalar order): a finish that is exact for every value, at a higher
    #: cost. None: this builder serves every call.
    exact: Builder | None = None
    serves: Callable[..., bool] | None = None


BUILDERS: dict[str, Builder] = {
    "gae": Builder(gae_coeffs, store_finish, True),
    "vtrace": Builder(vtrace_coeffs, vtrace_finish, True,
                      exact=Builder(vtrace_coeffs, vtrace_next_finish, True, next_value=True),
                      serves=vtrace_by_division_serves),
    "retrace": Builder(retrace_coeffs, retrace_finish, True, next_value=True),
    "lambda_returns": Builder(lambda_returns_coeffs, store_finish, True),
    "discounted_returns": Builder(discounted_returns_coeffs, store_finish, True),
    "eligibility_traces": Builder(eligibility_traces_coeffs, store_finish, False),
    "episodic_prefix_sum": Builder(episodic_prefix_sum_coeffs, store_finish, False),
    "adjoint_scan_forward": Builder(adjoint_scan_forward_coeffs, store_finish, False),
    "adjoint_scan_backward": Builder(adjoint_scan_backward_coeffs, store_finish, True),
    "gae_grad": Builder(gae_grad_coeffs, gae_grad_finish, False, next_value=True,
                        boundary_finish=gae_grad_boundary_finish),
    "vtrace_grad": Builder(vtrace_grad_coeffs, vtrace_grad_finish, False, next_value=True,
                           boundary_finish=vtrace_grad_boundary_finish),
    "lambda_returns_grad": Builder(lambda_returns_grad_coeffs, lambda_returns_grad_finish,
                                   False, boundary_finish=lambda_returns_grad_boundary_finish),
    "discounted_returns_grad": Builder(discounted_returns_grad_coeffs, store_finish, False,
                                       boundary_finish=discounted_returns_grad_boundary_finish),
    "eligibility_traces_grad": Builder(eligibility_traces_grad_coeffs, store_finish, True,
                                       boundary_finish=eligibility_traces_grad_boundary_finish),
    "episodic_prefix_sum_grad": Builder(
        episodic_prefix_sum_grad_coeffs, store_finish, True,
        boundary_finish=episodic_prefix_sum_grad_boundary_finish),
}
