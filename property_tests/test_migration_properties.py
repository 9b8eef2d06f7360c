"""Properties of ``root_migration`` over generated roots: arbitrary file trees (lock files and
a crashed writer's temporary files among them) and Memory Spaces with edges and forgotten
insights, migrated between two directories, sometimes interrupted at a generated step.

Oracles, read with the file system and SQL: the source's bytes and rows before the run.
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from mnemon_sm import migrate
from mnemon_sm.adapters.real import RealFiles, SystemClock
from mnemon_sm.adapters.sqlite import EmbeddedStore
from mnemon_sm.errors import InvalidInput
from mnemon_sm.flows.migration import MigrationEnd, MigrationFlow, copied_paths
from mnemon_sm.testing.memory import FakeClock

DIRS = ("", "runtime", "documents/archived", "state/lifecycle", "data")
NAMES = ("MEMORY.md", "memories.json", "a.md", "b.json", ".x.lock", ".y.flock", ".a.md.1.2.ff.tmp")
WORDS = ("redis", "queue", "billing", "deploy", "lunch")

files_ = st.dictionaries(
    st.tuples(st.sampled_from(DIRS), st.sampled_from(NAMES)).map(
        lambda p: f"{p[0]}/{p[1]}" if p[0] else p[1]
    ),
    st.binary(max_size=64),
    max_size=8,
)
insights_ = st.lists(
    st.tuples(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3), st.booleans()),
    max_size=5,
)
spaces_ = st.dictionaries(st.sampled_from(("alpha", "beta")), insights_, max_size=2)


def _build(root: Path, files: dict[str, bytes], spaces: dict[str, Any]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for path, data in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    store = EmbeddedStore(root, FakeClock())
    try:
        for space, items in spaces.items():
            store.create_space(space)
            for words, forget in items:
                made = store.remember(space, " ".join(words), entities=(words[0],))
                if forget and made.action == "added":
                    store.forget(space, made.id)
    finally:
        store.close()


def _state(root: Path) -> tuple[dict[str, str], dict[str, Any]]:
    """Every file's SHA-256 and every space's rows, read without the library."""
    files = {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }
    rows = {}
    for db in sorted(root.glob("data/*/mnemon.db")):
        with sqlite3.connect(f"file:{db}?immutable=1", uri=True) as conn:
            rows[db.parent.name] = [
                conn.execute(f"SELECT rowid, * FROM {t} ORDER BY rowid").fetchall()
                for t in ("insights", "edges", "oplog")
            ]
    return files, rows


def _copied(files: dict[str, str]) -> dict[str, str]:
    return {p: files[p] for p in copied_paths(tuple(files))}


@given(files=files_, spaces=spaces_)
def test_a_migration_copies_every_file_and_row_and_reads_its_source_only(
    files: dict[str, bytes], spaces: dict[str, Any]
) -> None:
    """INV-MIG-1, INV-MIG-2"""
    base = Path(tempfile.mkdtemp(prefix="migrate-prop-"))
    try:
        _build(base / "source", files, spaces)
        before = _state(base / "source")
        report = migrate(base / "source", base / "target", batch=3)
        assert _state(base / "source") == before, "INV-MIG-1"
        after_files, after_rows = _state(base / "target")
        assert _copied(after_files) == _copied(before[0]), "INV-MIG-2"
        assert after_rows == before[1], "INV-MIG-2"
        assert report.files == len(_copied(before[0])) and set(report.spaces) == set(spaces)
        with_a_file = base / "occupied"
        with_a_file.mkdir()
        (with_a_file / "x").write_bytes(b"x")
        try:
            migrate(base / "source", with_a_file)
            raise AssertionError("a target that is not empty was written")
        except InvalidInput:
            pass
        assert _state(with_a_file)[0] == {"x": hashlib.sha256(b"x").hexdigest()}, "INV-MIG-1"
    finally:
        shutil.rmtree(base, ignore_errors=True)


@given(files=files_, spaces=spaces_, stop=st.integers(min_value=1, max_value=12))
def test_an_interrupted_migration_rests_leaves_whole_files_and_can_start_again(
    files: dict[str, bytes], spaces: dict[str, Any], stop: int
) -> None:
    """INV-MIG-3: a BaseException at the ``stop``-th progress report (any step)."""
    base = Path(tempfile.mkdtemp(prefix="migrate-prop-"))
    try:
        source = base / "source"
        _build(source, files, spaces)
        before = _state(source)
        calls = []

        def interrupt(what: str, done: int, total: int) -> None:
            calls.append(what)
            if len(calls) == stop:
                raise KeyboardInterrupt

        target = base / "target"
        target.mkdir()
        flow = MigrationFlow(
            MigrationEnd(
                RealFiles(source), EmbeddedStore(source, SystemClock(), readonly=True), "s"
            ),
            MigrationEnd(RealFiles(target), EmbeddedStore(target, FakeClock()), "t"),
        )
        try:
            flow.perform("migrate", batch=2, progress=interrupt)
            interrupted = False
        except KeyboardInterrupt:
            interrupted = True
        assert flow.state == "idle", "INV-MIG-3"
        assert _state(source) == before, "INV-MIG-1"
        written, _ = _state(target)
        originals = _copied(before[0])
        for path, digest in written.items():
            if not path.startswith("data/") or path.count("/") == 1:
                assert originals.get(path) == digest, "INV-MIG-3"  # whole, no temporaries
        if not interrupted:
            assert _copied(written) == originals
        migrate(source, base / "again")
        assert _copied(_state(base / "again")[0]) == originals
    finally:
        shutil.rmtree(base, ignore_errors=True)
