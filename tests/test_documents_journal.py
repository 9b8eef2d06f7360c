"""The document index journal (``Config.documents_index = "journal"``).

The oracle of every test is a root in the default ``file`` mode, or the journal's documented
rules (``committed_records`` of the property tests, written from the module's rules): the same
operations on twin roots leave the same documents, and once a journal root closes,
``index.json`` alone is byte for byte what the ``file`` root wrote. The hostile cases: a torn
last line, bad bytes in a complete line, a writer that rewrites ``index.json`` without knowing
the journal (the reference implementation), a ``file``-mode root opening a journal, a
read-only root, a symlink in the journal's place, a reader that races a fold.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest

from mnemon_sm import Config, MemoryRoot
from mnemon_sm.errors import CorruptStore, StorageError
from mnemon_sm.flows.documents import cache as cache_module
from mnemon_sm.flows.documents.cache import IndexCache
from mnemon_sm.flows.documents.journal import JOURNAL_PATH
from mnemon_sm.flows.documents.model import INDEX_PATH, encode_index, parse_index
from mnemon_sm.ports import Ports
from mnemon_sm.testing.memory import MemoryFiles, MemoryIds, memory_ports
from mnemon_sm.testing.snapshot import files_state

sys.path.insert(0, str(Path(__file__).parents[1] / "property_tests"))
from test_document_properties import committed_records

ROOT = "/roots/r"
FILE = Config(durability="full", documents_index="file")
JOURNAL = attrs.evolve(FILE, documents_index="journal")


def files_of(ports: Ports) -> MemoryFiles:
    files = ports.files
    assert isinstance(files, MemoryFiles)
    return files


def committed(ports: Ports) -> list[Any]:
    files = files_of(ports).files
    return committed_records(files.get(INDEX_PATH), files.get(JOURNAL_PATH))


def story(root: MemoryRoot, ports: Ports, steps: int) -> None:
    """Creates, updates, searches and manual archives, the clock moving between them."""
    docs = root.documents
    ids: list[str] = []
    for step in range(steps):
        if step % 5 == 3 and ids:
            docs.update(ids[step % len(ids)], content=f"updated at step {step} deploy")
        elif step % 7 == 6 and len(ids) > 2:
            docs.search("deploy", limit=3)
        elif step % 11 == 10 and len(ids) > 4:
            active = [r.id for r in docs.records() if r.status == "active"]
            docs.archive(active[0])
        else:
            ids.append(docs.create(f"Note {step}", f"deploy note {step} body").document.id)
        ports.clock.advance(1000)  # type: ignore[attr-defined]


@pytest.mark.parametrize("bound", [None, 2048], ids=["one-journal", "folding-every-2KiB"])
def test_a_journal_root_commits_what_a_file_root_commits(
    bound: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if bound is not None:
        monkeypatch.setattr(cache_module, "JOURNAL_MAX", bound)
    twins = {}
    for config in (FILE, JOURNAL):
        ports, _ = memory_ports()
        ports = attrs.evolve(ports, ids=MemoryIds(seed=1))  # twins name documents alike
        root = MemoryRoot.open(ROOT, config, ports=ports)
        story(root, ports, 60)
        twins[config.documents_index] = (root, ports)
    (plain, plain_ports), (journal, journal_ports) = twins["file"], twins["journal"]
    assert journal.documents.records() == plain.documents.records()
    assert committed(journal_ports) == list(plain.documents.records())  # the documented rules
    assert JOURNAL_PATH in files_of(journal_ports).files  # not folded yet
    assert JOURNAL_PATH not in files_of(plain_ports).files
    other = MemoryRoot.open(ROOT, JOURNAL, ports=journal_ports)  # another process reads it all
    assert other.documents.records() == plain.documents.records()
    journal.close()
    plain.close()
    after = files_of(journal_ports).files
    assert JOURNAL_PATH not in after
    assert after[INDEX_PATH] == files_of(plain_ports).files[INDEX_PATH]
    assert other.documents.records() == parse_index(after[INDEX_PATH])


def test_the_journal_is_folded_once_past_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "JOURNAL_MAX", 4096)
    ports, _ = memory_ports()
    root = MemoryRoot.open(ROOT, JOURNAL, ports=ports)
    files = files_of(ports).files
    sizes = []
    for i in range(40):
        root.documents.create(f"Note {i}", f"body {i}")
        sizes.append(len(files.get(JOURNAL_PATH, b"")))
    assert max(sizes) <= 4096 + 2048  # never more than the bound plus one line
    assert 0 in sizes  # folded (the journal removed) more than once
    assert sizes.count(0) >= 3
    assert committed(ports) == list(root.documents.records())


def test_a_torn_last_line_is_no_part_of_the_journal_and_the_next_commit_drops_it() -> None:
    ports, _ = memory_ports()
    root = MemoryRoot.open(ROOT, JOURNAL, ports=ports)
    a = root.documents.create("A", "alpha").document
    root.documents.create("B", "beta")
    files = files_of(ports)
    lines = files.files[JOURNAL_PATH]
    first, second = lines.splitlines(keepends=True)
    files.put(JOURNAL_PATH, first + second[: len(second) // 2])  # a power loss mid-append
    reader = MemoryRoot.open(ROOT, JOURNAL, ports=ports)
    assert reader.documents.records() == (a,)
    c = reader.documents.create("C", "gamma").document
    assert files.files[JOURNAL_PATH].count(b"\n") == 2
    assert files.files[JOURNAL_PATH].endswith(b"\n")
    assert [r.id for r in root.documents.records()] == [a.id, c.id]


@pytest.mark.parametrize(
    "bad",
    [
        b"not json\n",
        b'{"version": 2, "documents": []}\n',
        b'{"version": 1, "documents": [{"id": "x"}]}\n',
        b"\xff\xfe\n",
    ],
    ids=["not-json", "version", "record", "not-utf8"],
)
def test_bad_bytes_in_a_complete_line_are_a_typed_error_and_change_nothing(bad: bytes) -> None:
    ports, _ = memory_ports()
    root = MemoryRoot.open(ROOT, JOURNAL, ports=ports)
    doc = root.documents.create("A", "alpha").document
    files = files_of(ports)
    files.put(JOURNAL_PATH, files.files[JOURNAL_PATH] + bad)
    before = files_state(files.files)
    fresh = MemoryRoot.open(ROOT, JOURNAL, ports=ports)
    for docs in (root.documents, fresh.documents):
        with pytest.raises(CorruptStore, match=r"index\.journal"):
            docs.records()
        with pytest.raises(CorruptStore):
            docs.create("B", "beta")
        with pytest.raises(CorruptStore):
            docs.update(doc.id, content="changed")
    fresh.close()  # a corrupt journal is never folded
    assert files_state(files.files) == before


def test_an_unsafe_path_in_a_journal_line_is_refused() -> None:
    ports, _ = memory_ports()
    root = MemoryRoot.open(ROOT, JOURNAL, ports=ports)
    doc = root.documents.create("A", "alpha").document
    files = files_of(ports)
    line = json.loads(files.files[JOURNAL_PATH])
    line["documents"][0]["relativePath"] = "documents/active/../../etc/passwd"
    files.put(JOURNAL_PATH, (json.dumps(line) + "\n").encode())
    with pytest.raises(CorruptStore, match="unsafe"):
        MemoryRoot.open(ROOT, JOURNAL, ports=ports).documents.get(doc.id)


def test_a_writer_that_ignores_the_journal_loses_no_acknowledged_change() -> None:
    """The reference implementation rewrites ``index.json`` from its own read of it: it never
    saw the journal's create, and it updated a document the journal also touched. Both
    writes stay: the journal's create is added back, the later revision wins."""
    ports, _ = memory_ports()
    root = MemoryRoot.open(ROOT, JOURNAL, ports=ports)
    a = root.documents.create("A", "alpha").document
    root.close()  # folded: index.json holds A
    root = MemoryRoot.open(ROOT, JOURNAL, ports=ports)
    root.documents.search("alpha")  # a journal line: A's access time
    b = root.documents.create("B", "beta").document  # a journal line: the create
    files = files_of(ports)
    theirs = attrs.evolve(a, title="A by the reference", revision=a.revision + 1)
    files.put(INDEX_PATH, encode_index([theirs]))  # their rewrite, without B
    for reader in (root, MemoryRoot.open(ROOT, FILE, ports=ports)):
        assert reader.documents.records() == (theirs, b)
    assert JOURNAL_PATH not in files.files  # the file-mode opening folded it
    assert parse_index(files.files[INDEX_PATH]) == (theirs, b)


