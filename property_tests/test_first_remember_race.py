"""The first ``remember`` on a fresh root, from several processes at once, makes exactly one
"General memory" space, and every memory lands in it.

Four processes (``property_tests/_first_remember.py``) each open the same fresh root, pass a
start barrier together and remember one fact without naming a space, so each built-in write
worker finds no space and stages the creation of the general one. Ten rounds, each on a new
root: before a staged creation adopted a twin that another process made after the worker
listed the spaces (re-reading the catalog under the cross-process lock), nine or ten rounds
in ten ended with two to four general spaces.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mnemon_sm.adapters.postgres import PgBackend, PgSpaces
from mnemon_sm.adapters.sqlite import EmbeddedStore
from mnemon_sm.flows.long_term.catalog import CATALOG_PATH
from mnemon_sm.testing.memory import FakeClock

RACER = Path(__file__).with_name("_first_remember.py")
PROCESSES, ROUNDS = 4, 10


def _line(proc: subprocess.Popen[str]) -> dict[str, Any]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, f"a racer ended early (exit code {proc.wait()})"
    data: dict[str, Any] = json.loads(line)
    return data


def _written(root: Path | str, cache: Path) -> tuple[list[dict[str, Any]], int]:
    """The catalog's bodies and how many insights their spaces hold, read anew."""
    if isinstance(root, Path):
        bodies = json.loads((root / CATALOG_PATH).read_text())["bodies"]
        with EmbeddedStore(root, FakeClock()) as store:
            return bodies, sum(len(store.list(b["id"])) for b in bodies)
    backend = PgBackend(root)
    try:
        data = backend.files.read(CATALOG_PATH)
        assert data is not None
        bodies = json.loads(data)["bodies"]
        with PgSpaces(backend, FakeClock(), cache=cache) as store:
            return bodies, sum(len(store.list(b["id"])) for b in bodies)
    finally:
        backend.close()


def _send(proc: subprocess.Popen[str], line: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()


@pytest.mark.parametrize("backend", ["directory", "postgres"])
def test_concurrent_first_remembers_make_one_general_space(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """``postgres``: the four racers are hosts of a root on a PostgreSQL server (the catalog
    a file row, its lock an advisory lock, the space a row of ``mnemon_spaces``)."""
    cluster = request.getfixturevalue("postgres_cluster") if backend == "postgres" else None
    racers = [
        subprocess.Popen(
            [sys.executable, str(RACER), "--proc", f"p{i}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(PROCESSES)
    ]
    outcomes: list[tuple[list[tuple[str, str]], list[dict[str, Any]], int]] = []
    try:
        for n in range(ROUNDS):
            root: Path | str = tmp_path / f"root-{n}"
            if cluster is None:
                Path(root).mkdir()
            else:
                root = cluster.url(f"first-remember-{tmp_path.name}-{n}")
            for proc in racers:
                _send(proc, str(root))
            assert [_line(p) for p in racers] == [{"ready": str(root)}] * PROCESSES
            for proc in racers:  # the barrier: every process is open and waiting
                _send(proc, "go")
            results = [_line(p) for p in racers]
            bodies, stored = _written(root, tmp_path / f"cache-{n}")
            outcomes.append(([(b["id"], b["name"]) for b in bodies], results, stored))
    finally:
        for proc in racers:
            assert proc.stdin is not None
            proc.stdin.close()
        codes = [proc.wait(timeout=60) for proc in racers]
    assert codes == [0] * PROCESSES
    one_space = [([("default", "General memory")], [{"ok": True, "spaces": ["default"]}] * 4, 4)]
    assert outcomes == one_space * ROUNDS
