"""Storage roots on PostgreSQL behave as roots in a directory do.

The oracle is a twin: the same calls, with the same clock and ids, on a root in a directory
(real file adapters) and on a root on a real PostgreSQL server (the test suite starts it:
``postgres_cluster`` in ``conftest.py``). Every answer (receipt, result or error type) must be
the same, and so must every file of the memory either root holds, byte for byte, and every
record of their audit logs (whose run ids are the writing process's own).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

from mnemon_sm import Config, MemoryRoot
from mnemon_sm.adapters.postgres import PgBackend
from mnemon_sm.adapters.real import RealFiles, RealLocks
from mnemon_sm.errors import MnemonError, StorageError
from mnemon_sm.flows.audit import AuditRecord, read_audit
from mnemon_sm.ports import Files, Ports
from mnemon_sm.testing.memory import FakeClock, MemoryIds
from mnemon_sm.testing.pg_cluster import Cluster
from mnemon_sm.testing.snapshot import files_state

_names = itertools.count()


def _url(cluster: Cluster, tag: str) -> str:
    return cluster.url(f"{tag}-{next(_names)}")


def _tree(files: Files, directory: str = "") -> dict[str, bytes]:
    """Every file under ``directory``, by path (temporary files included)."""
    found: dict[str, bytes] = {}
    for name in files.list(directory):
        path = f"{directory}/{name}" if directory else name
        data = files.read(path) if not _is_dir(files, path) else None
        if data is None:
            found.update(_tree(files, path))
        else:
            found[path] = data
    return found


def _is_dir(files: Files, path: str) -> bool:
    try:
        files.read(path)
    except StorageError:
        return True
    return False


def _runs_renamed(records: list[AuditRecord]) -> list[AuditRecord]:
    """``records`` with each run id replaced by its rank of first appearance."""
    ranks: dict[str, str] = {"-": "-"}
    return [attrs.evolve(r, run=ranks.setdefault(r.run, str(len(ranks)))) for r in records]


def _answer(call: Callable[[], Any]) -> object:
    try:
        result = call()
    except MnemonError as exc:
        return type(exc).__name__
    to_json = getattr(result, "to_json", None)
    return to_json() if callable(to_json) else result


CONFIG = Config(user_limit=400, memory_limit=600)


def _story(root: MemoryRoot) -> list[object]:
    """Hot memory (every rule's refusal included), context, Project Documents and an agent's
    lifecycle, on one root."""
    hot, answers = root.hot, []
    calls: list[Callable[[], Any]] = [
        lambda: hot.add("user", "Prefers concise answers", importance="critical"),
        lambda: hot.add("memory", "The release branch is cut on Thursdays"),
        lambda: hot.add("memory", "The release branch is cut on Thursdays"),  # duplicate
        lambda: hot.add("memory", "CI runs on two cores"),
        lambda: hot.replace("memory", "CI runs", "CI runs on two cores, 30 minutes at most"),
        lambda: hot.replace("memory", "nothing like it", "x"),  # no match
        lambda: hot.add("memory", "The release branch is frozen on Fridays"),
        lambda: hot.remove("memory", "release branch"),  # ambiguous
        lambda: hot.add("memory", "§ is reserved"),  # invalid
        lambda: hot.add("user", "x" * 500, maintenance=False),  # over capacity
        lambda: hot.remove("memory", "frozen on Fridays"),
        lambda: root.context.runtime_memory(),
        lambda: root.documents.create("Release notes", "# Release\n\nCut on Thursdays.\n"),
        lambda: root.documents.search("thursdays"),
        lambda: root.lifecycle("main").session_start(),
        lambda: root.lifecycle("main").pre_step(
            1, 1, [{"id": "m1", "role": "user", "content": "ship it"}]
        ),
        lambda: root.lifecycle("main").turn_stopping(1),
        lambda: root.lifecycle("main").status(),
    ]
    for call in calls:
        answers.append(_answer(call))
    doc_id = answers[12]["document"]["id"]  # type: ignore[index]
    answers.append(_answer(lambda: root.documents.update(doc_id, content="# Release\n\nMoved.\n")))
    answers.append(_answer(lambda: root.documents.get(doc_id)[1]))
    return answers


def test_a_postgres_root_answers_and_stores_what_a_directory_root_does(
    postgres_cluster: Cluster, tmp_path: Path
) -> None:
    backend = PgBackend(_url(postgres_cluster, "twin"))
    try:
        on_pg = Ports(
            files=backend.files, locks=backend.locks, clock=FakeClock(), ids=MemoryIds(seed=1)
        )
        directory = tmp_path / "root"
        in_dir = Ports(
            files=RealFiles(directory),
            locks=RealLocks(directory),
            clock=FakeClock(),
            ids=MemoryIds(seed=1),
        )
        pg_root = MemoryRoot.open(backend.display, CONFIG, ports=on_pg)
        dir_root = MemoryRoot.open(directory, CONFIG, ports=in_dir)
        assert _story(pg_root) == _story(dir_root)
        pg_root.close()
        dir_root.close()
        # A directory root's locks are files (flock, the reference's lock file); a
        # PostgreSQL root's are advisory locks: every other file of the memory is the same.
        expected = {
            path: data
            for path, data in files_state(_tree(in_dir.files)).items()
            if not path.endswith((".lock", ".flock"))
        }
        assert "runtime/memories.json" in expected and "runtime/MEMORY.md" in expected
        assert any(path.startswith("documents/") for path in expected)
        assert any(path.startswith("state/") for path in expected)
        assert files_state(_tree(on_pg.files)) == expected
        # The audit logs tell the same story; only the run ids (a process's own) differ.
        logged = [_runs_renamed(read_audit(p.files, 10_000)) for p in (on_pg, in_dir)]
        assert logged[0] == logged[1]
        refused = {"NoMatch", "AmbiguousMatch", "InvalidInput"}
        assert refused | {"ok", "CapacityExceeded"} <= {r.outcome for r in logged[0]}
    finally:
        backend.close()


def test_a_root_opened_by_url_keeps_what_it_committed(postgres_cluster: Cluster) -> None:
    url = _url(postgres_cluster, "url")
    root = MemoryRoot.open(url)
    assert root.path is None and root.location == url
    root.hot.add("memory", "Deploys need a second reviewer")
    root.close()
    again = MemoryRoot.open(url)
    try:
        assert [e.content for e in again.hot.snapshot().entries] == [
            "Deploys need a second reviewer"
        ]
        assert "Deploys need a second reviewer" in again.context.runtime_memory()
    finally:
        again.close()


def test_a_url_root_keeps_its_memory_spaces_in_the_database(
    postgres_cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MEMORY.md's archive-then-compact and a document's archiving write to Memory Spaces on
    the server: another host (another cache directory) recalls every archived entry and the
    document's cold reference."""
    from tests.test_maintenance import memory_facts

    url = _url(postgres_cluster, "root-spaces")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "host-a"))
    root = MemoryRoot.open(url)
    facts = memory_facts(49)
    block = None
    for _, content, importance in facts:
        block = root.hot.add("memory", content, importance=importance).maintenance or block
    receipt = root.hot.add("memory", "New durable fact: deploys need two approvals.")
    block = receipt.maintenance or block
    assert block is not None and block.kind == "long-term-archive"
    doc = root.documents.create("Old runbook", "# Runbook\n\nRestart the queue first.\n")
    archived = root.documents.archive(doc.document.id)
    root.close()
    assert (tmp_path / "host-a" / "mnemon-sm").is_dir()  # the replica, a cache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "host-b"))
    other = MemoryRoot.open(url)
    try:
        archive = [s.name for s in other.long_term.spaces()]
        assert "Working memory archive" in archive
        archived_facts = {c for _, c, _ in facts} - {
            e.content for e in other.hot.snapshot().of("memory")
        }
        assert archived_facts
        for content in archived_facts:  # through the recall worker, as an agent would
            found = other.long_term.recall(content, mode="basic").results
            assert [item["content"] for item in found] == [content]
        reference = other.long_term.recall("Old runbook", mode="basic").results
        assert reference and "documents/archived/old-runbook-" in reference[0]["content"]
        record = other.documents.records()
        assert [r.status for r in record if r.id == doc.document.id] == ["archived"]
        assert archived.document.status == "archived"
    finally:
        other.close()