def test_a_file_root_folds_a_journal_when_it_opens_and_when_it_commits() -> None:
    ports, _ = memory_ports()
    journal = MemoryRoot.open(ROOT, JOURNAL, ports=ports)
    plain = MemoryRoot.open(ROOT, FILE, ports=ports)  # opened before the journal exists
    journal.documents.create("A", "alpha")
    files = files_of(ports).files
    assert JOURNAL_PATH in files
    assert [r.title for r in plain.documents.records()] == ["A"]  # every root reads it
    plain.documents.create("B", "beta")
    assert JOURNAL_PATH not in files
    assert [r.title for r in parse_index(files[INDEX_PATH])] == ["A", "B"]
    journal.documents.create("C", "gamma")
    assert JOURNAL_PATH in files
    MemoryRoot.open(ROOT, FILE, ports=ports)
    assert JOURNAL_PATH not in files
    assert [r.title for r in parse_index(files[INDEX_PATH])] == ["A", "B", "C"]


def test_a_read_only_root_reads_the_journal_and_writes_nothing() -> None:
    ports, _ = memory_ports()
    root = MemoryRoot.open(ROOT, JOURNAL, ports=ports)
    root.documents.create("A", "alpha")
    before = dict(files_of(ports).files)
    reader = MemoryRoot.open(ROOT, attrs.evolve(JOURNAL, write_enabled=False), ports=ports)
    assert [h.document.title for h in reader.documents.search("alpha")] == ["A"]
    reader.close()
    assert files_of(ports).files == before


