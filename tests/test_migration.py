"""``migrate``: a whole root copied to another backend and proved, every outcome of its spec.

The oracle is the source itself, read with the file system and SQL (not through the library):
every file's bytes, and every Memory Space's rows. Roots are built through the public API in
the reference's directory layout (``runtime/``, ``documents/``, ``state/``, ``data/<space>/``
with its ``mnemon.db`` and the catalog ``data/.dsh-memory-bodies.json``).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from mnemon_sm import MemoryRoot, migrate
from mnemon_sm.adapters.real import RealFiles, SystemClock
from mnemon_sm.adapters.sqlite import EmbeddedStore
from mnemon_sm.errors import InvalidInput, MigrationMismatch, StorageError
from mnemon_sm.flows.migration import MigrationEnd, MigrationFlow, copied_paths
from mnemon_sm.testing.faults import RaisingPort
from mnemon_sm.testing.longterm import MemoryLongTermStore
from mnemon_sm.testing.memory import FakeClock
from mnemon_sm.testing.pg_cluster import Cluster

_names = itertools.count()


def _populated(path: Path) -> Path:
    """A root with hot memory, documents (one archived), two spaces with edges and a
    forgotten insight, and an agent's lifecycle state."""
    root = MemoryRoot.open(path)
    try:
        root.hot.add("memory", "The release branch is cut on Thursdays")
        root.hot.add("user", "Prefers short answers", importance="critical")
        kept = root.documents.create("Runbook", "# Runbook\n\nRestart the queue first.\n")
        old = root.documents.create("Old notes", "# Notes\n\nOutdated.\n")
        root.documents.archive(old.document.id)
        root.documents.update(kept.document.id, content="# Runbook\n\nRestart it twice.\n")
        team = root.long_term.create_space("Team", "what the team decided")
        root.long_term.remember(
            "Alice moved billing to Kafka because of load", space=team.id, entities=["Alice"]
        )
        root.long_term.remember("Alice owns the billing queue", space=team.id, entities=["Alice"])
        gone = root.long_term.remember("Lunch is at noon", space=team.id)
        root.long_term.forget(gone.writes[0].receipt["id"], space=team.id)
        root.lifecycle("main").session_start()
    finally:
        root.close()
    return path


