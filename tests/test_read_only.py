"""Read-only roots (``writeEnabled = false``) change no byte under the root.

Opening a root and every read (hot memory and its context text, documents, Memory Spaces)
must create no lock file, directory or temporary file and modify nothing, even where a
writable root would repair something (stale temporary files, a hand-edited projection, a
document crash window, an unregistered store, a missing side index). Checked two ways: by a
full listing of the root (every path, directories and lock files included, with each file's
SHA-256 and mode) taken before and after, and on a real read-only mount, where any write the
library attempted would fail.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from mnemon_sm import Config, MemoryRoot
from mnemon_sm.adapters.sqlite import EmbeddedStore
from mnemon_sm.adapters.sqlite.handles import Handle
from mnemon_sm.errors import CorruptStore, ReadOnly
from mnemon_sm.testing.memory import FakeClock
from mnemon_sm.testing.snapshot import root_state

READ_ONLY = Config(write_enabled=False)
FACTS = [
    "The staging database is Postgres 16 on the db-stage host",
    "Release builds are signed with the team key in the vault",
    "The nightly backup job runs at 02:00 UTC",
]


def listing(root: Path) -> dict[str, tuple[object, ...]]:
    """Every path under ``root`` (the root itself included): its kind and mode, and a file's
    SHA-256 and mtime and a symlink's target; lock and WAL files are not left out, and a
    SQLite shared-memory file (``-shm``) is listed without its content, which every reader
    of a database in WAL mode updates (it is memory shared by the processes, not data)."""
    out: dict[str, tuple[object, ...]] = {}
    for directory, dirs, files in os.walk(root):
        for name in [".", *dirs, *files]:
            path = os.path.join(directory, name)
            st = os.lstat(path)
            key = os.path.normpath(os.path.relpath(path, root))
            if name.endswith("-shm"):  # SQLite's shared memory: readers mark what they read
                out[key] = ("shm", stat.S_IMODE(st.st_mode))
            elif stat.S_ISREG(st.st_mode):
                with open(path, "rb") as handle:
                    digest = hashlib.sha256(handle.read()).hexdigest()
                out[key] = ("file", stat.S_IMODE(st.st_mode), digest, st.st_mtime_ns)
            elif stat.S_ISLNK(st.st_mode):
                out[key] = ("link", os.readlink(path))
            else:
                out[key] = ("dir", stat.S_IMODE(st.st_mode))
    return out


def populate(root: Path) -> tuple[MemoryRoot, dict[str, str]]:
    """A root with hot memory, two documents (one archived), three Memory Spaces with
    memories; then the debris a writable opener would repair. Returns the writer, still
    open (its store connections keep their WAL files), and ids to read."""
    writer = MemoryRoot.open(root)
    writer.hot.add("user", "User prefers concise replies", importance="critical")
    writer.hot.add("memory", "Deploys run through the release pipeline")
    kept = writer.documents.create("Deploy runbook", "How to deploy: run the pipeline.")
    gone = writer.documents.create("Old notes", "Superseded deployment notes.")
    writer.documents.archive(gone.document.id)
    writer.long_term.create_space("Project", "Project facts", active=True)
    ids = writer.long_term.remember_many(FACTS, space="default").ids
    writer.long_term.create_space("Other", "Another space", active=True)
    runtime = root / "runtime"
    (runtime / ".memories.json.1.2.a.tmp").write_bytes(b"a crashed writer's temp file")
    (runtime / "MEMORY.md").write_bytes(b"hand-edited projection\n")
    (root / "documents" / "active" / ".index.json.1.2.a.tmp").write_bytes(b"temp")
    (root / "state").mkdir(exist_ok=True)
    (root / "state" / ".maintenance-journal.json.1.2.a.tmp").write_bytes(b"temp")
    stray = root / "data" / "stray"  # a store on disk the catalog does not name yet
    stray.mkdir()
    shutil.copyfile(root / "data" / "default" / "mnemon.db", stray / "mnemon.db")
    for suffix in ("", "-wal", "-shm"):  # our index, rebuildable
        (root / "data" / "default" / f"mnemon-sm-index.db{suffix}").unlink(missing_ok=True)
    return writer, {"document": kept.document.id, "insight": ids[0]}


def settle(root: Path) -> None:
    """Bring every database to the state no connection leaves a WAL in (a root whose writers
    all closed): what SQLite's last connection does, checkpoint and delete the WAL."""
    gc.collect()  # the writer's connections
    for db in root.rglob("*.db"):
        with contextlib.closing(sqlite3.connect(db)) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert not [p for p in root.rglob("*") if p.name.endswith(("-wal", "-shm"))]


