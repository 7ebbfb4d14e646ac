"""``lookback`` strategy: one pass over long sequences with a decoupled look-back.

``split`` reads the inputs twice in two launches. Here each program's index names
its (row block, chunk), chunks numbered in scan order, because the hardware starts
programs in increasing index order (the assumption CUB's single-pass scan makes; with
``TICKET_ORDER`` a program instead takes an atomic ticket first, which orders programs
by when they actually start at the cost of one round trip before its loads). It
scans its BLOCK_T chunk from a zero carry and publishes, per row, the chunk's aggregate
(y at the chunk's outgoing edge, product of beta), then looks back over the chunks
before it, ``LOOK_WINDOW`` at a time (one lane each, a warp's worth), until each row
meets a chunk that has published its inclusive value (the true carry at its edge).
With that carry it finishes the chunk still held in registers, stores the outputs and
publishes its own inclusive value (only when a row has more chunks than one look-back
window: otherwise every predecessor's aggregate is read in one step anyway). One
launch, one read of the inputs, one write of the outputs.

Every published value travels in one 64-bit word with its tag (as CUB does for 4-byte
values): the float's bits below a 32-bit tag of the launch's epoch and the word's
status (aggregate or inclusive). A reader that sees the tag has the value, so a
publish needs no fence and a poll no second load (the H200 probe: GAE 16x32768
7.4 us with one-warp chunks, 9.1 before with a flag word, release fence and separate
aggregate loads).

The words and a launch counter live in a buffer the launcher keeps and zeroes once,
so a launch (and a CUDA-graph replay) runs no memset: every program adds one to the
counter per launch, so ``counter // programs`` read before it adds is the launch's
epoch, and a word counts only if it carries the epoch's tag. Launches of one
launcher therefore must not overlap; the launcher orders a call on a new stream
after its previous call.

Configs with 1 < BLOCK_N < num_warps are invalid: there the window's [BLOCK_N,
WINDOW] words are loaded by several warps per row, copies that may see a word before
and after it is published, and the cross-warp reduction that decides "every word is
ready" treats copies as equal. On the H200 exactly those configs gave wrong carries
(sweeps of this kernel: 48 of 164 such configs failed the correctness gate, none of
533 others; 280 of 684 against none of 1,915 with two earlier look-back variants). With
BLOCK_N = 1 every warp holds the whole
window; with num_warps <= BLOCK_N each row's words belong to one warp.

A program waits only on chunks of lower index, started before it, so the chain
always advances. Waits are bounded (``MAX_SPINS`` polls): past that the program
gives up and writes NaN rather than hang.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from rltriton_tune.call import Call, ProblemKey
from rltriton_tune.kernels.actions import reduce_actions_default, reduce_actions_space
from rltriton_tune.kernels.builders import Builder
from rltriton_tune.kernels.launch import (
    INT32_LIMIT,
    TILE_BUDGET,
    FastLaunch,
    Packer,
    TritonStrategy,
    current_stream,
    next_pow2,
    pow2_range,
    require,
)
from rltriton_tune.kernels.scan import (
    combine,
    edges,
    row_block,
    scan_tile_next,
    take,
    time_block,
    true_sizes,
    wide_product,
)
from rltriton_tune.strategy import Launcher, Params

#: Polls of the look-back window's words before a program gives up (NaN outputs, no hang).
MAX_SPINS = 1 << 20

#: Predecessor chunks read per look-back step (tests lower it to cross windows).
LOOK_WINDOW = 32

#: Tag values within an epoch: nothing yet, aggregate published, inclusive value
#: published. A word's tag is ``(epoch * EPOCH_STRIDE + value) mod 2**32``.
AGGREGATE = tl.constexpr(1)
INCLUSIVE = tl.constexpr(2)
EPOCH_STRIDE = tl.constexpr(4)
LOW_BITS = tl.constexpr(0xFFFFFFFF)

#: Whether programs publish inclusive values. Tests turn it off: the interpreter runs
#: programs one after another, so every predecessor would already be inclusive and the
#: aggregate-composing path would go untested; without inclusive values every program
#: composes all its predecessors' aggregates (same results, only slower).
PUBLISH_INCLUSIVE = True

#: Whether a program's chunk comes from an atomic ticket (start order) instead of its
#: program index (launch order, which the hardware follows).
TICKET_ORDER = False


@triton.jit
def _pack(tag, value):
    """One 64-bit word: a 32-bit tag above the float32 ``value``'s bits."""
    bits = value.to(tl.uint32, bitcast=True).to(tl.int64)
    return ((tag & LOW_BITS) << 32) | bits


@triton.jit
def _tag(word):
    return (word >> 32) & LOW_BITS


