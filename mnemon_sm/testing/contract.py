"""The port contract: one set of checks every adapter must pass.

``tests/test_port_contract.py`` runs it against the real adapters (on a temporary directory),
the in-memory fakes and the fault-injecting wrapper with no faults planned. Anyone writing an
adapter of their own can call the same functions. Each check raises ``AssertionError`` with a
message naming the broken promise.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import LockTimeout, StorageError
from ..ports import TEMP_NAME, Clock, Files, Locks

__all__ = ["check_clock_contract", "check_files_contract", "check_locks_contract"]


def _raises(error: type[BaseException], fn: Callable[[], object], promise: str) -> None:
    try:
        fn()
    except error:
        return
    raise AssertionError(f"{promise}: expected {error.__name__}")


def check_files_contract(files: Files) -> None:
    """Check a ``Files`` adapter over an empty storage root."""
    assert files.read("runtime/a.txt") is None, "a missing file reads as None"
    assert files.list("runtime") == (), "a missing directory lists as empty"
    files.ensure_dir("runtime")
    files.ensure_dir("runtime")  # idempotent
    temp = files.write_temp("runtime/a.txt", b"first")
    directory, _, name = temp.rpartition("/")
    assert directory == "runtime", "a temp file lives beside its target"
    assert TEMP_NAME.match(name), f"temp names match TEMP_NAME: {name}"
    assert files.read(temp) == b"first", "a temp file holds what was written"
    assert files.read("runtime/a.txt") is None, "writing a temp file leaves the target alone"
    files.fsync(temp)
    files.rename(temp, "runtime/a.txt")
    assert files.read("runtime/a.txt") == b"first", "rename makes the target hold the data"
    assert files.read(temp) is None, "rename removes the source name"
    other = files.write_temp("runtime/a.txt", b"second")
    assert other != temp, "temp names are unique"
    files.rename(other, "runtime/a.txt")
    assert files.read("runtime/a.txt") == b"second", "rename replaces an existing target"
    files.fsync("runtime")
    assert files.list("runtime") == ("a.txt",), "list shows the directory's names"
    _check_read_if_changed(files)
    files.remove("runtime/a.txt")
    files.remove("runtime/a.txt")  # removing a missing file is fine
    assert files.read("runtime/a.txt") is None, "remove deletes the file"
    for bad in ("/etc/passwd", "../escape", "runtime/../../escape", "runtime//x", ""):

        def read_bad(path: str = bad) -> object:
            return files.read(path)

        _raises(StorageError, read_bad, f"path {bad!r} is refused")
    _raises(StorageError, lambda: files.write_temp("nowhere/x", b""), "no temp in a missing dir")
    _raises(StorageError, lambda: files.fsync("runtime/missing"), "fsync of a missing file")
    _raises(StorageError, lambda: files.rename("runtime/missing", "runtime/b"), "rename missing")
    temp = files.write_temp("runtime/f", b"")
    files.rename(temp, "runtime/f")
    _raises(StorageError, lambda: files.ensure_dir("runtime/f"), "a file is not a directory")
    files.remove("runtime/f")


def _check_read_if_changed(files: Files) -> None:
    assert files.read_if_changed("runtime/none", None) == (None, None), "missing: (None, None)"
    stamp, data = files.read_if_changed("runtime/a.txt", None)
    assert stamp is not None and data == b"second", "first read returns a stamp and the data"
    again, data = files.read_if_changed("runtime/a.txt", stamp)
    assert data in (None, b"second"), "an unchanged file is reported unchanged or read again"
    if data is None:
        assert again == stamp, "an unchanged report keeps the stamp"
    temp = files.write_temp("runtime/a.txt", b"second")  # same bytes, new file
    files.rename(temp, "runtime/a.txt")
    temp = files.write_temp("runtime/a.txt", b"changed")
    files.rename(temp, "runtime/a.txt")
    _, data = files.read_if_changed("runtime/a.txt", stamp)
    assert data == b"changed", "a changed file is never reported unchanged"
    temp = files.write_temp("runtime/a.txt", b"second")
    files.rename(temp, "runtime/a.txt")


def check_locks_contract(first: Locks, second: Locks) -> None:
    """Check two ``Locks`` adapters on the same root (two processes, as far as they know)."""
    name = "runtime/.contract.lock"
    first.release(name)  # releasing what is not held is fine
    first.acquire(name, 1000)
    _raises(LockTimeout, lambda: second.acquire(name, 100), "a held lock excludes others")
    first.release(name)
    second.acquire(name, 1000)
    _raises(LockTimeout, lambda: first.acquire(name, 100), "and the other way round")
    second.release(name)
    second.release(name)
    first.acquire(name, 1000)
    first.release(name)


def check_clock_contract(clock: Clock) -> None:
    """Check a ``Clock``: integer milliseconds after 2020, never going backwards."""
    a, b = clock.now_ms(), clock.now_ms()
    assert isinstance(a, int) and a > 1_577_836_800_000, "milliseconds since the epoch"
    assert b >= a, "the clock does not go backwards between two reads"
