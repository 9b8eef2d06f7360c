"""Long-term storage on the real file system: no symlink is ever followed, and drafts of crashed
space creations are cleaned up.

A symlink in place of ``data/``, ``data/<space>/``, ``mnemon.db``, a file SQLite opens beside
it or the catalog is refused with a typed error naming the path, and the link's target keeps
every byte (no file changed, none added). Stores behind a link are not registered. A swap of a
component between the check and SQLite's own open is caught by the checks after the open.
Stale ``.mnemon.db.<pid>.<thread>.new`` drafts are removed when a space is opened or created,
never one whose writer is alive and recent. The checks around the open close no descriptor of
a store file while a connection of the process may hold SQLite's locks on it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mnemon_sm import Config, MemoryRoot
from mnemon_sm.adapters.real import real_ports
from mnemon_sm.adapters.sqlite import EmbeddedStore, drafts, schema, sideindex
from mnemon_sm.errors import CorruptStore, StorageError, WorkerFailed
from mnemon_sm.flows.long_term.catalog import CATALOG_PATH, Catalog
from mnemon_sm.testing.memory import FakeClock

EMBEDDED = Config(long_term_store="embedded")
Tree = dict[str, bytes]


def tree(directory: Path) -> Tree:
    """Every file below ``directory`` (links not followed) by its bytes; a link by its target."""
    out: Tree = {}
    for base, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = Path(base) / name
            key = str(path.relative_to(directory))
            if path.is_symlink():
                out[key] = b"-> " + os.readlink(path).encode()
            elif path.is_file():
                out[key] = path.read_bytes()
    return out


def closed_store(root: Path, *spaces: str) -> None:
    """A root whose ``spaces`` each hold one memory, closed (checkpointed, no WAL left)."""
    store = EmbeddedStore(root, FakeClock())
    for space in spaces:
        store.create_space(space)
        store.remember(space, f"a memory of {space}")
    store.close()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A root elsewhere holding a store ``victim``: the target every link points into."""
    closed_store(tmp_path / "outside", "victim")
    return tmp_path / "outside"


def operations(store: EmbeddedStore, space: str) -> dict[str, Callable[[], object]]:
    return {
        "remember": lambda: store.remember(space, "written through a link"),
        "recall": lambda: store.recall(space, "memory"),
        "status": lambda: store.status(space),
        "rebuild": lambda: store.rebuild_index(space),
    }


def refused_everywhere(store: EmbeddedStore, space: str, path: str) -> None:
    for name, call in operations(store, space).items():
        with pytest.raises(CorruptStore, match="symbolic link") as caught:
            call()
        assert caught.value.path == path, name


# -- a symlinked store file or directory ------------------------------------------------------


def test_a_symlinked_mnemon_db_is_refused_and_its_target_untouched(
    tmp_path: Path, outside: Path
) -> None:
    root = tmp_path / "root"
    closed_store(root, "default")
    (root / "data" / "linked").mkdir()
    (root / "data" / "linked" / "mnemon.db").symlink_to(outside / "data" / "victim" / "mnemon.db")
    before = tree(outside)
    store = EmbeddedStore(root, FakeClock())
    refused_everywhere(store, "linked", "data/linked/mnemon.db")
    with pytest.raises(CorruptStore, match="symbolic link"):
        store.delete_space("linked")
    assert store.spaces() == ("default",)  # listed only as a real file
    store.close()
    assert tree(outside) == before


def test_a_symlinked_space_directory_is_refused_and_its_target_untouched(
    tmp_path: Path, outside: Path
) -> None:
    root = tmp_path / "root"
    closed_store(root, "default")
    (root / "data" / "linked").symlink_to(outside / "data" / "victim", target_is_directory=True)
    before = tree(outside)
    store = EmbeddedStore(root, FakeClock())
    refused_everywhere(store, "linked", "data/linked")
    with pytest.raises(CorruptStore, match="symbolic link"):
        store.delete_space("linked")
    with pytest.raises(CorruptStore, match="symbolic link"):
        store.create_space("linked")
    assert store.spaces() == ("default",)
    store.close()
    assert tree(outside) == before


