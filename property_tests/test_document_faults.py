"""Project Documents under injected failures, concurrent writer processes and full disks.

- INV-DOC-7: every port call of an archiving create, a manual archive, an update and a plain
  create is failed in turn (every index, none sampled; ``durability="full"`` so the fsyncs are
  among them). Only ``locks.release`` is left out: a lock that cannot be released after a
  commit is not a failure of the commit. Either the request fails with a typed error, the
  files are byte for byte what they were, no active insight was added to long-term memory
  (and when no long-term write had happened yet, the long-term store is exactly as it was),
  reopening rolls nothing forward and the request then succeeds; or the failed call was
  bookkeeping (removing an archived document's active copy after the commit) and the request
  succeeded with a consistent store.
- INV-DOC-8: six writer processes (``property_tests/_doc_writer.py``) create documents at once
  on one real root with a small active limit, so creates archive each other's documents:
  every create succeeds, the store is consistent, the active total within the limit, and each
  archived document has its cold reference.
- INV-DSR-3: every port call a search makes after reading is failed in turn (the index write
  that records the access times, with ``ENOSPC`` as a full disk gives it), and the lock file
  cannot be created: the search returns the same documents.
"""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from test_document_properties import (
    ROOT,
    check_consistent,
    check_referenced,
    committed_records,
    index_of,
)
from test_multiprocess import send, stop_all, wait_ready

from mnemon_sm import Config, MemoryRoot
from mnemon_sm.adapters.postgres import PgBackend
from mnemon_sm.adapters.real import RealFiles
from mnemon_sm.errors import MnemonError, StorageError
from mnemon_sm.flows.documents.journal import JOURNAL_PATH
from mnemon_sm.flows.documents.model import INDEX_PATH, body_of, content_hash, parse_index
from mnemon_sm.ports import Files, Ports
from mnemon_sm.testing.faults import Fault, FaultInjector, faulty_ports
from mnemon_sm.testing.longterm import MemoryLongTermStore
from mnemon_sm.testing.maintenance import world
from mnemon_sm.testing.memory import MemoryLocks, memory_ports

NOTHING_WRITTEN = "INV-DOC-7"
CONCURRENT_CREATES = "INV-DOC-8"
SEARCH_BOOKKEEPING = "INV-DSR-3"
LIMIT = 4096
FULL = Config(durability="full", documents_active_limit=LIMIT)
BODY = "# Runbook\n\nHow to deploy the service safely.\n\n" + "Step detail. " * 60
LT_WRITES = {"long_term.remember", "long_term.create_space", "long_term.forget"}

Request = Callable[[Any, list[str]], Any]
REQUESTS: dict[str, Request] = {
    "archiving create": lambda d, ids: d.create("Runbook new", BODY + " new"),
    "manual archive": lambda d, ids: d.archive(ids[1]),
    "update": lambda d, ids: d.update(ids[2], content="short now", title="Renamed"),
    "plain create": lambda d, ids: d.create("Note", "a short note"),
}


def seeded(config: Config = FULL) -> tuple[Ports, list[str]]:
    """Three runbooks (a fourth does not fit) and a routing space for the archive worker."""
    ports, _ = memory_ports()
    root = MemoryRoot.open(ROOT, config, ports=ports)
    root.long_term.create_space("Runbooks", "Deploy runbooks", active=True)
    ids = []
    for i in range(3):
        ids.append(root.documents.create(f"Runbook {i}", BODY + str(i)).document.id)
        ports.clock.advance(1000)  # type: ignore[attr-defined]
    return ports, ids


def active_insights(ports: Ports) -> dict[str, set[str]]:
    store = ports.long_term
    assert isinstance(store, MemoryLongTermStore)
    return {space: set(s.insights) for space, s in store.data.items()}


class Snapshots(FaultInjector):
    """A fault injector that also takes ``take()`` just before call number ``snap_at``."""

    def __init__(self, take: Callable[[], Any]) -> None:
        super().__init__()
        self.take, self.snap_at, self.taken = take, -1, None

    def snap(self) -> None:
        self.taken = self.take()

    def call(self, name: str, fn: Callable[..., Any], *args: object, **kwargs: object) -> Any:
        if self.count == self.snap_at:
            self.snap()
        return super().call(name, fn, *args, **kwargs)


def reopen(ports: Ports, config: Config = FULL) -> MemoryRoot:
    locks = ports.locks
    assert isinstance(locks, MemoryLocks)
    locks.registry.clear()  # nothing is held between operations; a failure left nothing held
    return MemoryRoot.open(ROOT, config, ports=ports)


