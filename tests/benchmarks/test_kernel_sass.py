"""benchmarks/kernel_sass.py: our kernels compiled for sm_90 on the CPU, their SASS
counted; the counts of a hand-written listing, resource report and tile layouts;
--params, --strategy; the interpreter refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

LISTING = """Function:k
--:-:-:-:1\tLDC R1, c[0x0][0x28];
--:-:0:-:7\tS2R R3, SR_CTAID.X;
--:-:-:-:1\tISETP.GE.AND P0, PT, R3, UR6, PT;
--:-:-:-:1\t@P0 LDG.E R4, desc[UR6][R6.64];
--:-:-:-:1\t@!P0 FSEL R5, R4, RZ, P1;
--:-:-:-:1\tSHFL.UP PT, R5, R4, 0x1, RZ;
--:-:-:-:1\tBAR.SYNC.DEFER_BLOCKING 0x0;
--:-:-:-:1\tSTG.E desc[UR6][R6.64], R5;
--:-:-:-:1\tEXIT;
"""


def test_counts_of_a_listing(script):
    sass = script("kernel_sass")
    got = sass.counts(LISTING)
    assert got == {"instructions": 9, "before_first_load": 3, "LDG": 1, "STG": 1, "SHFL": 1,
                   "BAR": 1, "FSEL": 1, "ISETP": 1}
    assert sass.counts("Function:k\n")["before_first_load"] == 0


RESOURCE_USAGE = """
Resource usage:
 Common:
  GLOBAL:0
 Function flat_kernel:
  REG:255 STACK:8 SHARED:1024 LOCAL:0 CONSTANT[0]:640 TEXTURE:0 SURFACE:0 SAMPLER:0
"""


def test_resources_of_a_report(script):
    sass = script("kernel_sass")
    assert sass.parse_resources(RESOURCE_USAGE) == {"registers": 255, "stack_bytes": 8}
    with pytest.raises(RuntimeError, match="no resource usage"):
        sass.parse_resources("Resource usage:\n")


TTGIR = """#blocked = #ttg.blocked<{sizePerThread = [1, 1], threadsPerWarp = [32, 1], \
warpsPerCTA = [1, 1], order = [0, 1]}>
#blocked1 = #ttg.blocked<{sizePerThread = [4, 1], threadsPerWarp = [8, 4], \
warpsPerCTA = [1, 1], order = [0, 1]}>
#blocked2 = #ttg.blocked<{sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [1], \
order = [0]}>
"""


def test_tile_layouts_of_an_ir(script):
    """Two-dimensional layouts only (a vector of carries is not a tile), sorted."""
    assert script("kernel_sass").tile_layouts(TTGIR) == ["1x1/32x1", "4x1/8x4"]
    assert script("kernel_sass").tile_layouts("module {}") == []


def test_params_are_parsed_and_bad_items_named(script):
    sass = script("kernel_sass")
    assert sass.parse_params("BLOCK_N=16, num_warps=4,") == {"BLOCK_N": 16, "num_warps": 4}
    with pytest.raises(ValueError, match="NAME=INT items, got 'BLOCK_N'"):
        sass.parse_params("BLOCK_N")
    with pytest.raises(ValueError, match="num_warps must be an integer, got 'four'"):
        sass.parse_params("num_warps=four")


def test_capture_refuses_the_interpreter(script, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        script("kernel_sass").capture(lambda: None)


def _run_smoke(*args: str) -> subprocess.CompletedProcess:
    """``kernel_sass.py --smoke`` with ``args`` in a process of its own, the interpreter
    off; skips the test where this Triton cannot assemble or disassemble for NVIDIA."""
    triton = pytest.importorskip("triton")
    tools = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    if not all((tools / name).exists() for name in ("ptxas", "cuobjdump")):
        pytest.skip("this Triton has no NVIDIA assembler or disassembler")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_DEFAULT_FP_FUSION"] = "1"
    return subprocess.run([sys.executable, str(BENCHMARKS / "kernel_sass.py"), "--smoke",
                           *args], env=env, capture_output=True, text=True, timeout=900)


def test_smoke_compiles_our_kernel_for_sm90_and_counts_it(tmp_path):
    """Outside the interpreter (a process of its own): the flat kernel of a tiny GAE cell
    at the config asked for is captured at its launch, compiled for sm_90 and
    disassembled; its counts are those of a real kernel (loads of three inputs, a store,
    a scan's shuffles)."""
    done = _run_smoke("--params", "BLOCK_N=2,num_warps=1,num_stages=1",
                      "--output", str(tmp_path), "--dump", str(tmp_path / "sass"))
    assert done.returncode == 0, done.stderr[-2000:]
    (row,) = json.loads((tmp_path / "kernel_sass.json").read_text())["rows"]
    ours = row["ours"]
    assert row["cell"] == "gae|none|float32|env|N=5|T=6" and row["arch"] == "sm_90"
    assert ours["LDG"] >= 3 and ours["STG"] >= 1 and ours["SHFL"] >= 1
    assert 0 < ours["before_first_load"] < ours["instructions"]
    # the config asked for, and the assembler's registers for it (a tiny tile: no spills)
    assert row["params"] == {"BLOCK_N": 2, "num_warps": 1, "num_stages": 1, "DESCEND": 1,
                             "TWO_BLOCKS": 0}
    assert 0 < ours["registers"] <= 255 and ours["stack_bytes"] == 0
    listing = next((tmp_path / "sass").glob("*.ours.sass")).read_text()
    assert "flat_kernel" in listing
    assert "| gae\\|none" in done.stdout


def test_smoke_compiles_another_strategy_at_its_default_config(tmp_path):
    """``--strategy``: the tiled kernel of the smoke cell at its default config, compiled
    and counted like the flat one, with its tile layouts."""
    done = _run_smoke("--strategy", "tiled", "--output", str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    (row,) = json.loads((tmp_path / "kernel_sass.json").read_text())["rows"]
    assert row["strategy"] == "tiled" and {"BLOCK_N", "BLOCK_T"} <= set(row["params"])
    assert row["ours"]["LDG"] >= 3 and row["ours"]["layouts"]
    assert "| tiled BLOCK_N=" in done.stdout
    bad = _run_smoke("--strategy", "warp9")
    assert bad.returncode == 2 and "--strategy: expected one of flat" in bad.stderr