def read_everything(root: Path, ids: dict[str, str]) -> None:
    """Every read a host makes, on a root opened read-only; checks the answers are right."""
    with MemoryRoot.open(root, READ_ONLY) as opened:
        entries = opened.hot.snapshot().entries
        assert [e.content for e in entries] == [
            "User prefers concise replies",
            "Deploys run through the release pipeline",
        ]
        text = opened.context.runtime_memory()
        assert "Deploys run through the release pipeline" in text
        assert "hand-edited" not in text
        opened.context.routing_guidance()
        opened.hot.history()
        assert len(opened.documents.records()) == 2
        _, body = opened.documents.get(ids["document"])
        assert body == "How to deploy: run the pipeline."
        hits = opened.documents.search("deploy", include_archived=True)
        assert {h.document.title for h in hits} == {"Deploy runbook", "Old notes"}
        assert {s.id for s in opened.long_term.spaces()} >= {"default", "stray"}
        opened.long_term.status("default")
        found = opened.long_term.search("Postgres staging database", spaces=["default"])
        assert any("Postgres 16" in h.insight.content for h in found.hits)
        opened.long_term.search("nightly backup")
        opened.long_term.recall("When does the backup run?")
        opened.long_term.related(ids["insight"], space="default")
        with pytest.raises(ReadOnly):
            opened.hot.add("user", "refused")


def rows(root: Path, scratch: Path) -> dict[str, object]:
    """``root_state`` of a copy of ``root`` (SQLite creates files beside a database it reads,
    so the root itself is only listed)."""
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(root, scratch, symlinks=True)
    return root_state(scratch)


@pytest.mark.parametrize("writers", ["closed", "open"])
def test_reads_of_a_read_only_root_change_nothing(tmp_path: Path, writers: str) -> None:
    """``closed``: no WAL files (read as immutable snapshots); ``open``: the WAL files of the
    populating root's connections are there (read through the WAL)."""
    root = tmp_path / "root"
    writer, ids = populate(root)
    if writers == "closed":
        writer.close()
        del writer
        settle(root)
        reads_change_nothing(root, ids, tmp_path / "copy")
    else:
        # The writer stays open while the root is read (closing it closes its store).
        assert (root / "data" / "default" / "mnemon.db-wal").exists()
        reads_change_nothing(root, ids, tmp_path / "copy")
        writer.close()


def reads_change_nothing(root: Path, ids: dict[str, str], scratch: Path) -> None:
    before, state = listing(root), rows(root, scratch)
    read_everything(root, ids)
    read_everything(root, ids)  # a second opening finds nothing of the first
    assert listing(root) == before
    assert rows(root, scratch) == state


def test_opening_a_missing_root_read_only_creates_nothing(tmp_path: Path) -> None:
    root = tmp_path / "nowhere"
    with MemoryRoot.open(root, READ_ONLY) as opened:
        assert opened.hot.snapshot().entries == ()
        opened.context.runtime_memory()
        assert opened.documents.records() == ()
        assert opened.documents.search("anything") == []
        opened.long_term.spaces()
    assert not root.exists()


def test_a_read_only_root_sees_what_writers_commit_later(tmp_path: Path) -> None:
    """An immutable snapshot (no writer had the file open) is dropped when a writer comes."""
    root = tmp_path / "root"
    writer, _ = populate(root)
    writer.close()
    del writer
    settle(root)
    with MemoryRoot.open(root, READ_ONLY) as reader:
        assert not reader.long_term.search("kiwi orchard", spaces=["default"]).hits
        writer = MemoryRoot.open(root)
        writer.long_term.remember_many(["The kiwi orchard is watered at dawn"], space="default")
        assert reader.long_term.search("kiwi orchard", spaces=["default"]).hits
        writer.long_term.remember_many(["The mango grove is pruned in May"], space="default")
        assert reader.long_term.search("mango grove", spaces=["default"]).hits
        writer.close()