def test_a_symlinked_data_directory_is_refused_and_its_target_untouched(
    tmp_path: Path, outside: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "data").symlink_to(outside / "data", target_is_directory=True)
    before = tree(outside)
    store = EmbeddedStore(root, FakeClock())
    for call in (
        store.spaces,
        lambda: store.create_space("fresh"),
        lambda: store.delete_space("victim"),
        *operations(store, "victim").values(),
    ):
        with pytest.raises(CorruptStore, match="symbolic link") as caught:
            call()
        assert caught.value.path == "data"
    store.close()
    assert tree(outside) == before


@pytest.mark.parametrize(
    "name",
    [
        "mnemon.db-wal",
        "mnemon.db-shm",
        "mnemon-sm-index.db",
        "mnemon-sm-index.db-wal",
        "mnemon-sm-index.db-shm",
    ],
)
def test_a_symlinked_file_beside_the_store_is_refused_and_its_target_untouched(
    tmp_path: Path, name: str
) -> None:
    root = tmp_path / "root"
    closed_store(root, "default")
    target = tmp_path / "precious"
    target.write_bytes(b"not SQLite's to write")
    side = root / "data" / "default" / name
    side.unlink(missing_ok=True)
    side.symlink_to(target)
    store = EmbeddedStore(root, FakeClock())
    refused_everywhere(store, "default", f"data/default/{name}")
    store.close()
    assert target.read_bytes() == b"not SQLite's to write"
    assert side.is_symlink()


def test_a_dangling_side_file_link_creates_nothing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    closed_store(root, "default")
    wal = root / "data" / "default" / "mnemon.db-wal"
    wal.unlink(missing_ok=True)
    wal.symlink_to(tmp_path / "created-by-sqlite")
    store = EmbeddedStore(root, FakeClock())
    refused_everywhere(store, "default", "data/default/mnemon.db-wal")
    assert not (tmp_path / "created-by-sqlite").exists()


def test_a_link_appearing_after_the_open_is_refused_by_the_next_operation(
    tmp_path: Path,
) -> None:
    """The space directory moves out of the root and a link to it takes its place: the same
    file, but now reached through a link, so the next operation refuses it."""
    root = tmp_path / "root"
    closed_store(root, "default")
    store = EmbeddedStore(root, FakeClock())
    store.remember("default", "opened once")
    store.close()  # checkpointed: every row in mnemon.db
    store.status("default")
    moved = tmp_path / "moved"
    (root / "data" / "default").rename(moved)
    (root / "data" / "default").symlink_to(moved, target_is_directory=True)
    before = tree(moved)
    refused_everywhere(store, "default", "data/default")
    assert tree(moved) == before


# -- registration ----------------------------------------------------------------------------


