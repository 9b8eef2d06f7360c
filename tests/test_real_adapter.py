"""What only the real adapters promise: modes, symlinks, path rules, temp clean-up, racy
stamps and a failing rename; plus the fault injector's two effect-bearing fault kinds."""

from __future__ import annotations

import os
import shutil
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mnemon_sm import Config, MemoryRoot
from mnemon_sm.adapters import real as real_module
from mnemon_sm.adapters.real import REFERENCE_LOCKS, RealFiles, RealLocks
from mnemon_sm.errors import CorruptStore, LockTimeout, MnemonError, StorageError
from mnemon_sm.flows.documents.model import LOCK_NAME as DOCUMENTS_LOCK
from mnemon_sm.flows.hot.model import LOCK_NAME as HOT_LOCK
from mnemon_sm.ports import TEMP_NAME
from mnemon_sm.testing.faults import Fault, FaultInjector, SimulatedCrash, faulty_ports
from mnemon_sm.testing.memory import memory_ports
from mnemon_sm.testing.snapshot import root_state

LOCK = "runtime/.memories.lock"


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path, follow_symlinks=False).st_mode)


@pytest.fixture
def umask_zero() -> Iterator[None]:
    """Modes must come from the library, not from a restrictive umask."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


# -- modes -------------------------------------------------------------------------------


@pytest.mark.usefixtures("umask_zero")
def test_files_are_0600_and_runtime_is_0700(tmp_path: Path) -> None:
    root = tmp_path / "root"
    with MemoryRoot.open(root) as opened:
        opened.hot.add("user", "User prefers concise replies")
    runtime = root / "runtime"
    assert mode(runtime) == 0o700
    for name in ("memories.json", "USER.md", "MEMORY.md", ".memories.flock"):
        assert (runtime / name).is_file()
        assert mode(runtime / name) == 0o600, name


@pytest.mark.usefixtures("umask_zero")
def test_runtime_dir_recreated_by_a_mutation_is_0700(tmp_path: Path) -> None:
    """If runtime/ disappears under an open root, the next commit must not recreate it with
    looser permissions than the opener would."""
    root = tmp_path / "root"
    with MemoryRoot.open(root) as opened:
        opened.hot.add("user", "first")
        shutil.rmtree(root / "runtime")
        opened.hot.add("user", "second")
    assert (root / "runtime" / "USER.md").read_bytes() == b"second\n"
    assert mode(root / "runtime") == 0o700


# -- symlinks ----------------------------------------------------------------------------


@pytest.mark.parametrize("at", [True, False], ids=["dir_fd", "lstat"])
@pytest.mark.parametrize("depth", [1, 2])
def test_a_symlinked_directory_below_the_root_is_never_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, depth: int, at: bool
) -> None:
    """Every method, for a path whose directory (``depth`` 1) or whose directory's parent
    (``depth`` 2) is a symlink out of the root, is refused with ``StorageError`` and the
    target directory is left as it was; with ``dir_fd`` and with the ``lstat`` fallback of
    platforms without it."""
    monkeypatch.setattr(real_module, "_AT", at)
    root, outside = tmp_path / "root", tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "f").write_bytes(b"outside")
    (outside / "sub" / "f").write_bytes(b"outside")
    (root / "real").mkdir(parents=True)
    (root / "real" / "f").write_bytes(b"inside")
    (root / "link").symlink_to(outside, target_is_directory=True)
    files = RealFiles(root)
    path = "link/f" if depth == 1 else "link/sub/f"
    folder = path.rpartition("/")[0]
    before = {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()}
    calls: list[Callable[[], object]] = [
        lambda: files.read(path),
        lambda: files.read_if_changed(path, None),
        lambda: files.write_temp(path, b"x"),
        lambda: files.append(path, b"x"),
        lambda: files.fsync(path),
        lambda: files.rename("real/f", path),
        lambda: files.remove(path),
        lambda: files.list(folder),
        lambda: files.ensure_dir(f"{folder}/new"),
    ]
    for call in calls:
        with pytest.raises(StorageError, match="symbolic link"):
            call()
    assert {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in outside.rglob("*")) == sorted(["f", "sub", "f"])
    assert (root / "real" / "f").read_bytes() == b"inside"


def _outside(tmp_path: Path, data: bytes) -> Path:
    target = tmp_path / "outside" / "precious.txt"
    target.parent.mkdir()
    target.write_bytes(data)
    target.chmod(0o644)
    return target


# The reference's exclusive lock file and our flock file beside it.
LOCK_FILES = pytest.mark.parametrize("lock_name", [".memories.lock", ".memories.flock"])


@LOCK_FILES
def test_symlinked_lock_file_is_refused_on_an_open_root(tmp_path: Path, lock_name: str) -> None:
    root = tmp_path / "root"
    outside = _outside(tmp_path, b"do not truncate me")
    opened = MemoryRoot.open(root)
    opened.hot.add("user", "before the symlink")
    source = (root / "runtime" / "memories.json").read_bytes()
    lock = root / "runtime" / lock_name
    lock.unlink(missing_ok=True)
    lock.symlink_to(outside)

    with pytest.raises(StorageError):
        opened.hot.add("user", "after the symlink")

    assert outside.read_bytes() == b"do not truncate me"
    assert mode(outside) == 0o644
    assert lock.is_symlink()
    assert (root / "runtime" / "memories.json").read_bytes() == source
    opened.close()


@LOCK_FILES
def test_symlinked_lock_file_is_refused_when_opening(tmp_path: Path, lock_name: str) -> None:
    root = tmp_path / "root"
    outside = _outside(tmp_path, b"do not truncate me")
    MemoryRoot.open(root).close()
    lock = root / "runtime" / lock_name
    lock.unlink(missing_ok=True)
    lock.symlink_to(outside)

    with pytest.raises(StorageError):
        MemoryRoot.open(root)

    assert outside.read_bytes() == b"do not truncate me"
    assert mode(outside) == 0o644


@LOCK_FILES
def test_real_locks_refuse_a_symlink(tmp_path: Path, lock_name: str) -> None:
    outside = _outside(tmp_path, b"keep")
    (tmp_path / "runtime").mkdir()
    (tmp_path / "runtime" / lock_name).symlink_to(outside)
    with pytest.raises(StorageError, match="symbolic link"):
        RealLocks(tmp_path).acquire(LOCK, 100)
    assert outside.read_bytes() == b"keep"


@pytest.mark.parametrize(
    "name", ["runtime/.memories.lock", "documents/.index.lock", "state/lifecycle/.main.lock"]
)
def test_real_locks_never_follow_a_symlinked_directory(tmp_path: Path, name: str) -> None:
    """A lock's directory swapped for a symlink out of the root: refused, nothing created or
    changed in the target (the flock file, the reference's file and the aside name alike),
    also while a lock is held there."""
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    directory = (root / name).parent
    directory.parent.mkdir(parents=True, exist_ok=True)
    directory.symlink_to(outside, target_is_directory=True)
    locks = RealLocks(root)
    with pytest.raises(StorageError, match="symbolic link"):
        locks.acquire(name, 100)
    assert list(outside.iterdir()) == []
    directory.unlink()
    locks.acquire(name, 100)  # held in the real directory
    directory.rename(tmp_path / "parked")
    directory.symlink_to(outside, target_is_directory=True)  # swapped while held
    locks.release(name)
    assert list(outside.iterdir()) == []
    if name in REFERENCE_LOCKS:  # removed from the directory it was made in
        assert not (tmp_path / "parked" / Path(name).name).exists()


@pytest.mark.parametrize(
    "operation",
    [
        pytest.param(lambda r: r.hot.add("user", "new"), id="add"),
        pytest.param(lambda r: r.hot.remove("user", "first"), id="remove"),
        pytest.param(lambda r: r.hot.snapshot(), id="snapshot"),
        pytest.param(lambda r: r.context.runtime_memory(), id="context"),
    ],
)
def test_symlinked_source_is_refused(
    tmp_path: Path, operation: Callable[[MemoryRoot], object]
) -> None:
    root = tmp_path / "root"
    opened = MemoryRoot.open(root)
    opened.hot.add("user", "first")
    source = root / "runtime" / "memories.json"
    outside = _outside(tmp_path, source.read_bytes())
    original = outside.read_bytes()
    source.unlink()
    source.symlink_to(outside)

    with pytest.raises(MnemonError) as caught:
        operation(opened)
    assert isinstance(caught.value, StorageError | CorruptStore)
    with pytest.raises(MnemonError) as reopening:
        MemoryRoot.open(root).hot.add("user", "again")
    assert isinstance(reopening.value, StorageError | CorruptStore)

    assert outside.read_bytes() == original
    assert mode(outside) == 0o644
    assert source.is_symlink()
    opened.close()


# -- the reference implementation's lock files ------------------------------------------

REFERENCE_NAMES = pytest.mark.parametrize("name", sorted(REFERENCE_LOCKS))


def _reference_creates(root: Path, name: str) -> Path:
    """Take ``name`` as the reference does: create it exclusively, mode 0600."""
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    return path


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_the_reference_lock_names_are_those_of_hot_memory_and_documents() -> None:
    assert {HOT_LOCK, DOCUMENTS_LOCK} == REFERENCE_LOCKS


@REFERENCE_NAMES
@pytest.mark.usefixtures("umask_zero")
def test_a_reference_lock_is_held_as_the_reference_holds_it(tmp_path: Path, name: str) -> None:
    locks = RealLocks(tmp_path)
    locks.acquire(name, 100)
    locks.release(name)
    flock_file = (tmp_path / name.removesuffix(".lock")).with_suffix(".flock")
    _age(flock_file, 60)  # our lock file beside it was last used long ago
    locks.acquire(name, 100)
    path = tmp_path / name
    st = os.lstat(path)
    assert stat.S_ISREG(st.st_mode) and mode(path) == 0o600
    assert time.time() - st.st_mtime < 5, "fresh: the reference's stale rule must not apply"
    with pytest.raises(FileExistsError):  # what the reference's exclusive create meets
        _reference_creates(tmp_path, name)
    locks.release(name)
    assert not path.exists()
    assert flock_file.is_file()
    _reference_creates(tmp_path, name)  # the reference gets it at once


@REFERENCE_NAMES
def test_a_fresh_reference_lock_is_waited_for(tmp_path: Path, name: str) -> None:
    held = _reference_creates(tmp_path, name)
    _age(held, 25)  # old, but not stale by the reference's 30 s rule
    inode = held.stat().st_ino
    with pytest.raises(LockTimeout):
        RealLocks(tmp_path).acquire(name, 100)
    assert held.stat().st_ino == inode, "the reference's lock was left alone"
    held.unlink()  # the reference releases it
    other = RealLocks(tmp_path)
    other.acquire(name, 100)  # our flock was dropped by the timeout; the file is free now
    other.release(name)


@REFERENCE_NAMES
def test_a_stale_reference_lock_is_taken_over(tmp_path: Path, name: str) -> None:
    """Older than 30 s: deleted and retried (the reference's rule). An empty lock file an
    older version of ours left behind is handled the same way."""
    stale = _reference_creates(tmp_path, name)
    _age(stale, 31)
    locks = RealLocks(tmp_path)
    locks.acquire(name, 100)
    assert time.time() - stale.stat().st_mtime < 5
    locks.release(name)
    assert not stale.exists()


@REFERENCE_NAMES
def test_a_lock_file_of_ours_left_by_a_dead_process_is_removed_at_once(
    tmp_path: Path, name: str
) -> None:
    dead = RealLocks(tmp_path)
    dead.acquire(name, 100)
    dead.release_all()  # the process died: its flock is gone, its lock file stays
    assert (tmp_path / name).exists()
    survivor = RealLocks(tmp_path)
    survivor.acquire(name, 100)  # far less than the 30 s a reference lock would cost
    survivor.release(name)
    assert not (tmp_path / name).exists()


@REFERENCE_NAMES
def test_release_leaves_a_lock_file_that_is_no_longer_ours(tmp_path: Path, name: str) -> None:
    """A holder past 30 s may have its file taken by the reference: releasing must not
    delete the reference's lock."""
    locks = RealLocks(tmp_path)
    locks.acquire(name, 100)
    (tmp_path / name).unlink()  # the reference found it stale ...
    theirs = _reference_creates(tmp_path, name)  # ... and took it
    locks.release(name)
    assert theirs.exists()


def test_removing_a_judged_file_puts_back_one_that_replaced_it(tmp_path: Path) -> None:
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    path = runtime / ".memories.lock"
    path.write_bytes(b"judged")
    judged = (path.stat().st_dev, path.stat().st_ino)
    path.rename(tmp_path / "judged")  # kept elsewhere, so its inode is not reused
    path.write_bytes(b"theirs")  # another program's, in its place since
    where = real_module._Dir.open(real_module.RealFiles(tmp_path), ["runtime"])
    real_module._remove_if(where, path.name, judged)
    assert path.read_bytes() == b"theirs"
    assert os.listdir(runtime) == [".memories.lock"]
    real_module._remove_if(where, path.name, (path.stat().st_dev, path.stat().st_ino))
    assert os.listdir(runtime) == []
    real_module._remove_if(where, path.name, judged)  # a missing file is no error
    where.close()


def test_other_lock_names_are_plain_flocks(tmp_path: Path) -> None:
    name = "data/.dsh-memory-bodies.lock"
    first, second = RealLocks(tmp_path), RealLocks(tmp_path)
    first.acquire(name, 100)
    with pytest.raises(LockTimeout):
        second.acquire(name, 100)
    assert os.listdir(tmp_path / "data") == [".dsh-memory-bodies.lock"]
    first.release(name)
    second.acquire(name, 100)
    second.release(name)
    assert os.listdir(tmp_path / "data") == [".dsh-memory-bodies.lock"]


def test_our_writer_waits_for_the_reference_and_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    with MemoryRoot.open(root, Config(lock_timeout_ms=100)) as opened:
        opened.hot.add("user", "first")
        held = _reference_creates(root, HOT_LOCK)
        before = root_state(root)
        with pytest.raises(LockTimeout):
            opened.hot.add("user", "second")
        assert root_state(root) == before
        assert held.exists()
        held.unlink()  # the reference releases it
        opened.hot.add("user", "second")
    assert [e.content for e in MemoryRoot.open(root).hot.snapshot().entries] == [
        "first",
        "second",
    ]


# -- path rules --------------------------------------------------------------------------

BAD_PATHS = ["../escape", "runtime/../../escape", "runtime/..", "..", "/etc/passwd", "a//b", ""]


@pytest.mark.parametrize("bad", BAD_PATHS)
def test_paths_outside_the_root_are_refused(tmp_path: Path, bad: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    files = RealFiles(root)
    files.ensure_dir("runtime")
    (root / "runtime" / "x").write_bytes(b"x")
    calls: list[Callable[[], object]] = [
        lambda: files.read(bad),
        lambda: files.read_if_changed(bad, None),
        lambda: files.rename("runtime/x", bad),
        lambda: files.remove(bad),
    ]
    if bad:  # "" means the root itself for these three
        calls += [lambda: files.ensure_dir(bad), lambda: files.list(bad), lambda: files.fsync(bad)]
    for call in calls:
        with pytest.raises(StorageError, match="outside the storage root"):
            call()
    if bad:
        with pytest.raises(StorageError, match="outside the storage root"):
            RealLocks(root).acquire(bad, 100)
    assert (root / "runtime" / "x").read_bytes() == b"x"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root"]
    assert os.listdir(root) == ["runtime"]
    assert os.listdir(root / "runtime") == ["x"]


@pytest.mark.parametrize("bad", [*BAD_PATHS, ".", "runtime/.", "/abs"])
def test_write_temp_refuses_a_bad_target_path(tmp_path: Path, bad: str) -> None:
    """The temp file's own name is harmless, but its target must obey the path rules too
    (as MemoryFiles.write_temp and every other RealFiles method do)."""
    files = RealFiles(tmp_path)
    files.ensure_dir("runtime")
    with pytest.raises(StorageError, match="outside the storage root"):
        files.write_temp(bad, b"data")
    assert os.listdir(tmp_path) == ["runtime"]
    assert os.listdir(tmp_path / "runtime") == []


# -- stale temp files --------------------------------------------------------------------


def test_opening_removes_stale_temp_files_only(tmp_path: Path) -> None:
    root = tmp_path / "root"
    with MemoryRoot.open(root) as opened:
        opened.hot.add("memory", "kept fact")
    runtime = root / "runtime"
    stale = [".memories.json.123.456.abc.tmp", ".USER.md.99.1786608000000.0.tmp"]
    kept = [
        ".keep",
        ".notes.tmp",
        ".USER.md.12.34.xyz.tmp",  # not hex
        "memories.json.1.2.a.tmp",  # no leading dot
        ".memories.json.1.2.a.tmp.bak",
    ]
    for name in stale + kept:
        (runtime / name).write_bytes(b"leftover " + name.encode())
    assert all(TEMP_NAME.match(n) for n in stale)
    assert not any(TEMP_NAME.match(n) for n in kept)
    before = {n: (runtime / n).read_bytes() for n in kept}

    MemoryRoot.open(root).close()

    names = set(os.listdir(runtime))
    assert not names & set(stale)
    assert {n: (runtime / n).read_bytes() for n in kept} == before
    assert {"memories.json", "USER.md", "MEMORY.md", ".memories.flock"} <= names
    assert (runtime / "MEMORY.md").read_bytes() == b"kept fact\n"


# -- read_if_changed and the racy window -------------------------------------------------


class CoarseOs:
    """``os`` as real.py sees it on a file system whose timestamps tick every ``tick_ns``."""

    def __init__(self, tick_ns: int) -> None:
        self.tick_ns = tick_ns

    def __getattr__(self, name: str) -> object:
        return getattr(os, name)

    def _coarse(self, st: os.stat_result) -> SimpleNamespace:
        tick = self.tick_ns
        return SimpleNamespace(
            st_mode=st.st_mode, st_dev=st.st_dev, st_ino=st.st_ino, st_size=st.st_size,
            st_mtime_ns=st.st_mtime_ns // tick * tick, st_ctime_ns=st.st_ctime_ns // tick * tick,
        )  # fmt: skip

    def stat(self, path: str, *, follow_symlinks: bool = True) -> SimpleNamespace:
        return self._coarse(os.stat(path, follow_symlinks=follow_symlinks))

    def fstat(self, fd: int) -> SimpleNamespace:
        return self._coarse(os.fstat(fd))


@pytest.mark.parametrize("coarse", [False, True], ids=["real-times", "50ms-ticks"])
def test_read_if_changed_rereads_a_same_size_rewrite_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, coarse: bool
) -> None:
    """Same inode, same size, written within one timestamp tick: only the racy-window rule
    can tell the two versions apart."""
    if coarse:
        monkeypatch.setattr(real_module, "os", CoarseOs(50_000_000))
    files = RealFiles(tmp_path)
    files.ensure_dir("runtime")
    path = tmp_path / "runtime" / "data"
    for round_ in range(20):
        first, second = b"A%03d" % round_, b"B%03d" % round_
        path.write_bytes(first)
        stamp, data = files.read_if_changed("runtime/data", None)
        assert data == first
        with open(path, "r+b") as fh:
            fh.write(second)
        again, data = files.read_if_changed("runtime/data", stamp)
        assert data == second, f"round {round_}: a changed file was reported unchanged"
        assert again is not None


def test_read_if_changed_on_a_one_second_timestamp_file_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ext3, HFS+ and many network mounts keep whole seconds (FAT: two). A same-size rewrite
    in the same second, more than 100 ms after the second began, leaves every stamp field
    equal; the adapter must still not call the file unchanged."""
    monkeypatch.setattr(real_module, "os", CoarseOs(1_000_000_000))
    files = RealFiles(tmp_path)
    files.ensure_dir("runtime")
    path = tmp_path / "runtime" / "data"
    while not 200_000_000 <= time.time_ns() % 1_000_000_000 <= 600_000_000:
        time.sleep(0.01)
    path.write_bytes(b"AAAA")
    stamp, data = files.read_if_changed("runtime/data", None)
    assert data == b"AAAA"
    with open(path, "r+b") as fh:
        fh.write(b"BBBB")
    _, data = files.read_if_changed("runtime/data", stamp)
    assert data == b"BBBB", "a changed file was reported unchanged"


def test_read_if_changed_rereads_a_same_size_replacement(tmp_path: Path) -> None:
    files = RealFiles(tmp_path)
    files.ensure_dir("runtime")
    for round_ in range(20):
        contents = [b"first-%03d" % round_, b"other-%03d" % round_]
        stamp = None
        for expected in contents:
            temp = files.write_temp("runtime/data", expected)
            files.rename(temp, "runtime/data")
            stamp, data = files.read_if_changed("runtime/data", stamp)
            assert data == expected, f"round {round_}"


def test_read_if_changed_trusts_only_old_stamps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(real_module, "_RACY_WINDOW_NS", 100_000_000)  # keep the test short
    monkeypatch.setattr(real_module, "_FINE_RACY_WINDOW_NS", 100_000_000)
    files = RealFiles(tmp_path)
    files.ensure_dir("runtime")
    path = tmp_path / "runtime" / "data"
    path.write_bytes(b"settled")
    time.sleep(0.15)  # beyond the racy window
    stamp, data = files.read_if_changed("runtime/data", None)
    assert data == b"settled"
    assert files.read_if_changed("runtime/data", stamp) == (stamp, None)

    mtime = os.stat(path).st_mtime_ns
    with open(path, "r+b") as fh:
        fh.write(b"SETTLED")
    os.utime(path, ns=(mtime, mtime))  # same size and mtime: only ctime tells
    _, data = files.read_if_changed("runtime/data", stamp)
    assert data == b"SETTLED"


@pytest.mark.parametrize("tick_ns", [None, 10_000_000, 1_000_000_000], ids=["fine", "10ms", "1s"])
def test_the_racy_window_is_wide_for_times_of_a_coarse_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tick_ns: int | None
) -> None:
    """A file system stamping with the kernel's clock (times not whole multiples of 10 ms)
    gets the short window; times of a decimal tick (exFAT, ext3, FAT, network mounts) the wide
    one: a stamp taken 0.3 s after the write is trusted only on the first."""
    if tick_ns is not None:
        monkeypatch.setattr(real_module, "os", CoarseOs(tick_ns))
    files = RealFiles(tmp_path)
    files.ensure_dir("runtime")
    (tmp_path / "runtime" / "data").write_bytes(b"settled")
    mtime = os.stat(tmp_path / "runtime" / "data").st_mtime_ns
    if tick_ns is None and mtime % 10_000_000 == 0:
        mtime += 1  # a fine clock that happened to land on a multiple of 10 ms
        os.utime(tmp_path / "runtime" / "data", ns=(mtime, mtime))
    time.sleep(0.3)
    stamp, data = files.read_if_changed("runtime/data", None)
    assert data == b"settled"
    again = files.read_if_changed("runtime/data", stamp)
    assert (again == (stamp, None)) == (tick_ns is None)


# -- a failing os.replace ----------------------------------------------------------------


@pytest.mark.parametrize(("failing_call", "what"), [(1, "projection"), (2, "source")])
def test_failed_rename_changes_no_source_and_leaves_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing_call: int, what: str
) -> None:
    root = tmp_path / "root"
    runtime = root / "runtime"
    opened = MemoryRoot.open(root, Config(durability="full"))
    opened.hot.add("user", "first")
    source = (runtime / "memories.json").read_bytes()
    user_md = (runtime / "USER.md").read_bytes()

    original = os.replace
    calls: list[str] = []

    def replace_failing_once(src: str, dst: str, **dir_fds: Any) -> None:
        calls.append(dst)
        if len(calls) == failing_call:
            raise OSError(5, "Input/output error")
        original(src, dst, **dir_fds)

    monkeypatch.setattr(real_module.os, "replace", replace_failing_once)
    with pytest.raises(StorageError) as caught:
        opened.hot.add("user", "second")
    monkeypatch.setattr(real_module.os, "replace", original)

    assert isinstance(caught.value.__cause__, OSError)
    assert calls[-1].endswith("USER.md" if what == "projection" else "memories.json")
    assert (runtime / "memories.json").read_bytes() == source
    assert not [n for n in os.listdir(runtime) if TEMP_NAME.match(n)]
    RealLocks(root).acquire(LOCK, 100)  # the lock was released
    RealLocks(root).release(LOCK)

    # The unacknowledged entry is nowhere visible, and the projection is repaired.
    assert [e.content for e in opened.hot.snapshot().entries] == ["first"]
    assert "second" not in opened.context.runtime_memory()
    assert (runtime / "USER.md").read_bytes() == user_md

    receipt = opened.hot.add("user", "third")
    assert receipt.success
    assert receipt.entry_count == 2
    assert (runtime / "USER.md").read_bytes() == "first\n§\nthird\n".encode()
    assert [e.content for e in MemoryRoot.open(root).hot.snapshot().entries] == ["first", "third"]
    opened.close()


# -- the fault injector (memory fakes) ---------------------------------------------------


def test_fail_fault_raises_the_given_error_without_effect() -> None:
    inner, _ = memory_ports()
    boom = StorageError("disk on fire")
    injector = FaultInjector([Fault(1, "fail", boom), Fault(3, "fail")])
    ports = faulty_ports(inner, injector)
    ports.files.ensure_dir("runtime")  # call 0

    with pytest.raises(StorageError) as caught:
        ports.files.write_temp("runtime/a", b"data")  # call 1
    assert caught.value is boom
    assert inner.files.list("runtime") == ()  # type: ignore[attr-defined]

    temp = ports.files.write_temp("runtime/a", b"data")  # call 2: no fault, still alive
    with pytest.raises(StorageError, match="injected"):
        ports.files.rename(temp, "runtime/a")  # call 3: default error
    assert inner.files.read("runtime/a") is None
    assert inner.files.read(temp) == b"data"
    assert not injector.crashed
    ports.files.rename(temp, "runtime/a")  # call 4
    assert inner.files.read("runtime/a") == b"data"
    assert injector.names == [
        "files.ensure_dir", "files.write_temp", "files.write_temp", "files.rename",
        "files.rename",
    ]  # fmt: skip


def test_crash_after_applies_the_effect_then_crashes() -> None:
    inner, _ = memory_ports()
    inner.files.put("runtime/a", b"old")  # type: ignore[attr-defined]
    temp = inner.files.write_temp("runtime/a", b"new")
    injector = FaultInjector([Fault(0, "crash_after")])
    ports = faulty_ports(inner, injector)

    with pytest.raises(SimulatedCrash):
        ports.files.rename(temp, "runtime/a")
    assert not issubclass(SimulatedCrash, Exception)
    assert inner.files.read("runtime/a") == b"new"
    assert inner.files.read(temp) is None
    assert injector.crashed

    with pytest.raises(SimulatedCrash):  # a dead process makes no more calls
        ports.files.remove("runtime/a")
    assert inner.files.read("runtime/a") == b"new"


def test_crash_before_has_no_effect() -> None:
    inner, _ = memory_ports()
    inner.files.put("runtime/a", b"old")  # type: ignore[attr-defined]
    temp = inner.files.write_temp("runtime/a", b"new")
    ports = faulty_ports(inner, FaultInjector([Fault(0, "crash_before")]))
    with pytest.raises(SimulatedCrash):
        ports.files.rename(temp, "runtime/a")
    assert inner.files.read("runtime/a") == b"old"
    assert inner.files.read(temp) == b"new"


def test_crash_after_the_source_rename_keeps_the_commit() -> None:
    """A crash after the commit point loses only the acknowledgement, not the entry."""
    inner, _ = memory_ports()
    MemoryRoot.open("/unused", ports=inner).hot.add("user", "first")
    probe = FaultInjector()
    MemoryRoot.open("/unused", ports=faulty_ports(inner, probe)).hot.add("user", "probe")
    renames = [i for i, n in enumerate(probe.names) if n == "files.rename"]
    inner.locks.release_all()  # type: ignore[attr-defined]

    # Same sequence of calls again, crashing right after the last rename (the source).
    crashing = FaultInjector([Fault(renames[-1], "crash_after")])
    with pytest.raises(SimulatedCrash):
        MemoryRoot.open("/unused", ports=faulty_ports(inner, crashing)).hot.add("user", "second")
    inner.locks.release_all()  # type: ignore[attr-defined]

    reopened = MemoryRoot.open("/unused", ports=inner)
    assert [e.content for e in reopened.hot.snapshot().entries] == ["first", "probe", "second"]
    assert inner.files.read("runtime/USER.md") == "first\n§\nprobe\n§\nsecond\n".encode()


# -- a held lock pins its directory ------------------------------------------------------


def _walks(files: RealFiles, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Record every walk from the root to a directory that ``files`` makes."""
    walks: list[list[str]] = []
    walk = files._open_dir

    def counted(parts: list[str], step: Any = None) -> int:
        walks.append(list(parts))
        return walk(parts, step)

    monkeypatch.setattr(files, "_open_dir", counted)
    return walks


def test_a_held_lock_pins_its_directory_for_the_thread_that_holds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    files = RealFiles(tmp_path)
    locks = RealLocks(tmp_path, files)
    files.ensure_dir("runtime")
    walks = _walks(files, monkeypatch)
    locks.acquire(LOCK, 1000)
    acquired = len(walks)
    temp = files.write_temp("runtime/memories.json", b"{}")
    files.fsync(temp)
    files.rename(temp, "runtime/memories.json")
    files.fsync("runtime")
    assert files.read("runtime/memories.json") == b"{}"
    assert len(walks) == acquired, "no walk from the root while the lock pins runtime/"
    other: list[bytes | None] = []
    thread = threading.Thread(target=lambda: other.append(files.read("runtime/memories.json")))
    thread.start()
    thread.join()
    assert other == [b"{}"] and walks[-1] == ["runtime"], "another thread walks as before"
    locks.release(LOCK)
    before = len(walks)
    files.read("runtime/memories.json")
    assert len(walks) == before + 1, "released: every call walks again"
    locks.acquire(LOCK, 1000)
    locks.release_all()  # a dead process's locks: the pin goes with them
    before = len(walks)
    files.read("runtime/memories.json")
    assert len(walks) == before + 1


def test_a_runtime_directory_swapped_for_a_symlink_between_commits_is_refused(
    tmp_path: Path,
) -> None:
    """The pin lasts one locked commit: the next one walks from the root again."""
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    opened = MemoryRoot.open(root, Config(durability="off"))
    opened.hot.add("memory", "before the swap")
    (root / "runtime").rename(tmp_path / "parked")
    (root / "runtime").symlink_to(outside, target_is_directory=True)
    with pytest.raises(StorageError, match="symbolic link"):
        opened.hot.add("memory", "after the swap")
    assert list(outside.iterdir()) == []


def test_threads_of_one_process_queue_for_a_lock_held_by_another_root_object(
    tmp_path: Path,
) -> None:
    """Two adapters of one root in one process: the second waits for the first (no flock
    poll needed) and gets the lock as soon as it is released; held, it excludes the other."""
    import threading

    first, second = RealLocks(tmp_path), RealLocks(tmp_path / ".")
    first.acquire(LOCK, 1000)
    with pytest.raises(LockTimeout):
        second.acquire(LOCK, 50)
    got = threading.Event()

    def take() -> None:
        second.acquire(LOCK, 10_000)
        got.set()

    thread = threading.Thread(target=take)
    thread.start()
    assert not got.wait(0.05)
    first.release(LOCK)
    assert got.wait(10)
    thread.join()
    with pytest.raises(LockTimeout):
        first.acquire(LOCK, 50)
    second.release(LOCK)
    first.acquire(LOCK, 50)
    first.release(LOCK)


def test_temporary_files_never_renamed_leave_a_bounded_record(tmp_path: Path) -> None:
    files = RealFiles(tmp_path)
    files.ensure_dir("runtime")
    temps = [files.write_temp("runtime/x.json", b"1") for _ in range(200)]
    assert len(files._temp_parts) <= 64
    files.rename(temps[-1], "runtime/x.json")  # a forgotten one still works by the rules
    files.rename(temps[0], "runtime/x.json")
    assert files.read("runtime/x.json") == b"1"
    for temp in temps[1:-1]:
        files.remove(temp)
    assert files._temp_parts == {}
    assert os.listdir(tmp_path / "runtime") == ["x.json"]


# -- without fcntl (not POSIX): the filelock package locks the same file --------------------


@pytest.mark.parametrize("name", [LOCK, "documents/.index.lock", "data/.dsh-memory-bodies.lock"])
def test_without_fcntl_the_locks_keep_their_contract(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    from mnemon_sm.testing.contract import check_locks_contract

    monkeypatch.setattr(real_module, "fcntl", None)
    check_locks_contract(RealLocks(tmp_path), RealLocks(tmp_path), name)
    assert real_module._PORTABLE == {}, "every filelock lock was released"
    if name in REFERENCE_LOCKS:  # the reference's lock file is created and removed as before
        assert not (tmp_path / name).exists()


def test_without_fcntl_a_root_commits_and_a_dead_holder_frees_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(real_module, "fcntl", None)
    root = MemoryRoot.open(tmp_path, Config(durability="off", lock_timeout_ms=100))
    root.hot.add("memory", "kept without fcntl")
    dead = RealLocks(tmp_path)
    dead.acquire(LOCK, 100)
    with pytest.raises(LockTimeout):
        root.hot.add("memory", "waits for the holder")
    dead.release_all()  # what the kernel does for a dead process
    root.hot.add("memory", "after the holder died")
    assert [e.content for e in root.hot.snapshot().entries] == [
        "kept without fcntl",
        "after the holder died",
    ]
    assert real_module._PORTABLE == {}


def test_without_fcntl_another_process_is_kept_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The in-process queue only orders threads: across processes the filelock lock must
    exclude on its own."""
    import subprocess
    import sys

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from mnemon_sm.adapters import real; real.fcntl = None; "
            f"locks = real.RealLocks({str(tmp_path)!r}); locks.acquire({LOCK!r}, 5000); "
            f"print('held', flush=True); sys.stdin.read(); locks.release({LOCK!r})",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        monkeypatch.setattr(real_module, "fcntl", None)
        with pytest.raises(LockTimeout):
            RealLocks(tmp_path).acquire(LOCK, 200)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(10)
    locks = RealLocks(tmp_path)
    locks.acquire(LOCK, 5000)
    locks.release(LOCK)