@triton.jit
def _value(word):
    return (word & LOW_BITS).to(tl.uint32).to(tl.float32, bitcast=True)


@triton.jit
def _publish(WORDS, at, m, tag, value):
    """Store a tagged value: tag and value travel in one word, so no fence is needed
    for a reader to see them together (relaxed: it orders nothing else)."""
    tl.atomic_xchg(WORDS + at, _pack(tag, value), mask=m, sem="relaxed")


@triton.jit
def _word_at(chunk, r, N, BIG: tl.constexpr):
    """Offset of the words of ``chunk`` and rows ``r`` within a [NC, N] plane."""
    if BIG:
        return chunk.to(tl.int64) * N + r
    else:
        return chunk * N + r


@triton.jit
def _poll(WORDS, plane, at, live, aggregate, inclusive):
    """The two words of each ``live`` lane, and whether each lane is ready: its value
    is inclusive, or both words hold this epoch's aggregate (dead lanes are ready)."""
    wa = tl.load(WORDS + at, mask=live, other=0, volatile=True)
    wb = tl.load(WORDS + plane + at, mask=live, other=0, volatile=True)
    ready = ~live | (_tag(wa) == inclusive) | ((_tag(wa) == aggregate) &
                                                (_tag(wb) == aggregate))
    return wa, wb, ready


@triton.jit
def _look_back(WORDS, plane, r, m, k, base, N, BIG: tl.constexpr, WINDOW: tl.constexpr,
               MAX_SPINS: tl.constexpr):
    """The carry into chunk ``k`` of rows ``r``: predecessors' aggregates composed,
    WINDOW chunks a step, back to each row's nearest inclusive value (or its start)."""
    # Lane WINDOW-1 holds the nearest predecessor, lane 0 the farthest: composing them
    # is then a forward scan over lanes (Triton's reverse scan adds a lane-reversing
    # butterfly on every element).
    lane = tl.arange(0, WINDOW)[None, :]
    back = WINDOW - 1 - lane  # chunks before the nearest one
    acc_a = tl.zeros(r.shape, tl.float32)
    acc_b = acc_a + 1.0
    done = ~m  # rows past N look for nothing
    aggregate = (base + AGGREGATE) & LOW_BITS
    inclusive = (base + INCLUSIVE) & LOW_BITS
    j = k - 1
    looking = j >= 0
    gave_up = k < 0  # False, as a tensor the loop can carry
    while looking:
        win = j - back                                  # chunks j-W+1, ..., j-1, j
        at = _word_at(win, r[:, None], N, BIG)
        live = (win >= 0) & ~done[:, None]
        wa, wb, ready = _poll(WORDS, plane, at, live, aggregate, inclusive)
        spins = 0
        while (tl.min(ready.to(tl.int32)) == 0) & (spins < MAX_SPINS):
            wa, wb, ready = _poll(WORDS, plane, at, live, aggregate, inclusive)
            spins += 1
        gave_up = tl.min(ready.to(tl.int32)) == 0
        ends = live & (_tag(wa) == inclusive)
        pos = tl.min(tl.where(ends, back, WINDOW), axis=1)  # each row's nearest inclusive
        used = live & (back <= pos[:, None])
        last = back == pos[:, None]
        # Unused lanes are the identity (0, 1); an inclusive value ends the chain (b = 0).
        step_a = tl.where(used, _value(wa), 0.0)
        step_b = tl.where(used, tl.where(last, 0.0, _value(wb)), 1.0)
        ya, yb = tl.associative_scan((step_a, step_b), 1, combine)
        nearest = back == 0
        acc_a = acc_a + acc_b * take(ya, nearest)
        acc_b = acc_b * take(yb, nearest)
        done = done | (pos < WINDOW)
        j -= WINDOW
        looking = (j >= 0) & (tl.min(done.to(tl.int32)) == 0) & ~gave_up
    return tl.where(gave_up, float("nan"), acc_a)  # gave up waiting: poison, not hang


