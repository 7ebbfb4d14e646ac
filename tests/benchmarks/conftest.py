"""Load the scripts of ``benchmarks/`` as modules (they are not a package)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def script():
    """``script("peers")``: the module ``benchmarks/peers.py``, imported from its folder."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    return importlib.import_module
