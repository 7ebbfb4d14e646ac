"""Drop-in for rl-triton 0.1.3: its seven functions' signatures hold here unchanged.

rl-triton imports Triton kernels for CUDA at import time, so its source is read
with ``ast`` instead of imported: from the wheel named by ``RL_TRITON_WHEEL``,
from the copy next to this project's checkout (``../shared/peers``), or from an
installed ``rl_triton``. Skipped when none is there.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import os
import zipfile
from pathlib import Path

import pytest

import rltriton_tune
from rltriton_tune.algorithms import ALGORITHMS

WHEEL_NAME = "rl_triton-0.1.3-py3-none-any.whl"
FUNCTIONS = ("compute_gae", "compute_vtrace", "compute_retrace", "compute_lambda_returns",
             "compute_discounted_returns", "compute_eligibility_traces",
             "compute_episodic_prefix_sum")


def _sources() -> dict[str, str] | None:
    """Text of rl-triton's ``ops/*.py`` by file name, or None when it is nowhere here."""
    candidates = [os.environ.get("RL_TRITON_WHEEL", "")]
    root = Path(__file__).resolve().parents[1]
    candidates += [str(root.parent / "shared" / "peers" / WHEEL_NAME),
                   str(root.parent.parent / "shared" / "peers" / WHEEL_NAME)]
    for wheel in filter(None, candidates):
        if os.path.isfile(wheel):
            with zipfile.ZipFile(wheel) as archive:
                return {Path(name).name: archive.read(name).decode()
                        for name in archive.namelist()
                        if name.startswith("rl_triton/ops/") and name.endswith(".py")}
    spec = importlib.util.find_spec("rl_triton")    # finds, does not import
    if spec is None or not spec.submodule_search_locations:
        return None
    ops = Path(next(iter(spec.submodule_search_locations))) / "ops"
    return {p.name: p.read_text() for p in ops.glob("*.py")}


def _their_functions() -> dict[str, ast.FunctionDef]:
    sources = _sources()
    if sources is None:
        pytest.skip(f"rl-triton 0.1.3 not found (set RL_TRITON_WHEEL to {WHEEL_NAME})")
    found = {}
    for text in sources.values():
        for node in ast.parse(text).body:
            if isinstance(node, ast.FunctionDef) and node.name in FUNCTIONS:
                found[node.name] = node
    assert set(found) == set(FUNCTIONS)
    return found


def _parameters(node: ast.FunctionDef) -> list[tuple[str, object]]:
    """(name, default) of each positional parameter (``inspect.Parameter.empty`` if none)."""
    args = node.args
    assert not args.kwonlyargs and not args.vararg and not args.kwarg
    defaults = [inspect.Parameter.empty] * (len(args.args) - len(args.defaults))
    defaults += [ast.literal_eval(d) for d in args.defaults]
    return [(a.arg, d) for a, d in zip(args.args, defaults, strict=True)]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_rl_triton_parameter_and_default_is_ours(name):
    theirs = _parameters(_their_functions()[name])
    ours = list(inspect.signature(getattr(rltriton_tune, name)).parameters.values())
    positional = [p for p in ours if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    # Same names, same order, same defaults: positional and keyword calls bind alike.
    assert [(p.name, p.default) for p in positional] == theirs
    # Everything added here is keyword-only with a default: no old call changes meaning.
    for p in ours[len(positional):]:
        assert p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is not p.empty, p


@pytest.mark.parametrize("name", FUNCTIONS)
def test_return_arity_matches(name):
    returns = ast.unparse(_their_functions()[name].returns)
    pair = returns.startswith("tuple")
    assert len(ALGORITHMS[name.removeprefix("compute_")].outputs) == (2 if pair else 1), returns


def test_both_bootstrap_arguments_raise_what_rl_triton_raised():
    """rl-triton asserts ``bootstrap_values is None`` when ``last_value`` is given."""
    source = ast.unparse(_their_functions()["compute_gae"])
    assert "assert bootstrap_values is None" in source
    import torch

    x = torch.zeros(2, 3)
    with pytest.raises(AssertionError):
        rltriton_tune.compute_gae(x, x, x, bootstrap_values=x, last_value=torch.zeros(2))
    with pytest.raises(AssertionError):
        rltriton_tune.compute_vtrace(x, x, x, x, x, bootstrap_values=x,
                                     last_value=torch.zeros(2))
