"""The in-memory fake's durability model and bookkeeping (regressions found by review)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mnemon_sm.adapters import real
from mnemon_sm.adapters.real import RealFiles
from mnemon_sm.testing.memory import MemoryFiles


def test_put_is_setup_and_is_not_recorded() -> None:
    files = MemoryFiles()
    files.put("runtime/x", b"data")
    assert files.log.calls == []
    assert files.read("runtime/x") == b"data"


def test_a_stamp_from_before_a_power_loss_never_matches_after_it() -> None:
    files = MemoryFiles(track_durability=True)
    files.ensure_dir("runtime")
    temp = files.write_temp("runtime/m", b"written, never fsynced")
    files.rename(temp, "runtime/m")
    files.fsync("runtime")
    stamp, data = files.read_if_changed("runtime/m", None)
    assert data == b"written, never fsynced"
    files.lose_power()
    _, after = files.read_if_changed("runtime/m", stamp)
    assert after == b""  # the name survived, its unsynced data did not; and it was re-read


def test_power_loss_keeps_only_what_was_fsynced() -> None:
    files = MemoryFiles(track_durability=True)
    files.ensure_dir("runtime")
    durable = files.write_temp("runtime/a", b"A")
    files.fsync(durable)
    files.rename(durable, "runtime/a")
    files.fsync("runtime")
    volatile = files.write_temp("runtime/b", b"B")
    files.fsync(volatile)
    files.rename(volatile, "runtime/b")  # directory not fsynced afterwards
    files.lose_power()
    assert files.read("runtime/a") == b"A"
    assert files.read("runtime/b") is None
    assert files.list("runtime") == ("a",)


def test_real_ensure_dir_fsyncs_the_parent_of_each_new_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(real.os, "fsync", fsync)
    RealFiles(tmp_path / "root").ensure_dir("runtime")
    assert synced == [str(tmp_path), str(tmp_path / "root")]
    synced.clear()
    RealFiles(tmp_path / "root").ensure_dir("runtime")  # exists: nothing to make durable
    assert synced == []


def test_memory_locks_make_another_thread_wait_and_refuse_a_reentrant_acquire() -> None:
    """Like a real lock taken through its own descriptor: another thread of the same holder
    waits for the release (it is not refused); the holding thread acquiring again is a bug
    (``StorageError``); another holder times out at once."""
    import threading

    from mnemon_sm.errors import LockTimeout, StorageError
    from mnemon_sm.testing.memory import MemoryLocks

    locks = MemoryLocks()
    locks.acquire("x", 1000)
    with pytest.raises(StorageError):
        locks.acquire("x", 1000)
    got: list[str] = []
    waiter = threading.Thread(target=lambda: (locks.acquire("x", 10_000), got.append("x")))
    waiter.start()
    waiter.join(0.2)
    assert got == []  # still waiting
    locks.release("x")
    waiter.join(10)
    assert got == ["x"]
    with pytest.raises(LockTimeout):
        MemoryLocks(registry=locks.registry).acquire("x", 1000)
