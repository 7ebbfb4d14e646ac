"""Every strategy's kernels compile for an H200 (sm_90) with the installed Triton.

The interpreter suite cannot catch GPU compile errors; ``gpu_compile.py`` compiles
the real launches (ptxas ships with Triton's wheel, no GPU needed). It runs in a
subprocess because the test process's kernels were created under TRITON_INTERPRET=1.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("gpu_compile.py")


def _nvidia_backend() -> bool:
    try:
        import triton.backends.nvidia as nvidia
    except Exception:  # noqa: BLE001 - no Triton, or a build without the CUDA backend
        return False
    return (Path(nvidia.__file__).parent / "bin" / "ptxas").exists()


def _compiled_json(code: str, tmp_path: Path) -> dict:
    """Run ``code`` in a fresh process with real (not interpreted) kernels and its own
    Triton cache, from the checkout's root; the JSON its last line of output prints."""
    import json

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=600, cwd=SCRIPT.parents[2])
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not _nvidia_backend(), reason="Triton's CUDA backend (ptxas) not installed")
def test_every_strategy_compiles_for_sm90(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")  # really compile, no cache hits
    done = subprocess.run([sys.executable, str(SCRIPT), "--workers", "2"], env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    compiled, total = map(int, re.search(r"(\d+) of (\d+)", done.stderr).groups())
    assert compiled == total >= 5 * 7 * 2  # every strategy x estimator, 32- and 64-bit offsets


ACCESSES = """
import json, sys
sys.path.insert(0, {here!r})
from gpu_compile import global_accesses
from rltriton_tune.kernels import launch
out = {{}}
for hints in (True, False):
    launch.ALIGN_HINTS = hints
    out[str(hints)] = global_accesses("flat", {key!r}, {{"BLOCK_N": {rows}, "num_warps": 4}})
print(json.dumps(out))
"""


@pytest.mark.skipif(not _nvidia_backend(), reason="Triton's CUDA backend (ptxas) not installed")
@pytest.mark.parametrize("key", ["gae|none|float32|env|N=300|T=300",
                                 "eligibility_traces|none|float32|time|N=300|T=300",
                                 "retrace|trunc|float32|env|N=300|T=256|A=8"])
def test_alignment_hints_give_vector_accesses(key, tmp_path):
    """A size that is a multiple of 4 but not of 16 compiles to 16-byte loads and stores
    along the contiguous axis with the hints, and to 4-byte ones without
    (benchmarks/switches.py times both on a GPU). For Retrace the size is A = 8: its action
    rows (T is a multiple of 16, so only the per-action loads depend on the hints)."""
    # Time-major rows are the contiguous axis: a program needs several to form a vector.
    code = ACCESSES.format(here=str(SCRIPT.parent), key=key, rows=8 if "|time|" in key else 1)
    found = _compiled_json(code, tmp_path)
    (hinted,), (plain,) = found["True"], found["False"]
    if "retrace" in key:  # per-action loads: BLOCK_A = 4096 // 256 = 16 -> A = 8 whole
        assert hinted.get("ld.global.v4.b32", 0) > plain.get("ld.global.v4.b32", 0)
        assert hinted.get("ld.global.b32", 0) < plain.get("ld.global.b32", 0)
        return
    assert hinted.get("ld.global.v4.b32", 0) >= 1 and hinted.get("st.global.v4.b32", 0) >= 1
    assert not any(".v" in op for op in plain), plain


PTX_OPS = r"""
import json, re, sys
from collections import Counter
sys.path.insert(0, {here!r})
from gpu_compile import compiled_launches
from rltriton_tune.call import ProblemKey
out = {{}}
for name, (key, params) in {cases!r}.items():
    ptx = compiled_launches("flat", ProblemKey.from_text(key), params)[-1].asm["ptx"]
    out[name] = dict(Counter(re.findall(r"(shfl\.sync\.\w+|max\.f32|min\.f32)", ptx)))
print(json.dumps(out))
"""


@pytest.mark.skipif(not _nvidia_backend(), reason="Triton's CUDA backend (ptxas) not installed")
def test_flat_tile_order_and_absent_flags_in_the_compiled_code(tmp_path):
    """At rl-triton's config (one 256-step row, 4 warps): flipped runs of vectors scan
    their aggregates in reverse across lanes, with butterfly shuffles; ``DESCEND=1``
    scans the tile forward, with no butterflies, as rl-triton does. Without
    truncations the returns estimators take no max of flags (an absent input adds no
    work)."""
    rl = {"BLOCK_N": 1, "num_warps": 4, "num_stages": 3}
    cases = {"runs": ("gae|last_value|float32|env|N=333|T=150", {**rl, "DESCEND": 0}),
             "descending": ("gae|last_value|float32|env|N=333|T=150", {**rl, "DESCEND": 1}),
             "returns": ("discounted_returns|none|float32|env|N=333|T=150", rl),
             "lambda": ("lambda_returns|none|float32|env|N=333|T=150", rl)}
    found = _compiled_json(PTX_OPS.format(here=str(SCRIPT.parent), cases=cases), tmp_path)
    assert found["runs"].get("shfl.sync.bfly", 0) > 0, found["runs"]
    assert "shfl.sync.bfly" not in found["descending"], found["descending"]
    assert found["descending"].get("shfl.sync.up", 0) > 0, found["descending"]
    for name in ("returns", "lambda"):
        assert "max.f32" not in found[name] and "min.f32" not in found[name], found[name]


REGISTERS = r"""
import json, re, subprocess, sys, tempfile
from pathlib import Path
sys.path.insert(0, {here!r})
from gpu_compile import compiled_launches
from triton.tools.disasm import path_to_cuobjdump
from rltriton_tune.call import ProblemKey
out = {{}}
for name, params in {cases!r}.items():
    cubin = compiled_launches("flat", ProblemKey.from_text({key!r}), params)[-1].asm["cubin"]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kernel.cubin"
        path.write_bytes(cubin)
        text = subprocess.run([path_to_cuobjdump(), "-res-usage", str(path)], check=True,
                              capture_output=True, text=True).stdout
    out[name] = int(re.search(r"REG:(\d+)", text).group(1))
print(json.dumps(out))
"""


@pytest.mark.skipif(not _nvidia_backend(), reason="Triton's CUDA backend (ptxas) not installed")
def test_two_blocks_caps_the_registers_a_thread(tmp_path):
    """``TWO_BLOCKS=1`` reaches the compiler: V-trace at rl-triton's config for 2,799
    steps (one row of 4096 a program, 16 warps) fits 64 registers a thread, so two
    programs share a multiprocessor (sm_90, Triton 3.6: 106 without the cap)."""
    rl = {"BLOCK_N": 1, "num_warps": 16, "num_stages": 2, "DESCEND": 1}
    cases = {"compiler": {**rl, "TWO_BLOCKS": 0}, "capped": {**rl, "TWO_BLOCKS": 1}}
    found = _compiled_json(REGISTERS.format(here=str(SCRIPT.parent), cases=cases,
                                            key="vtrace|none|float32|env|N=11077|T=2799"),
                           tmp_path)
    # the premise (one program an SM without the cap) and the cap reaching ptxas
    assert found["compiler"] > 64 >= found["capped"], found


@pytest.mark.parametrize("key_text, strategy, params", [
    ("gae|none|float32|env|N=12|T=45000", "tiled", {"BLOCK_N": 1, "BLOCK_T": 1024}),
    ("gae|none|float32|env|N=100000|T=12", "flat", {"BLOCK_N": 16}),
    ("vtrace|none|float32|env|N=3000|T=5000", "tiled", {"BLOCK_N": 2, "BLOCK_T": 512}),
    ("eligibility_traces|none|float32|env|N=40|T=9000", "lookback", {"BLOCK_T": 1024}),
])
def test_the_gates_small_copy_specialises_like_the_key(key_text, strategy, params):
    """The correctness gate checks a big key on a small copy first; with the same
    specialisation (integer divisibility, alignment constexprs) both launches use one
    binary, so gating a config compiles it once."""
    sys.path.insert(0, str(SCRIPT.parent))
    from gpu_compile import OPTIONS, _specialize, recorded_launches

    from rltriton_tune.call import ProblemKey
    from rltriton_tune.kernels import strategies
    from rltriton_tune.tune.gate import small_key

    key = ProblemKey.from_text(key_text)
    full = strategies()[strategy].validate(key, params)  # as the gate passes them

    def specialisations(key):
        out = []
        for kernel, args, consts in recorded_launches(strategy, key, full):
            options = {k: consts.pop(k) for k in OPTIONS if k in consts}
            sig, consts, attrs = _specialize(kernel, args, consts)
            out.append((sig, {k: str(v) for k, v in consts.items()}, attrs, options))
        return out

    assert small_key(key) != key
    assert specialisations(small_key(key)) == specialisations(key)


SYNC = """
import json, re, sys
sys.path.insert(0, {here!r})
from gpu_compile import compiled_launches
from rltriton_tune.call import ProblemKey
out = {{}}
for strategy, key, params in {cases!r}:
    ptx = compiled_launches(strategy, ProblemKey.from_text(key), params)[0].asm["ptx"]
    out[key] = [len(re.findall(r"\\bbar\\.sync", ptx)), len(re.findall(r"\\bshfl\\.", ptx))]
print(json.dumps(out))
"""


@pytest.mark.skipif(not _nvidia_backend(), reason="Triton's CUDA backend (ptxas) not installed")
def test_per_env_inputs_and_column_scans_stay_in_registers(tmp_path):
    """``last_value`` and seeds add no barrier to the flat kernel (a [BLOCK_N, BLOCK_T]
    load of one address a row made Triton 3.6 move every input tile through shared
    memory), and time-major column tiles scan without shuffles (descending tiles, the
    look-back's window composed by a forward scan)."""
    flat = {"BLOCK_N": 1, "num_warps": 4}
    cols = {"BLOCK_N": 128, "BLOCK_T": 8, "num_warps": 1}
    cases = [("flat", "gae|none|float32|env|N=24000|T=300", flat),
             ("flat", "gae|last_value|float32|env|N=24000|T=300", flat),
             ("flat", "eligibility_traces|none|float32|env|N=24000|T=300", flat),
             ("flat", "eligibility_traces|seed|float32|env|N=24000|T=300", flat),
             ("columns", "gae|last_value|float32|time|N=32768|T=2048", cols)]
    # One warp of single-element loads: whole columns a lane where N is odd (what
    # ``shapes.lane_elems`` tells ``columns``' search), four lanes a column where N is a
    # multiple of 4 (16-byte loads of 4 columns a lane).
    narrow = {"BLOCK_N": 32, "BLOCK_T": 32, "num_warps": 1}
    cases += [("columns", "gae|none|float32|time|N=4745|T=1047", narrow),
              ("columns", "gae|none|float32|time|N=4096|T=1047", narrow)]
    found = _compiled_json(SYNC.format(here=str(SCRIPT.parent), cases=cases), tmp_path)
    assert found[cases[1][1]][0] == found[cases[0][1]][0], found
    assert found[cases[3][1]][0] == found[cases[2][1]][0], found
    assert found[cases[4][1]][1] == 0, found
    assert found[cases[5][1]][1] == 0 < found[cases[6][1]][1], found


PIPELINE = """
import json, sys
sys.path.insert(0, {here!r})
from gpu_compile import compiled_launches
from rltriton_tune.call import ProblemKey
out = []
for strategy, key, params in {cases!r}:
    ptxs = [c.asm["ptx"] for c in compiled_launches(strategy, ProblemKey.from_text(key), params)]
    # per launch: asynchronous copies, plain global loads
    out.append([[ptx.count("cp.async.c"), ptx.count("ld.global")] for ptx in ptxs])
print(json.dumps(out))
"""


@pytest.mark.skipif(not _nvidia_backend(), reason="Triton's CUDA backend (ptxas) not installed")
def test_stages_pipeline_the_time_loops(tmp_path):
    """``num_stages`` > 1 turns the tile loops' (tiled, split) and the step loop's
    (sequential) input loads into asynchronous copies issued ahead; at 1 stage they stay
    plain loads.
    Triton pipelines a loop without a matrix product only when the loop asks for stages,
    so this guards the ``tl.range`` in both cores."""
    key = "gae|none|float32|time|N=32768|T=2048"
    tile = {"BLOCK_N": 128, "BLOCK_T": 16, "num_warps": 1}
    cases = [("tiled", key, {**tile, "num_stages": 1}), ("tiled", key, {**tile, "num_stages": 3}),
             ("sequential", key, {"BLOCK_N": 128, "num_warps": 1, "num_stages": 1}),
             ("sequential", key, {"BLOCK_N": 128, "num_warps": 1, "num_stages": 8}),
             ("tiled", "vtrace|none|float32|env|N=4096|T=8192",
              {"BLOCK_N": 1, "BLOCK_T": 1024, "num_warps": 8, "num_stages": 3}),
             ("split", "vtrace|none|float32|time|N=64|T=32768",
              {"BLOCK_N": 1, "BLOCK_T": 256, "CHUNK_T": 1024, "CARRY_BLOCK": 64,
               "num_warps": 2, "num_stages": 3})]
    found = _compiled_json(PIPELINE.format(here=str(SCRIPT.parent), cases=cases), tmp_path)
    ((tiled1,), (tiled3,), (seq1,), (seq8,), (env3,), split3) = found
    assert tiled1[0] == 0 and tiled1[1] > 0, found
    assert tiled3[0] > 0, found
    assert seq1[0] == 0 and seq8[0] > 0, found
    assert env3[0] > 0, found
    assert len(split3) == 2 and all(copies > 0 for copies, _ in split3), found  # both passes