def test_a_root_url_shows_no_password(postgres_cluster: Cluster) -> None:
    url = _url(postgres_cluster, "pw").replace("mnemon@", "mnemon:secret@")
    root = MemoryRoot.open(url)  # trust authentication: the password is not checked
    try:
        assert "secret" not in root.location and root.location.startswith("postgresql://mnemon@")
    finally:
        root.close()


def test_a_bad_root_url_is_a_typed_error_and_touches_nothing(tmp_path: Path) -> None:
    from mnemon_sm.errors import InvalidInput

    with pytest.raises(InvalidInput):
        MemoryRoot.open("postgresql://u@/db?root=../escape")
    with pytest.raises(StorageError, match="cannot open"):
        MemoryRoot.open(f"postgresql://u@/db?host={tmp_path}&port=1&root=r")
    assert list(tmp_path.iterdir()) == []


def test_the_command_line_takes_a_root_url(postgres_cluster: Cluster, tmp_path: Path) -> None:
    """``--root URL`` and ``$MNEMON_DATA_DIR=URL`` open the same root; the commands that
    work on a directory refuse a URL with a typed error."""
    from tests.test_cli import base_env, error_of, run_cli

    url = _url(postgres_cluster, "cli")
    added = run_cli(
        tmp_path, "--root", url, "hot", "add", "--target", "memory", "Staging is eu-west-1"
    )
    assert added.returncode == 0, added.stderr
    env = {**base_env(tmp_path), "MNEMON_DATA_DIR": url}
    shown = run_cli(tmp_path, "hot", "show", "--target", "memory", env=env)
    assert shown.returncode == 0 and "Staging is eu-west-1" in shown.stdout
    refused = run_cli(tmp_path, "--root", url, "demo")
    assert refused.returncode != 0 and error_of(refused)["type"] == "InvalidInput"
    assert (
        "secret"
        not in error_of(
            run_cli(tmp_path, "--root", url.replace("mnemon@", "mnemon:secret@"), "demo")
        )["message"]
    )


