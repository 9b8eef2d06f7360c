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


def _send(proc: subprocess.Popen[str], line: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()


def test_concurrent_first_remembers_make_one_general_space(tmp_path: Path) -> None:
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
            root = tmp_path / f"root-{n}"
            root.mkdir()
            for proc in racers:
                _send(proc, str(root))
            assert [_line(p) for p in racers] == [{"ready": str(root)}] * PROCESSES
            for proc in racers:  # the barrier: every process is open and waiting
                _send(proc, "go")
            results = [_line(p) for p in racers]
            bodies = json.loads((root / CATALOG_PATH).read_text())["bodies"]
            with EmbeddedStore(root, FakeClock()) as store:
                stored = sum(len(store.list(b["id"])) for b in bodies)
            outcomes.append(([(b["id"], b["name"]) for b in bodies], results, stored))
    finally:
        for proc in racers:
            assert proc.stdin is not None
            proc.stdin.close()
        codes = [proc.wait(timeout=60) for proc in racers]
    assert codes == [0] * PROCESSES
    one_space = [([("default", "General memory")], [{"ok": True, "spaces": ["default"]}] * 4, 4)]
    assert outcomes == one_space * ROUNDS