@pytest.mark.parametrize("mode", ["file", "journal"])
@pytest.mark.parametrize("kind", list(REQUESTS))
def test_a_failed_call_anywhere_leaves_every_store_as_it_was(kind: str, mode: str) -> None:
    """``journal``: the roots commit by index journal (the seeds left one, so the request
    appends to it)."""
    config = attrs.evolve(FULL, documents_index=mode)
    ports, ids = seeded(config)
    injector = FaultInjector()
    root = MemoryRoot.open(ROOT, config, ports=faulty_ports(ports, injector))
    start = injector.count
    probe = REQUESTS[kind](root.documents, ids)
    calls = injector.names[start:]
    assert bool(probe.archived) == (kind in ("archiving create", "manual archive"))
    assert len(calls) > 10
    # Documents archived earlier in a request stay archived when a later step fails (each was
    # archived completely, with its reference): past the first archive's commit, "as it was"
    # means as it was after that archive.
    moved = calls.index("files.remove") if probe.archived and kind != "manual archive" else None
    failed: Counter[str] = Counter()
    for k, name in enumerate(calls):
        if name == "locks.release":
            continue
        ports, ids = seeded(config)
        injector = Snapshots(lambda ports=ports: (world(ports), active_insights(ports)))
        root = MemoryRoot.open(ROOT, config, ports=faulty_ports(ports, injector))
        injector.snap()
        first = injector.count
        at = first + k
        injector.faults[at] = Fault(at, "fail")
        if moved is not None and k > moved:
            injector.snap_at = first + moved + 1  # right after the first archive's commit
        where = (NOTHING_WRITTEN, kind, k, name)
        try:
            REQUESTS[kind](root.documents, ids)
        except MnemonError:
            failed[name] += 1
            assert injector.names[at] == name, where  # the same call sequence up to the fault
            (before_files, before_lt), before_active = injector.taken
            files_now, lt_now = world(ports)
            assert files_now == before_files, where
            assert active_insights(ports) == before_active, where
            if not LT_WRITES & set(injector.names[first:at]):
                assert lt_now == before_lt, where
            again = reopen(ports, config)
            assert world(ports)[0] == before_files, where  # nothing rolled forward
            REQUESTS[kind](again.documents, ids)  # and the request can be made again
        else:
            assert name in ("files.remove", "files.read"), where  # bookkeeping, or a read
            reopen(ports, config)  # whose file is then replaced (see store.Undo)
        check_consistent(ports)
        check_referenced(ports)
    # Not vacuous: failures reached the commit and, for archives, the long-term writes.
    assert failed["files.rename"] >= 1 and failed["files.fsync"] >= 2, failed
    if mode == "journal":
        assert failed["files.append"] >= 1, failed
    if probe.archived:
        assert failed["long_term.remember"] >= 1 and failed["long_term.insights"] >= 1, failed


def test_a_failed_update_stays_invisible_and_is_not_rolled_forward() -> None:
    """The issue's story, call by call: after the failure ``get``, ``records`` and ``search``
    show the old document, and so does a new opening."""
    ports, ids = seeded()
    injector = FaultInjector()
    root = MemoryRoot.open(ROOT, FULL, ports=faulty_ports(ports, injector))
    start = injector.count
    REQUESTS["update"](root.documents, ids)
    writes = [
        k
        for k, n in enumerate(injector.names[start:])
        if n in ("files.write_temp", "files.fsync", "files.rename")
    ]
    assert len(writes) >= 6  # the file and the index, three calls each
    for k in writes:
        ports, ids = seeded()
        old = reopen(ports).documents.get(ids[2])
        injector = FaultInjector()
        root = MemoryRoot.open(ROOT, FULL, ports=faulty_ports(ports, injector))
        at = injector.count + k
        injector.faults[at] = Fault(at, "fail")
        with pytest.raises(StorageError):
            REQUESTS["update"](root.documents, ids)
        for docs in (root.documents, reopen(ports).documents):
            assert docs.get(ids[2]) == old, (NOTHING_WRITTEN, k)
            assert [r for r in docs.records() if r.id == ids[2]] == [old[0]], (NOTHING_WRITTEN, k)
            assert [h.document.id for h in docs.search("short now")] == [], (NOTHING_WRITTEN, k)


# -- concurrent creates across processes ----------------------------------------------------------

DOC_WRITER = Path(__file__).with_name("_doc_writer.py")
PROCS, COUNT = 6, 5
PROC_LIMIT = 6000  # about five documents: most creates archive one


def _index_mode(mode: str, name: str) -> str:
    if mode == "mixed":
        return "journal" if int(name[1:]) % 2 else "file"
    return mode