def test_stores_behind_links_are_never_registered(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "root"
    closed_store(root, "default")
    data = root / "data"
    (data / "dir-link").symlink_to(outside / "data" / "victim", target_is_directory=True)
    (data / "file-link").mkdir()
    (data / "file-link" / "mnemon.db").symlink_to(outside / "data" / "victim" / "mnemon.db")
    before = tree(outside)
    with MemoryRoot.open(root, EMBEDDED) as opened:
        assert [s.id for s in opened.long_term.spaces()] == ["default"]
        assert opened.long_term.search("memory").hits  # the real space still answers
    assert "link" not in (data / ".dsh-memory-bodies.json").read_text()
    assert tree(outside) == before


def test_a_root_with_a_symlinked_data_directory_refuses_long_term_work(
    tmp_path: Path, outside: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "data").symlink_to(outside / "data", target_is_directory=True)
    before = tree(outside)
    with MemoryRoot.open(root, EMBEDDED) as opened:
        with pytest.raises(StorageError):
            opened.long_term.spaces()
        with pytest.raises(WorkerFailed, match="data is a symbolic link"):
            opened.long_term.remember("the first memory of this root")  # the worker's tool
        with pytest.raises(StorageError):
            opened.long_term.create_space("Billing", "Invoices and tax rules")
    assert tree(outside) == before


def test_a_symlinked_catalog_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    root = tmp_path / "root"
    closed_store(root, "default")
    target = tmp_path / "their-catalog.json"
    target.write_bytes(b'{"version": 1, "bodies": []}\n')
    (root / CATALOG_PATH).symlink_to(target)
    ports = real_ports(root)
    store = EmbeddedStore(root, ports.clock)
    catalog = Catalog(ports.files, ports.locks, ports.clock, store)
    for call in (
        catalog.list,
        lambda: catalog.create("Billing", "Invoices and tax rules"),
        lambda: catalog.update("default", active=False),
    ):
        with pytest.raises(StorageError, match="symbolic link"):
            call()
    assert target.read_bytes() == b'{"version": 1, "bodies": []}\n'
    assert (root / CATALOG_PATH).is_symlink()
    assert store.spaces() == ("default",)  # nothing created meanwhile


# -- a swap between the check and SQLite's open ------------------------------------------------


@pytest.fixture
def swapping(tmp_path: Path, outside: Path) -> Callable[[str, bool], None]:
    """``swap(what, back)``: just before SQLite opens ``data/default/mnemon.db`` by name,
    replace ``what`` ("dir" or "db") with a link into ``outside``; with ``back``, restore the
    original right after SQLite opened the link's target."""
    root = tmp_path / "root"
    closed_store(root, "default")
    folder = root / "data" / "default"
    real_open = schema.open_connection
    plan: dict[str, object] = {}

    def swap_in() -> Callable[[], None]:
        if plan["what"] == "dir":
            folder.rename(tmp_path / "parked")
            folder.symlink_to(outside / "data" / "victim", target_is_directory=True)

            def restore() -> None:
                folder.unlink()
                (tmp_path / "parked").rename(folder)

            return restore
        db = folder / "mnemon.db"
        db.rename(tmp_path / "parked.db")
        db.symlink_to(outside / "data" / "victim" / "mnemon.db")

        def restore_db() -> None:
            db.unlink()
            (tmp_path / "parked.db").rename(db)

        return restore_db

    def opening(path: str, mode: str = "mode=rw") -> object:
        restore = swap_in()
        try:
            return real_open(path, mode)
        finally:
            if plan["back"]:
                restore()

    def swap(what: str, back: bool) -> None:
        plan.update(what=what, back=back)
        before = tree(outside)
        store = EmbeddedStore(root, FakeClock())
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(schema, "open_connection", opening)
            with pytest.raises(CorruptStore) as caught:
                store.remember("default", "must not land in the victim")
        assert caught.value.path == "data/default/mnemon.db"
        store.close()
        assert tree(outside) == before

    return swap


@pytest.mark.parametrize("what", ["dir", "db"])
@pytest.mark.parametrize("back", [False, True], ids=["swapped", "swapped and restored"])
def test_a_swap_to_a_link_while_sqlite_opens_is_caught(
    swapping: Callable[[str, bool], None], what: str, back: bool
) -> None:
    swapping(what, back)


def test_a_side_index_link_appearing_just_before_attach_is_not_followed(
    tmp_path: Path, outside: Path
) -> None:
    """The index is swapped for a link to another store between its check (an existing one
    is lstat'ed, not opened) and SQLite's ATTACH: refused before SQLite reads or writes the
    link's target."""
    root = tmp_path / "root"
    closed_store(root, "default")
    index = root / "data" / "default" / "mnemon-sm-index.db"
    victim = outside / "data" / "victim" / "mnemon.db"
    real_lstat = os.lstat

    class Swapping:
        def __getattr__(self, name: str) -> object:
            return getattr(os, name)

        @staticmethod
        def lstat(path: str) -> os.stat_result:
            found = real_lstat(path)
            if not index.is_symlink():
                index.unlink()
                index.symlink_to(victim)
            return found

    before = tree(outside)
    store = EmbeddedStore(root, FakeClock())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sideindex, "os", Swapping())
        with pytest.raises(CorruptStore, match="symbolic link") as caught:
            store.status("default")
    assert caught.value.path == "data/default/mnemon-sm-index.db"
    assert tree(outside) == before


