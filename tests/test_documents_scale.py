"""Project Documents at scale: the index parsed once per change, encoded from cached record
blocks, and search answered from the in-process search index exactly as the plain scan does.

The differential tests keep the plain scan (the search as it read every candidate's file) as
the oracle: for generated document sets, changes through two roots on the same files (another
process, as far as the index is concerned), missing and restored files, every query and option,
the indexed search returns the same documents, scores, bodies and order.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemon_sm import Config, MemoryRoot
from mnemon_sm.errors import CorruptStore, DocumentConflict
from mnemon_sm.flows.documents import model, rules
from mnemon_sm.flows.documents.cache import IndexCache
from mnemon_sm.flows.documents.model import INDEX_PATH, DocumentRecord, body_of, parse_index
from mnemon_sm.flows.documents.search_index import _descending
from mnemon_sm.flows.documents.undo import Undo
from mnemon_sm.ports import Ports
from mnemon_sm.testing.memory import MemoryFiles, memory_ports

CONFIG = Config(durability="off")
ROOT = "/roots/r"


def open_root(ports: Ports, config: Config = CONFIG) -> MemoryRoot:
    return MemoryRoot.open(ROOT, config, ports=ports)


def advance(ports: Ports, ms: int = 1000) -> None:
    ports.clock.advance(ms)  # type: ignore[attr-defined]


def files_of(ports: Ports) -> MemoryFiles:
    files = ports.files
    assert isinstance(files, MemoryFiles)
    return files


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the strict parses of the index (one item per parse, its record count)."""
    seen: list[int] = []
    real = model.parse_index

    def counting(data: bytes | None) -> tuple[DocumentRecord, ...]:
        records = real(data)
        seen.append(len(records))
        return records

    monkeypatch.setattr(model, "parse_index", counting)
    return seen


