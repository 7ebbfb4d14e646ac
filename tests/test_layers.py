"""The package's layers depend one way: core <- runtime <- tooling.

core (algorithms, kernels, fallback, reference) imports neither runtime nor tooling;
the runtime (estimators, dispatch, profile loading, process state) never imports the
tooling (tuner, bench, CLI): online tuning plugs in from the tooling side. Imports
inside functions count too. The package's ``__init__`` is the facade that wires them.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import rltriton_tune

PACKAGE = Path(rltriton_tune.__file__).resolve().parent

CORE = ("algorithms", "call", "codegen", "pow2", "problems", "reference", "strategy",
        "kernels", "fallback")
RUNTIME = ("settings", "state", "estimators", "hot_path", "dispatch", "tuning_db", "torchrl",
           "autograd", "fused_grad", "ops")
TOOLING = ("tune", "cli")


def layer(module: str) -> str | None:
    """The layer of ``rltriton_tune.<module...>`` (None for the facade)."""
    parts = module.split(".")
    if parts[0] != "rltriton_tune":
        return None
    if len(parts) == 1:
        return "facade"
    top = parts[1]
    for name, members in (("core", CORE), ("runtime", RUNTIME), ("tooling", TOOLING)):
        if top in members:
            return name
    return "unknown"


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts).removesuffix(".__init__")
        out[name] = path
    return out


def imports_of(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # ``from package import module`` imports the module; other names are attributes
            # of ``base`` itself
            names = {f"{base}.{alias.name}" for alias in node.names}
            submodules = names & set(modules())
            found |= submodules if submodules == names else submodules | {base}
    return {name for name in found if name.startswith("rltriton_tune")}


ALLOWED = {"core": {"core"}, "runtime": {"core", "runtime"},
           "tooling": {"core", "runtime", "tooling", "facade"}}


def test_every_module_belongs_to_a_layer():
    unknown = sorted(m for m in modules() if layer(m) == "unknown")
    assert not unknown, f"modules outside the layer table: {unknown}"


@pytest.mark.parametrize("module", sorted(modules()))
def test_imports_point_down_the_layers(module):
    own = layer(module)
    if own == "facade":
        return
    bad = sorted(name for name in imports_of(modules()[module], module)
                 if layer(name) not in ALLOWED[own])
    assert not bad, f"{module} ({own}) imports {bad}"


def test_import_and_first_calls_load_no_tooling():
    """``import rltriton_tune``, a first call and ``explain`` load neither the tuner nor the
    CLI, nor Optuna, matplotlib or tqdm beyond what torch itself loads."""
    code = ("import sys, torch\n"
            "before = set(sys.modules)\n"
            "import rltriton_tune as R\n"
            "R.compute_gae(torch.randn(3, 5), torch.randn(3, 5), torch.zeros(3, 5))\n"
            "R.explain('vtrace', 64, 64)\n"
            "new = set(sys.modules) - before\n"
            "print(sorted(m for m in new if m.split('.')[0] in ('optuna', 'matplotlib', "
            "'tqdm', 'sqlalchemy', 'alembic') or m.startswith(('rltriton_tune.tune', "
            "'rltriton_tune.cli'))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "RLTRITON_TUNE_ONLINE": "0"})
    assert out.stdout.strip() == "[]"
