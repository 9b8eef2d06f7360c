"""INV-HOT-7: concurrent writer processes lose nothing; the result is the lock-order replay.

Four writer processes (``property_tests/_writer.py``) run 100 mixed operations each on one
storage root at the same time, serialized only by the real cross-process file lock. Every
writer logs ``"<proc>:<op>"`` to a shared append-only file while it still holds the lock, so
the log is the lock order. The test then replays the log against :class:`RefModel`, a small
independent model of the hot-memory rules written here (it does not use
``mnemon_sm.flows.hot.rules``), and requires every acknowledgement (receipt or error class) to be
what the model answers at that point of the lock order, and the final ``memories.json`` to be
the model's final state, entry order included.

The model and the process helpers are also used by ``test_sigkill.py``.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from mnemon_sm.adapters.postgres import PgBackend
from mnemon_sm.adapters.real import RealFiles
from mnemon_sm.config import Config, Durability
from mnemon_sm.flows.hot.invariants import check
from mnemon_sm.flows.hot.model import SOURCE_PATH
from mnemon_sm.ports import Files
from mnemon_sm.root import MemoryRoot

WRITER = Path(__file__).with_name("_writer.py")
USER_LIMIT, MEMORY_LIMIT = 1024, 4096  # small, so capacity refusals happen
DELIMITER = "\n§\n"
ENTRY_MAX_BYTES = 8192
IMPORTANCES = ("critical", "normal", "low")

Entry = tuple[str, str, str]  # (target, content, importance)


class RefModel:
    """The hot-memory semantics, written from the rules' text, over a plain list of entries.

    ``apply`` returns what a writer acknowledges: ``{"ok": True, "receipt": {...}}`` (the
    receipt's JSON shape) or ``{"ok": False, "error": "<ErrorClass>"}``. Inputs are assumed to
    use only ASCII whitespace (what the writer generates), so ``str.split`` collapses like the
    JavaScript whitespace class does.
    """

    def __init__(self, user_limit: int, memory_limit: int, entries: Iterable[Entry] = ()) -> None:
        self.limits = {"user": user_limit, "memory": memory_limit}
        self.entries: list[Entry] = list(entries)

    def used(self, target: str, entries: list[Entry] | None = None) -> int:
        chosen = self.entries if entries is None else entries
        joined = DELIMITER.join(c for t, c, _ in chosen if t == target)
        return len(joined.encode("utf-8"))

    def _receipt(self, target: str, message: str, **change: Any) -> dict[str, Any]:
        count = sum(1 for t, _, _ in self.entries if t == target)
        usage = {"used": self.used(target), "limit": self.limits[target]}
        receipt = {"success": True, "message": message, "target": target, "entryCount": count}
        return {"ok": True, "receipt": {**receipt, "usage": usage, **change}}

    @staticmethod
    def _normal(text: Any) -> str | None:
        """The normalized text, or None when the rules refuse it (InvalidInput)."""
        if not isinstance(text, str):
            return None
        normal = " ".join(text.split())
        if not normal or "§" in normal or len(normal.encode("utf-8")) > ENTRY_MAX_BYTES:
            return None
        return normal

    def _commit(
        self, target: str, after: list[Entry], message: str, **change: Any
    ) -> dict[str, Any]:
        before, projected = self.used(target), self.used(target, after)
        if projected > self.limits[target] and projected > before:
            return {"ok": False, "error": "CapacityExceeded"}
        self.entries = after
        return self._receipt(target, message, **change)

    def apply(self, kind: str, args: dict[str, Any]) -> dict[str, Any]:
        invalid = {"ok": False, "error": "InvalidInput"}
        target: str = args.get("target", "")
        importance: str | None = args.get("importance")
        if target not in self.limits or kind not in ("add", "replace", "remove"):
            return invalid
        if importance is not None and importance not in IMPORTANCES:
            return invalid
        content = self._normal(args.get("content")) if kind != "remove" else ""
        old = self._normal(args.get("old_text")) if kind != "add" else ""
        if content is None or old is None:
            return invalid
        mine = [i for i, e in enumerate(self.entries) if e[0] == target]
        if kind == "add":
            if any(self.entries[i][1] == content for i in mine):
                return self._receipt(
                    target, "Entry already exists (no duplicate added).", added=content
                )
            after = [*self.entries, (target, content, importance or "normal")]
            return self._commit(target, after, "Entry added.", added=content)
        matches = [i for i in mine if old in self.entries[i][1]]
        exact = [i for i in matches if self.entries[i][1] == old]
        if len(matches) > 1 and len(exact) == 1:
            matches = exact
        if not matches:
            return {"ok": False, "error": "NoMatch"}
        if len(matches) > 1:
            return {"ok": False, "error": "AmbiguousMatch"}
        (index,) = matches
        _, found, found_importance = self.entries[index]
        if kind == "remove":
            after = self.entries[:index] + self.entries[index + 1 :]
            return self._commit(target, after, "Entry removed.", removed=found)
        if any(self.entries[i][1] == content for i in mine if i != index):
            return {"ok": False, "error": "DuplicateEntry"}
        after = list(self.entries)
        after[index] = (target, content, importance or found_importance)
        replaced = {"from": found, "to": content}
        return self._commit(target, after, "Entry replaced.", replaced=replaced)


# -- writer processes ---------------------------------------------------------------------------


def spawn_writer(root: Path | str, out: Path, proc: str, seed: int, ops: int, durability: str,
                 *extra: str) -> subprocess.Popen[bytes]:  # fmt: skip
    """Start a writer (``extra``: more options); its stdout goes to ``out``."""
    args = [
        sys.executable, str(WRITER), "--root", str(root), "--proc", proc, "--seed", str(seed),
        "--ops", str(ops), "--durability", durability, "--user-limit", str(USER_LIMIT),
        "--memory-limit", str(MEMORY_LIMIT), *extra,
    ]  # fmt: skip
    with open(out, "wb") as stdout, open(out.with_suffix(".err"), "wb") as stderr:
        return subprocess.Popen(args, stdin=subprocess.PIPE, stdout=stdout, stderr=stderr)


def wait_ready(proc: subprocess.Popen[bytes], out: Path, timeout: float = 60.0) -> None:
    """Poll ``out`` until the writer reports its root open (the harness may sleep)."""
    deadline = time.monotonic() + timeout
    while b"\n" not in out.read_bytes():
        if proc.poll() is not None:
            err = out.with_suffix(".err").read_text()
            raise AssertionError(f"writer exited with {proc.returncode} before ready: {err}")
        assert time.monotonic() < deadline, "writer did not get ready in time"
        time.sleep(0.001)


def send(proc: subprocess.Popen[bytes], line: str) -> None:
    """Pass a start barrier of the writer (``open`` or ``go``)."""
    assert proc.stdin is not None
    try:
        proc.stdin.write(line.encode() + b"\n")
        proc.stdin.flush()
    except BrokenPipeError:
        pass  # the writer died: its exit status and stderr are what the test reports


def stop_all(procs: Iterable[subprocess.Popen[bytes]]) -> None:
    """Kill whatever is still running (a failed test must not leave writers behind) and close
    every stdin."""
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
        if p.stdin is not None:
            p.stdin.close()


def read_lines(out: Path) -> list[dict[str, Any]]:
    """The complete JSON lines a writer printed (a line cut short by a kill is dropped)."""
    text = out.read_text(encoding="utf-8")
    lines = text.split("\n")[:-1]  # what follows the last newline was never fully written
    return [json.loads(line) for line in lines]


def disk_entries(root: Path | Files) -> list[Entry]:
    """The entries of ``memories.json`` (of a root's directory, or read through a ``Files``
    port); a root no commit ever reached has no source file."""
    files = RealFiles(root) if isinstance(root, Path) else root
    source = files.read(SOURCE_PATH)
    if source is None:  # e.g. a writer killed before its first commit
        return []
    data = json.loads(source.decode("utf-8"))
    return [(e["target"], e["content"], e["importance"]) for e in data["entries"]]


def test_disk_entries_of_a_root_no_commit_reached(tmp_path: Path) -> None:
    """Regression: a writer killed before its first commit leaves no source file to read."""
    root = tmp_path / "root"
    MemoryRoot.open(root, Config()).close()
    assert not (root / SOURCE_PATH).exists()
    assert disk_entries(root) == []


# -- the test -----------------------------------------------------------------------------------

INVARIANT = "INV-HOT-7"  # the spec's ID, as a literal (the spec lint looks for it)
PROCS, OPS = 4, 100
SEED = 7_2024


@pytest.mark.parametrize("backend", ["directory", "postgres"])
def test_concurrent_writers_equal_lock_order_replay(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """INV-HOT-7: the final source and every acknowledgement equal the lock-order replay,
    on a root in a directory (file locks) and on PostgreSQL (advisory locks; each writer
    process is another host with its own pool)."""
    log = tmp_path / "lock-order.log"
    root: Path | str = tmp_path / "root"
    files: Files | None = None
    if backend == "postgres":
        cluster = request.getfixturevalue("postgres_cluster")
        root = cluster.url(f"replay-{tmp_path.name}")
        opened = PgBackend(root)
        request.addfinalizer(opened.close)
        files = opened.files
    # Durability "normal" (fsync of the temporary source file, no directory fsync): the
    # invariant is about what concurrent processes see through the shared page cache, which
    # no fsync changes, so "full" would only slow the run; the file fsync is kept because it
    # lengthens the critical section, which makes writers contend for the lock more often.
    durability: Durability = "normal"
    names = [f"p{i}" for i in range(PROCS)]
    outs = {name: tmp_path / f"{name}.jsonl" for name in names}
    procs = {
        name: spawn_writer(
            root, outs[name], name, SEED + i, OPS, durability, "--wait-go", "--lock-log", str(log)
        )
        for i, name in enumerate(names)
    }
    try:
        for name in names:  # the start barrier: every writer is up before any operation runs
            wait_ready(procs[name], outs[name])
        for name in names:
            send(procs[name], "go")
        for name in names:
            procs[name].wait(timeout=120)
    finally:
        stop_all(procs.values())
    for name in names:
        err = outs[name].with_suffix(".err").read_text()
        assert procs[name].returncode == 0, f"writer {name} failed: {err}"

    acks: dict[tuple[str, int], dict[str, Any]] = {}
    for name in names:
        done = [line for line in read_lines(outs[name]) if "ok" in line]
        assert [a["op"] for a in done] == list(range(OPS)), f"{name} did not acknowledge all"
        acks.update({(name, a["op"]): a for a in done})

    order = []
    for line in log.read_text().splitlines():
        proc, op = line.split(":")
        order.append((proc, int(op)))
    assert len(order) == len(set(order)), "an operation released the lock twice"
    unknown = set(order) - set(acks)
    assert not unknown, f"the lock log names operations nobody acknowledged: {unknown}"
    # Every request that passed validation took the lock exactly once; an invalid request is
    # refused before the lock (allowed either way, the model does not depend on the state).
    missing = {k for k, a in acks.items() if a.get("error") != "InvalidInput"} - set(order)
    assert not missing, f"acknowledged operations missing from the lock order: {missing}"
    for name in names:
        ops = [op for proc, op in order if proc == name]
        assert ops == sorted(ops), f"{name}'s operations are out of order in the log"

    model = RefModel(USER_LIMIT, MEMORY_LIMIT)
    for position, key in enumerate(order):
        ack = acks[key]
        expected = model.apply(ack["kind"], ack["args"])
        got = {k: ack[k] for k in ("ok", "receipt", "error") if k in ack}
        assert got == expected, (
            f"{INVARIANT}: lock-order position {position}: {key} {ack['kind']} {ack['args']}\n"
            f"acknowledged {got}\nmodel says   {expected}"
        )
    for key in set(acks) - set(order):
        ack = acks[key]
        assert ack["error"] == "InvalidInput"
        assert model.apply(ack["kind"], ack["args"]) == {"ok": False, "error": "InvalidInput"}

    source = files if files is not None else RealFiles(root)
    assert disk_entries(source) == model.entries, f"{INVARIANT}: the source is not the replay"
    config = Config(
        durability=durability, user_limit=USER_LIMIT, memory_limit=MEMORY_LIMIT
    )  # the writers' settings, so the capacity invariant is checked against their limits
    assert check(source, config) == []

    # Not vacuous: the writers really interleaved, and the mix reached the interesting rules.
    switches = sum(1 for a, b in itertools.pairwise(order) if a[0] != b[0])
    assert switches >= PROCS * 5, f"writers barely interleaved ({switches} switches)"
    outcomes = Counter(a.get("error") or a["receipt"]["message"] for a in acks.values())
    for outcome in ("Entry added.", "Entry replaced.", "Entry removed.", "NoMatch"):
        assert outcomes[outcome] > 0, f"no {outcome!r} in {dict(outcomes)}"