def _files(path: Path) -> dict[str, str]:
    """SHA-256 of every file under ``path``, by relative path (read with the file system)."""
    return {
        p.relative_to(path).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def _copied(path: Path) -> dict[str, str]:
    """The files a migration copies as files: no lock files, no store files."""
    every = _files(path)
    return {p: every[p] for p in copied_paths(tuple(every))}


def _rows(path: Path) -> dict[str, dict[str, list[tuple[Any, ...]]]]:
    """Every row of every space under ``path``, read with SQL."""
    out = {}
    for db in sorted((path / "data").glob("*/mnemon.db")):
        with sqlite3.connect(f"file:{db}?immutable=1", uri=True) as conn:
            out[db.parent.name] = {
                table: conn.execute(f"SELECT rowid, * FROM {table} ORDER BY rowid").fetchall()
                for table in ("insights", "edges", "oplog")
            }
    return out


@pytest.fixture
def url(postgres_cluster: Cluster) -> str:
    return postgres_cluster.url(f"migrate-{next(_names)}")


def test_a_directory_root_goes_to_postgres_and_back_unchanged(url: str, tmp_path: Path) -> None:
    source = _populated(tmp_path / "source")
    before = _files(source)
    progress: list[tuple[str, int, int]] = []
    there = migrate(source, url, progress=lambda *step: progress.append(step), batch=3)
    assert _files(source) == before  # INV-MIG-1: the source is only read
    assert there.files == len(_copied(source)) and there.bytes > 0
    assert set(there.spaces) == set(_rows(source))
    assert [p for p in progress if p[0] == "files"][-1] == ("files", there.files, there.files)
    assert ("spaces", len(there.spaces), len(there.spaces)) in progress

    back = migrate(url, tmp_path / "back")
    assert back.files_sha256 == there.files_sha256 and back.spaces == there.spaces
    assert _copied(tmp_path / "back") == _copied(source)
    assert _rows(tmp_path / "back") == _rows(source)

    on_pg = MemoryRoot.open(url)  # the copy is a working root
    try:
        original = MemoryRoot.open(source)
        try:
            assert on_pg.hot.snapshot().entries == original.hot.snapshot().entries
            assert [d.to_json() for d in on_pg.documents.records()] == [
                d.to_json() for d in original.documents.records()
            ]
            team = next(s for s in on_pg.long_term.spaces() if s.name == "Team")
            asked = on_pg.long_term.recall("Kafka billing", spaces=[team.id]).results
            assert asked and "Kafka" in asked[0]["content"]
        finally:
            original.close()
    finally:
        on_pg.close()


def test_a_target_that_is_not_empty_is_refused_and_left_as_it_was(
    url: str, tmp_path: Path
) -> None:
    source = _populated(tmp_path / "source")
    target = tmp_path / "target"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    with pytest.raises(InvalidInput, match="not empty"):
        migrate(source, target)
    assert _files(target) == {"notes.txt": hashlib.sha256(b"mine").hexdigest()}
    migrate(source, url)
    with pytest.raises(InvalidInput, match="not empty"):
        migrate(source, url)


def test_a_source_that_is_missing_or_holds_a_symlink_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no root directory"):
        migrate(tmp_path / "nowhere", tmp_path / "target")
    source = _populated(tmp_path / "source")
    (tmp_path / "outside").write_text("secret")
    os.symlink(tmp_path / "outside", source / "runtime" / "link.md")
    with pytest.raises(StorageError, match="symlink"):
        migrate(source, tmp_path / "target")
    assert _files(tmp_path / "target") == {}


def _flow(source: Path, target: Path, **wrap: Any) -> MigrationFlow:
    """A migration flow on two directory roots; ``wrap`` replaces an end's files or store."""
    ends = {
        "source": MigrationEnd(
            RealFiles(source), EmbeddedStore(source, SystemClock(), readonly=True), "source"
        ),
        "target": MigrationEnd(RealFiles(target), EmbeddedStore(target, FakeClock()), "target"),
    }
    for key, value in wrap.items():
        end, part = key.split("_")
        ends[end] = MigrationEnd(
            value(ends[end].files) if part == "files" else ends[end].files,
            value(ends[end].store) if part == "store" else ends[end].store,
            ends[end].where,
        )
    return MigrationFlow(ends["source"], ends["target"])


def _raising(method: str, error: BaseException) -> Any:
    def wrap(inner: Any) -> RaisingPort:
        port = RaisingPort(inner, method, error)
        port.armed = True
        return port

    return wrap


def test_a_file_that_cannot_be_read_fails_the_copy_and_the_flow_rests(tmp_path: Path) -> None:
    source = _populated(tmp_path / "source")
    flow = _flow(
        source, tmp_path / "target", source_files=_raising("read", StorageError("disk gone"))
    )
    with pytest.raises(StorageError, match="disk gone"):
        flow.perform("migrate")
    assert flow.state == "idle"
    assert _files(tmp_path / "target") == {}  # failed on the first file: nothing copied


def test_a_space_that_cannot_be_imported_fails_the_copy_and_is_not_in_the_target(
    tmp_path: Path,
) -> None:
    source = _populated(tmp_path / "source")
    flow = _flow(
        source,
        tmp_path / "target",
        target_store=_raising("import_rows", StorageError("store refused")),
    )
    with pytest.raises(StorageError, match="store refused"):
        flow.perform("migrate")
    assert flow.state == "idle"
    assert _rows(tmp_path / "target") == {}
    assert set(_copied(tmp_path / "target")) == set(_copied(source))  # files came first


def test_a_store_without_the_row_capability_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    source = _populated(tmp_path / "source")
    flow = _flow(
        source, tmp_path / "target", target_store=lambda _: MemoryLongTermStore(FakeClock())
    )
    with pytest.raises(InvalidInput, match="row by row"):
        flow.perform("migrate")
    assert flow.state == "idle" and _files(tmp_path / "target") == {}


@pytest.mark.parametrize("when", ["files", "spaces", "verify"])
def test_an_exception_in_any_step_leaves_the_flow_at_rest_and_whole_files(
    tmp_path: Path, when: str
) -> None:
    """INV-MIG-3 on examples: a KeyboardInterrupt (a progress callback's) in each step."""
    source = _populated(tmp_path / "source")
    flow = _flow(source, tmp_path / "target")

    def interrupt(what: str, done: int, total: int) -> None:
        if what == when:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        flow.perform("migrate", batch=2, progress=interrupt)
    assert flow.state == "idle"
    originals = _copied(source)
    for path, digest in _copied(tmp_path / "target").items():
        assert originals[path] == digest  # whole: renamed into place only when complete
    assert not [p for p in _files(tmp_path / "target") if p.endswith(".tmp")]
    again = migrate(source, tmp_path / "fresh")
    assert _copied(tmp_path / "fresh") == originals and again.files == len(originals)


def test_an_exception_while_planning_leaves_the_flow_at_rest_and_writes_nothing(
    tmp_path: Path,
) -> None:
    source = _populated(tmp_path / "source")
    flow = _flow(source, tmp_path / "target", source_files=_raising("walk", KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        flow.perform("migrate")
    assert flow.state == "idle" and _files(tmp_path / "target") == {}
    flow.perform("migrate")  # the same flow works next time
    assert _copied(tmp_path / "target") == _copied(source)


def test_a_source_changed_during_the_migration_fails_verification(tmp_path: Path) -> None:
    source = _populated(tmp_path / "source")

    def change_the_source(what: str, done: int, total: int) -> None:
        if what == "spaces":
            (source / "runtime" / "MEMORY.md").write_text("changed meanwhile\n")

    with pytest.raises(MigrationMismatch, match=r"runtime/MEMORY\.md differs in source"):
        _flow(source, tmp_path / "target").perform("migrate", progress=change_the_source)


def test_bad_arguments_are_refused_before_anything_is_read(tmp_path: Path) -> None:
    source = _populated(tmp_path / "source")
    for bad in (0, -1, 10_001, True, "64"):
        with pytest.raises(InvalidInput, match="batch"):
            migrate(source, tmp_path / "target", batch=bad)  # type: ignore[arg-type]
    assert _files(tmp_path / "target") == {}


def test_the_command_line_migrates_and_reports(url: str, tmp_path: Path) -> None:
    from tests.test_cli import error_of, run_cli

    source = _populated(tmp_path / "source")
    done = run_cli(tmp_path, "migrate", "--from", str(source), "--to", url)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["files"] == len(_copied(source)) and "Team" not in report["spaces"]
    assert "files: " in done.stderr and "verify: " in done.stderr
    again = run_cli(tmp_path, "migrate", "--from", str(source), "--to", url)
    assert again.returncode != 0 and error_of(again)["type"] == "InvalidInput"
