"""Project Documents under generated workloads, crashes and hostile paths.

- INV-DOC-2 (pure): the eviction order lists active documents only, never the target, least
  recently used first; through the flow, the documents a request archives are exactly the
  first ones of that order taken from the index before the request.
- INV-DOC-1 / INV-DOC-4: after every committed mutation of a generated run (creates, updates,
  searches, manual archives, with a small active limit) the active total is within the limit,
  the index agrees with the files, and every archived document has a cold reference holding
  its archived path and SHA-256 in long-term memory.
- INV-DOC-3: a crash before or after every port call of an archiving create, a manual archive
  and an update, then reopening: every document is active or archived exactly once, its body
  hash is what the index says (and unchanged unless the request changed it), no orphan file
  remains, and the request then succeeds.
- INV-DOC-5: source paths that leave the workspace or enter the managed directory, and
  symlinked document directories or files (on the real file system), are refused with nothing
  written.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

import attrs
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from mnemon_sm import Config, MemoryRoot
from mnemon_sm.errors import DocumentCapacityExceeded, InvalidInput, StorageError
from mnemon_sm.flows.documents import cache as cache_module
from mnemon_sm.flows.documents.journal import JOURNAL_PATH
from mnemon_sm.flows.documents.model import INDEX_PATH, DocumentRecord, body_of, content_hash
from mnemon_sm.flows.documents.rules import lru
from mnemon_sm.ports import Ports
from mnemon_sm.testing.faults import Fault, FaultInjector, SimulatedCrash, faulty_ports
from mnemon_sm.testing.longterm import MemoryLongTermStore
from mnemon_sm.testing.memory import MemoryFiles, MemoryLocks, memory_ports
from mnemon_sm.testing.snapshot import files_state

WITHIN_LIMIT = "INV-DOC-1"
LRU_ORDER = "INV-DOC-2"
ONCE_AFTER_CRASH = "INV-DOC-3"
REFERENCED = "INV-DOC-4"
NOTHING_WRITTEN = "INV-DOC-5"
LIMIT = 4096
CONFIG = Config(durability="off", documents_active_limit=LIMIT)
ROOT = "/roots/docs"
CRASHES = settings(
    max_examples=max(3, settings().max_examples // 12),
    phases=[p for p in settings().phases if p is not Phase.explain],
)

stamps = st.integers(0, 20).map(lambda n: f"2026-01-01T00:00:{n:02d}.000Z")


@st.composite
def records(draw: Any) -> list[DocumentRecord]:
    out = []
    for i in range(draw(st.integers(0, 8))):
        out.append(
            DocumentRecord(
                id=f"{i:08x}-0000",
                title=f"t{i}",
                description="",
                status=draw(st.sampled_from(["active", "active", "archived"])),
                filename=f"t{i}-{i:08x}.md",
                relative_path="",
                source_paths=(),
                session_ids=(),
                created_at="2026-01-01T00:00:00.000Z",
                updated_at=draw(stamps),
                last_accessed_at=draw(stamps),
                revision=1,
                content_hash="",
                size_bytes=100,
                memory_body_ids=(),
            )
        )
    return out


@given(records(), st.data())
def test_eviction_order_is_least_recently_used_first(rs: list[DocumentRecord], data: Any) -> None:
    exclude = data.draw(st.sampled_from([None, *(r.id for r in rs)]))
    order = lru(rs, exclude)
    assert all(r.status == "active" and r.id != exclude for r in order), LRU_ORDER
    assert {r.id for r in order} == {r.id for r in rs if r.status == "active"} - {exclude}
    keys = [(r.last_accessed_at, r.updated_at) for r in order]
    assert keys == sorted(keys), LRU_ORDER
    for a, b in itertools.pairwise(order):  # ties keep index order
        if (a.last_accessed_at, a.updated_at) == (b.last_accessed_at, b.updated_at):
            assert rs.index(a) < rs.index(b), LRU_ORDER


# -- consistency helpers -----------------------------------------------------------------------


def committed_records(index: bytes | None, journal: bytes | None) -> list[DocumentRecord]:
    """The committed documents, by the index journal's documented rules (written from them,
    not from the library's merge): ``index.json``'s records, then the records of each complete
    journal line in order (the bytes after the last newline are not part of the journal). A
    record of an id not held yet is added at the end; one of an id held replaces the held one
    when its revision is higher, or equal and its ``lastAccessedAt`` is not earlier."""
    from mnemon_sm.flows.documents.model import parse_index

    records = list(parse_index(index))
    complete = (journal or b"")[: (journal or b"").rfind(b"\n") + 1]
    for line in complete.splitlines():
        wrapped = {"version": 1, "documents": json.loads(line)["documents"]}
        for new in parse_index(json.dumps(wrapped).encode()):
            at = next((i for i, r in enumerate(records) if r.id == new.id), None)
            if at is None:
                records.append(new)
                continue
            old = records[at]
            later = (new.revision, new.last_accessed_at) >= (old.revision, old.last_accessed_at)
            if new.revision > old.revision or later:
                records[at] = new
    return records


def index_of(ports: Ports) -> list[DocumentRecord]:
    files = ports.files
    return committed_records(files.read(INDEX_PATH), files.read(JOURNAL_PATH))


def check_consistent(ports: Ports) -> None:
    """The index agrees with the files: one file per record, in its status folder, holding
    the body the index hashes; no other managed file."""
    files = ports.files
    assert isinstance(files, MemoryFiles)
    names = {k for k in files.files if k.startswith("documents/") and k.endswith(".md")}
    expected = set()
    for r in index_of(ports):
        here = f"documents/{r.status}/{r.filename}"
        expected.add(here)
        data = files.files.get(here)
        assert data is not None, (ONCE_AFTER_CRASH, "missing", here)
        assert content_hash(body_of(data)) == r.content_hash, (ONCE_AFTER_CRASH, "hash", here)
        if r.status == "active":
            assert len(data) == r.size_bytes, (ONCE_AFTER_CRASH, "size", here)
    assert names == expected, (ONCE_AFTER_CRASH, names ^ expected)


def check_referenced(ports: Ports) -> None:
    store = ports.long_term
    assert isinstance(store, MemoryLongTermStore)
    texts = [i.content for s in store.data.values() for i in s.insights.values()]
    for r in index_of(ports):
        if r.status == "archived":
            path = f"{ROOT}/documents/archived/{r.filename}"
            assert any(path in t and r.content_hash in t for t in texts), (REFERENCED, r.id)


def active_total(ports: Ports) -> int:
    return sum(r.size_bytes for r in index_of(ports) if r.status == "active")


# -- generated runs ----------------------------------------------------------------------------

ops = st.lists(
    st.one_of(
        st.tuples(st.just("create"), st.integers(50, 1500), st.integers(0, 5)),
        st.tuples(st.just("update"), st.integers(20, 1500), st.integers(0, 9)),
        st.tuples(st.just("search"), st.integers(0, 5), st.integers(1, 3)),
        st.tuples(st.just("archive"), st.integers(0, 9), st.just(0)),
    ),
    min_size=1,
    max_size=14,
)
TOPICS = ("deploy", "billing", "search", "auth", "cache", "ingest")


@given(ops)
def test_every_committed_mutation_keeps_the_limit_the_order_and_the_references(
    run: list[tuple[str, int, int]],
) -> None:
    ports, _ = memory_ports()
    root = MemoryRoot.open(ROOT, CONFIG, ports=ports)
    docs = root.documents
    serial = 0
    for kind, a, b in run:
        ports.clock.advance(1000)  # type: ignore[attr-defined]
        before = index_of(ports)
        active = [r for r in before if r.status == "active"]
        try:
            if kind == "create":
                serial += 1
                body = f"{TOPICS[b]} notes {serial}. " + "w" * a
                result = docs.create(f"{TOPICS[b].title()} doc {serial}", body)
                target = None
            elif kind == "update" and active:
                target = active[b % len(active)].id
                result = docs.update(target, content=f"updated {serial} " + "u" * a)
            elif kind == "archive" and active:
                target = active[a % len(active)].id
                result = docs.archive(target)
            elif kind == "search":
                docs.search(TOPICS[a], limit=b)
                continue
            else:
                continue
        except DocumentCapacityExceeded:  # nothing left to archive: only archives happened
            now = {r.id: r.status for r in index_of(ports)}
            assert set(now) == {r.id for r in before}  # the request itself did not land
            assert all(now[r.id] == r.status or now[r.id] == "archived" for r in before)
            check_consistent(ports)
            continue
        candidates = [r for r in before if r.status == "active" and r.id != target]
        order = [
            r.id for r in sorted(candidates, key=lambda r: (r.last_accessed_at, r.updated_at))
        ]
        if kind != "archive":
            assert list(result.archived) == order[: len(result.archived)], LRU_ORDER
            assert active_total(ports) <= LIMIT, WITHIN_LIMIT
        check_consistent(ports)
        check_referenced(ports)


# -- crashes -----------------------------------------------------------------------------------

BODY = "# Runbook\n\nHow to deploy the service safely.\n\n" + "Step detail. " * 60


def seeded(config: Config = CONFIG) -> tuple[Ports, list[str]]:
    ports, _ = memory_ports()
    root = MemoryRoot.open(ROOT, config, ports=ports)
    ids = []
    for i in range(3):
        ids.append(root.documents.create(f"Runbook {i}", BODY + str(i)).document.id)
        ports.clock.advance(1000)  # type: ignore[attr-defined]
    return ports, ids


def request(kind: str, ids: list[str]) -> Any:
    if kind == "create":
        return lambda d: d.create("Runbook new", BODY + " new")
    if kind == "archive":
        return lambda d: d.archive(ids[1])
    return lambda d: d.update(ids[2], content=BODY + " updated")


MODES = {
    "file": (CONFIG, None),
    "journal": (attrs.evolve(CONFIG, documents_index="journal"), None),
    # every commit folds the journal: the crash windows of the fold too
    "journal-folding": (attrs.evolve(CONFIG, documents_index="journal"), 0),
}


@pytest.mark.parametrize("mode", list(MODES))
@CRASHES
@given(st.sampled_from(["create", "archive", "update"]))
def test_a_crash_at_any_port_call_leaves_every_document_exactly_once(mode: str, kind: str) -> None:
    config, bound = MODES[mode]
    _crash_everywhere(kind, config, bound)


def _folding(bound: int | None) -> contextlib.AbstractContextManager[object]:
    """With ``bound`` set, the journal is folded past that many bytes (the seeds leave a
    journal of acknowledged lines under the real bound; the request then folds it)."""
    if bound is None:
        return contextlib.nullcontext()
    return mock.patch.object(cache_module, "JOURNAL_MAX", bound)


def _crash_everywhere(kind: str, config: Config, bound: int | None) -> None:
    ports, ids = seeded(config)
    injector = FaultInjector()
    root = MemoryRoot.open(ROOT, config, ports=faulty_ports(ports, injector))
    start = injector.count
    with _folding(bound):
        request(kind, ids)(root.documents)
    calls = injector.count - start
    assert calls > 5
    for k in range(calls):
        for crash in ("crash_before", "crash_after"):
            ports, ids = seeded(config)
            hashes = {r.id: r.content_hash for r in index_of(ports)}
            injector = FaultInjector()
            root = MemoryRoot.open(ROOT, config, ports=faulty_ports(ports, injector))
            at = injector.count + k
            injector.faults[at] = Fault(at, crash)  # type: ignore[arg-type]
            with pytest.raises(SimulatedCrash), _folding(bound):
                request(kind, ids)(root.documents)
            locks = ports.locks
            assert isinstance(locks, MemoryLocks)
            locks.registry.clear()
            reopened = MemoryRoot.open(ROOT, config, ports=ports)
            where = (kind, k, crash, injector.names[-1])
            check_consistent(ports)
            after = {r.id: r for r in index_of(ports)}
            for doc_id, digest in hashes.items():
                assert doc_id in after, (ONCE_AFTER_CRASH, where)
                if not (kind == "update" and doc_id == ids[2]):
                    assert after[doc_id].content_hash == digest, (ONCE_AFTER_CRASH, where)
            check_referenced(ports)
            if not (kind == "archive" and after[ids[1]].status == "archived"):
                request(kind, ids)(reopened.documents)  # the request can be made again
            check_consistent(ports)


# -- hostile paths -----------------------------------------------------------------------------

hostile = st.one_of(
    st.builds(lambda n, t: "../" * n + t, st.integers(1, 4), st.sampled_from(["x", "etc/passwd"])),
    st.sampled_from(["/etc/passwd", "/w2/file", "documents", "documents/active/a.md"]),
    st.builds(lambda t: f"sub/../../{t}", st.sampled_from(["x", "y/z"])),
    st.builds(lambda t: f"./documents/{t}", st.sampled_from(["index.json", "archived/q.md"])),
)


@given(hostile)
def test_paths_leaving_the_workspace_are_refused_with_nothing_written(path: str) -> None:
    ports, _ = memory_ports()
    root = MemoryRoot.open(ROOT, CONFIG, ports=ports)
    root.documents.create("Existing", "body")
    files = ports.files
    assert isinstance(files, MemoryFiles)
    before = files_state(files.files)
    with pytest.raises(InvalidInput):
        root.documents.create("Doc", "body", source_paths=["ok.md", path], workspace="/w")
    assert files_state(files.files) == before, NOTHING_WRITTEN


def test_symlinked_document_directories_and_files_are_never_followed() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        outside = base / "outside"
        outside.mkdir()
        root_dir = base / "root"
        root_dir.mkdir()
        (root_dir / "documents").symlink_to(outside, target_is_directory=True)
        root = MemoryRoot.open(root_dir, CONFIG)
        with pytest.raises(StorageError):
            root.documents.create("Doc", "body")
        assert list(outside.iterdir()) == [], NOTHING_WRITTEN

        (root_dir / "documents").unlink()
        root = MemoryRoot.open(root_dir, CONFIG)
        doc = root.documents.create("Doc", "secret body").document
        target = root_dir / doc.relative_path
        target.unlink()
        victim = outside / "victim.md"
        victim.write_text("not ours")
        os.symlink(victim, target)
        assert root.documents.search("secret") == []  # the link is not read
        root.documents.update(doc.id, content="replaced")
        assert victim.read_text() == "not ours", NOTHING_WRITTEN  # the link was replaced
        assert not target.is_symlink()
        data = json.loads((root_dir / INDEX_PATH).read_text())
        assert data["documents"][0]["revision"] == 2


texts = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=30)


@given(records(), st.lists(texts, min_size=8, max_size=8))
def test_the_index_encoder_equals_json_dumps(rs: list[DocumentRecord], words: list[str]) -> None:
    import json as std_json

    from mnemon_sm.flows.documents.model import encode_index, record_block, split_blocks
    from mnemon_sm.flows.documents.model import join_blocks as model_join

    varied = [
        attrs.evolve(
            r,
            title=words[i % 8],
            description=words[(i + 3) % 8],
            source_paths=tuple(words[: i % 4]),  # lists of 0 to 3 items
            session_ids=tuple(words[i % 8 : i % 8 + (i + 1) % 3]),
            memory_body_ids=tuple(words[(i + 5) % 8 :][: i % 3]),
        )
        for i, r in enumerate(rs)
    ]
    doc = {"version": 1, "documents": [r.to_json() for r in varied]}
    expected = (std_json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    assert encode_index(varied) == expected
    # an index in this layout is cut back into the same blocks (a root seeds its encoder so)
    blocks = split_blocks(expected)
    assert blocks == ([record_block(r) for r in varied] if varied else None)
    for other in (std_json.dumps(doc), std_json.dumps(doc, indent=4)):  # other layouts
        cut = split_blocks(other.encode())
        assert cut is None or model_join(cut) == other.encode()


SEARCH_SKIPS_MISSING = "INV-DSR-1"


@given(
    st.lists(st.sampled_from(TOPICS), min_size=1, max_size=6),
    st.data(),
)
def test_search_skips_missing_files_and_returns_only_what_it_read(
    topics: list[str], data: Any
) -> None:
    ports, _ = memory_ports()
    root = MemoryRoot.open(ROOT, Config(durability="off"), ports=ports)
    records = [
        root.documents.create(f"{t.title()} doc {i}", f"{t} notes {i}").document
        for i, t in enumerate(topics)
    ]
    gone = data.draw(st.sets(st.sampled_from([r.id for r in records])))
    for r in records:
        if r.id in gone:
            ports.files.remove(r.relative_path)
    query = data.draw(st.sampled_from(["", *TOPICS, "notes", "zzz"]))
    hits = root.documents.search(query, limit=50)  # never raises on a missing file
    returned = {h.document.id for h in hits}
    assert not returned & gone, SEARCH_SKIPS_MISSING
    expected = {
        r.id
        for r in records
        if r.id not in gone and (not query or query in r.title.lower() or query in "notes")
    }
    assert returned == expected, SEARCH_SKIPS_MISSING
