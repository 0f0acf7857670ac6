"""The layer contracts (pyproject.toml, `lint-imports` in make test) hold, and fire on a wrong-way import.

grimp reads every import statement of a module, so an import inside a
function or under `if TYPE_CHECKING:` breaks a contract like any other.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")
PACKAGES = ("core", "stack", "manifests", "admission", "components", "tools", "trainers", "controllers", "tests", "bench", "policy", "e2e")
TRAINER_NAMES = ("gemma-jax", "trl-gpu")


def lint(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(LINT), "--config", "pyproject.toml", "--no-cache"],
        cwd=root, capture_output=True, text=True, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """The project's Python packages and its import contracts, in a scratch directory."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__", "golden", "*.json", "*.yaml"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    return tmp_path


def test_the_real_tree_keeps_every_contract(tree):
    result = lint(tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def _prepend(path: Path, text: str) -> None:
    source = path.read_text()
    at = source.index("\nfrom ") + 1  # after the module docstring and __future__ import
    path.write_text(source[:at] + text + source[at:])


@pytest.mark.parametrize("module, injected, broken", [
    # The pure facts reaching up to the stack, hidden behind TYPE_CHECKING.
    ("core/catalog.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from stack.config import StackConfig\n",
     "Layers: each imports only the layers below it"),
    # A manifest builder importing a component inside a function.
    ("manifests/run.py", "def _late():\n    from components.runs import Runs\n    return Runs\n",
     "Layers: each imports only the layers below it"),
    # A cycle inside the stack layer: the config imports the rules, the rules the config.
    ("stack/rules.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from stack.config import StackConfig\n",
     "No import cycles inside a layer"),
    # Pulumi in a manifest builder.
    ("manifests/pod.py", "import pulumi\n", "Manifests and admission rules are pure: no Pulumi"),
    # A trainer reading the platform's catalog.
    ("trainers/gemma_jax/__init__.py", "from core import catalog\n", "Trainers import nothing of the platform"),
    # Shipped code leaning on test support.
    ("tools/render.py", "from tests.support import examples\n", "Shipped code does not import test support"),
])  # fmt: skip
def test_a_wrong_way_import_breaks_its_contract(tree, module, injected, broken):
    path = tree / module
    if "\nfrom " in path.read_text():
        _prepend(path, injected)
    else:
        path.write_text(path.read_text() + "\n" + injected)
    result = lint(tree)
    assert result.returncode != 0
    assert f"{broken} BROKEN" in result.stdout, result.stdout


def _string_constants(path: Path) -> set[str]:
    return {n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def test_trainer_names_are_spelled_only_in_the_trainer_table():
    """`gemma-jax` and `trl-gpu` appear in the trainer table, stack files, docs and tests, nowhere else."""
    shipped = [ROOT / "__main__.py"] + [p for d in ("core", "stack", "manifests", "admission", "components", "tools", "policy")
                                        for p in (ROOT / d).rglob("*.py")]
    offenders = {
        str(p.relative_to(ROOT)): sorted(name for name in TRAINER_NAMES if any(name in s for s in _string_constants(p)))
        for p in shipped
        if p != ROOT / "core" / "trainers.py"
    }
    assert {k: v for k, v in offenders.items() if v} == {}
    assert all(any(name in s for s in _string_constants(ROOT / "core" / "trainers.py")) for name in TRAINER_NAMES)


def test_main_only_wires_components():
    """__main__.py imports components and the stack reader, and defines nothing of its own."""
    tree = ast.parse((ROOT / "__main__.py").read_text())
    imported = {a.name if isinstance(n, ast.Import) else n.module
                for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    assert {m.split(".")[0] for m in imported} <= {"pulumi", "components", "admission", "stack"}
    assert not [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    top_level_imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    nested = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert len(nested) == len(top_level_imports), "imports only at the top of the file"
    first_statement = next(i for i, n in enumerate(tree.body) if not isinstance(n, (ast.Import, ast.ImportFrom, ast.Expr)))
    assert all(i < first_statement for i, n in enumerate(tree.body) if n in top_level_imports)


def _trainer_import_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the modules of its own package it imports, anywhere in the file (AST)."""
    prefix = ".".join(package.relative_to(ROOT).parts)
    graph: dict[str, set[str]] = {}
    for path in package.glob("*.py"):
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == prefix:
                edges |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(prefix + "."):
                edges.add(node.module.removeprefix(prefix + ".").split(".")[0])
            elif isinstance(node, ast.Import):
                edges |= {a.name.removeprefix(prefix + ".").split(".")[0] for a in node.names
                          if a.name.startswith(prefix + ".")}
        graph[path.stem] = edges - {path.stem}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found, state = [], {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                found.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


@pytest.mark.parametrize("package", ["trainers/gemma_jax", "trainers/trl_gpu", "trainers/staging"])
def test_the_trainers_have_no_import_cycles(package):
    """Imports inside functions count too (the Hugging Face codecs once imported each other that way)."""
    assert _cycles(_trainer_import_graph(ROOT / package)) == []


def test_the_cycle_check_fires():
    assert _cycles({"hf": {"hf_gemma4"}, "hf_gemma4": {"hf"}}) == [["hf", "hf_gemma4", "hf"]]