@pytest.fixture
def encodes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records every record serialised for the index (its id)."""
    seen: list[str] = []
    real = model.record_block

    def counting(record: DocumentRecord) -> bytes:
        seen.append(record.id)
        return real(record)

    monkeypatch.setattr(model, "record_block", counting)
    return seen


# -- the index cache ---------------------------------------------------------------------------


def test_a_writer_seeds_the_cache_so_nothing_it_wrote_is_parsed_again(parses: list[int]) -> None:
    ports, _ = memory_ports()
    root = open_root(ports)
    docs = [root.documents.create(f"Note {i}", f"deploy body {i}").document for i in range(5)]
    root.documents.update(docs[0].id, content="changed deploy body")
    assert root.documents.search("deploy")  # records the access: one more index write
    root.documents.get(docs[1].id)
    assert len(root.documents.records()) == 5
    root.documents.preview("create", title="T", content="c")
    assert parses == []  # every index this root read is one it wrote itself


def test_another_process_change_is_parsed_once_and_seen(parses: list[int]) -> None:
    ports, _ = memory_ports()
    mine, other = open_root(ports), open_root(ports)  # two roots on the same files
    doc = mine.documents.create("Runbook", "How to deploy.").document
    assert parses == []
    assert other.documents.get(doc.id)[1] == "How to deploy."  # other bytes: parsed
    assert parses == [1]
    other.documents.update(doc.id, content="How to roll back.")
    assert mine.documents.get(doc.id)[1] == "How to roll back."
    assert mine.documents.records()[0].revision == 2
    assert [h.content for h in mine.documents.search("roll back")] == ["How to roll back."]
    assert mine.documents.search("deploy") == []
    assert parses == [1, 1]  # the change was parsed once, by the root that had not seen it


def test_the_cache_never_serves_an_index_replaced_behind_it() -> None:
    ports, _ = memory_ports()
    root = open_root(ports)
    a = root.documents.create("Alpha", "alpha body").document
    root.documents.create("Beta", "beta body")
    data = files_of(ports).files[INDEX_PATH]
    files_of(ports).put(INDEX_PATH, model.encode_index(parse_index(data)[1:]))  # drop Alpha
    assert [r.title for r in root.documents.records()] == ["Beta"]
    assert root.documents.search("alpha") == []
    files_of(ports).put(INDEX_PATH, b"{not json")
    with pytest.raises(CorruptStore):
        root.documents.records()
    files_of(ports).put(INDEX_PATH, data)
    assert root.documents.get(a.id)[1] == "alpha body"


def test_one_change_serialises_one_record_and_the_cache_holds_one_index(
    encodes: list[str],
) -> None:
    ports, _ = memory_ports()
    root = open_root(ports)
    docs = [root.documents.create(f"Note {i}", f"body {i}").document for i in range(20)]
    encodes.clear()
    root.documents.update(docs[3].id, content="new body")
    assert encodes == [docs[3].id]
    encodes.clear()
    new = root.documents.create("Another", "body").document
    assert encodes == [new.id]
    cache = root.documents._cache
    assert set(cache._blocks) == {r.id for r in root.documents.records()}  # the bound
    assert cache._index.data == files_of(ports).files[INDEX_PATH]
    assert cache._view.records == root.documents.records() == parse_index(cache._index.data)


@pytest.mark.parametrize("mode", ["file", "journal"])
def test_a_create_whose_drawn_id_the_index_holds_is_refused_and_writes_nothing(mode: str) -> None:
    """Regression: an id port that repeats itself once made the commit write an index with
    an id twice (every later read refused it); now the create is refused before any write and
    the first document stays as it was, in this process as in any other."""
    ports, _ = memory_ports()
    ports = attrs.evolve(ports, ids=_SameId())
    root = open_root(ports, attrs.evolve(CONFIG, documents_index=mode))
    one = root.documents.create("One", "one body").document
    before = dict(files_of(ports).files)
    with pytest.raises(DocumentConflict, match="already"):
        root.documents.create("Two", "two body")
    assert files_of(ports).files == before
    for reader in (root, open_root(ports)):
        assert reader.documents.records() == (one,)


class _SameId:
    def new_id(self) -> str:
        return "0123abcd-0000-4000-8000-000000000000"


@pytest.mark.parametrize("mode", ["file", "journal"])
def test_a_record_the_parse_would_refuse_is_never_committed(mode: str) -> None:
    """The commit checks the records it writes as the parse would (safe managed paths) and
    refuses one before writing anything; a good one is committed and read back as it is."""
    ports, _ = memory_ports()
    files = files_of(ports)
    files.ensure_dir("documents")
    cache = IndexCache(mode)
    good = rules.draft_create({"title": "T", "content": "c"}, "0123abcd-1", "now", "/w").record
    cache.view(files)
    view = cache.commit(files, Undo(files), [good])
    assert view.records == (good,) and view.active_bytes == good.size_bytes
    before = dict(files.files)
    for bad in (attrs.evolve(good, filename="../x.md"), attrs.evolve(good, relative_path="x")):
        with pytest.raises(CorruptStore, match="unsafe"):
            cache.commit(files, Undo(files), [bad])
        assert files.files == before and cache.view(files).records == (good,)
    assert IndexCache().view(files).records == (good,)  # another process reads the same


names = st.text(string.ascii_letters + "é ", min_size=1, max_size=12)


@given(
    st.lists(
        st.tuples(names, names, st.lists(names, max_size=3), st.booleans(), st.booleans()),
        max_size=6,
    )
)
def test_a_remembered_index_is_what_its_bytes_parse_to(
    rows: list[tuple[str, str, list[str], bool, bool]],
) -> None:
    records = []
    for i, (title, description, paths, archived, summary) in enumerate(rows):
        draft = rules.draft_create(
            {"title": title, "description": description, "content": title, "source_paths": paths},
            f"{i:08x}-0000",
            f"2026-01-0{i % 9 + 1}T00:00:00.000Z",
            "/w",
        )
        r = draft.record
        if archived:
            r = attrs.evolve(
                r,
                status="archived",
                relative_path=r.path("archived"),
                archived_at="2026-02-01T00:00:00.000Z",
                archive_summary="gone" if summary else None,
                memory_body_ids=("space",),
            )
        records.append(r)
    cache = IndexCache()
    assert parse_index(cache.encode(records)) == tuple(records)
    assert cache.encode(records) == model.encode_index(records)


@given(st.text(max_size=6), st.text(max_size=6))
def test_the_descending_key_orders_as_negated_code_points(a: str, b: str) -> None:
    def negated(s: str) -> tuple[int, ...]:
        return tuple(-ord(c) for c in s)

    assert (_descending(a) < _descending(b)) == (negated(a) < negated(b))
    assert (_descending(a) == _descending(b)) == (a == b)


# -- the search index --------------------------------------------------------------------------


def plain_scan(
    ports: Ports, query: str, limit: int = 20, archived: bool = False
) -> list[tuple[str, int, str]]:
    """The oracle: every candidate's file read and scored, ordered by score then the latest
    update (ties in index order), cut to the limit."""
    records = parse_index(ports.files.read(INDEX_PATH))
    scored = []
    for r in records:
        if r.status != "active" and not archived:
            continue
        try:
            data = ports.files.read(r.path())
        except Exception:
            continue
        if data is None:
            continue
        body = body_of(data)
        points = rules.score(query, r, body)
        if points > 0:
            scored.append((points, r, body))
    scored.sort(key=lambda s: (-s[0], tuple(-ord(c) for c in s[1].updated_at)))
    return [(r.id, p, b) for p, r, b in scored[:limit]]


def indexed(root: MemoryRoot, query: str, limit: int = 20, archived: bool = False) -> list[Any]:
    hits = root.documents.search(
        query, limit=limit, include_archived=archived, record_access=False
    )
    return [(h.document.id, h.score, h.content) for h in hits]


WORDS = ("deploy", "Deploy", "billing", "state", "note", "ship-it", "42", "Straße", "é")
texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join)
QUERIES = st.one_of(
    st.sampled_from(["", " ", "zzz", "dep", "note 42", "ship", "-", "?", "strasse", "ß", "E"]),
    texts,
)

op = st.one_of(
    st.tuples(st.just("create"), st.integers(0, 1), texts, texts, texts),
    st.tuples(st.just("update"), st.integers(0, 1), st.integers(0, 30), texts, texts),
    st.tuples(st.just("title"), st.integers(0, 1), st.integers(0, 30), texts),
    st.tuples(st.just("remove"), st.integers(0, 30)),
    st.tuples(st.just("restore"), st.integers(0, 30)),
    st.tuples(st.just("search"), QUERIES, st.integers(1, 6), st.booleans(), st.booleans()),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, max_size=25), st.lists(QUERIES, min_size=1, max_size=4))
def test_the_indexed_search_equals_the_plain_scan(ops: list[Any], queries: list[str]) -> None:
    ports, _ = memory_ports()
    roots = (open_root(ports), open_root(ports))  # the second one: "another process"
    files = files_of(ports)
    ids: list[str] = []
    removed: dict[str, bytes] = {}
    for step in ops:
        kind = step[0]
        if kind == "create":
            _, who, title, description, content = step
            doc = roots[who].documents.create(title, content, description=description)
            ids.append(doc.document.id)
        elif kind in ("update", "title") and ids:
            who, doc_id = step[1], ids[step[2] % len(ids)]
            if kind == "update":
                change: dict[str, Any] = {"content": step[3], "description": step[4]}
            else:
                change = {"title": step[3]}
            if doc_id in removed and "content" not in change:
                continue  # a missing file needs the content back
            roots[who].documents.update(doc_id, **change)
            removed.pop(doc_id, None)
        elif kind == "remove" and ids:
            path = roots[0].documents.get(ids[step[1] % len(ids)])[0].path()
            data = files.files.get(path)
            if data is not None:
                removed[ids[step[1] % len(ids)]] = data
                files.remove(path)
        elif kind == "restore" and ids:
            doc_id = ids[step[1] % len(ids)]
            if doc_id in removed:
                files.put(roots[0].documents.get(doc_id)[0].path(), removed.pop(doc_id))
        elif kind == "search":
            _, query, limit, archived, record = step
            roots[0].documents.search(query, limit=limit, include_archived=archived,
                                      record_access=record)  # fmt: skip
        advance(ports, 0 if len(ids) % 3 else 1000)  # equal update times happen
        for query in queries:
            assert indexed(roots[0], query) == plain_scan(ports, query)
    for query in queries:
        for limit in (1, 3, 50):
            for archived in (False, True):
                expected = plain_scan(ports, query, limit, archived)
                for root in roots:
                    assert indexed(root, query, limit, archived) == expected


def test_search_follows_update_archive_and_files_removed_or_restored() -> None:
    ports, _ = memory_ports()
    root, other = open_root(ports), open_root(ports)
    files = files_of(ports)
    a = root.documents.create("Deploy runbook", "How we ship the release.").document
    advance(ports)
    b = root.documents.create("Billing", "Invoices go out monthly.").document
    advance(ports)

    def found(query: str, archived: bool = False, who: MemoryRoot = root) -> list[str]:
        return [h.document.id for h in who.documents.search(query, include_archived=archived)]

    assert found("ship") == [a.id]
    other.documents.update(a.id, content="How we roll back a release.")  # another process
    assert found("ship") == [] and found("roll back") == [a.id]
    root.documents.update(b.id, title="Billing and shipping")
    assert found("ship") == [b.id]
    root.documents.archive(a.id)  # the built-in worker writes the cold reference
    assert found("release") == []
    assert found("release", archived=True) == [a.id]
    assert found("release", archived=True, who=other) == [a.id]
    data = files.files[b.relative_path]
    files.remove(b.relative_path)
    assert found("ship") == [] and found("") == []
    files.put(b.relative_path, data)
    assert found("ship") == [b.id]
    hits = root.documents.search("monthly")
    assert [h.content for h in hits] == ["Invoices go out monthly."]


def test_a_result_whose_file_changed_in_place_is_read_again_and_ranked_again() -> None:
    """A file edited without its record changing: every result is what its file holds now."""
    ports, _ = memory_ports()
    root = open_root(ports)
    files = files_of(ports)
    a = root.documents.create("Alpha", "deploy notes").document
    advance(ports)
    b = root.documents.create("Beta", "deploy deploy").document
    assert [h.document.id for h in root.documents.search("deploy")] == [b.id, a.id]
    text = files.files[b.relative_path].replace(b"deploy deploy", b"nothing here")
    files.put(b.relative_path, text)  # by hand: the index does not change
    hits = root.documents.search("deploy")
    assert [(h.document.id, h.content) for h in hits] == [(a.id, "deploy notes")]
    assert indexed(root, "nothing") == plain_scan(ports, "nothing")


def test_an_unreadable_file_is_skipped_and_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    ports, _ = memory_ports()
    root = open_root(ports)
    doc = root.documents.create("Deploy", "deploy body").document
    root.documents.search("deploy")  # indexed
    files = files_of(ports)
    real: Callable[[str], bytes | None] = files.read

    def refusing(path: str) -> bytes | None:
        if path == doc.relative_path:
            from mnemon_sm.errors import StorageError

            raise StorageError("a symlink")
        return real(path)

    monkeypatch.setattr(files, "read", refusing)
    assert root.documents.search("deploy") == []
    monkeypatch.setattr(files, "read", real)
    assert [h.document.id for h in root.documents.search("deploy")] == [doc.id]


# -- the words of the search index: retired slots, rebuilds, the scan fallback, separators ---


@pytest.mark.parametrize("floors", [(0, 0), (0, 64), (64, 0)])
def test_word_lookup_equals_the_plain_scan_across_rebuilds_and_scans(
    monkeypatch: pytest.MonkeyPatch, floors: tuple[int, int]
) -> None:
    """Many changes to few documents: slots are retired and (floor 0) the words rebuilt;
    tokens held by many words are (floor 0) found by scanning the bodies. Bodies edited by
    hand hold the words' separator; a query across it, or across two words, finds nothing
    the plain scan does not."""
    from mnemon_sm.flows.documents import search_index

    monkeypatch.setattr(search_index, "COMPACT_FLOOR", floors[0])
    monkeypatch.setattr(search_index, "SCAN_FLOOR", floors[1])
    ports, _ = memory_ports()
    root, other = open_root(ports), open_root(ports)
    files = files_of(ports)
    bodies = ["deploy state", "state-machine notes", "billing 42 deploy", "Straße ship-it"]
    ids = [root.documents.create(f"Doc {i}", b).document.id for i, b in enumerate(bodies)]
    queries = ["deploy", "state", "state-m", "e", "42", "ship", "\x00", "a\x00b", "y s",
               "deploy\x00state", "strasse", "zzz", "-"]  # fmt: skip
    words = search_index._Words
    rebuilt = []
    real = words.reset

    def counting(self: Any) -> None:
        rebuilt.append(1)
        real(self)

    monkeypatch.setattr(words, "reset", counting)
    for step in range(30):
        if step == 1:
            rebuilt.clear()  # the parts' first indexing is done
        doc = ids[step % len(ids)]
        who = root if step % 3 else other
        body = bodies[(step + step // 4) % 4]
        who.documents.update(doc, content=f"{body} rev{step} deploy{step % 5}")
        if step % 7 == 0:  # by hand: the separator inside a body, no record change
            path = root.documents.get(doc)[0].path()
            files.put(path, files.files[path].replace(b"rev", b"a\x00b deploy\x00state rev"))
        advance(ports, 1000 if step % 2 else 0)
        for query in queries:
            assert indexed(root, query) == plain_scan(ports, query), (step, query)
    assert bool(rebuilt) == (floors[0] == 0)  # rebuilt when retired slots outnumber live ones
    part = root.documents._search.index._parts["active"]
    assert part.words.live == len(ids)


def test_a_record_replaced_in_place_is_committed_without_a_parse(parses: list[int]) -> None:
    """A commit that replaces records at their positions (as recording access times does)
    seeds the cache: the next read parses nothing, and the bytes on disk parse to the records
    the cache holds; an unsafe replacement is refused before anything is written."""
    ports, _ = memory_ports()
    root = open_root(ports)
    for i in range(8):
        root.documents.create(f"Doc {i}", f"body {i}")
    files = files_of(ports)
    cache = IndexCache()
    records = cache.view(files).records
    parses.clear()
    touched = attrs.evolve(records[3], last_accessed_at="2030-01-01T00:00:00.000Z")
    view = cache.commit(files, Undo(files), [touched])
    assert view.records == (*records[:3], touched, *records[4:])
    assert cache.view(files) is view and parses == []  # remembered: nothing parsed
    assert parse_index(files.files[INDEX_PATH]) == view.records
    before = dict(files.files)
    unsafe = attrs.evolve(records[5], relative_path="documents/active/../../x.md")
    with pytest.raises(CorruptStore, match="unsafe"):
        cache.commit(files, Undo(files), [unsafe])
    assert files.files == before
    assert cache.encode(records) == model.encode_index(records)


def test_a_parsed_index_seeds_the_encoder(encodes: list[str]) -> None:
    """A root that parsed an index another process wrote re-encodes, on its first rewrite,
    only the record it changed: the others' blocks are cut from the bytes it read."""
    ports, _ = memory_ports()
    writer = open_root(ports)
    docs = [writer.documents.create(f"Note {i}", f"body {i}").document for i in range(12)]
    reader = open_root(ports)
    encodes.clear()
    reader.documents.update(docs[5].id, content="changed")
    assert encodes == [docs[5].id]
    assert parse_index(files_of(ports).files[INDEX_PATH]) == reader.documents.records()
