"""Every script in examples/ runs to completion on a CPU, as a user would run it."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
#: Examples that need an optional package, by the module they import.
NEEDS = {"torchrl_ppo_loss.py": "torchrl"}


def test_examples_found():
    assert {p.name for p in EXAMPLES} >= {"cleanrl_ppo.py", "rl_triton_switch.py",
                                          "torchrl_ppo_loss.py"}


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(script):
    needed = NEEDS.get(script.name)
    if needed and importlib.util.find_spec(needed) is None:
        pytest.skip(f"{script.name} needs {needed}")
    # A user's environment: this checkout importable, no Triton interpreter.
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip()