def test_a_reader_without_write_access_opens_a_read_only_root(postgres_cluster: Cluster) -> None:
    """A database user who may only read opens an up-to-date root with writes disabled: it
    sees what was committed, opening writes nothing, and a write is refused with a typed
    error before it reaches the server."""
    from mnemon_sm.errors import ReadOnly

    url = _url(postgres_cluster, "ro")
    writer = MemoryRoot.open(url)
    writer.hot.add("user", "Prefers tea")
    writer.close()
    reader_role = f"reader{next(_names)}"
    postgres_cluster.psql(
        f"CREATE ROLE {reader_role} LOGIN; GRANT SELECT ON ALL TABLES IN SCHEMA public TO "
        f"{reader_role}"
    )
    read_only = url.replace("mnemon@", f"{reader_role}@")
    root = MemoryRoot.open(read_only, Config(write_enabled=False))
    try:
        assert [e.content for e in root.hot.snapshot().entries] == ["Prefers tea"]
        assert "Prefers tea" in root.context.runtime_memory()
        with pytest.raises(ReadOnly):
            root.hot.add("user", "Prefers coffee")
    finally:
        root.close()
    writable = MemoryRoot.open(read_only)  # writes enabled, but the user may not write
    try:
        with pytest.raises(StorageError):
            writable.hot.add("user", "Prefers coffee")
        assert [e.content for e in writable.hot.snapshot().entries] == ["Prefers tea"]
    finally:
        writable.close()


def test_the_driver_is_imported_only_for_a_postgres_root() -> None:
    """``import mnemon_sm`` imports no PostgreSQL driver; without the extra, a root URL gets
    a typed error that names it, and a directory root still works."""
    from tests._fresh_python import python_lines

    imported = "print(sorted(m for m in sys.modules if m.split('.')[0].startswith('psycopg')))\n"
    code = "import sys\nimport mnemon_sm\n" + imported
    assert python_lines(code) == ["[]"]
    code = (
        "import sys, tempfile\n"
        "import mnemon_sm\n"
        "try:\n"
        "    mnemon_sm.MemoryRoot.open('postgresql://u@/db?root=r')\n"
        "except mnemon_sm.StorageError as exc:\n"
        "    print(exc)\n"
        "mnemon_sm.MemoryRoot.open(tempfile.mkdtemp()).close()\n" + imported
    )
    assert python_lines(code, without=["psycopg", "psycopg_pool"]) == [
        "a PostgreSQL root needs the postgres extra: pip install 'mnemon-sm[postgres]'",
        "[]",
    ]


def test_documents_use_the_journal_on_postgres_unless_told_otherwise(
    postgres_cluster: Cluster, tmp_path: Path
) -> None:
    """``documentsIndex = "auto"`` (the default) is the journal on PostgreSQL, where no other
    reader needs ``index.json`` current, and the file in a directory; a set value stays."""
    on_pg = MemoryRoot.open(_url(postgres_cluster, "docs"))
    in_dir = MemoryRoot.open(tmp_path / "root")
    told = MemoryRoot.open(_url(postgres_cluster, "told"), Config(documents_index="file"))
    try:
        assert Config().documents_index == "auto"
        assert on_pg.config.documents_index == "journal"
        assert in_dir.config.documents_index == "file"
        assert told.config.documents_index == "file"
        on_pg.documents.create("Runbook", "# Runbook\\n\\nRestart the queue.\\n")
        told.documents.create("Runbook", "# Runbook\\n\\nRestart the queue.\\n")
        assert on_pg._ports.files.read("documents/index.journal") is not None
        assert told._ports.files.read("documents/index.journal") is None
    finally:
        for root in (on_pg, in_dir, told):
            root.close()
