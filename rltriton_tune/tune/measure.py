"""Timing of prepared launchers: CUDA-graph replays on GPUs, wall clock on CPUs.

Device time on CUDA (DESIGN.md, "Measuring"): one CUDA graph holds one launch per
input copy, the copies together exceed twice the L2 cache so no launch reads
warm data; the graph is replayed several times and the median replay, divided
by the launches in it, is the device time. Full-call time is host wall time of
back-to-back launches, synchronised at the end. On CPU device time is the median
wall-clock time of repeats after a warm-up.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from rltriton_tune.call import Call, ProblemKey
from rltriton_tune.problems import data_bytes, random_inputs
from rltriton_tune.strategy import Launcher

#: Used when torch cannot report the L2 size (the H200's is 60 MB).
DEFAULT_L2_BYTES = 60 * 2**20
#: Most input copies rotated through one graph (tiny problems stay partly cached).
MAX_COPIES = 1024
#: Input copies per graph of a quick first pass (:class:`Bench`).
QUICK_COPIES = 64
#: Device memory the rotated copies may take.
MAX_COPY_BYTES = 2 * 2**30


@dataclass(frozen=True)
class Timing:
    """Median device time and host (full-call) time of one launcher, in microseconds."""

    device_us: float
    host_us: float


def make_call(key: ProblemKey, device: torch.device | str, seed: int = 0) -> Call:
    """A validated :class:`Call` for ``key`` on random inputs (seeded)."""
    from rltriton_tune.estimators import prepare_call

    return prepare_call(key.algorithm, **random_inputs(key, device, seed))


def clone_call(call: Call) -> Call:
    """The same call on freshly allocated copies of its tensors."""
    return Call(algorithm=call.algorithm, tensors={k: v.clone() for k, v in call.tensors.items()},
                scalars=dict(call.scalars), n=call.n, t=call.t, time_major=call.time_major,
                a=call.a, starts_at=call.starts_at, out_dtype=call.out_dtype)


def copies_needed(key: ProblemKey, device: torch.device, max_copies: int = MAX_COPIES) -> int:
    """How many input copies rotate through a graph so the working set exceeds 2x L2
    (at most ``max_copies``)."""
    if device.type != "cuda":
        return 1
    props = torch.cuda.get_device_properties(device)
    l2 = int(getattr(props, "L2_cache_size", 0) or DEFAULT_L2_BYTES)
    per_call = max(1, data_bytes(key))
    wanted = math.ceil(2 * l2 / per_call)
    return int(max(2, min(wanted, max_copies, max(2, MAX_COPY_BYTES // per_call))))


class Bench:
    """Inputs for timing one key on one device, shared by every candidate of a study.

    ``quick`` is for first passes over thousands of configs (exhaustive sweeps): at most
    :data:`QUICK_COPIES` input copies per graph and no host timing, about a tenth of the
    cost per config on small keys; the best configs are then re-measured in full.
    """

    def __init__(self, key: ProblemKey, device: torch.device, seed: int = 0,
                 quick: bool = False) -> None:
        self.key = key
        self.device = torch.device(device)
        self.quick = quick
        base = make_call(key, self.device, seed)
        copies = copies_needed(key, self.device, QUICK_COPIES if quick else MAX_COPIES)
        self.calls = [base] + [clone_call(base) for _ in range(copies - 1)]

    def time(self, launcher: Launcher, budget_s: float = 0.2,
             host: bool | None = None) -> Timing:
        """Device and host time of ``launcher`` on these inputs; host time is NaN when
        quick, or with ``host=False`` (on CUDA)."""
        if self.device.type == "cuda":
            return time_cuda(launcher, self.calls, self.device, budget_s,
                             host=not self.quick if host is None else host)
        return time_cpu(launcher, self.calls[0], budget_s)


def _median_wall(fn: Callable[[], object], budget_s: float, min_reps: int = 3,
                 max_reps: int = 200) -> list[float]:
    samples: list[float] = []
    deadline = time.perf_counter() + budget_s
    while len(samples) < min_reps or (len(samples) < max_reps and time.perf_counter() < deadline):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def time_cpu(launcher: Launcher, call: Call, budget_s: float = 0.2) -> Timing:
    """Median wall time of repeated launches after one warm-up (CPU or other sync devices)."""
    launcher(call)
    samples = _median_wall(lambda: launcher(call), budget_s)
    us = statistics.median(samples) * 1e6
    return Timing(device_us=us, host_us=us)


def time_cuda(launcher: Launcher, calls: Sequence[Call], device: torch.device,
              budget_s: float = 0.2, replays: int = 10, host: bool = True) -> Timing:
    """Median per-launch device time from CUDA-graph replays over rotated inputs,
    plus the host time of back-to-back eager launches (NaN without ``host``)."""
    with torch.cuda.device(device):
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):
            for call in calls[:2]:  # warm-up (compilation, allocator) outside capture
                launcher(call)
        torch.cuda.current_stream(device).wait_stream(stream)
        torch.cuda.synchronize(device)

        try:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for call in calls:
                    launcher(call)
        except Exception:  # noqa: BLE001 - not capturable (e.g. torch.compile): time eagerly
            torch.cuda.synchronize(device)
            return _time_cuda_eager(launcher, calls, device, budget_s)
        graph.replay()
        torch.cuda.synchronize(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        one = max(start.elapsed_time(end) / 1e3, 1e-6)
        reps = int(max(3, min(replays * 10, budget_s / 2 / one)))
        times: list[float] = []
        for _ in range(reps):
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e3 / len(calls))
        del graph
        if not host:
            return Timing(device_us=statistics.median(times), host_us=math.nan)

        host_reps = max(3, min(len(calls), 200))
        torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        for i in range(host_reps):
            launcher(calls[i % len(calls)])
        torch.cuda.synchronize(device)
        host_us = (time.perf_counter() - t0) * 1e6 / host_reps
    return Timing(device_us=statistics.median(times), host_us=host_us)


def _time_cuda_eager(launcher: Launcher, calls: Sequence[Call], device: torch.device,
                     budget_s: float) -> Timing:
    """Fallback for launchers that cannot be captured: events around eager rounds.

    Each round is enqueued while the GPU sleeps (``torch.cuda._sleep``), so the
    events bracket the kernels running back to back and not the host's launch
    overhead, which for small problems is larger than the device time.
    """
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times: list[float] = []
    host_s = 0.0
    deadline = time.perf_counter() + budget_s
    while len(times) < 3 or (len(times) < 100 and time.perf_counter() < deadline):
        torch.cuda._sleep(sleep_cycles(host_s * 1.5 + 1e-4))
        t0 = time.perf_counter()
        start.record()
        for call in calls:
            launcher(call)
        end.record()
        host_s = time.perf_counter() - t0
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / len(calls))
    device_us = statistics.median(times)
    # Back to back, a call costs the larger of its host and device times.
    return Timing(device_us=device_us, host_us=max(device_us, host_s * 1e6 / len(calls)))


#: Upper bound of GPU clocks (Hz) used to turn a sleep time into cycles: a slower clock
#: only sleeps longer.
SLEEP_CLOCK_HZ = 2.0e9


def sleep_cycles(seconds: float) -> int:
    """Cycles for ``torch.cuda._sleep`` to keep the GPU busy at least ``seconds`` (max 1 s)."""
    return int(min(seconds, 1.0) * SLEEP_CLOCK_HZ)


def copy_bandwidth(device: torch.device, nbytes: int = 1 << 30) -> float:
    """Measured device copy bandwidth (read + write bytes per second)."""
    device = torch.device(device)
    elems = nbytes // 4 if device.type == "cuda" else (64 << 20) // 4
    src = torch.ones(elems, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(10):
            start.record()
            dst.copy_(src)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        seconds = statistics.median(times)
    else:
        seconds = statistics.median(_median_wall(lambda: dst.copy_(src), 0.2))
    return 2 * src.numel() * 4 / seconds