@pytest.mark.parametrize(
    ("mode", "backend"),
    [
        ("file", "directory"),
        ("journal", "directory"),
        ("mixed", "directory"),
        ("mixed", "postgres"),
    ],
)
def test_concurrent_creates_from_processes_all_succeed(
    tmp_path: Path, mode: str, backend: str, request: pytest.FixtureRequest
) -> None:
    """``mixed``: every other writer commits by journal, the others rewrite the index (each
    folding the journal its commit finds). ``postgres``: the six writers are hosts of one root
    on a PostgreSQL server, sharing one replica directory for its Memory Spaces."""
    root: Path | str = tmp_path / "root"
    pg: PgBackend | None = None
    if backend == "postgres":
        cluster = request.getfixturevalue("postgres_cluster")
        root = cluster.url(f"doc-writers-{tmp_path.name}")
        pg = PgBackend(str(root))
    MemoryRoot.open(root, Config(documents_active_limit=PROC_LIMIT)).close()
    names = [f"p{i}" for i in range(PROCS)]
    outs = {name: tmp_path / f"{name}.jsonl" for name in names}
    procs = {}
    for name in names:
        args = [sys.executable, str(DOC_WRITER), "--root", str(root), "--proc", name,
                "--count", str(COUNT), "--limit", str(PROC_LIMIT),
                "--index", _index_mode(mode, name)]  # fmt: skip
        with open(outs[name], "wb") as out, open(outs[name].with_suffix(".err"), "wb") as err:
            procs[name] = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=out, stderr=err)
    try:
        for name in names:  # the start barrier: every writer is up before any create runs
            wait_ready(procs[name], outs[name])
        for p in procs.values():
            send(p, "go")
        for p in procs.values():
            p.wait(timeout=300)
    finally:
        stop_all(procs.values())
    results = []
    for name in names:
        assert procs[name].returncode == 0, outs[name].with_suffix(".err").read_text()
        lines = outs[name].read_text().splitlines()[1:]
        results += [json.loads(line) for line in lines]
    outcomes = Counter("ok" if r["ok"] else f"{r['error']}: {r['message']}" for r in results)
    assert outcomes == {"ok": PROCS * COUNT}, (CONCURRENT_CREATES, outcomes)

    files: Files = RealFiles(root) if pg is None else pg.files
    records = committed_records(files.read(INDEX_PATH), files.read(JOURNAL_PATH))
    if mode != "file":  # the last journal writer to close folded the journal
        assert files.read(JOURNAL_PATH) is None, CONCURRENT_CREATES
        assert parse_index(files.read(INDEX_PATH)) == tuple(records), CONCURRENT_CREATES
    assert len(records) == PROCS * COUNT, CONCURRENT_CREATES
    active = [r for r in records if r.status == "active"]
    assert sum(r.size_bytes for r in active) <= PROC_LIMIT, CONCURRENT_CREATES
    for r in records:
        data = files.read(r.path())
        assert data is not None and content_hash(body_of(data)) == r.content_hash, r.id
        other = "archived" if r.status == "active" else "active"
        assert files.read(r.path(other)) is None, (CONCURRENT_CREATES, r.id)  # exactly once
    archived = [r for r in records if r.status == "archived"]
    assert len(archived) >= PROCS * COUNT - 6, "the limit did not make creates archive"
    reader = MemoryRoot.open(root)
    store = reader.long_term.service.store
    texts = [i.content for space in store.spaces() for i in store.list(space)]
    for r in archived:
        path = f"{reader.location}/documents/archived/{r.filename}"
        assert any(path in t and r.content_hash in t for t in texts), (CONCURRENT_CREATES, r.id)
    reader.close()
    if pg is not None:
        pg.close()
    # Each archived document was archived by exactly one acknowledged create.
    receipts = [doc_id for r in results for doc_id in r["archived"]]
    assert sorted(receipts) == sorted(r.id for r in archived), CONCURRENT_CREATES


# -- search bookkeeping under storage failures ---------------------------------------------------


def test_search_answers_when_its_bookkeeping_cannot_be_written() -> None:
    ports, _ = seeded()
    injector = FaultInjector()
    root = MemoryRoot.open(ROOT, FULL, ports=faulty_ports(ports, injector))
    expected = [h.document.title for h in root.documents.search("runbook", record_access=False)]
    assert len(expected) == 3
    start = injector.count
    root.documents.search("runbook")
    calls = injector.names[start:]
    reads = ("files.read", "files.read_if_changed")
    writes = [k for k, n in enumerate(calls) if n.startswith("files.") and n not in reads]
    assert [calls[k] for k in writes][:3] == ["files.write_temp", "files.fsync", "files.rename"]
    full = StorageError("no space left on device")
    full.__cause__ = OSError(errno.ENOSPC, "No space left on device")
    for k in [calls.index("locks.acquire"), *writes]:
        ports, _ = seeded()
        injector = FaultInjector()
        root = MemoryRoot.open(ROOT, FULL, ports=faulty_ports(ports, injector))
        at = injector.count + k
        injector.faults[at] = Fault(at, "fail", full)
        hits = root.documents.search("runbook")
        assert [h.document.title for h in hits] == expected, (SEARCH_BOOKKEEPING, calls[k])
        assert injector.names[at] == calls[k], (SEARCH_BOOKKEEPING, calls[k])
        check_consistent(ports)
    assert index_of(ports)  # the index is still readable after every failure
