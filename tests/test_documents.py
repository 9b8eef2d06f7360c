"""Project Documents stories: the format, create/update/search, LRU archiving with a confirmed
cold reference, manual archive, the races, refusals and crash repair."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

from mnemon_sm import Config, MemoryRoot, WorkerFailed
from mnemon_sm.adapters.workers.builtin import BuiltinWorkers
from mnemon_sm.errors import (
    CorruptStore,
    DocumentArchived,
    DocumentCapacityExceeded,
    DocumentConflict,
    DocumentNotFound,
    InvalidInput,
    MaintenanceRejected,
    StorageError,
)
from mnemon_sm.flows.documents.api import Documents
from mnemon_sm.flows.documents.journal import JOURNAL_PATH
from mnemon_sm.flows.documents.model import INDEX_PATH, content_hash, parse_index, render, slug
from mnemon_sm.flows.documents.values import DocumentResult
from mnemon_sm.ports import Ports
from mnemon_sm.ports.long_term.checks import Prepared
from mnemon_sm.ports.workers import ToolBox, WorkerRequest
from mnemon_sm.testing.coverage import TransitionRecorder
from mnemon_sm.testing.faults import Fault, FaultInjector, RaisingPort, faulty_ports
from mnemon_sm.testing.longterm import ScriptedWorkers
from mnemon_sm.testing.maintenance import held_run_data, insight_contents, world
from mnemon_sm.testing.memory import CallLog, MemoryFiles, memory_ports
from mnemon_sm.testing.snapshot import root_state
from mnemon_sm.testing.wrap import FailingFiles

from ._flow_probe import assert_pure, calls_by_state, flow_probe, port_gaps

LIMIT = 4096
CONFIG = Config(durability="off", documents_active_limit=LIMIT)
BODY = "# Runbook\n\nHow to deploy the service safely.\n\n" + "Step detail. " * 60


def open_root(workers: Any = None, config: Config = CONFIG) -> tuple[MemoryRoot, Ports]:
    ports, _ = memory_ports()
    if workers is not None:
        ports = attrs.evolve(ports, workers=workers)
    return MemoryRoot.open("/roots/r", config, ports=ports), ports


def files_of(ports: Ports) -> dict[str, bytes]:
    files = ports.files
    assert isinstance(files, MemoryFiles)
    return {k: v for k, v in files.files.items() if k.startswith("documents/")}


def index(ports: Ports) -> list[dict[str, Any]]:
    data = ports.files.read(INDEX_PATH)
    assert data is not None
    docs: list[dict[str, Any]] = json.loads(data)["documents"]
    return docs


# -- format ------------------------------------------------------------------------------------


def test_create_writes_the_reference_format() -> None:
    root, ports = open_root()
    result = root.documents.create(
        "SQLite deployment decision",
        "  # Decision\n\nUse SQLite so deployment remains single-file.\n\n",
        description="Why this project uses an embedded database.",
        source_paths=["ADR.md", "ADR.md", "docs/../ADR.md"],
        session_ids=["session-1"],
        workspace="/work/project",
    )
    record = result.document
    assert result.action == "created" and record.revision == 1
    assert record.filename == f"sqlite-deployment-decision-{record.id[:8]}.md"
    assert record.relative_path == f"documents/active/{record.filename}"
    body = "# Decision\n\nUse SQLite so deployment remains single-file."
    assert record.content_hash == hashlib.sha256(body.encode()).hexdigest()
    assert record.source_paths == ("ADR.md",)
    data = ports.files.read(record.relative_path)
    assert data is not None and record.size_bytes == len(data)
    assert data.decode() == (
        "---\n"
        f'id: "{record.id}"\n'
        'title: "SQLite deployment decision"\n'
        'description: "Why this project uses an embedded database."\n'
        'status: "active"\n'
        f'created_at: "{record.created_at}"\n'
        f'updated_at: "{record.updated_at}"\n'
        f'content_hash: "{record.content_hash}"\n'
        "source_paths:\n"
        '  - "ADR.md"\n'
        "session_ids:\n"
        '  - "session-1"\n'
        "memory_body_ids:\n"
        "  []\n"
        "---\n\n" + body + "\n"
    )
    [stored] = index(ports)
    assert list(stored) == [
        "id", "title", "description", "status", "filename", "relativePath", "sourcePaths",
        "sessionIds", "createdAt", "updatedAt", "lastAccessedAt", "revision", "contentHash",
        "sizeBytes", "memoryBodyIds",
    ]  # fmt: skip
    assert ports.files.read(INDEX_PATH).endswith(b"\n")  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("Résumé notes", "re-sume-notes"),
        ("日本語のタイトル", "document"),
        ("../../etc/passwd", "etc-passwd"),
        ("a/b\\c", "a-b-c"),
        ("x" * 60, "x" * 48),
    ],
)
def test_slug_never_carries_a_path_component(title: str, expected: str) -> None:
    assert slug(title) == expected
    root, _ = open_root()
    record = root.documents.create(title, "body").document
    assert record.filename == f"{expected}-{record.id[:8]}.md"
    assert "/" not in record.filename and ".." not in record.filename.removesuffix(".md")


def test_update_bumps_the_revision_and_the_hash_and_keeps_the_file_name() -> None:
    root, _ = open_root()
    first = root.documents.create("Deploy runbook", "old body", session_ids=["s1"]).document
    second = root.documents.update(
        first.id, content="new body", title="Renamed runbook", session_ids=["s2", "s1"]
    )
    record = second.document
    assert second.action == "updated"
    assert (record.revision, record.filename) == (2, first.filename)
    assert record.content_hash == hashlib.sha256(b"new body").hexdigest() != first.content_hash
    assert record.title == "Renamed runbook" and record.session_ids == ("s1", "s2")
    assert root.documents.get(first.id) == (record, "new body")
    again = root.documents.update(first.id, title="Only the title").document
    assert (again.revision, root.documents.get(first.id)[1]) == (3, "new body")


def creating(title: str = "title", content: str = "body", **fields: Any) -> Callable[[Any], Any]:
    return lambda d: d.create(title, content, **fields)


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (creating(""), InvalidInput),
        (creating("t" * 161), InvalidInput),
        (creating(content="  \x00 "), InvalidInput),
        (creating(description="d" * 601), InvalidInput),
        (creating(source_paths=[f"f{i}" for i in range(51)]), InvalidInput),
        (creating(session_ids=[f"s{i}" for i in range(21)]), InvalidInput),
        (creating(source_paths=["../outside.md"], workspace="/w"), InvalidInput),
        (creating(source_paths=["/etc/passwd"], workspace="/w"), InvalidInput),
        (creating(source_paths=["documents/active/x.md"], workspace="/w"), InvalidInput),
        (creating(source_paths="abc"), InvalidInput),  # one string is not a list of paths
        (creating("title \ud800"), InvalidInput),  # lone surrogates, field by field
        (creating(content="body \udfff"), InvalidInput),
        (creating(description="about \ud83d"), InvalidInput),
        (creating(session_ids=["s\udc80"]), InvalidInput),
        (creating(source_paths=["notes/\udcff.md"]), InvalidInput),
        (lambda d: d.update(d.records()[0].id, title="t\ud800"), InvalidInput),
        (creating(session_ids="s1"), InvalidInput),
        (creating(content="x" * (2 * 1024 * 1024 + 1)), InvalidInput),
        (lambda d: d.update("no-such-id", content="x"), DocumentNotFound),
        (lambda d: d.archive("no-such-id"), DocumentNotFound),
    ],
)
def test_invalid_requests_write_nothing(call: Callable[[Any], Any], error: type) -> None:
    root, ports = open_root()
    root.documents.create("Existing", "body")
    before = files_of(ports)
    with pytest.raises(error):
        call(root.documents)
    assert files_of(ports) == before


def test_archived_documents_are_immutable() -> None:
    root, ports = open_root()
    doc = root.documents.create("Old notes", "body").document
    root.documents.archive(doc.id)
    before = files_of(ports)
    with pytest.raises(DocumentArchived):
        root.documents.update(doc.id, content="new")
    with pytest.raises(InvalidInput, match="only active"):
        root.documents.archive(doc.id)
    assert files_of(ports) == before


# -- search ------------------------------------------------------------------------------------


def test_search_scores_orders_and_records_access() -> None:
    root, ports = open_root(config=Config(durability="off"))
    clock = ports.clock
    a = root.documents.create(
        "Deploy runbook", "How we ship.", description="Release steps"
    ).document
    clock.advance(1000)  # type: ignore[attr-defined]
    b = root.documents.create("Billing notes", "The deploy of billing needs a freeze.").document
    clock.advance(1000)  # type: ignore[attr-defined]
    c = root.documents.create("Tax rules", "Nothing about shipping.").document
    clock.advance(1000)  # type: ignore[attr-defined]
    hits = root.documents.search("deploy")
    assert [(h.document.id, h.score) for h in hits] == [(a.id, 12 + 4), (b.id, 4 + 1)]
    accessed = {r["id"]: r["lastAccessedAt"] for r in index(ports)}
    assert accessed[a.id] == accessed[b.id] > accessed[c.id]
    assert [h.document.id for h in root.documents.search("")] == [c.id, b.id, a.id]
    assert root.documents.search("zzz qqq") == []
    long = root.documents.create("Long", "# Title\n\n" + "**word** " * 100).document
    [hit] = root.documents.search("Long")
    assert hit.document.id == long.id and len(hit.excerpt) == 220 and "*" not in hit.excerpt
    with pytest.raises(InvalidInput):
        root.documents.search("x", limit=51)


def test_search_skips_a_document_whose_file_is_missing() -> None:
    root, ports = open_root()
    gone = root.documents.create("Deploy A", "deploy body").document
    kept = root.documents.create("Deploy B", "deploy body").document
    ports.files.remove(gone.relative_path)
    assert [h.document.id for h in root.documents.search("deploy")] == [kept.id]


# -- capacity and LRU archiving ------------------------------------------------------------------


def fill(root: MemoryRoot, ports: Ports, n: int) -> list[str]:
    ids = []
    for i in range(n):
        ids.append(
            root.documents.create(
                f"Runbook {i}: deploy steps", BODY, description=f"Deploy runbook number {i}"
            ).document.id
        )
        ports.clock.advance(1000)  # type: ignore[attr-defined]
    return ids


def test_overflow_archives_the_least_recently_used_and_the_reference_is_recallable() -> None:
    root, ports = open_root()
    ids = fill(root, ports, 3)
    root.documents.search("Runbook 0", limit=1)  # 0 is now the most recently used
    result = root.documents.create("Runbook 3: deploy steps", BODY)
    assert result.archived == (ids[1],)
    statuses = {r["id"]: r["status"] for r in index(ports)}
    assert statuses[ids[1]] == "archived" and statuses[ids[0]] == "active"
    archived = next(r for r in index(ports) if r["id"] == ids[1])
    assert archived["revision"] == 2 and archived["memoryBodyIds"] == ["default"]
    assert archived["archiveSummary"].startswith("Deploy runbook number 1 How to deploy")
    assert ports.files.read(f"documents/active/{archived['filename']}") is None
    cold = ports.files.read(f"documents/archived/{archived['filename']}")
    assert cold is not None and b'status: "archived"' in cold
    recalled = root.long_term.recall("Runbook 1: deploy steps").results
    top = recalled[0]["content"]
    assert "Runbook 1: deploy steps" in top
    assert f"/roots/r/documents/archived/{archived['filename']}" in top
    assert archived["contentHash"] in top
    total = sum(r["sizeBytes"] for r in index(ports) if r["status"] == "active")
    assert total <= LIMIT
    maintenance = result.to_json()["maintenance"]
    assert maintenance["archivedDocumentIds"] == [ids[1]]
    assert maintenance["memoryBodyIds"] == ["default"]


def test_an_update_never_archives_its_own_document() -> None:
    root, ports = open_root()
    ids = fill(root, ports, 3)
    result = root.documents.update(ids[0], content=BODY + " More." * 100)
    assert ids[0] not in result.archived and result.archived
    assert result.document.status == "active"


def test_nothing_left_to_archive_is_a_typed_capacity_error() -> None:
    root, ports = open_root()
    before = files_of(ports)
    with pytest.raises(DocumentCapacityExceeded) as caught:
        root.documents.create("Huge", "x" * 5000)
    assert caught.value.limit == LIMIT and caught.value.projected > LIMIT
    assert files_of(ports) == before


def test_a_request_may_refuse_to_archive_to_make_room() -> None:
    root, ports = open_root()
    fill(root, ports, 3)
    before = files_of(ports)
    with pytest.raises(DocumentCapacityExceeded, match="archiving is off"):
        root.documents.create("Worker write", BODY, archive_if_full=False)
    assert files_of(ports) == before


def test_manual_archive_takes_the_same_path() -> None:
    root, ports = open_root()
    [doc] = fill(root, ports, 1)
    result = root.documents.archive(doc)
    assert result.action == "archived" and result.archived == (doc,)
    assert result.document.status == "archived" and result.document.revision == 2
    assert [h.document.id for h in root.documents.search("Runbook")] == []
    assert [h.document.id for h in root.documents.search("Runbook", include_archived=True)] == [
        doc
    ]


# -- refusals keep the document active ----------------------------------------------------------


def scripted(script: Callable[[WorkerRequest, ToolBox], object]) -> ScriptedWorkers:
    return ScriptedWorkers({"document_archive": script})


def builtin(request: WorkerRequest, tools: ToolBox) -> object:
    return BuiltinWorkers().run(request, tools)


def refs(ref_id: str) -> Callable[[dict[str, Any]], Any]:
    return lambda r: {**r, "references": [{"memoryBodyId": "default", "id": ref_id}]}


@pytest.mark.parametrize(
    ("edit", "error", "rule"),
    [
        (lambda r: {**r, "action": "failed", "summary": "no"}, MaintenanceRejected, "declined"),
        (lambda r: {**r, "summary": " "}, MaintenanceRejected, "summary"),
        (lambda r: {**r, "summary": "s" * 1001}, MaintenanceRejected, "summary"),
        (lambda r: {**r, "references": []}, MaintenanceRejected, "cold-reference"),
        (refs("pending-9"), MaintenanceRejected, "cold-reference"),
        (refs("nope"), MaintenanceRejected, "cold-reference"),
        (lambda r: {**r, "extra": 1}, MaintenanceRejected, "schema"),
        (lambda r: None, WorkerFailed, None),
    ],
)
def test_a_refused_archive_keeps_the_document_active(
    edit: Callable[[dict[str, Any]], Any], error: type, rule: str | None
) -> None:
    def script(request: WorkerRequest, tools: ToolBox) -> object:
        return edit(dict(builtin(request, tools)))  # type: ignore[call-overload]

    root, ports = open_root(scripted(script))
    [doc] = fill(root, ports, 1)
    before = world(ports)
    with pytest.raises(error) as caught:
        root.documents.archive(doc)
    if rule is not None:
        assert caught.value.rule == rule  # type: ignore[attr-defined]
    assert world(ports) == before  # files and long-term memory: nothing was written
    assert root.documents.get(doc)[0].status == "active"


def test_a_reference_without_the_path_and_hash_is_refused_and_nothing_moves() -> None:
    def script(request: WorkerRequest, tools: ToolBox) -> object:
        receipt = tools.call(
            "mnemon_remember",
            {"content": "A vague note about a runbook", "memoryBodyId": "default"},
        )
        return {
            "summary": "A runbook.",
            "action": "archived",
            "memoryBodyIds": ["default"],
            "references": [{"memoryBodyId": "default", "id": receipt["id"]}],
        }

    root, ports = open_root(scripted(script))
    root.long_term.create_space("Runbooks", "Deploy runbooks", active=True)
    [doc] = fill(root, ports, 1)
    before = world(ports)
    with pytest.raises(MaintenanceRejected, match="does not hold the archived path"):
        root.documents.archive(doc)
    assert world(ports) == before  # the refused reference was never written


OTHER_SHA = hashlib.sha256(b"another body").hexdigest()
Reference = Callable[[str, str], str]


def archiver(
    content: Reference, existing: list[str]
) -> Callable[[WorkerRequest, ToolBox], object]:
    """A document archiver whose cold reference is a remember of ``content(plannedPath,
    contentSha256)`` it stages or, once ``existing`` holds an id, that insight."""

    def script(request: WorkerRequest, tools: ToolBox) -> object:
        if existing:
            ident = existing[0]
        else:
            text = content(request.data["plannedPath"], request.data["contentSha256"])
            receipt = tools.call("mnemon_remember", {"content": text, "memoryBodyId": "default"})
            ident = receipt["id"]
        return {
            "summary": "A runbook.",
            "action": "archived",
            "memoryBodyIds": ["default"],
            "references": [{"memoryBodyId": "default", "id": ident}],
        }

    return script


#: How a cold reference is written from the planned path and SHA-256, and whether it passes.
REFERENCES: dict[str, tuple[Reference, bool]] = {
    "path-and-sha": (lambda path, sha: f"Runbook, archived at {path} (sha256 {sha}).", True),
    "wrong-sha": (lambda path, sha: f"Runbook, archived at {path} (sha256 {OTHER_SHA}).", False),
    "no-sha": (lambda path, sha: f"Runbook, archived at {path}.", False),
    "wrong-path": (
        lambda path, sha: f"Runbook at {path.replace('/archived/', '/active/')} (sha256 {sha}).",
        False,
    ),
    "no-path": (lambda path, sha: f"Runbook, archived (sha256 {sha}).", False),
}


@pytest.mark.parametrize("kind", sorted(REFERENCES))
@pytest.mark.parametrize("existing", [False, True], ids=["staged", "existing"])
def test_a_cold_reference_must_hold_the_planned_path_and_the_sha256(
    kind: str, existing: bool
) -> None:
    """RULE-DOC-5, path and hash alike, for a reference the run stages and for an existing
    insight it names; a refused one writes nothing anywhere and the document stays active."""
    content, accepted = REFERENCES[kind]
    named: list[str] = []
    root, ports = open_root(scripted(archiver(content, named)))
    root.long_term.create_space("Runbooks", "Deploy runbooks", active=True)  # the default
    [doc] = fill(root, ports, 1)
    record = root.documents.get(doc)[0]
    if existing:  # in long-term memory before the run, which only names it
        planned = f"/roots/r/{record.path('archived')}"
        with root.long_term.mutex:
            text = content(planned, record.content_hash)
            named.append(str(root.long_term.service.remember(text, space_id="default")["id"]))
    before = world(ports)
    if accepted:
        assert root.documents.archive(doc).document.status == "archived"
        return
    with pytest.raises(MaintenanceRejected, match="does not hold the archived path") as caught:
        root.documents.archive(doc)
    assert caught.value.rule == "cold-reference"
    assert world(ports) == before  # nothing moved, and the reference was not written
    assert root.documents.get(doc)[0].status == "active"


class DroppingStore:
    """A long-term store that stores a remember without ``dropped`` (a store that changes
    what it is given): only the check after the writes can see it."""

    def __init__(self, inner: object, dropped: str) -> None:
        self.inner, self.dropped = inner, dropped

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def remember(self, space: str, content: str | Prepared, **kwargs: Any) -> Any:
        if isinstance(content, Prepared):  # an insight checked by the caller
            changed = attrs.evolve(content, content=content.content.replace(self.dropped, ""))
        else:
            changed = content.replace(self.dropped, "")
        return self.inner.remember(space, changed, **kwargs)  # type: ignore[attr-defined]


def test_a_reference_is_confirmed_again_as_written() -> None:
    content = REFERENCES["path-and-sha"][0]
    root, ports = open_root(scripted(archiver(content, [])))
    root.long_term.create_space("Runbooks", "Deploy runbooks", active=True)
    [doc] = fill(root, ports, 1)
    digest = root.documents.get(doc)[0].content_hash
    dropping = attrs.evolve(ports, long_term=DroppingStore(ports.long_term, digest))
    root = MemoryRoot.open("/roots/r", CONFIG, ports=dropping)
    before = files_of(ports)
    with pytest.raises(MaintenanceRejected, match="does not hold the archived path"):
        root.documents.archive(doc)
    assert files_of(ports) == before and root.documents.get(doc)[0].status == "active"


def test_archive_update_race_keeps_the_active_copy() -> None:
    roots: list[MemoryRoot] = []

    def script(request: WorkerRequest, tools: ToolBox) -> object:
        other = MemoryRoot.open("/roots/r", CONFIG, ports=roots[0]._ports)
        other.documents.update(request.data["id"], content="changed while archiving")
        return builtin(request, tools)

    root, ports = open_root(scripted(script))
    roots.append(root)
    [doc] = fill(root, ports, 1)
    long_term = world(ports)[1]
    with pytest.raises(DocumentConflict):
        root.documents.archive(doc)
    assert world(ports)[1] == long_term  # no stale cold reference (old hash, no such file)
    record, body = root.documents.get(doc)
    assert (record.status, record.revision, body) == ("active", 2, "changed while archiving")
    assert not any(
        k.startswith("documents/archived/") and k.endswith(".md") for k in files_of(ports)
    )


def test_an_eviction_victim_changed_meanwhile_sends_the_request_back_to_planning() -> None:
    """Another writer archives the document chosen to make room while the worker runs: the
    create is not refused (the room exists now), and the race wrote no second reference."""
    roots: list[MemoryRoot] = []

    def script(request: WorkerRequest, tools: ToolBox) -> object:
        if len(roots) == 1:
            other = MemoryRoot.open("/roots/r", CONFIG, ports=roots[0]._ports)
            roots.append(other)
            other.documents.archive(request.data["id"])  # the same victim, first
        return builtin(request, tools)

    root, ports = open_root(scripted(script))
    roots.append(root)
    ids = fill(root, ports, 3)
    result = root.documents.create("Runbook 3: deploy steps", BODY)
    assert result.action == "created" and result.archived == ()  # the other one made room
    statuses = {r["id"]: r["status"] for r in index(ports)}
    assert statuses[ids[0]] == "archived" and statuses[result.document.id] == "active"
    name = next(r["filename"] for r in index(ports) if r["id"] == ids[0])
    path = f"/roots/r/documents/archived/{name}"
    held = [t for ts in insight_contents(ports).values() for t in ts if path in t]
    assert len(held) == 1  # the other writer's reference only


@pytest.mark.parametrize("swapped", ["documents/archived", "documents"])
def test_a_directory_swapped_for_a_symlink_during_the_archive_is_refused(
    tmp_path: Path, swapped: str
) -> None:
    """The archive worker runs with no lock held; a directory of the store swapped for a
    symlink meanwhile makes the move fail with a typed error, and nothing lands outside the
    root (or anywhere else: the long-term store is unchanged too)."""
    root_dir, outside, saved = tmp_path / "root", tmp_path / "outside", tmp_path / "saved"
    outside.mkdir()
    seen: list[str] = []

    def script(request: WorkerRequest, tools: ToolBox) -> object:
        (root_dir / swapped).rename(saved)
        (root_dir / swapped).symlink_to(outside, target_is_directory=True)
        seen.append(swapped)
        return builtin(request, tools)

    root = MemoryRoot.open(root_dir, CONFIG, workers=scripted(script))
    doc = root.documents.create("Runbook", BODY).document.id
    before = root_state(root_dir)
    with pytest.raises(StorageError):
        root.documents.archive(doc)
    assert seen == [swapped]
    assert list(outside.iterdir()) == []  # the symlink's target is untouched
    (root_dir / swapped).unlink()
    saved.rename(root_dir / swapped)
    assert root_state(root_dir) == before
    assert root.documents.get(doc)[0].status == "active"


def _create_racing_the_commit() -> tuple[DocumentResult, list[str], list[str], Ports]:
    """Two documents, then a create that fits; another root creates a document between the
    planning's release of the index lock and the commit's acquire of it."""
    root, ports = open_root()
    ids = fill(root, ports, 2)  # three documents fit, a fourth does not
    other = MemoryRoot.open("/roots/r", CONFIG, ports=ports)
    locks = ports.locks
    original = locks.acquire
    acquired: list[str] = []
    sneaked: list[str] = []

    def acquire(name: str, timeout_ms: int) -> None:
        if name == "documents/.index.lock" and not sneaked:
            acquired.append(name)
            if len(acquired) == 2:  # the commit's, right after the planning's
                sneaked.append(other.documents.create("Sneaky", BODY).document.id)
        original(name, timeout_ms)

    locks.acquire = acquire  # type: ignore[method-assign]
    return root.documents.create("Late runbook", BODY), ids, sneaked, ports


def test_a_concurrent_create_that_takes_the_room_sends_the_request_back_to_planning() -> None:
    """``committing --commit_raced--> planning``: the plan fitted, but another writer took the
    room before the commit. The commit plans again on the fresh index and goes back to
    planning, which archives the least recently used document; the request succeeds and
    nothing is written twice."""
    recorder = TransitionRecorder()  # sees the machines started while it is installed
    recorder.install()
    try:
        result, ids, sneaked, ports = _create_racing_the_commit()
    finally:
        recorder.uninstall()
    raced = [
        (flow, t.source, t.index)
        for flow, t in recorder.all()
        if flow == "document_mutation" and t.event == "commit_raced"
    ]
    assert len(raced) == 1 and raced[0] in recorder.seen
    assert result.action == "created" and result.archived == (ids[0],)  # planned again
    records = index(ports)
    assert [r["id"] for r in records] == [*ids, *sneaked, result.document.id]
    assert [r["status"] for r in records] == ["archived", "active", "active", "active"]
    assert sum(r["sizeBytes"] for r in records if r["status"] == "active") <= LIMIT
    assert set(files_of(ports)) == {INDEX_PATH} | {  # each document once, where its status says
        f"documents/{r['status']}/{r['filename']}" for r in records
    }
    archived = f"/roots/r/documents/archived/{records[0]['filename']}"
    held = [t for ts in insight_contents(ports).values() for t in ts if archived in t]
    assert len(held) == 1 and records[0]["contentHash"] in held[0]  # one cold reference


def test_a_storage_failure_in_the_commit_is_typed_and_acknowledges_nothing() -> None:
    inner, _ = memory_ports()
    injector = FaultInjector()
    root = MemoryRoot.open("/roots/r", CONFIG, ports=faulty_ports(inner, injector))
    start = injector.count
    root.documents.create("Probe", "body")
    calls = injector.names[start:]
    write = calls.index("files.write_temp")
    root2 = MemoryRoot.open("/roots/r", CONFIG, ports=faulty_ports(inner, injector))
    injector.faults[injector.count + write] = Fault(injector.count + write, "fail")
    with pytest.raises(StorageError):
        root2.documents.create("Second", "body")
    assert [r["title"] for r in index(inner)] == ["Probe"]


# -- crash repair on open ------------------------------------------------------------------------


def test_opening_repairs_every_crash_window() -> None:
    root, ports = open_root()
    a, b = fill(root, ports, 2)
    c = root.documents.create("Gamma", "gamma body").document.id
    d = root.documents.create("Delta", "delta body").document.id
    rec = {r["id"]: r for r in index(ports)}
    files = ports.files
    assert isinstance(files, MemoryFiles)
    # a: archived in the index but the active file is still there (crash before the remove)
    root.documents.archive(a)
    rec_a = {r["id"]: r for r in index(ports)}[a]
    files.put(f"documents/active/{rec_a['filename']}", b"stale active copy")
    # b: the archived copy was written but the index still says active
    files.put(
        f"documents/archived/{rec[b]['filename']}", files.read(rec[b]["relativePath"]) or b""
    )
    # c: an update wrote the file but not the index
    record_c, _ = root.documents.get(c)
    from mnemon_sm.flows.documents.model import content_hash, render

    newer = attrs.evolve(
        record_c, content_hash=content_hash("gamma v2"), updated_at="2026-12-01T00:00:00.000Z"
    )
    files.put(record_c.relative_path, render(newer, "gamma v2"))
    # d: its active file vanished, but an archived copy exists
    files.put(
        f"documents/archived/{rec[d]['filename']}", files.read(rec[d]["relativePath"]) or b""
    )
    files.remove(rec[d]["relativePath"])
    # an orphan from a create that crashed before the index commit
    orphan = render(attrs.evolve(record_c, id="ffffffff-0000-0000-0000-000000000000"), "orphan")
    files.put("documents/active/orphan-ffffffff.md", orphan)
    files.put("documents/active/.x.md.1.2.ab.tmp", b"temp")

    reopened = MemoryRoot.open("/roots/r", CONFIG, ports=ports)
    after = {r["id"]: r for r in index(ports)}
    names = set(files_of(ports))
    for doc_id, r in after.items():
        here = f"documents/{r['status']}/{r['filename']}"
        there = f"documents/{'archived' if r['status'] == 'active' else 'active'}/{r['filename']}"
        assert here in names and there not in names, doc_id
    assert reopened.documents.get(a)[1] == BODY.strip()
    assert after[c]["revision"] == 2 and reopened.documents.get(c)[1] == "gamma v2"
    assert reopened.documents.get(d)[1] == "delta body"
    assert "documents/active/orphan-ffffffff.md" not in names
    assert "documents/active/.x.md.1.2.ab.tmp" not in names
    assert world(ports)  # still a valid world


def test_a_corrupt_index_is_reported_and_left_alone() -> None:
    root, ports = open_root()
    root.documents.create("One", "body")
    files = ports.files
    assert isinstance(files, MemoryFiles)
    bad = b'{"version": 1, "documents": [{"id": 1}]}'
    files.put(INDEX_PATH, bad)
    reopened = MemoryRoot.open("/roots/r", CONFIG, ports=ports)  # hot memory still opens
    assert reopened.hot.add("user", "Still works").success
    for call in (
        lambda: reopened.documents.create("Two", "body"),
        lambda: reopened.documents.search("one"),  # the search flow's failure outcome
        lambda: reopened.documents.records(),
    ):
        with pytest.raises(CorruptStore, match="invalid document index"):
            call()
    assert files.read(INDEX_PATH) == bad


#: The port tests run with fsync on, as the spec declares the calls of a durable root.
PORTS_CONFIG = Config(durability="full", documents_active_limit=LIMIT)
PORT_FLOWS = ("document_mutation", "document_search")


class PortStories:
    """Roots of several stories on one call log whose probe tags each call with the document
    flow state it is made in (a worker's tool calls with the state of the flow waiting for
    it); :meth:`observed` is what the stories called, per state."""

    def __init__(self) -> None:
        self.log = CallLog()
        self.roots: list[MemoryRoot] = []
        self.log.probe = flow_probe(
            lambda: [f for r in self.roots for f in (r.documents._flow, r.documents._search)]
        )

    def ports(self, script: Callable[[WorkerRequest, ToolBox], object] | None = None) -> Ports:
        """Fresh ports on the shared log; ``script`` is the archive worker (on a thread of its
        own, as a worker that is not host code runs), else the built-in one (inline)."""
        ports, _ = memory_ports(self.log)
        if script is None:
            return ports
        return attrs.evolve(ports, workers=ScriptedWorkers({"document_archive": script}, self.log))

    def open(self, ports: Ports, config: Config = PORTS_CONFIG) -> MemoryRoot:
        self.roots.append(MemoryRoot.open("/roots/r", config, ports=ports))
        return self.roots[-1]

    def observed(self) -> dict[tuple[str, str], set[str]]:
        return calls_by_state(self.log.calls)


def _repair_archive_and_search(stories: PortStories) -> None:
    """Opening repairs a crashed writer's leftovers (a temp file, an archived copy of a move
    that crashed before its commit, an active file lost after it); the built-in worker archives
    for room through a new space; an update, a manual archive, a refusal and two searches."""
    ports = stories.ports()
    ids = fill(stories.open(ports), ports, 3)
    files = ports.files
    assert isinstance(files, MemoryFiles)
    files.put("documents/active/.x.md.1.2.ab.tmp", b"left by a crashed writer")
    for doc in ids[:2]:
        record, body = stories.roots[0].documents.get(doc)
        assert body is not None  # the archived copy of a move that crashed before its commit:
        files.put(f"documents/archived/{record.filename}", render(record, body))
    files.remove(stories.roots[0].documents.get(ids[1])[0].relative_path)  # restored from it
    root = stories.open(ports)  # repairs all three
    assert not [n for n in files_of(ports) if n.endswith(".tmp") or "archived/" in n]
    assert root.documents.get(ids[1])[1] == BODY.strip()
    root.documents.create("One more runbook", BODY)  # archives through a new space
    root.documents.update(ids[2], content="short now")
    root.documents.archive(ids[2])
    with pytest.raises(InvalidInput):
        root.documents.create("", "no title")  # refused in planning
    root.documents.search("runbook")
    root.documents.search("runbook", limit=5, include_archived=True, record_access=False)


def _journal_mode(stories: PortStories) -> None:
    """A journal-mode root commits creates, an update, a search and an archive as journal
    lines; a file-mode root opened before them folds the journal when it records a
    search; a journal-mode opening rolls an update whose line was lost forward as a line;
    closing folds the journal into the index."""
    ports = stories.ports()
    journal = attrs.evolve(PORTS_CONFIG, documents_index="journal")
    plain = stories.open(ports)
    root = stories.open(ports, journal)
    ids = fill(root, ports, 3)
    root.documents.update(ids[2], content="short now")
    root.documents.search("runbook")
    root.documents.archive(ids[0])
    assert JOURNAL_PATH in files_of(ports)
    plain.documents.search("runbook")  # a file-mode commit: index.json holds it all now
    assert JOURNAL_PATH not in files_of(ports)
    root.documents.update(ids[1], content="a line of the journal")
    record, _ = root.documents.get(ids[2])
    files = ports.files
    assert isinstance(files, MemoryFiles)
    body = "rolled forward"
    newer = attrs.evolve(
        record, updated_at="2030-01-01T00:00:00.000Z", content_hash=content_hash(body)
    )
    files.put(record.path(), render(newer, body))  # an update that crashed before its line
    reopened = stories.open(ports, journal)
    assert reopened.documents.get(ids[2])[1] == body
    lines = files_of(ports)[JOURNAL_PATH].count(b"\n")
    assert lines == 2  # the update of ids[1], then the roll-forward
    reopened.close()
    assert JOURNAL_PATH not in files_of(ports)
    assert parse_index(files_of(ports)[INDEX_PATH]) == root.documents.records()


def _a_reference_found_on_disk(stories: PortStories) -> None:
    """The cold reference already exists, in a store found on disk that the catalog does not
    list yet: the worker (on its own thread) lists the spaces, which registers that store (a
    catalog write while delegating), recalls the reference and names it; confirming reads it
    from long-term memory, since it is no write of this run."""

    def script(request: WorkerRequest, tools: ToolBox) -> object:
        tools.call("mnemon_memory_bodies", {})
        found = tools.call("mnemon_recall", {"query": request.data["contentSha256"]})
        [hit] = found["results"]
        return {
            "summary": "A runbook.",
            "action": "archived",
            "memoryBodyIds": [hit["memoryBodyId"]],
            "references": [{"memoryBodyId": hit["memoryBodyId"], "id": hit["id"]}],
        }

    ports = stories.ports(script)
    root = stories.open(ports)
    [doc] = fill(root, ports, 1)
    record = root.documents.get(doc)[0]
    ports.long_term.create_space("found")  # a store of the root no catalog lists yet
    reference = f"Runbook 0, archived at /roots/r/{record.path('archived')}"
    ports.long_term.remember("found", f"{reference} (sha256 {record.content_hash}).")
    result = root.documents.archive(doc)
    assert result.document.status == "archived" and result.memory_body_ids == ("found",)
    assert [s.id for s in root.long_term.spaces()] == ["found"]


def _storage_failures(stories: PortStories) -> None:
    """A full disk fails a create's index commit (its new file is removed again) and the
    archived copy of a move whose worker created a space and remembered into it (the remember
    is forgotten and the space deleted: nothing of the archive stays)."""

    def script(request: WorkerRequest, tools: ToolBox) -> object:
        tools.call("mnemon_memory_bodies", {})
        space = tools.call(
            "mnemon_memory_body_create", {"name": "Archive", "description": "Cold references"}
        )["memoryBodyId"]
        text = f"Archived at {request.data['plannedPath']}, {request.data['contentSha256']}."
        receipt = tools.call("mnemon_remember", {"content": text, "memoryBodyId": space})
        return {
            "summary": "A runbook.",
            "action": "archived",
            "memoryBodyIds": [space],
            "references": [{"memoryBodyId": space, "id": receipt["id"]}],
        }

    ports = stories.ports(script)
    files = FailingFiles(ports.files)
    root = stories.open(attrs.evolve(ports, files=files))
    general = root.long_term.create_space("General memory", "Durable facts", active=True)
    [doc] = fill(root, ports, 1)
    before = files_of(ports)
    files.fail_next("write_temp", INDEX_PATH)
    with pytest.raises(StorageError):
        root.documents.create("Note", "a short note")
    files.fail_next("write_temp", "documents/archived/", prefix=True)
    with pytest.raises(StorageError):
        root.documents.archive(doc)
    [index, archived] = files.failed  # each failed once
    assert index == INDEX_PATH and archived.startswith("documents/archived/")
    assert files_of(ports) == before
    assert [s.id for s in root.long_term.spaces()] == [general.id]
    assert root.documents.get(doc)[0].status == "active"


def test_port_calls_in_each_state_are_the_ones_the_spec_declares() -> None:
    """Every call a document flow makes is tagged with the state it is in, rest states
    included (a validator or an edge's action runs in idle, the repair on open in opening),
    and every state makes exactly the calls its spec declares: none undeclared, and each
    declared port reached by one of the stories."""
    stories = PortStories()
    _repair_archive_and_search(stories)
    observed = stories.observed()
    # confirming: a staged reference is checked without a port call; idle: none at all
    assert {s for f, s in observed if f == "document_mutation"} == {
        "opening",
        "planning",
        "delegating",
        "moving",
        "committing",
    }
    assert {s for f, s in observed if f == "document_search"} == {"searching"}
    opening = observed[("document_mutation", "opening")]
    assert {"files.list", "locks.acquire", "files.remove", "locks.release"} <= opening
    searching = observed[("document_search", "searching")]
    assert {"locks.acquire", "files.read", "files.rename"} <= searching
    moving = observed[("document_mutation", "moving")]
    assert {"long_term.remember", "long_term.insights"} <= moving
    assert "long_term.remember" not in observed[("document_mutation", "delegating")]
    _a_reference_found_on_disk(stories)
    _storage_failures(stories)
    _journal_mode(stories)
    gaps = port_gaps(stories.observed(), PORT_FLOWS)
    assert gaps == {}, "\n".join(
        f"{state}: undeclared {sorted(extra)}, declared but never called {sorted(unused)}"
        for state, (extra, unused) in gaps.items()
    )


def test_the_validators_are_pure() -> None:
    """A validator reads its arguments and the configuration only: no port call and nothing
    stored on the flow, whatever the request (valid, invalid, naming a missing document)."""
    ports, log = memory_ports()
    root = MemoryRoot.open("/roots/r", CONFIG, ports=ports)
    [doc] = fill(root, ports, 1)
    flow, search = root.documents._flow, root.documents._search
    checks: list[tuple[object, Callable[[], None]]] = [(flow, flow.check_writable)]
    for request in (
        {"operation": "create", "title": "T", "content": "body"},
        {"operation": "update", "id": doc, "content": "new"},
        {"operation": "archive", "id": "missing"},
        {"operation": "rename"},
    ):
        checks.append((flow, functools.partial(flow.check_request, request)))
    for request in ({"query": "deploy"}, {"query": 3}, {"query": "x", "limit": 0}):
        checks.append((search, functools.partial(search.check_request, request)))
    assert_pure(checks, log)


def test_a_create_draws_its_id_from_the_id_port_in_planning_once() -> None:
    """The id of a new document comes from the injected id source, drawn while planning
    (never in a validator), once per request: a create that archives first is planned twice
    and keeps its id."""
    ports, _ = memory_ports()
    root = MemoryRoot.open("/roots/r", CONFIG, ports=ports)
    drawn: list[str | None] = []
    numbers = iter(range(1, 100))

    def new_id() -> str:
        drawn.append(flow.state)
        return f"00000000-0000-4000-8000-{next(numbers):012d}"

    documents = Documents(
        ports.files,
        ports.locks,
        ports.clock,
        CONFIG,
        "/roots/r",
        lambda: root.long_term,
        root._delegate,
        new_id,
    )
    flow = documents._flow
    ids = []
    for i in range(3):
        ids.append(documents.create(f"Runbook {i}", BODY).document.id)
        ports.clock.advance(1000)  # type: ignore[attr-defined]
    assert ids == [f"00000000-0000-4000-8000-{n:012d}" for n in (1, 2, 3)]
    result = documents.create("Runbook 3", BODY)  # planned, archived for room, planned again
    assert result.archived == (ids[0],)
    assert result.document.id == "00000000-0000-4000-8000-000000000004"
    documents.update(ids[1], content="new")  # an update keeps its id and draws none
    with pytest.raises(DocumentNotFound):
        documents.update("", content="x")  # not even for an empty id
    assert drawn == ["planning"] * 4


def test_document_opening_is_never_observed_at_rest() -> None:
    """The repair on open is the initial state; the facade is ready (idle) once opened, a
    read-only root included, and opening makes no call on a read-only root."""
    ports, log = memory_ports()
    root = MemoryRoot.open("/roots/r", CONFIG, ports=ports)
    root.documents.create("One", "body")
    assert root.documents._flow.state == "idle"
    log.clear()
    read_only = Config(durability="off", documents_active_limit=LIMIT, write_enabled=False)
    documents = Documents(
        ports.files,
        ports.locks,
        ports.clock,
        read_only,
        "/roots/r",
        lambda: root.long_term,
        root._delegate,
    )
    assert documents._flow.state == "idle" and log.calls == []


def test_withdrawing_a_failed_archive_deletes_only_the_spaces_it_created() -> None:
    """A staged space creation that adopted another writer's identical space wrote nothing:
    taking the run back leaves that space (and its references) alone."""
    from mnemon_sm.flows.documents.mutation import _withdraw
    from mnemon_sm.flows.long_term.tools import AppliedWrite

    root, _ = open_root(scripted(lambda request, tools: {}))
    service = root.long_term.service
    general = service.create_space("General memory", "Durable facts", active=True)
    theirs = service.create_space("Runbooks", "Deploy runbooks", active=True)
    ours = service.create_space("Scratch", "Made by the failed run", active=True)
    receipt = service.remember("their cold reference", space_id=theirs.id)
    _withdraw(
        service,
        [
            AppliedWrite("mnemon_memory_body_create", {}, theirs.id, created=False),
            AppliedWrite("mnemon_memory_body_create", {}, ours.id, created=True),
        ],
    )
    assert [s.id for s in service.spaces()] == [general.id, theirs.id]
    assert service.store.insights(theirs.id, [str(receipt["id"])])


# -- a request's data travels with its events ---------------------------------------------------


class Rigged:
    """The ports of one root whose archive worker and two ports can be told to misbehave:
    ``mode`` is how the worker answers (``builtin``, ``decline``, ``race``: another writer
    updates the document first, ``interrupt``: it raises ``KeyboardInterrupt``); ``files``
    fails a ``write_temp`` and ``long_term`` a ``remember`` once armed."""

    def __init__(self) -> None:
        ports, _ = memory_ports()
        self.mode = "builtin"
        self.files = RaisingPort(ports.files, "write_temp", RuntimeError("disk controller"))
        self.long_term = RaisingPort(ports.long_term, "remember", KeyboardInterrupt())
        self.ports = attrs.evolve(
            ports, files=self.files, long_term=self.long_term, workers=scripted(self.work)
        )

    def work(self, request: WorkerRequest, tools: ToolBox) -> object:
        if self.mode == "interrupt":
            raise KeyboardInterrupt
        if self.mode == "race":
            other = MemoryRoot.open("/roots/r", CONFIG, ports=self.ports)
            other.documents.update(request.data["id"], content="changed while archiving")
        answer = builtin(request, tools)
        if self.mode == "decline":
            return {**answer, "action": "failed", "summary": "no"}  # type: ignore[dict-item]
        return answer


def _declining(rig: Rigged, documents: Documents, ids: list[str]) -> object:
    rig.mode = "decline"
    return documents.archive(ids[0])


def _racing(rig: Rigged, documents: Documents, ids: list[str]) -> object:
    rig.mode = "race"
    return documents.archive(ids[0])


def _interrupting(rig: Rigged, documents: Documents, ids: list[str]) -> object:
    rig.mode = "interrupt"
    return documents.create("Runbook 3: deploy steps", BODY)


def _failing_write(rig: Rigged, documents: Documents, ids: list[str]) -> object:
    rig.files.armed = True  # in committing
    return documents.create("Note", "a short note")


def _failing_search(rig: Rigged, documents: Documents, ids: list[str]) -> object:
    rig.files.armed = True  # in searching, recording the access times
    return documents.search("Runbook")


def _failing_remember(rig: Rigged, documents: Documents, ids: list[str]) -> object:
    rig.long_term.armed = True  # in moving, applying the staged cold reference
    return documents.archive(ids[0])


#: Each kind of request, and the error it ends with (None: it succeeds).
REQUEST_KINDS: dict[str, tuple[Callable[[Rigged, Documents, list[str]], object], Any]] = {
    "create": (lambda rig, d, ids: d.create("Note", "a short note"), None),
    "create that archives": (lambda rig, d, ids: d.create("Runbook 3: deploy steps", BODY), None),
    "update": (lambda rig, d, ids: d.update(ids[2], content="short now"), None),
    "update that archives": (lambda rig, d, ids: d.update(ids[2], content=BODY * 2), None),
    "archive": (lambda rig, d, ids: d.archive(ids[0]), None),
    "refused in planning": (lambda rig, d, ids: d.create("", "no title"), InvalidInput),
    "refused by the plan": (
        lambda rig, d, ids: d.create("Worker write", BODY, archive_if_full=False),
        DocumentCapacityExceeded,
    ),
    "refused reference": (_declining, MaintenanceRejected),
    "refused move": (_racing, DocumentConflict),
    "worker interrupted": (_interrupting, KeyboardInterrupt),
    "port failed while committing": (_failing_write, RuntimeError),
    "port interrupted while moving": (_failing_remember, KeyboardInterrupt),
    "search": (lambda rig, d, ids: d.search("Runbook"), None),
    "search refused": (lambda rig, d, ids: d.search("Runbook", limit=0), InvalidInput),
    "port failed while searching": (_failing_search, RuntimeError),
}
FAILING_WRITES = {"port failed while committing", "port failed while searching"}


@pytest.mark.parametrize("kind", list(REQUEST_KINDS))
def test_nothing_of_a_request_stays_on_the_flow(kind: str) -> None:
    """INV-DOC-9: the run travels with the flow's events, so once a request ended, whatever
    its end (a receipt, a refusal in any step, an exception from a port or the worker), the
    document flows hold exactly what they held right after opening (their state apart), and
    no worker's tool box is reachable from the root. A search's request travels the same
    way."""
    rig = Rigged()
    root = MemoryRoot.open("/roots/r", CONFIG, ports=rig.ports)
    contexts = (root.documents._flow, root.documents._search)
    opened = [{k: v for k, v in vars(c).items() if k != "state"} for c in contexts]
    ids = fill(root, rig.ports, 3)  # three documents fit, a fourth does not
    run, error = REQUEST_KINDS[kind]
    if error is None:
        result = run(rig, root.documents, ids)
        if isinstance(result, DocumentResult):
            assert bool(result.archived) == ("archive" in kind)  # the path the kind names
        else:
            assert [h.document.id for h in result] == ids[::-1]  # type: ignore[attr-defined]
    else:
        with pytest.raises(error) as caught:
            run(rig, root.documents, ids)
        # The caller's exception keeps the frames it went through (the rigged port holds it):
        # let go of them, as a caller that handled it would.
        caught.value.with_traceback(None)
    assert rig.files.fired == (kind in FAILING_WRITES)
    assert rig.long_term.fired == (kind == "port interrupted while moving")
    for context, before in zip(contexts, opened, strict=True):
        after = {k: v for k, v in vars(context).items() if k != "state"}
        assert after.keys() == before.keys(), kind
        assert all(after[k] is before[k] for k in before), kind
        assert context.state == "idle"
    assert held_run_data(root) == []
