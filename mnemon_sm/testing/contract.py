"""The port contract: one set of checks every adapter must pass.

``tests/test_port_contract.py`` runs it against the real adapters (on a temporary directory),
the in-memory fakes and the fault-injecting wrapper with no faults planned. Anyone writing an
adapter of their own can call the same functions. Each check raises ``AssertionError`` with a
message naming the broken promise.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable

from mnemon_sm.errors import InvalidInput, LockTimeout, StorageError, UnknownInsight, UnknownSpace
from mnemon_sm.ports import TEMP_NAME, Clock, Files, FileTree, Ids, Locks
from mnemon_sm.ports.long_term.port import ROW_TABLES, LongTermStore, SpaceRows
from mnemon_sm.ports.long_term.values import DraftEdge, DraftInsight, ImportDraft

__all__ = [
    "check_clock_contract",
    "check_files_contract",
    "check_ids_contract",
    "check_locks_contract",
    "check_long_term_contract",
]


def _raises(error: type[BaseException], fn: Callable[[], object], promise: str) -> None:
    try:
        fn()
    except error:
        return
    raise AssertionError(f"{promise}: expected {error.__name__}")


def check_files_contract(files: Files) -> None:
    """Check a ``Files`` adapter over an empty storage root."""
    assert files.read("runtime/a.txt") is None, "a missing file reads as None"
    assert files.list("runtime") == (), "a missing directory lists as empty"
    files.ensure_dir("runtime")
    files.ensure_dir("runtime")  # idempotent
    temp = files.write_temp("runtime/a.txt", b"first")
    directory, _, name = temp.rpartition("/")
    assert directory == "runtime", "a temp file lives beside its target"
    assert TEMP_NAME.match(name), f"temp names match TEMP_NAME: {name}"
    assert files.read(temp) == b"first", "a temp file holds what was written"
    assert files.read("runtime/a.txt") is None, "writing a temp file leaves the target alone"
    files.fsync(temp)
    files.rename(temp, "runtime/a.txt")
    assert files.read("runtime/a.txt") == b"first", "rename makes the target hold the data"
    assert files.read(temp) is None, "rename removes the source name"
    other = files.write_temp("runtime/a.txt", b"second")
    assert other != temp, "temp names are unique"
    files.rename(other, "runtime/a.txt")
    assert files.read("runtime/a.txt") == b"second", "rename replaces an existing target"
    files.fsync("runtime")
    assert files.list("runtime") == ("a.txt",), "list shows the directory's names"
    _check_read_if_changed(files)
    files.append("runtime/log", b"one\n")
    files.append("runtime/log", b"two\n")
    assert files.read("runtime/log") == b"one\ntwo\n", "append adds to the end, creating"
    _raises(StorageError, lambda: files.append("nowhere/log", b"x"), "no append in a missing dir")
    files.remove("runtime/log")
    files.remove("runtime/a.txt")
    files.remove("runtime/a.txt")  # removing a missing file is fine
    assert files.read("runtime/a.txt") is None, "remove deletes the file"
    for bad in ("/etc/passwd", "../escape", "runtime/../../escape", "runtime//x", ""):

        def read_bad(path: str = bad) -> object:
            return files.read(path)

        _raises(StorageError, read_bad, f"path {bad!r} is refused")
    _raises(StorageError, lambda: files.write_temp("nowhere/x", b""), "no temp in a missing dir")
    _raises(StorageError, lambda: files.fsync("runtime/missing"), "fsync of a missing file")
    _raises(StorageError, lambda: files.rename("runtime/missing", "runtime/b"), "rename missing")
    kept = files.write_temp("runtime/k", b"kept")
    _raises(StorageError, lambda: files.rename(kept, "nowhere/k"), "no rename to a missing dir")
    assert files.read(kept) == b"kept", "a rename that fails keeps its source"
    files.remove(kept)
    temp = files.write_temp("runtime/f", b"")
    files.rename(temp, "runtime/f")
    _raises(StorageError, lambda: files.ensure_dir("runtime/f"), "a file is not a directory")
    files.remove("runtime/f")
    if isinstance(files, FileTree):
        _check_walk(files)


def _check_walk(files: FileTree | Files) -> None:
    """The optional ``FileTree`` capability: every file, nested ones too, no directory."""
    assert isinstance(files, Files) and isinstance(files, FileTree)
    files.ensure_dir("tree/deep/er")
    for path in ("tree/a", "tree/deep/b", "tree/deep/er/c", "top"):
        temp = files.write_temp(path, path.encode())
        files.rename(temp, path)
    walked = files.walk()
    expected = ("top", "tree/a", "tree/deep/b", "tree/deep/er/c")
    assert walked == expected, (
        f"walk lists every file, nested ones too, sorted, and no directory: {walked}"
    )
    for path in expected:
        files.remove(path)


def _check_read_if_changed(files: Files) -> None:
    assert files.read_if_changed("runtime/none", None) == (None, None), "missing: (None, None)"
    stamp, data = files.read_if_changed("runtime/a.txt", None)
    assert stamp is not None and data == b"second", "first read returns a stamp and the data"
    again, data = files.read_if_changed("runtime/a.txt", stamp)
    assert data in (None, b"second"), "an unchanged file is reported unchanged or read again"
    if data is None:
        assert again == stamp, "an unchanged report keeps the stamp"
    temp = files.write_temp("runtime/a.txt", b"second")  # same bytes, new file
    files.rename(temp, "runtime/a.txt")
    temp = files.write_temp("runtime/a.txt", b"changed")
    files.rename(temp, "runtime/a.txt")
    _, data = files.read_if_changed("runtime/a.txt", stamp)
    assert data == b"changed", "a changed file is never reported unchanged"
    temp = files.write_temp("runtime/a.txt", b"second")
    files.rename(temp, "runtime/a.txt")


def check_locks_contract(
    first: Locks, second: Locks, name: str = "runtime/.contract.lock"
) -> None:
    """Check two ``Locks`` adapters on the same root (two processes, as far as they know),
    on the lock ``name`` (adapters may treat some names specially, e.g. the reference's)."""
    first.release(name)  # releasing what is not held is fine
    first.acquire(name, 1000)
    _raises(LockTimeout, lambda: second.acquire(name, 100), "a held lock excludes others")
    first.release(name)
    second.acquire(name, 1000)
    _raises(LockTimeout, lambda: first.acquire(name, 100), "and the other way round")
    second.release(name)
    second.release(name)
    first.acquire(name, 1000)
    first.release(name)


def check_clock_contract(clock: Clock) -> None:
    """Check a ``Clock``: integer milliseconds after 2020, never going backwards; ``wait``
    returns True at once for an event already set, through the event's own ``wait``."""
    a, b = clock.now_ms(), clock.now_ms()
    assert isinstance(a, int) and a > 1_577_836_800_000, "milliseconds since the epoch"
    assert b >= a, "the clock does not go backwards between two reads"

    class Watched(threading.Event):
        waited = False

        def wait(self, timeout: float | None = None) -> bool:
            self.waited = True
            return super().wait(timeout)

    done = Watched()
    done.set()
    assert clock.wait(done, 60_000) is True, "a set event ends the wait at once"
    assert done.waited, "the adapter waits through the event's own wait()"


def check_ids_contract(ids: Ids, draws: int = 200) -> None:
    """Check an ``Ids``: each id is a UUID in canonical text form, and no two are equal."""
    drawn = [ids.new_id() for _ in range(draws)]
    for text in drawn:
        assert isinstance(text, str), "an id is a string"
        try:
            canonical = str(uuid.UUID(text))
        except ValueError:
            raise AssertionError("an id is a canonical UUID") from None
        assert canonical == text, "an id is a canonical UUID"
    assert len(set(drawn)) == draws, "ids are never repeated"


def check_long_term_contract(store: LongTermStore) -> None:
    """Check a ``LongTermStore`` adapter over a root with no spaces."""
    assert store.spaces() == (), "a new root has no spaces"
    _raises(UnknownSpace, lambda: store.status("nope"), "an unknown space is refused")
    store.create_space("default")
    _raises(InvalidInput, lambda: store.create_space("default"), "a space is created once")
    assert store.spaces() == ("default",), "spaces() lists created spaces"
    first = store.remember("default", "The deploy script lives in tools/deploy.sh")
    assert first.action == "added" and first.id, "remember adds an insight"
    again = store.remember("default", "The deploy script lives in tools/deploy.sh")
    assert (again.action, again.id, again.replaced_id) == ("skipped", first.id, first.id), (
        "an exact duplicate is skipped and reported with the existing id"
    )
    second = store.remember("default", "Releases ship every second Tuesday", importance=5)
    listed = store.list("default")
    assert {i.id for i in listed} == {first.id, second.id}, "list shows active insights"
    assert listed[0].id == second.id, "list orders by importance first"
    assert all(i.access_count == 0 for i in listed), "list counts no access"
    basic = store.recall("default", "deploy script", mode="basic", readonly=True)
    assert [h.insight.id for h in basic.hits] == [first.id], "basic recall filters by substring"
    assert basic.hits[0].score is None, "basic recall has no score"
    smart = store.recall("default", "where is the deploy script")
    assert smart.hits and smart.hits[0].insight.id == first.id, "smart recall finds the insight"
    score = smart.hits[0].score
    assert score is not None and 0 < score <= 1, "smart scores are normalized relevance"
    counts = {i.id: i.access_count for i in store.list("default")}
    assert counts[first.id] >= 1, "a recall counts access on what it returned"
    store.recall("default", "deploy", mode="keyword", readonly=True)
    after = {i.id: i.access_count for i in store.list("default")}
    assert after == counts, "a read-only recall counts no access"
    link = store.link("default", first.id, second.id, edge_type="causal", weight=0.7)
    assert (link.source_id, link.target_id, link.edge_type) == (first.id, second.id, "causal")
    assert any(h.insight.id == second.id for h in store.related("default", first.id)), (
        "related follows a link"
    )
    assert any(h.insight.id == first.id for h in store.related("default", second.id)), (
        "links go both ways"
    )
    edges = store.graph("default").edges
    assert {(e.source_id, e.target_id) for e in edges if e.edge_type == "causal"} == {
        (first.id, second.id),
        (second.id, first.id),
    }, "the graph keeps both directed rows of a link"
    store.forget("default", second.id)
    _raises(UnknownInsight, lambda: store.forget("default", second.id), "forget happens once")
    assert [i.id for i in store.list("default")] == [first.id], "forgotten insights are gone"
    assert not any(
        second.id in (e.source_id, e.target_id) for e in store.graph("default").edges
    ), "forget drops the insight's edges"
    found = store.insights("default", [second.id, first.id, "no-such-id", first.id])
    assert [i.id for i in found] == [first.id], "insights() gives active ones, in order, once"
    assert found[0].content == "The deploy script lives in tools/deploy.sh", "whole rows"
    assert found[0].access_count == store.list("default")[0].access_count, "counts no access"
    _raises(UnknownSpace, lambda: store.insights("nope", [first.id]), "unknown space refused")
    status = store.status("default")
    assert (status.total_insights, status.deleted_insights) == (1, 1), "status counts"
    draft = ImportDraft(
        (
            DraftInsight("Imported fact one"),
            DraftInsight("The deploy script lives in tools/deploy.sh"),
        ),
        (DraftEdge(0, 1, "semantic", 0.9, "related"),),
    )
    report = store.import_draft("default", draft)
    assert (report.imported, report.skipped) == (1, 1), "import skips exact duplicates"
    assert report.ids[1] == first.id, "a skipped draft insight maps to the existing one"
    store.create_space("other")
    store.delete_space("other")
    assert store.spaces() == ("default",), "a deleted space is gone"
    if isinstance(store, SpaceRows):
        _check_space_rows(store)


def _check_space_rows(store: LongTermStore) -> None:
    """The optional ``SpaceRows`` capability, on the contract's ``default`` space."""
    assert isinstance(store, SpaceRows)
    exported = list(store.export_rows("default", batch=2))
    assert [t for t, _ in exported] == sorted((t for t, _ in exported), key=ROW_TABLES.index), (
        "rows come table by table"
    )
    assert all(0 < len(rows) <= 2 for _, rows in exported), "in pages of the batch size"
    store.import_rows("copy", iter(exported))
    assert store.space_digest("copy") == store.space_digest("default"), "a copy has its rows"
    assert store.graph("copy") == store.graph("default"), "a copy answers as its source"
    assert store.status("copy").deleted_insights == 1, "forgotten insights are rows too"
    _raises(InvalidInput, lambda: store.import_rows("copy", iter(exported)), "copy once")
    _raises(
        InvalidInput,
        lambda: store.import_rows("bad", iter([("nope", [(1, "x")])])),
        "only Mnemon's tables",
    )
    assert "bad" not in store.spaces(), "a refused import leaves no space"
    _raises(UnknownSpace, lambda: list(store.export_rows("nope")), "unknown space refused")
    store.delete_space("copy")