def test_a_dangling_index_link_appearing_while_the_store_opens_creates_nothing(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    closed_store(root, "default")
    index = root / "data" / "default" / "mnemon-sm-index.db"
    real_configure = schema.configure

    def configure(conn: object, durability: str = "full") -> None:
        index.unlink()
        index.symlink_to(tmp_path / "made-by-attach")
        real_configure(conn, durability)  # type: ignore[arg-type]

    store = EmbeddedStore(root, FakeClock())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(schema, "configure", configure)
        with pytest.raises(StorageError):
            store.status("default")
    assert not (tmp_path / "made-by-attach").exists()


def test_a_store_file_replaced_while_sqlite_opens_is_caught(tmp_path: Path) -> None:
    root = tmp_path / "root"
    closed_store(root, "default", "other")
    db = root / "data" / "default" / "mnemon.db"
    real_open = schema.open_connection

    def opening(path: str, mode: str = "mode=rw") -> object:
        os.replace(root / "data" / "other" / "mnemon.db", db)  # a regular file, not a link
        return real_open(path, mode)

    store = EmbeddedStore(root, FakeClock())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(schema, "open_connection", opening)
        with pytest.raises(CorruptStore, match="replaced while it was being opened"):
            store.status("default")


def test_a_creation_that_cannot_open_its_new_store_removes_nothing_through_a_link(
    tmp_path: Path, outside: Path
) -> None:
    """The new space's directory is swapped for a link while the new store is opened: the
    clean-up of the failed creation must not delete the link target's store."""
    root = tmp_path / "root"
    closed_store(root, "default")
    folder = root / "data" / "fresh"
    real_open = schema.open_connection

    def opening(path: str, mode: str = "mode=rw") -> object:
        folder.rename(tmp_path / "parked")
        folder.symlink_to(outside / "data" / "victim", target_is_directory=True)
        return real_open(path, mode)

    before = tree(outside)
    store = EmbeddedStore(root, FakeClock())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(schema, "open_connection", opening)
        with pytest.raises(CorruptStore, match="symbolic link"):
            store.create_space("fresh")
    assert tree(outside) == before


# -- the pinned open keeps SQLite's locks -----------------------------------------------------

OTHER_PROCESS = """
import sys
from pathlib import Path
from mnemon_sm.adapters.sqlite import EmbeddedStore
from mnemon_sm.testing.memory import FakeClock

with EmbeddedStore(Path(sys.argv[1]), FakeClock()) as store:
    if sys.argv[2] == "remember":
        store.remember("default", "a memory of the other process")
    else:
        print("\\n".join(sorted(i.content for i in store.list("default"))))
"""


def other_process(root: Path, action: str) -> list[str]:
    """Open ``root``'s store in another process, ``remember`` or ``list`` there, close it."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-c", OTHER_PROCESS, str(root), action], env=env,
                          check=True, capture_output=True, text=True)  # fmt: skip
    return done.stdout.splitlines()


def test_another_process_closing_never_takes_an_open_store_for_unused(tmp_path: Path) -> None:
    """Closing any descriptor of a file drops every POSIX lock the process holds on it,
    SQLite's included. While a store is open here, through two store objects (the second
    opened and closed again), another process that closes the same store must still see it
    in use: it leaves both WAL files in place, and what this process commits afterwards is
    what every process reads (before, the other process deleted the WALs under this one, and
    its later commits were lost to every other reader)."""
    closed_store(tmp_path, "default")
    folder = tmp_path / "data" / "default"
    store = EmbeddedStore(tmp_path, FakeClock())
    store.remember("default", "a memory of this process")
    second = EmbeddedStore(tmp_path, FakeClock())  # its open and close keep the first's locks
    assert len(second.list("default")) == 2
    second.close()
    other_process(tmp_path, "remember")
    assert {"mnemon.db-wal", "mnemon-sm-index.db-wal"} <= set(os.listdir(folder))
    store.remember("default", "a later memory of this process")
    assert other_process(tmp_path, "list") == [
        "a later memory of this process",
        "a memory of default",
        "a memory of the other process",
        "a memory of this process",
    ]
    store.close()


# -- stale drafts ----------------------------------------------------------------------------


def dead_pid() -> int:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                           capture_output=True, text=True)  # fmt: skip
    return int(child.stdout)


def dead_thread_id() -> int:
    ident: list[int] = []
    thread = threading.Thread(target=lambda: ident.append(threading.get_ident()))
    thread.start()
    thread.join()
    return ident[0]


def plant(folder: Path, pid: int, thread: int, *, age_s: int = 0) -> list[Path]:
    made = []
    for suffix in ("", "-journal"):
        path = folder / f".mnemon.db.{pid}.{thread}.new{suffix}"
        path.write_bytes(b"half a schema")
        if age_s:
            old = path.stat().st_mtime - age_s
            os.utime(path, (old, old))
        made.append(path)
    return made


@pytest.fixture
def live_process() -> Iterator[int]:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)  # fmt: skip
    try:
        yield child.pid
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait()


def test_drafts_of_gone_writers_are_removed_when_a_space_opens(
    tmp_path: Path, live_process: int
) -> None:
    closed_store(tmp_path, "default")
    folder = tmp_path / "data" / "default"
    gone = plant(folder, dead_pid(), 1) + plant(folder, os.getpid(), dead_thread_id())
    too_old = plant(folder, live_process, 7, age_s=drafts.STALE_AFTER_S + 60)
    young = plant(folder, live_process, 8, age_s=drafts.STALE_AFTER_S - 60)
    mine = plant(folder, os.getpid(), threading.get_ident())
    store = EmbeddedStore(tmp_path, FakeClock())
    store.status("default")
    assert not any(p.exists() for p in gone + too_old)
    assert all(p.exists() for p in young + mine)  # writers alive and recent: kept
    store.close()


def test_drafts_of_gone_writers_are_removed_when_their_space_is_created(tmp_path: Path) -> None:
    folder = tmp_path / "data" / "default"
    folder.mkdir(parents=True)
    gone = plant(folder, dead_pid(), 3)
    store = EmbeddedStore(tmp_path, FakeClock())
    store.create_space("default")
    assert not any(p.exists() for p in gone)
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith(".")) == []
    store.close()


def test_a_space_directory_without_a_store_loses_its_stale_drafts_when_listed(
    tmp_path: Path,
) -> None:
    closed_store(tmp_path, "default")
    orphan = tmp_path / "data" / "0b9c-crashed"
    orphan.mkdir()
    plant(orphan, dead_pid(), 5)
    store = EmbeddedStore(tmp_path, FakeClock())
    assert store.spaces() == ("default",)
    assert list(orphan.iterdir()) == []
    store.close()


def test_a_draft_being_written_now_is_never_removed(tmp_path: Path) -> None:
    """While this thread writes its draft, another store of the process opens and lists the
    same directories (which removes stale drafts): the creation still succeeds."""
    closed_store(tmp_path, "default")
    other = EmbeddedStore(tmp_path, FakeClock())
    real_create = schema.create
    seen: list[bool] = []

    def create(path: str, where: str) -> None:
        real_create(path, where)
        worker = threading.Thread(target=lambda: (other.spaces(), other.status("default")))
        worker.start()
        worker.join()
        seen.append(Path(path).exists())

    store = EmbeddedStore(tmp_path, FakeClock())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(schema, "create", create)
        store.create_space("fresh")
    assert seen == [True]
    assert store.status("fresh").total_insights == 0
    store.close()
    other.close()