def test_a_read_under_which_the_file_changed_is_read_again(tmp_path: Path) -> None:
    """A writer that commits while an immutable read runs (it takes no lock) makes that read
    start over on the file as it is now."""
    writer, _ = populate(tmp_path)
    writer.close()
    del writer
    settle(tmp_path)
    store = EmbeddedStore(tmp_path, FakeClock(), readonly=True)
    seen: list[int] = []

    def count(handle: Handle) -> int:
        found = int(handle.conn.execute("SELECT count(*) FROM main.insights").fetchone()[0])
        if not seen:
            with EmbeddedStore(tmp_path, FakeClock()) as other:
                other.remember("default", "Committed while the read ran")
        seen.append(found)
        return found

    assert store._read("default", "count", count, index=False) == seen[0] + 1
    assert seen == [seen[0], seen[0] + 1]
    store.close()


def test_a_store_without_mnemons_core_columns_is_corrupt_read_only_too(tmp_path: Path) -> None:
    path = tmp_path / "data" / "default" / "mnemon.db"
    path.parent.mkdir(parents=True)
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE insights (id TEXT PRIMARY KEY, content TEXT)")
        db.commit()
    before = listing(tmp_path)
    store = EmbeddedStore(tmp_path, FakeClock(), readonly=True)
    with pytest.raises(CorruptStore, match="not a Mnemon store"):
        store.status("default")
    assert listing(tmp_path) == before


# -- a real read-only file system ---------------------------------------------------------

# Inside a private mount namespace: bind the root read-only onto MOUNT, run the reads there.
_MOUNT = 'mount --bind "$1" "$2" && mount -o remount,bind,ro "$2" && exec "$3" -c "$4" "$2" "$5"'
_READER = """
import errno, json, sys
from pathlib import Path
from mnemon_sm import MemoryRoot
from mnemon_sm.errors import StorageError
from tests.test_read_only import listing, read_everything
root = Path(sys.argv[1])
try:
    (root / "runtime" / "probe").write_bytes(b"")
except OSError as exc:
    assert exc.errno == errno.EROFS, exc
else:
    raise AssertionError("the file system is writable")
try:
    MemoryRoot.open(root).hot.add("user", "refused by the file system")
except StorageError:
    pass
else:
    raise AssertionError("a writable root could write")
before = listing(root)
read_everything(root, json.loads(sys.argv[2]))
assert listing(root) == before
print("read")
"""
REPO = Path(__file__).resolve().parents[1]


def _run_read_only(
    root: Path, ids: dict[str, str], mount: Path
) -> subprocess.CompletedProcess[str]:
    """Run :data:`_READER` on ``root`` made read-only by the operating system: a read-only
    bind mount in a private mount namespace (as root, or in a user namespace); failing that,
    a tree without write permission (which binds every user but root)."""
    mount.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = [str(root), str(mount), sys.executable, _READER, json.dumps(ids)]
    for unshare in (["unshare", "-m"], ["unshare", "-Urm"]):
        if shutil.which(unshare[0]) is None:
            break
        probe = subprocess.run([*unshare, "sh", "-c", _MOUNT, "sh", *args[:2], "true", "", ""],
                               capture_output=True, text=True)  # fmt: skip
        if probe.returncode == 0:
            command = [*unshare, "sh", "-c", _MOUNT, "sh", *args]
            return subprocess.run(command, capture_output=True, text=True, env=env)
    assert os.geteuid() != 0, "no read-only file system can be made here"
    for path in [root, *root.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)
    try:
        command = [sys.executable, "-c", _READER, str(root), json.dumps(ids)]
        return subprocess.run(command, capture_output=True, text=True, env=env)
    finally:
        for path in [root, *root.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)


@pytest.mark.parametrize("writers", ["closed", "open"])
def test_reads_work_on_a_read_only_file_system(tmp_path: Path, writers: str) -> None:
    root = tmp_path / "root"
    writer, ids = populate(root)
    writer.close()
    if writers == "closed":
        del writer
        settle(root)
    proc = _run_read_only(root, ids, tmp_path / "mount")
    assert proc.returncode == 0 and proc.stdout == "read\n", proc.stderr
