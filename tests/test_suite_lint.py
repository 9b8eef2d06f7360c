"""Rules the test suites keep, checked on their source.

No assertion inside a callback the library catches. A worker runs on a thread of its own and
whatever it raises, ``AssertionError`` included, becomes a failed run (``WorkerFailed``, a
failed review); an embedder's exception becomes lexical recall. An assertion there cannot fail
a test: the test must record what it saw and assert after the flow returns. Callbacks are
found by their shape: a function taking a ``ToolBox`` (every worker, its helpers that get the
tool box, and the functions nested in them), the worker-thread hooks of
:func:`mnemon_sm.testing.maintenance.archive_script` (``corrupt``, ``extra``, ``during``,
``keep``) and an embedder's ``embed(texts)``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SUITES = ("tests", "property_tests")
#: ``archive_script`` arguments that the worker calls on its own thread.
WORKER_HOOKS = ("corrupt", "extra", "during", "keep")
BASE = Path(__file__).resolve().parent.parent


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.arg]:
    args = node.args
    return [*args.posonlyargs, *args.args, *args.kwonlyargs]


def _is_callback(node: ast.FunctionDef | ast.AsyncFunctionDef, hooks: set[str]) -> bool:
    params = _parameters(node)
    names = [a.arg for a in params]
    takes_toolbox = any(
        a.annotation is not None and "ToolBox" in ast.unparse(a.annotation) for a in params
    )
    worker_run = {"request", "tools"} <= set(names)
    embedder = node.name == "embed" and "texts" in names
    return takes_toolbox or worker_run or embedder or node.name in hooks


def _hooks(tree: ast.Module) -> set[str]:
    """Names of functions passed as a worker-thread hook of ``archive_script``."""
    return {
        kw.value.id
        for call in ast.walk(tree)
        if isinstance(call, ast.Call)
        for kw in call.keywords
        if kw.arg in WORKER_HOOKS and isinstance(kw.value, ast.Name)
    }


def _asserts(node: ast.AST) -> Iterator[int]:
    """Lines of ``assert``, ``raise AssertionError`` and ``pytest.fail`` under ``node``."""
    for inner in ast.walk(node):
        if isinstance(inner, ast.Assert):
            yield inner.lineno
        elif isinstance(inner, ast.Raise) and inner.exc is not None:
            raised = inner.exc.func if isinstance(inner.exc, ast.Call) else inner.exc
            if isinstance(raised, ast.Name) and raised.id == "AssertionError":
                yield inner.lineno
        elif isinstance(inner, ast.Call) and ast.unparse(inner.func) == "pytest.fail":
            yield inner.lineno


def assertions_in_callbacks(source: str, name: str) -> list[str]:
    """``file:line (callback)`` of every assertion inside a callback the library catches."""
    tree = ast.parse(source, name)
    hooks = _hooks(tree)
    found = {
        f"{name}:{line} ({node.name})"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _is_callback(node, hooks)
        for line in _asserts(node)
    }
    return sorted(found)


def test_no_callback_the_library_catches_asserts() -> None:
    files = sorted(p for suite in SUITES for p in (BASE / suite).rglob("*.py"))
    assert len(files) > 40  # the suites were found
    found = [
        hit
        for path in files
        for hit in assertions_in_callbacks(path.read_text("utf-8"), str(path.relative_to(BASE)))
    ]
    assert found == [], "record in the callback, assert after the flow returns"


@pytest.mark.parametrize(
    "source",
    [
        "def worker(request, tools: ToolBox) -> object:\n    assert request.kind\n",
        "def worker(request, tools):\n    if not request:\n        raise AssertionError\n",
        "class W:\n    async def run(self, request, tools):\n        pytest.fail('no')\n",
        "def outer(r, t: 'ToolBox'):\n    def inner():\n        assert t\n    inner()\n",
        "def during():\n    assert True\n\narchive_script('default', during=during)\n",
        "class E:\n    def embed(self, texts):\n        assert texts\n",
    ],
    ids=["toolbox", "raise", "run-method", "nested", "hook", "embedder"],
)
def test_the_lint_finds_an_assertion_in_each_kind_of_callback(source: str) -> None:
    assert assertions_in_callbacks(source, "example.py") != []


def test_the_lint_leaves_assertions_outside_callbacks_alone() -> None:
    source = (
        "def test_it():\n    seen = []\n"
        "    def worker(request, tools: ToolBox):\n        seen.append(request)\n"
        "    run(worker)\n    assert seen\n"
    )
    assert assertions_in_callbacks(source, "example.py") == []