def test_a_reader_racing_a_fold_never_misses_a_document() -> None:
    """The journal is read before ``index.json``: a fold between the two reads leaves the
    reader with the old journal over the new index (no-ops), never without the journal's
    documents."""
    ports, _ = memory_ports()
    writer = MemoryRoot.open(ROOT, JOURNAL, ports=ports)
    made = [writer.documents.create(f"N{i}", f"body {i}").document.id for i in range(3)]
    files = files_of(ports)
    reader = IndexCache("journal")
    real = files.read_if_changed

    def fold_between(path: str, seen: Any) -> Any:
        read = real(path, seen)  # the reader's first read; another process folds right after
        files.read_if_changed = real  # type: ignore[method-assign]
        writer.documents._flow.cache.compact(files, "off", due_only=False)
        return read

    files.read_if_changed = fold_between  # type: ignore[method-assign]
    assert [r.id for r in reader.view(files).records] == made
    assert JOURNAL_PATH not in files.files


def test_a_symlink_in_the_journal_s_place_is_refused(tmp_path: Path) -> None:
    root = MemoryRoot.open(tmp_path, JOURNAL)
    doc = root.documents.create("A", "alpha").document
    root.close()
    target = tmp_path / "elsewhere"
    target.write_bytes(b"")
    os.symlink(target, tmp_path / JOURNAL_PATH)
    index = (tmp_path / INDEX_PATH).read_bytes()
    again = MemoryRoot.open(tmp_path, JOURNAL)
    with pytest.raises(StorageError):
        again.documents.get(doc.id)
    with pytest.raises(StorageError):
        again.documents.create("B", "beta")
    assert target.read_bytes() == b"" and (tmp_path / INDEX_PATH).read_bytes() == index


def test_a_real_root_in_journal_mode_round_trips(tmp_path: Path) -> None:
    """On disk: the journal holds one line per commit, closing folds it, and a root in the
    default mode (or any reader of index.json alone) then sees every document."""
    root = MemoryRoot.open(tmp_path, JOURNAL)
    ids = [root.documents.create(f"Note {i}", f"body {i}").document.id for i in range(5)]
    root.documents.update(ids[1], content="changed")
    journal = (tmp_path / JOURNAL_PATH).read_bytes()
    assert journal.count(b"\n") == 6
    assert oct((tmp_path / JOURNAL_PATH).stat().st_mode & 0o777) == "0o600"
    root.close()
    assert not (tmp_path / JOURNAL_PATH).exists()
    on_disk = parse_index((tmp_path / INDEX_PATH).read_bytes())
    assert [r.id for r in on_disk] == ids and on_disk[1].revision == 2
    assert MemoryRoot.open(tmp_path).documents.get(ids[1])[1] == "changed"


def test_closing_without_a_journal_takes_no_lock_and_writes_nothing() -> None:
    ports, log = memory_ports()
    root = MemoryRoot.open(ROOT, JOURNAL, ports=ports)
    root.documents.create("A", "alpha")
    root.close()  # folds: no journal left
    again = MemoryRoot.open(ROOT, JOURNAL, ports=ports)
    before = files_state(files_of(ports).files)
    start = len(log.calls)
    again.close()
    names = {c.name for c in log.calls[start:]}
    assert "locks.acquire" not in names and "files.write_temp" not in names, names
    assert files_state(files_of(ports).files) == before