@triton.jit
def lookback_kernel(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, N, T, A, sn, st, se,
                    san, sat, saa, osn, ost, S0, S1, S2, S3, STATE, NC, COEFFS: tl.constexpr,
                    FINISH: tl.constexpr, REVERSE: tl.constexpr, NEXT: tl.constexpr,
                    F_TRUNC: tl.constexpr, F_BOOT: tl.constexpr, F_ENV: tl.constexpr,
                    F_STARTS: tl.constexpr, BLOCK_A: tl.constexpr, BIG: tl.constexpr,
                    ALIGN_N: tl.constexpr, ALIGN_T: tl.constexpr, ALIGN_A: tl.constexpr,
                    RUN: tl.constexpr, DESCEND: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_T: tl.constexpr, MAX_SPINS: tl.constexpr, PUBLISH_INCLUSIVE: tl.constexpr,
                    WINDOW: tl.constexpr, TICKET_ORDER: tl.constexpr):
    N, T, A, sn, st, san, sat, osn, ost = true_sizes(
        N, T, A, sn, st, san, sat, osn, ost, ALIGN_N, ALIGN_T, ALIGN_A)
    # STATE (int64): [0] launch counter, never reset; then two [NC, N] planes of tagged
    # words per (chunk, row): aggregate alpha (or the inclusive value), aggregate beta.
    n_blocks = tl.cdiv(N, BLOCK_N)
    programs = n_blocks * NC
    # The counter tells launches apart (launches never overlap) and orders no memory, so
    # relaxed suffices. A ticket must come back before the loads can start. In launch
    # order the counter instead counts finished programs: a program reads it (a load
    # whose round trip overlaps the input loads) and counts itself only at its end, so
    # fewer than ``programs`` of its own launch can have counted when it reads.
    if TICKET_ORDER:
        ticket = tl.atomic_add(STATE, 1, sem="relaxed")
        epoch = ticket // programs
        local = (ticket - epoch * programs).to(tl.int32)
    else:
        epoch = tl.load(STATE, volatile=True) // programs
        local = tl.program_id(0)
    base = epoch * EPOCH_STRIDE
    rb = local % n_blocks
    k = local // n_blocks  # position of the chunk in scan order
    if REVERSE:
        chunk = NC - 1 - k
    else:
        chunk = k
    rows = row_block(rb, BLOCK_N, BIG)
    # DESCEND: a backward scan's tile holds its steps last to first, so that the tile is
    # scanned forward (no lane-reversing shuffles; see ``scan.time_block``).
    SCAN_REVERSE: tl.constexpr = REVERSE and not DESCEND
    ts = time_block(chunk * BLOCK_T, BLOCK_T, BIG, DESCEND)
    feed, out = edges(BLOCK_T, SCAN_REVERSE)
    # Per-env inputs (last_value at T-1, seeds at t = 0) act on the first chunk in scan
    # order only, selected by step: every chunk runs one code path, at the cost of one
    # [BLOCK_N] load. A branch on the first chunk compiles the loads twice and keeps the
    # compiler from scheduling them ahead of it.
    a, b = COEFFS(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, rows, ts, N, T, A, sn, st, se, san,
                  sat, saa, S0, S1, S2, S3, F_TRUNC, F_BOOT, F_ENV, F_STARTS, BLOCK_A)
    zero = tl.zeros([BLOCK_N], tl.float32)
    y, p, y_next, p_next = scan_tile_next(a, b, zero, feed, SCAN_REVERSE, NEXT, RUN)
    agg_a = take(y, out)
    agg_b = take(p, out)
    r = tl.reshape(rows, [BLOCK_N])
    m = r < N
    plane = wide_product(NC, N, BIG)
    mine = _word_at(k, r, N, BIG)
    WORDS = STATE + 1
    # The first chunk's aggregate is its inclusive value; later chunks publish theirs
    # at once, so their successors need not wait for their carry.
    if k == 0:
        _publish(WORDS, mine, m, base + INCLUSIVE, agg_a)
    else:
        _publish(WORDS, plane + mine, m, base + AGGREGATE, agg_b)
        _publish(WORDS, mine, m, base + AGGREGATE, agg_a)
    carry = _look_back(WORDS, plane, r, m, k, base, N, BIG, WINDOW, MAX_SPINS)
    if PUBLISH_INCLUSIVE:
        if k > 0:
            _publish(WORDS, mine, m, base + INCLUSIVE, agg_a + agg_b * carry)
    y = y + p * carry[:, None]
    if NEXT:
        y_next = y_next + p_next * carry[:, None]
    else:
        y_next = y
    FINISH(P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, O0, O1, O2, O3, rows, ts, y, y_next, N, T, A,
           sn, st, se, san, sat, saa, osn, ost, S0, S1, S2, S3, F_TRUNC, F_BOOT, F_ENV, F_STARTS,
           BLOCK_A)
    if not TICKET_ORDER:
        tl.atomic_add(STATE, 1, sem="relaxed")  # finished (a fire-and-forget reduction)


