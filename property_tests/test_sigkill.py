"""INV-HOT-2: a writer killed with SIGKILL loses nothing it acknowledged and half-applies nothing.

Sixty times, a writer process (``property_tests/_writer.py``) opens one persistent storage
root, runs mixed operations back to back and is killed with SIGKILL after a random 5-80 ms
(seeded). The test process then reopens the root and requires that:

- it opens at all: the kernel released the dead writer's ``flock`` (a lock still held would
  make opening raise ``LockTimeout``);
- ``memories.json`` parses, both as the kill left it and after opening (INV-HOT-1);
- every operation the writer acknowledged on stdout is in the state, with the acknowledgement
  the reference model predicts, and the one operation in flight, if any, is wholly present or
  wholly absent (INV-HOT-2): the entries equal the model either before or after that operation;
- the projections match the source after opening (INV-HOT-3) and no temporary file is left in
  ``runtime/``.

The model of each iteration starts from the state observed after the previous reopen, so
"acknowledged implies present" is checked across every kill. Most runs use durability
``full`` (the default); some use ``normal`` and ``off``, which must survive a process kill just
the same (only a power loss distinguishes them).
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from test_multiprocess import (
    MEMORY_LIMIT,
    USER_LIMIT,
    Entry,
    RefModel,
    disk_entries,
    read_lines,
    send,
    spawn_writer,
    wait_ready,
)

from mnemon_sm.adapters.postgres import PgBackend
from mnemon_sm.adapters.real import RealFiles
from mnemon_sm.config import Config
from mnemon_sm.flows.hot.invariants import check
from mnemon_sm.ports import TEMP_NAME, Files
from mnemon_sm.root import MemoryRoot

INVARIANT = "INV-HOT-2"  # the spec's ID, as a literal (the spec lint looks for it)
ITERATIONS = 60
SEED = 20_240_611
DURABILITIES = ("full", "full", "normal", "off")  # by iteration; "full" is the default
WRITER_OPS = 100_000  # never reached: every writer is killed mid-run


def _spawn(root: Path | str, tmp: Path, iteration: int) -> tuple[subprocess.Popen[bytes], Path]:
    """A writer that starts Python now but opens the root only when told ``open``."""
    out = tmp / f"k{iteration}.jsonl"
    durability = DURABILITIES[iteration % len(DURABILITIES)]
    proc = spawn_writer(
        root, out, f"k{iteration}", SEED + iteration, WRITER_OPS, durability,
        "--wait-open", "--adopt", "--lock-timeout-ms", "5000",
    )  # fmt: skip
    return proc, out


def _temps(files: Files) -> list[str]:
    return [n for n in files.list("runtime") if TEMP_NAME.match(n)]


def _check_after_kill(
    root: Path | str,
    files: Files,
    config: Config,
    out: Path,
    committed: list[Entry],
    stats: Counter[str],
) -> list[Entry]:
    """Reopen after a kill, check everything, and return the state now committed."""
    lines = read_lines(out)
    begun = [line for line in lines if line.get("phase") == "begin"]
    acks = [line for line in lines if "ok" in line]
    assert [a["op"] for a in acks] == list(range(len(acks)))
    assert len(begun) - len(acks) in (0, 1), "the writer ran two operations at once"
    in_flight: dict[str, Any] | None = begun[-1] if len(begun) > len(acks) else None

    assert check(files, config, "INV-HOT-1") == [], "memories.json does not parse after a kill"
    stats["temps left by a kill"] += bool(_temps(files))

    reopened = MemoryRoot.open(root, config)  # LockTimeout here: the dead writer's lock is held
    try:
        problems = check(files, config, "INV-HOT-1", "INV-HOT-3", "INV-HOT-5", "INV-HOT-6")
        assert problems == [], problems
        assert _temps(files) == [], "opening left temporary files of the dead writer"
        snapshot = reopened.hot.snapshot()
        observed: list[Entry] = [(e.target, e.content, e.importance) for e in snapshot.entries]
    finally:
        reopened.close()
    assert observed == disk_entries(files)

    model = RefModel(USER_LIMIT, MEMORY_LIMIT, committed)
    for ack in acks:
        expected = model.apply(ack["kind"], ack["args"])
        got = {k: ack[k] for k in ("ok", "receipt", "error") if k in ack}
        assert got == expected, (
            f"{INVARIANT}: op {ack['op']} {ack['args']}: acked {got}, model {expected}"
        )
    without = list(model.entries)
    with_it = without
    if in_flight is not None:
        model.apply(in_flight["kind"], in_flight["args"])
        with_it = model.entries
    assert observed in (without, with_it), (
        f"{INVARIANT}: after {len(acks)} acknowledged operations and in flight {in_flight}\n"
        f"state      {observed}\nacked only {without}\nwith it    {with_it}"
    )
    stats["acknowledged"] += len(acks)
    stats["in flight"] += in_flight is not None
    stats["in flight and present"] += in_flight is not None and observed != without
    return observed


@pytest.mark.parametrize("backend", ["directory", "postgres"])
def test_sigkill_loses_nothing_acknowledged(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """INV-HOT-2 (with INV-HOT-1 and INV-HOT-3) across SIGKILLs at random times.
    ``postgres``: the writer is a host of a root on a PostgreSQL server; the kill ends its
    sessions, so the server rolls back what it had not committed and frees its locks."""
    rng = random.Random(SEED)
    root: Path | str = tmp_path / "root"
    iterations = ITERATIONS
    pg: PgBackend | None = None
    if backend == "postgres":
        root = request.getfixturevalue("postgres_cluster").url(f"sigkill-{tmp_path.name}")
        pg = PgBackend(root)
        iterations = ITERATIONS // 2
    files: Files = RealFiles(root) if pg is None else pg.files
    config = Config(user_limit=USER_LIMIT, memory_limit=MEMORY_LIMIT, lock_timeout_ms=2000)
    committed: list[Entry] = []
    stats: Counter[str] = Counter()
    pending = _spawn(root, tmp_path, 0)
    try:
        for iteration in range(iterations):
            proc, out = pending
            send(proc, "open")
            wait_ready(proc, out)
            time.sleep(rng.uniform(0.005, 0.080))
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            assert proc.stdin is not None
            proc.stdin.close()
            err = out.with_suffix(".err").read_text()
            assert proc.returncode == -signal.SIGKILL, f"writer ended by itself: {err}"
            if iteration + 1 < iterations:  # its interpreter starts while this one is checked
                pending = _spawn(root, tmp_path, iteration + 1)
            committed = _check_after_kill(root, files, config, out, committed, stats)
    finally:
        proc = pending[0]
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdin is not None:
            proc.stdin.close()
        if pg is not None:
            pg.close()

    # Not vacuous: writers got work done, and most kills hit an operation in flight.
    assert stats["acknowledged"] >= iterations, stats
    assert stats["in flight"] >= iterations // 2, stats
