"""A writer process for the multi-process property tests (not a test module).

Run it by path with the virtualenv's python, from anywhere::

    python property_tests/_writer.py --root DIR --proc p0 --seed 1 --ops 100 [options]

It opens a ``MemoryRoot`` on ``DIR`` and performs a seeded pseudo-random sequence of mixed
hot-memory operations: adds of unique entries ``"<proc>-<nnn> ..."`` (mostly to ``memory``,
some to ``user``, a few large ones that may overflow ``user``), replaces and removes of its own
earlier entries, adds/replaces/removes of a few ``"shared fact <k>"`` entries that every writer
touches (so outcomes depend on the order of the writers), and operations that must be refused
(no match, ambiguous match, duplicate replacement, an invalid request) or that change nothing
(an exact duplicate add). Which entry an operation picks depends on the writer's earlier
results, so the sequence is fixed by the seed and by what the store answered.

Protocol on stdout, one JSON object per line, each written and flushed at once:

- ``{"ready": true, "proc": ..., "pid": ...}`` once the root is open;
- ``{"proc", "op", "kind", "args", "phase": "begin"}`` just before operation ``op`` starts;
- ``{"proc", "op", "kind", "args", "ok": true, "receipt": {...}}`` or ``{..., "ok": false,
  "error": "<ErrorClass>"}`` after it returned: this line is the acknowledgement.

``--lock-log FILE``: the Locks port is wrapped so that, when the root's lock is released while
an operation is in flight, the line ``"<proc>:<op>"`` is appended to ``FILE`` (``O_APPEND``,
one ``os.write``) *before* the lock is let go: the file lists operations in lock order.
``--wait-open``: read the line ``open`` from stdin before opening the root; ``--wait-go``:
read the line ``go`` after reporting ready, before the first operation (start barriers).
``--adopt``: treat every entry present at open as the writer's own (replace/remove targets).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:  # run by path: make the package importable without installing it
    sys.path.insert(0, _REPO)

from mnemon_sm.adapters.postgres import PgBackend, is_postgres_url  # noqa: E402
from mnemon_sm.adapters.real import RealFiles, RealLocks, SystemClock  # noqa: E402
from mnemon_sm.config import Config  # noqa: E402
from mnemon_sm.errors import MnemonError  # noqa: E402
from mnemon_sm.flows.hot.model import LOCK_NAME  # noqa: E402
from mnemon_sm.ports import Files, Locks, Ports  # noqa: E402
from mnemon_sm.root import MemoryRoot  # noqa: E402

WORDS = (
    "alpha", "river", "kernel", "lock", "fsync", "zebra", "quartz", "delta", "prefers",
    "concise", "replies", "café", "naïve", "日本語", "emoji🙂", "Straße",
)  # fmt: skip
SHARED = 4  # "shared fact 0" .. "shared fact 3"
_KEY = re.compile(r"^([a-z]+[0-9]+-[0-9]{3}) ")


def _key(content: str) -> str | None:
    """The writer-made key (``p3-017``) an entry starts with, if any: a unique substring."""
    found = _KEY.match(content)
    return found.group(1) if found else None


class RecordingLocks:
    """The real Locks port, plus a lock-order log line per in-flight operation."""

    def __init__(self, inner: Locks, log_path: str | None, proc: str) -> None:
        self._inner, self._proc = inner, proc
        self._fd = None if log_path is None else os.open(
            log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600
        )  # fmt: skip
        self._held: set[str] = set()
        self.current_op: int | None = None

    def acquire(self, name: str, timeout_ms: int) -> None:
        self._inner.acquire(name, timeout_ms)
        self._held.add(name)

    def release(self, name: str) -> None:
        if name in self._held:
            self._held.discard(name)
            if name == LOCK_NAME and self._fd is not None and self.current_op is not None:
                os.write(self._fd, f"{self._proc}:{self.current_op}\n".encode())
        self._inner.release(name)


def _emit(obj: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class Plan:
    """Chooses the next operation from the seed and what the store answered so far."""

    def __init__(self, proc: str, seed: int) -> None:
        self.proc, self.rng = proc, random.Random(seed)
        self.mine: dict[str, list[list[str | None]]] = {"user": [], "memory": []}  # [key, text]
        self.serial = 0

    def adopt(self, target: str, content: str) -> None:
        self.mine[target].append([_key(content), content])

    def _words(self, n: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(n))

    def _new_key(self) -> str:
        self.serial += 1
        return f"{self.proc}-{self.serial:03d}"

    def _importance(self) -> str | None:
        return self.rng.choice((None, None, "critical", "normal", "low"))

    def _own(self) -> tuple[str, list[str | None]] | None:
        targets = [t for t in ("memory", "user") if self.mine[t]]
        if not targets:
            return None
        target = self.rng.choice(targets)
        return target, self.rng.choice(self.mine[target])

    @staticmethod
    def _old(entry: list[str | None]) -> str:
        return entry[0] or entry[1] or ""

    def _messy(self, text: str) -> str:
        """The same text with extra ASCII whitespace (the store collapses it)."""
        return self.rng.choice(("  ", "\t", "\n ")) + text.replace(" ", "  \t", 1) + " \n"

    def next(self) -> tuple[str, dict[str, str]]:
        rng = self.rng
        crowd = sum(len(v) for v in self.mine.values())
        weights = {
            "add_memory": 30, "add_user": 10, "add_big_user": 3, "replace_own": 15,
            "remove_own": 12 + 3 * max(0, crowd - 25), "shared_add": 5, "shared_remove": 4,
            "shared_replace": 3, "no_match": 3, "dup_add": 3, "dup_replace": 2,
            "ambiguous": 2, "invalid": 1,
        }  # fmt: skip
        choice = rng.choices(list(weights), list(weights.values()))[0]
        own = self._own()
        importance = self._importance()
        extra = {} if importance is None else {"importance": importance}
        if choice == "add_user":
            return "add", {"target": "user", "content": f"{self._new_key()} {self._words(3)}"}
        if choice == "add_big_user":
            content = f"{self._new_key()} big {self._words(rng.randint(25, 45))}"
            return "add", {"target": "user", "content": content, **extra}
        if choice == "replace_own" and own:
            target, entry = own
            key = entry[0] or self._new_key()
            content = f"{key} revised {self._words(rng.randint(1, 4))}"
            return "replace", {"target": target, "old_text": self._old(entry),
                               "content": content, **extra}  # fmt: skip
        if choice == "remove_own" and own:
            return "remove", {"target": own[0], "old_text": self._old(own[1])}
        if choice == "shared_add":
            return "add", {"target": "memory", "content": f"shared fact {rng.randrange(SHARED)}"}
        if choice == "shared_remove":
            fact = f"shared fact {rng.randrange(SHARED)}"
            return "remove", {"target": "memory", "old_text": fact}
        if choice == "shared_replace":
            old, new = rng.sample(range(SHARED), 2)
            return "replace", {"target": "memory", "old_text": f"shared fact {old}",
                               "content": f"shared fact {new}"}  # fmt: skip
        if choice == "no_match":
            return "replace", {"target": rng.choice(("user", "memory")),
                               "old_text": f"absent {self.proc} {rng.randrange(10**6)}",
                               "content": f"{self._new_key()} never"}  # fmt: skip
        if choice == "dup_add" and own:
            target, entry = own
            return "add", {"target": target, "content": self._messy(entry[1] or ""), **extra}
        if choice == "dup_replace":
            for target in ("memory", "user"):
                if len(self.mine[target]) >= 2:
                    a, b = rng.sample(self.mine[target], 2)
                    return "replace", {"target": target, "old_text": self._old(a),
                                       "content": b[1] or ""}  # fmt: skip
        if choice == "ambiguous":
            for target in ("memory", "user"):
                if sum(1 for e in self.mine[target] if e[0]) >= 2:
                    return "remove", {"target": target, "old_text": f"{self.proc}-"}
        if choice == "invalid":
            return "add", {"target": "memory", "content": f"{self._new_key()} § reserved"}
        return "add", {"target": "memory", "content": f"{self._new_key()} {self._words(3)}",
                       **extra}  # fmt: skip

    def observe(self, kind: str, args: dict[str, str], result: dict[str, object]) -> None:
        receipt = result.get("receipt")
        if not isinstance(receipt, dict):
            return
        target = args["target"]
        if kind == "add" and receipt["message"] == "Entry added.":
            added = str(receipt["added"])
            if not added.startswith("shared fact"):
                self.adopt(target, added)
        elif kind == "replace":
            change = receipt["replaced"]
            for entry in self.mine[target]:
                if entry[1] == change["from"]:
                    entry[1] = change["to"]
                    entry[0] = entry[0] or _key(change["to"])
                    break
            else:
                self.adopt(target, change["to"])  # a shared fact or someone else's entry
        elif kind == "remove":
            gone = receipt["removed"]
            self.mine[target] = [e for e in self.mine[target] if e[1] != gone]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="a directory, or a PostgreSQL root URL")
    parser.add_argument("--proc", required=True, help="a tag like p0 (letters then digits)")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--ops", type=int, required=True)
    parser.add_argument("--durability", choices=("full", "normal", "off"), default="full")
    parser.add_argument("--user-limit", type=int, default=1024)
    parser.add_argument("--memory-limit", type=int, default=4096)
    parser.add_argument("--lock-timeout-ms", type=int, default=60_000)
    parser.add_argument("--lock-log")
    parser.add_argument("--wait-open", action="store_true")
    parser.add_argument("--wait-go", action="store_true")
    parser.add_argument("--adopt", action="store_true")
    opts = parser.parse_args(argv)
    if not re.fullmatch(r"[a-z]+[0-9]+", opts.proc):
        parser.error("--proc must be letters then digits")

    config = Config(
        durability=opts.durability, user_limit=opts.user_limit,
        memory_limit=opts.memory_limit, lock_timeout_ms=opts.lock_timeout_ms,
    )  # fmt: skip
    files: Files
    inner: Locks
    if is_postgres_url(opts.root):  # a root on PostgreSQL: this process is one more host
        backend = PgBackend(opts.root)
        files, inner = backend.files, backend.locks
    else:
        files, inner = RealFiles(opts.root), RealLocks(opts.root)
    locks = RecordingLocks(inner, opts.lock_log, opts.proc)
    ports = Ports(files=files, locks=locks, clock=SystemClock())
    if opts.wait_open and sys.stdin.readline().strip() != "open":
        return 3
    root = MemoryRoot.open(opts.root, config, ports=ports)
    plan = Plan(opts.proc, opts.seed)
    if opts.adopt:
        for entry in root.hot.snapshot().entries:
            plan.adopt(entry.target, entry.content)
    _emit({"ready": True, "proc": opts.proc, "pid": os.getpid()})
    if opts.wait_go and sys.stdin.readline().strip() != "go":
        return 3

    for op in range(opts.ops):
        kind, args = plan.next()
        head = {"proc": opts.proc, "op": op, "kind": kind, "args": args}
        _emit({**head, "phase": "begin"})
        locks.current_op = op
        try:
            # The lock-order replay models the mutation flow: adds go without maintenance.
            extra = {"maintenance": False} if kind == "add" else {}
            receipt = getattr(root.hot, kind)(**args, **extra)
        except MnemonError as exc:
            result: dict[str, object] = {"ok": False, "error": type(exc).__name__}
        else:
            result = {"ok": True, "receipt": receipt.to_json()}
        finally:
            locks.current_op = None
        _emit({**head, **result})
        plan.observe(kind, args, result)
    root.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