class LookbackStrategy(TritonStrategy):
    name = "lookback"
    #: In the tuner's search space: its `gpu` tests pass on the H200, CUDA-graph capture
    #: included, and its best config beat split's on every few-row shape probed there
    #: (N = 1-64, T = 8192-10^6).
    searchable = True

    def space(self, key: ProblemKey) -> dict[str, list[int]]:
        bt = next_pow2(key.t)
        return {
            "BLOCK_N": pow2_range(1, max(1, min(16, next_pow2(key.n)))),
            "BLOCK_T": pow2_range(min(64, bt), min(4096, bt)),
            "num_warps": pow2_range(1, 16),
            **reduce_actions_space(key),
        }

    def tile_elems(self, key: ProblemKey, p: Params) -> int:
        return p["BLOCK_N"] * p["BLOCK_T"]

    def check(self, key: ProblemKey, p: Params) -> None:
        bn, bt = p["BLOCK_N"], p["BLOCK_T"]
        require(bn * bt <= TILE_BUDGET, self.name,
                f"BLOCK_N={bn} x BLOCK_T={bt} exceeds the tile budget {TILE_BUDGET}")
        programs = triton.cdiv(key.n, bn) * triton.cdiv(key.t, bt)
        require(programs < 2**31 - 1, self.name, f"grid of {programs} programs is too large")
        require(bn == 1 or p["num_warps"] <= bn, self.name,
                f"BLOCK_N={bn} with num_warps={p['num_warps']}: more warps than rows gives "
                "wrong carries on the GPU (use num_warps <= BLOCK_N, or BLOCK_N=1)")

    def default_params(self, key: ProblemKey) -> Params:
        # One warp: its lanes are the look-back window (the H200 probe's best configs
        # from T = 9000 to 300000 all have one warp).
        return {"BLOCK_N": 1, "BLOCK_T": min(1024, max(next_pow2(key.t), 1)), "num_warps": 1,
                **reduce_actions_default(key)}

    def window(self, key: ProblemKey, params: Params) -> int:
        """Predecessor chunks a program reads per look-back step (a power of two)."""
        return LOOK_WINDOW

    def _launcher(self, key: ProblemKey, params: Params,
                  builder: Builder | None = None) -> Launcher:
        bn, bt = params["BLOCK_N"], params["BLOCK_T"]
        pack = Packer(key, bn * bt, params["num_warps"], params.get("REDUCE_A", 0), builder=builder)
        n_blocks, n_chunks = triton.cdiv(key.n, bn), triton.cdiv(key.t, bt)
        grid = (n_blocks * n_chunks,)
        window = self.window(key, params)
        # Inclusive values shorten a look-back only past one window of predecessors.
        inclusive = PUBLISH_INCLUSIVE and n_chunks > window
        words = 2 * n_chunks * key.n
        consts = dict(pack.constexprs, BLOCK_N=bn, BLOCK_T=bt,
                      MAX_SPINS=MAX_SPINS, PUBLISH_INCLUSIVE=inclusive, WINDOW=window,
                      TICKET_ORDER=TICKET_ORDER, num_warps=params["num_warps"])
        # Word offsets reach 2 * chunks * N, past the inputs' N * T when chunks are 1 step.
        consts["BIG"] = consts["BIG"] or words >= INT32_LIMIT
        kernel = FastLaunch(lookback_kernel, grid, consts, pack.pointers, pack.pointer_slots)
        tickets = Tickets(1 + words)

        def launch(call: Call):
            args, outs = pack.args(call)
            kernel([*args, tickets.buffer(outs[0].device), n_chunks])
            return outs

        launch.tickets = tickets  # the counter and words, for inspection
        return launch


class Tickets:
    """One launcher's launch counter and tagged words per device, zeroed once.

    The kernel tags words with the launch's epoch, so the buffer needs no reset
    between launches, but two launches must not run at the same time: a call on
    another stream than the previous call waits for that stream first. While a
    CUDA graph is being captured the previous stream is not waited on (the graph
    replays later, in the replaying stream's order), and a device without a buffer
    yet gets a fresh zeroed one inside the graph.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._buffers: dict[torch.device, torch.Tensor] = {}
        # The last stream each device's buffer was used on: (raw handle, stream object).
        self._streams: dict[torch.device, tuple[int, torch.cuda.Stream]] = {}

    def _zeros(self, device: torch.device) -> torch.Tensor:
        return torch.zeros(self.size, dtype=torch.int64, device=device)

    def buffer(self, device: torch.device) -> torch.Tensor:
        found = self._buffers.get(device)
        if device.type != "cuda":
            if found is None:
                found = self._buffers[device] = self._zeros(device)
            return found
        if torch.cuda.is_current_stream_capturing():
            return found if found is not None else self._zeros(device)
        if found is None:
            found = self._buffers[device] = self._zeros(device)
        # The raw handle is a cheap read; a stream object is made only when it changed.
        raw = current_stream(device.index)
        last = self._streams.get(device)
        if last is None or last[0] != raw:
            stream = torch.cuda.current_stream(device)
            if last is not None:
                stream.wait_stream(last[1])
            self._streams[device] = (raw, stream)
        return found
