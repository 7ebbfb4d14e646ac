"""Retrace's action pre-pass past 2^31 steps: program indices computed in 64 bits.

The interpreter runs a kernel as program K of a larger grid when its program id is
shifted (the builder's ``create_get_program_id``), so the index arithmetic of a grid
too large to allocate here is checked on a few elements. A regression (``pid * BLOCK``
in 32 bits) wraps to negative indices, which pass the ``p < P`` mask: the pre-pass
check runs in a child process, so that such a read cannot take the test run down.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

triton = pytest.importorskip("triton")
interpreter = pytest.importorskip("triton.runtime.interpreter")

pytestmark = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1"
    or not hasattr(getattr(interpreter, "InterpreterBuilder", None), "create_get_program_id"),
    reason="needs the Triton interpreter and its program-id hook")

#: Shifts the interpreter's program ids by ``SHIFT`` (set by the code that follows).
PROGRAM_SHIFT = """
import numpy as np
import triton.language as tl
from triton.runtime import interpreter

_own = interpreter.InterpreterBuilder.create_get_program_id


def _shifted(self, axis):
    pid = _own(self, axis)
    return interpreter.TensorHandle((pid.data + SHIFT).astype(np.int32), tl.int32)


interpreter.InterpreterBuilder.create_get_program_id = _shifted
"""


def run_child(body: str) -> str:
    code = textwrap.dedent(body)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_block_indices_of_a_program_past_2_31_elements_are_int64():
    out = run_child("""
        import torch, triton, triton.language as tl
        from rltriton_tune.kernels.scan import block_indices
        BLOCK = 4096
        SHIFT = 2**31 // BLOCK + 3          # the block starting at 2^31 + 3 * 4096
        """ + textwrap.indent(PROGRAM_SHIFT, "        ") + """
        @triton.jit
        def probe(OUT, BLOCK: tl.constexpr, BIG: tl.constexpr):
            tl.store(OUT + tl.arange(0, BLOCK), block_indices(tl.program_id(0), BLOCK, BIG))

        out = torch.zeros(BLOCK, dtype=torch.int64)
        probe[(1,)](out, BLOCK=BLOCK, BIG=True)
        want = SHIFT * BLOCK + torch.arange(BLOCK)
        print(bool(torch.equal(out, want)), out[0].item(), want[0].item())
        """)
    assert out.split()[0] == "True", out


def test_wide_product_does_not_wrap():
    """The look-back words' plane (chunks x N) and split's aggregate offsets are products
    of two int32 sizes: with BIG they are formed in int64, where an int32 product cast
    afterwards has already wrapped (4096 chunks of 2^20 rows: 2^32, not 0)."""
    out = run_child("""
        import torch, triton, triton.language as tl
        from rltriton_tune.kernels.scan import wide_product

        @triton.jit
        def probe(OUT, X, Y, BIG: tl.constexpr):
            tl.store(OUT, wide_product(X, Y, BIG))
            tl.store(OUT + 1, wide_product(tl.program_id(0) + X - 1, Y, BIG))

        out = torch.zeros(2, dtype=torch.int64)
        probe[(1,)](out, 4096, 2**20, BIG=True)
        wide = out.tolist()
        probe[(1,)](out, 3, 7, BIG=False)
        print(wide == [2**32, 4095 * 2**20] and out.tolist() == [21, 14], wide)
        """)
    assert out.split()[0] == "True", out


def test_the_pre_pass_past_2_31_steps_touches_only_its_own_steps():
    """The program that starts at step 2^31 of a problem whose steps end there reads and
    writes nothing (all its steps are masked); a wrapped index would read at negative
    offsets and write the outputs."""
    out = run_child("""
        import torch
        from rltriton_tune.kernels.actions import MAX_BLOCK_A, TILE, expectation_kernel
        A = 4
        BLOCK_P = TILE // A
        SHIFT = 2**31 // BLOCK_P            # its first step is 2^31 = P
        """ + textwrap.indent(PROGRAM_SHIFT, "        ") + """
        pi = torch.full((BLOCK_P, A), 0.25)
        nq = torch.ones(BLOCK_P, A)
        mu = torch.ones(BLOCK_P)
        act = torch.zeros(BLOCK_P, dtype=torch.int64)
        ratio = torch.full((BLOCK_P,), 7.0)
        eq = torch.full((BLOCK_P,), 7.0)
        expectation_kernel[(1,)](pi, mu, nq, act, ratio, eq, SHIFT * BLOCK_P, A=A,
                                 BLOCK_P=BLOCK_P, BLOCK_A=min(A, MAX_BLOCK_A), BIG=True)
        print(bool((ratio == 7).all() and (eq == 7).all()))
        """)
    assert out.split()[0] == "True", out
