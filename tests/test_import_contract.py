"""The package layout keeps its import contract, and no import hides a loop.

The contract itself lives in ``pyproject.toml`` (``[tool.importlinter]``): cli over the
composition root over flows and adapters over engine, ports and the base modules; flows layered
among themselves; adapters never reaching the engine. ``lint-imports`` checks it on the installed
package. A lazy import (inside a function) is the usual way to dodge a loop, so only imports of
optional dependencies may be lazy, and each says so on the line before it.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests._fresh_python import python_lines

BASE = Path(__file__).resolve().parent.parent
PACKAGE = BASE / "mnemon_sm"
OPTIONAL_MARK = "# optional:"


def _lint_imports() -> str:
    found = Path(sys.executable).parent / "lint-imports"
    return str(found) if found.exists() else (shutil.which("lint-imports") or "lint-imports")


def test_the_import_contract_holds() -> None:
    env = {**os.environ, "PYTHONPATH": str(BASE)}
    proc = subprocess.run(
        [_lint_imports(), "--config", str(BASE / "pyproject.toml"), "--no-cache"],
        capture_output=True,
        text=True,
        cwd=BASE,
        env=env,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


def _lazy_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every mnemon_sm import not at module level or under TYPE_CHECKING."""
    tree = ast.parse(path.read_text("utf-8"))
    allowed: set[int] = set()
    for node in tree.body:
        allowed.add(id(node))
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            allowed.update(id(n) for n in ast.walk(node))
    found = []
    for node in ast.walk(tree):
        if id(node) in allowed:
            continue
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mnemon_sm"):
            found.append((node.lineno, node.module or ""))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("mnemon_sm")]
    return found


def test_only_optional_dependencies_are_imported_lazily() -> None:
    undocumented = []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text("utf-8").splitlines()
        for line, module in _lazy_imports(path):
            above = lines[line - 2].strip() if line >= 2 else ""
            if not above.startswith(OPTIONAL_MARK):
                undocumented.append(f"{path.relative_to(BASE)}:{line}: {module}")
    assert not undocumented, "lazy imports without an '# optional:' reason:\n" + "\n".join(
        undocumented
    )


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f():\n    from mnemon_sm.root import MemoryRoot\n", [(2, "mnemon_sm.root")]),
        ("def f():\n    import mnemon_sm.text\n", [(2, "mnemon_sm.text")]),
        ("from mnemon_sm.root import MemoryRoot\n", []),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from mnemon_sm import x\n", []),
    ],
)
def test_lazy_import_detection(
    tmp_path: Path, source: str, expected: list[tuple[int, str]]
) -> None:
    module = tmp_path / "m.py"
    module.write_text(source)
    assert _lazy_imports(module) == expected


def test_the_old_builtin_workers_path_still_works_with_a_warning() -> None:
    code = (
        "import warnings\n"
        "warnings.simplefilter('error')\n"
        "try:\n"
        "    import mnemon_sm.workers.builtin\n"
        "except DeprecationWarning as exc:\n"
        "    print('warned:', exc)\n"
        "warnings.simplefilter('ignore')\n"
        "import importlib, mnemon_sm\n"
        "old = importlib.import_module('mnemon_sm.workers.builtin')\n"
        "print(old.BuiltinWorkers is mnemon_sm.BuiltinWorkers)\n"
    )
    assert python_lines(code) == [
        "warned: mnemon_sm.workers.builtin is deprecated; import BuiltinWorkers from mnemon_sm",
        "True",
    ]


def test_the_test_kit_imports_without_hypothesis() -> None:
    """Every module of mnemon_sm.testing but the strategies works without Hypothesis."""
    kit = sorted(
        f"mnemon_sm.testing.{p.stem}"
        for p in (PACKAGE / "testing").glob("*.py")
        if p.stem not in ("__init__", "strategies")
    )
    code = (
        "import importlib, sys\n"
        f"for name in {kit!r}:\n"
        "    importlib.import_module(name)\n"
        "try:\n"
        "    importlib.import_module('mnemon_sm.testing.strategies')\n"
        "except ModuleNotFoundError as exc:\n"
        "    print('strategies need', exc)\n"
        "print('hypothesis' in sys.modules)\n"
    )
    assert len(kit) >= 10
    assert python_lines(code, without=["hypothesis"]) == ["strategies need hypothesis", "False"]
