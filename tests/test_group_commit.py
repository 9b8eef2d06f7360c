"""Group commit: requests of one process that queue while a commit runs commit together.

Each test forces a batch deterministically: the test holds the root's mutex, starts the
callers one at a time (each waits until the one before it has queued, so the queue order is
known), then lets the mutex go; whichever caller takes it settles the whole queue. The
oracle is the same calls made one at a time, in that order, on a twin root that never groups
(same clock, same starting entries): every caller must get what it would have got there, and
the files must end byte-identical.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from mnemon_sm import Config, MemoryRoot
from mnemon_sm.errors import (
    AmbiguousMatch,
    CapacityExceeded,
    DuplicateEntry,
    InvalidInput,
    MnemonError,
    NoMatch,
    ReadOnly,
    StorageError,
)
from mnemon_sm.flows.hot.group import _Slot
from mnemon_sm.flows.hot.model import SOURCE_PATH
from mnemon_sm.testing.faults import RaisingPort
from mnemon_sm.testing.memory import memory_ports

Call = tuple[str, dict[str, Any]]

SEED = ["alpha fact", "beta fact one", "beta fact two", "gamma fact"]


def _root(config: Config | None = None, **wrap: Any) -> tuple[MemoryRoot, Any]:
    ports, _ = memory_ports()
    for name, make in wrap.items():
        ports = ports.__class__(**{**_fields(ports), name: make(getattr(ports, name))})
    root = MemoryRoot.open("/grouped", config or Config(memory_limit=400), ports=ports)
    for text in SEED:
        root.hot.add("memory", text)
    return root, ports


def _fields(ports: Any) -> dict[str, Any]:
    import attrs

    return {f.name: getattr(ports, f.name) for f in attrs.fields(type(ports))}


def _outcome(root: MemoryRoot, name: str, kwargs: dict[str, Any]) -> object:
    try:
        return getattr(root.hot, name)(**kwargs).to_json()
    except MnemonError as exc:
        return (type(exc).__name__, exc.message)


def grouped(root: MemoryRoot, calls: list[Call]) -> list[object]:
    """Make ``calls`` queue in this order behind the held mutex, then let them go."""
    group, mutex = root.hot._group, root.hot._shared.mutex
    results: list[object] = [None] * len(calls)

    def caller(i: int, name: str, kwargs: dict[str, Any]) -> None:
        try:
            results[i] = _outcome(root, name, kwargs)
        except BaseException as exc:  # a test thread reports what reached it
            results[i] = exc

    threads = []
    with mutex:
        for i, (name, kwargs) in enumerate(calls):
            thread = threading.Thread(target=caller, args=(i, name, kwargs))
            thread.start()
            threads.append(thread)
            deadline = time.monotonic() + 10
            while len(group._queue) < i + 1 and time.monotonic() < deadline:
                time.sleep(0.001)
            assert len(group._queue) == i + 1, "the caller did not queue"
    for thread in threads:
        thread.join(10)
        assert not thread.is_alive()
    return results


FILES = (SOURCE_PATH, "runtime/USER.md", "runtime/MEMORY.md")


def one_at_a_time(calls: list[Call]) -> tuple[list[object], list[bytes | None]]:
    twin, ports = _root()
    results = [_outcome(twin, name, kwargs) for name, kwargs in calls]
    return results, [ports.files.read(p) for p in FILES]


def add(text: str, **kw: Any) -> Call:
    return ("add", {"target": "memory", "content": text, **kw})


def replace(old: str, new: str) -> Call:
    return ("replace", {"target": "memory", "old_text": old, "content": new})


def remove(old: str) -> Call:
    return ("remove", {"target": "memory", "old_text": old})


# One member of each kind, several depending on members before them in the same batch.
EVERY_KIND = [
    add("delta fact"),  # commits
    add("alpha fact"),  # duplicate add: unchanged, its receipt
    add("bad § text"),  # InvalidInput before joining
    replace("delta fact", "delta fact, revised"),  # depends on the first member
    remove("beta fact"),  # AmbiguousMatch: two entries contain it
    replace("gamma", "alpha fact"),  # DuplicateEntry
    remove("no such text"),  # NoMatch
    add("x" * 380, maintenance=False),  # CapacityExceeded (400-byte limit)
    remove("delta fact, revised"),  # removes what the batch revised
    remove("delta fact, revised"),  # NoMatch: already removed by the member before
    add("epsilon fact"),  # commits, and stays
    ("add", {"target": "user", "content": "user fact"}),  # the other target, same commit
]


def test_every_caller_gets_what_it_would_have_got_alone_and_the_files_match() -> None:
    root, ports = _root()
    results = grouped(root, EVERY_KIND)
    expected, files = one_at_a_time(EVERY_KIND)
    assert results == expected
    assert [ports.files.read(p) for p in FILES] == files
    assert root.hot._group.batches == 1
    kinds = {r[0] for r in results if isinstance(r, tuple)}
    assert kinds == {
        InvalidInput.__name__,
        AmbiguousMatch.__name__,
        DuplicateEntry.__name__,
        NoMatch.__name__,
        CapacityExceeded.__name__,
    }
    assert [e.content for e in root.hot.snapshot().entries] == [*SEED, "epsilon fact", "user fact"]


def test_a_batch_writes_each_file_once_and_syncs_once() -> None:
    root, ports = _root()
    log = ports.files.log
    log.clear()
    calls = [add(f"new fact {i}") for i in range(5)]
    results = grouped(root, calls)
    assert all(isinstance(r, dict) and r["success"] for r in results)
    written = [c.args[0] for c in log.calls if c.method == "write_temp"]
    assert written == ["runtime/MEMORY.md", SOURCE_PATH]
    synced = [c.args[0] for c in log.calls if c.method == "fsync"]
    assert len(synced) == 2 and synced[0].startswith("runtime/.memories.json.")
    assert synced[1] == "runtime"
    assert [c.method for c in log.calls if c.port == "locks"] == ["acquire", "release"]
    assert root.hot._group.batches == 1


def test_receipts_count_entries_as_each_member_left_them() -> None:
    root, _ = _root()
    results = grouped(root, [add("one more"), add("two more"), remove("one more")])
    assert [r["entryCount"] for r in results] == [5, 6, 5]  # type: ignore[index]


def test_a_read_only_root_refuses_every_member() -> None:
    ports, _ = memory_ports()
    MemoryRoot.open("/ro", Config(), ports=ports).hot.add("memory", "kept")
    root = MemoryRoot.open("/ro", Config(write_enabled=False), ports=ports)
    results = grouped(root, [add("a"), remove("kept"), add("b")])
    assert results == [(ReadOnly.__name__, ReadOnly().message)] * 3
    assert ports.files.read(SOURCE_PATH) is not None
    assert [e.content for e in root.hot.snapshot().entries] == ["kept"]


def test_a_storage_failure_fails_every_member_and_changes_nothing() -> None:
    failing: list[RaisingPort] = []

    def wrap(files: object) -> RaisingPort:
        port = RaisingPort(files, "rename", StorageError("disk full"))
        failing.append(port)
        return port

    root, ports = _root(files=wrap)
    before = ports.files.read(SOURCE_PATH)
    failing[0].armed = True
    results = grouped(root, [add("a fact"), add("b fact"), remove("gamma")])
    assert results == [("StorageError", "disk full")] * 3
    assert ports.files.read(SOURCE_PATH) == before
    assert root.hot.add("memory", "after").success  # the flow is at rest and usable


def _interrupting(method: str) -> tuple[list[RaisingPort], Callable[[object], RaisingPort]]:
    made: list[RaisingPort] = []

    def wrap(port: object) -> RaisingPort:
        made.append(RaisingPort(port, method, KeyboardInterrupt()))
        return made[0]

    return made, wrap


def test_an_interrupt_before_the_commit_puts_the_others_back_and_they_commit() -> None:
    made, wrap = _interrupting("now_ms")
    root, ports = _root(clock=wrap)
    calls = [add("a fact"), add("b fact"), add("c fact")]
    made[0].armed = True
    results = grouped(root, calls)
    interrupted = [i for i, r in enumerate(results) if isinstance(r, KeyboardInterrupt)]
    assert len(interrupted) == 1
    rest = [c for i, c in enumerate(calls) if i not in interrupted]
    assert [r for r in results if not isinstance(r, KeyboardInterrupt)] == one_at_a_time(rest)[0]
    assert [ports.files.read(p) for p in FILES] == one_at_a_time(rest)[1]
    assert root.hot.add("memory", "after").success


def test_an_interrupt_during_the_commit_tells_the_others_it_is_uncertain() -> None:
    made, wrap = _interrupting("fsync")
    root, _ = _root(files=wrap)
    made[0].armed = True
    results = grouped(root, [add("a fact"), add("b fact"), add("c fact")])
    assert sum(isinstance(r, KeyboardInterrupt) for r in results) == 1
    others = [r for r in results if not isinstance(r, KeyboardInterrupt)]
    assert len(others) == 2
    for kind, message in others:  # type: ignore[misc]
        assert kind == "StorageError" and "may or may not have taken effect" in message
    assert root.hot.add("memory", "after").success  # at rest, lock released, usable


@pytest.mark.parametrize(
    ("threads", "backend"), [(2, "directory"), (4, "directory"), (4, "postgres")]
)
def test_free_running_threads_lose_nothing(
    threads: int, backend: str, tmp_path: Any, request: pytest.FixtureRequest
) -> None:
    """Real files and locks, or a real PostgreSQL root: every acknowledged add is in the
    source, in some order."""
    where: Any = tmp_path
    if backend == "postgres":
        where = request.getfixturevalue("postgres_cluster").url(f"threads-{tmp_path.name}")
    root = MemoryRoot.open(where, Config(durability="off", memory_limit=100_000))
    request.addfinalizer(root.close)
    per = 40
    errors: list[BaseException] = []

    def writer(t: int) -> None:
        try:
            for i in range(per):
                root.hot.add("memory", f"thread {t} fact {i}")
                if i % 3 == 2:
                    root.hot.remove("memory", f"thread {t} fact {i - 1}")
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=writer, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert not errors
    expected = {f"thread {t} fact {i}" for t in range(threads) for i in range(per) if i % 3 != 1}
    reopened = MemoryRoot.open(where, Config(durability="off", memory_limit=100_000))
    request.addfinalizer(reopened.close)
    assert {e.content for e in reopened.hot.snapshot().entries} == expected
    for t in range(threads):  # each thread's own adds are in its order
        mine = [e.content for e in reopened.hot.snapshot().entries if f"thread {t} " in e.content]
        assert mine == sorted(mine, key=lambda c: int(c.rsplit(" ", 1)[1]))


def test_a_batch_after_a_request_that_did_not_commit_starts_from_ready() -> None:
    root, _ = _root()
    with pytest.raises(NoMatch):
        root.hot.remove("memory", "nothing like this")
    assert root._flow.state == "ready"
    results = grouped(root, [add("from ready one"), add("from ready two")])
    assert [r["success"] for r in results] == [True, True]  # type: ignore[index]
    assert root._flow.state == "committed"
    assert root.hot._group.batches == 1


def test_a_caller_that_holds_the_mutex_already_leads_at_once() -> None:
    """A re-entrant call (the mutex is this thread's) never waits for another leader, which
    would be waiting for this very mutex; it settles the queue, the waiting caller's request
    included. (The scenario runs on a daemon thread, so a deadlock fails the test.)"""
    root, _ = _root()
    group, mutex = root.hot._group, root.hot._shared.mutex
    answers: list[object] = []
    mine: list[object] = []

    def scenario() -> None:
        with mutex:
            waiting = threading.Thread(
                target=lambda: answers.append(_outcome(root, *add("queued"))), daemon=True
            )
            waiting.start()
            deadline = time.monotonic() + 10
            while not (group._leading and group._queue) and time.monotonic() < deadline:
                time.sleep(0.001)
            mine.append(group._leading)
            mine.append(_outcome(root, *add("re-entrant")))
        waiting.join(10)

    runner = threading.Thread(target=scenario, daemon=True)
    runner.start()
    runner.join(20)
    assert not runner.is_alive(), "deadlocked"
    assert mine[0] is True, "the other caller was leading, waiting for the mutex"
    assert mine[1]["success"] and answers[0]["success"]  # type: ignore[index]
    assert group.batches == 1
    contents = [e.content for e in root.hot.snapshot().entries]
    assert contents[-2:] == ["queued", "re-entrant"]


def test_a_lone_caller_sends_its_request_at_once_without_queueing() -> None:
    root, _ = _root()
    group = root.hot._group
    queued: list[int] = []
    original = group._lead

    def lead(slot: Any) -> None:
        queued.append(len(group._queue))
        original(slot)

    group._lead = lead  # type: ignore[method-assign]
    receipt = root.hot.add("memory", "alone at last")
    assert receipt.success and receipt.added == "alone at last"
    assert queued == [] and group._queue == [] and not group._leading
    assert group.batches == 0


def test_a_caller_that_finds_a_request_queued_goes_after_it() -> None:
    """The mutex is free but a request waits in the queue (its caller is about to lead): a
    new caller may not overtake it. It leads, settling the queued request first, in one
    batch, as the twin that makes the calls one at a time in that order."""
    root, ports = _root()
    waiting = _Slot("add", {"target": "memory", "content": "queued first"})
    root.hot._group._queue.append(waiting)
    mine = root.hot.replace("memory", "queued first", "overtaken")  # matches only after it
    assert waiting.done and waiting.answer().added == "queued first"
    assert mine.replaced is not None and mine.replaced.to == "overtaken"
    assert root.hot._group.batches == 1
    _, files = one_at_a_time([add("queued first"), replace("queued first", "overtaken")])
    assert [ports.files.read(p) for p in FILES] == files
