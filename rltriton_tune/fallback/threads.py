"""How many CPU threads a torch-fallback call uses: one, unless its operations are large.

The torch modes are many small whole-tensor operations (the doubling scan: a few
per round, log2(T) rounds; the builders: a dozen; the loop: one per step). Each
operation on more than torch's grain size (32768 elements) is an OpenMP parallel
region, which ends at a barrier where every thread must arrive. When another
process occupies a core, one of the threads is often descheduled, and the
barrier waits for the scheduler to run it again: milliseconds per region, for
regions of microseconds of work. On this project's 2-core CPU with one busy-loop
neighbour, GAE 16x8192 with ``last_value`` in the doubling mode took 364 ms with
2 threads against 1.3 ms with one; ``benchmarks/cpu_busy.py`` measures
every mode both ways. With one thread nothing waits for anyone, and the quiet
machine loses little: 2 threads saved 0-30% on these sizes.

So each phase of a CPU call runs on one thread unless its operations hold at least
:data:`PARALLEL_MIN_ELEMENTS` elements each, enough work (milliseconds) to pay for
a descheduled thread. The thread count is set for the call and restored after it;
with torch's OpenMP backend it is a per-thread setting, so other Python threads
keep theirs (MKL's count, used by Retrace's CPU matmul, is process-wide).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

#: Elements per operation from which a phase keeps torch's thread count (4M floats:
#: about 2-4 ms of one core's elementwise work, a scheduler time slice or more).
PARALLEL_MIN_ELEMENTS = 1 << 22


@contextmanager
def serial_below(device: torch.device, elements: int) -> Iterator[None]:
    """Run the block on one CPU thread when its operations hold fewer than
    :data:`PARALLEL_MIN_ELEMENTS` elements each (CPU eager calls only)."""
    if device.type != "cpu" or elements >= PARALLEL_MIN_ELEMENTS:
        yield
        return
    before = torch.get_num_threads()
    if before == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
