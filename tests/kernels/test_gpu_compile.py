"""Every strategy's kernels compile for an H200 (sm_90) with the installed Triton.

The interpreter suite cannot catch GPU compile errors; ``gpu_compile.py`` compiles
the real launches (ptxas ships with Triton's wheel, no GPU needed). It runs in a
subprocess because this session's kernels were created under TRITON_INTERPRET=1.
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


@pytest.mark.skipif(not _nvidia_backend(), reason="Triton's CUDA backend (ptxas) not installed")
def test_every_strategy_compiles_for_sm90(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")  # really compile, no cache hits
    done = subprocess.run([sys.executable, str(SCRIPT), "--workers", "2"], env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    compiled, total = map(int, re.search(r"(\d+) of (\d+)", done.stderr).groups())
    assert compiled == total >= 5 * 7 * 2  # every strategy x estimator, 32- and 64-bit offsets
