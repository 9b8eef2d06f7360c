"""Real adapters: the local file system, ``filelock`` and the system clock.

Rules kept here:
- every path is relative to the storage root and may not escape it;
- files are opened with ``O_NOFOLLOW`` (a symlink in place of a managed file or a lock file is
  refused, never followed) and created with mode 0600; directories are created 0700;
- directories below the root are walked one at a time with ``O_NOFOLLOW | O_DIRECTORY``
  relative to the one before, so a directory swapped for a symlink is refused too;
- a temporary file lives beside its target and is named
  ``.<name>.<pid>.<epoch ms>.<hex>.tmp`` (the reference's pattern), so a later opener can find
  and remove what a crashed writer left behind;
- every ``OSError`` becomes ``StorageError`` (``__cause__`` keeps the original).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import filelock

from ..errors import LockTimeout, StorageError
from . import TEMP_NAME, Ports, Stamp

__all__ = ["RealFiles", "RealLocks", "SystemClock", "real_ports"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_DIR_FLAGS = os.O_RDONLY | _DIRECTORY | _CLOEXEC
# Directories are walked with dir_fd where the platform has it (every POSIX system).
_AT = {os.open, os.mkdir, os.unlink, os.rename} <= os.supports_dir_fd and os.listdir in (
    os.supports_fd
)

# A stat-based "unchanged" proof is only trusted once the file's times are this far in the
# past: timestamps are coarse (a few ms on ext4, 1 s on ext3 and many network mounts, 2 s on
# FAT), so two writes inside one tick can leave equal times. Within the window the bytes are
# read again, which costs microseconds (the "racy clean" rule of git).
_RACY_WINDOW_NS = 3_000_000_000
# filelock retries a contended lock by polling; 2 ms keeps waits short without spinning.
_LOCK_POLL_S = 0.002


def _storage_error(action: str, path: str, exc: OSError) -> StorageError:
    if exc.errno == errno.ELOOP:
        return StorageError(f"cannot {action} {path}: it is a symbolic link, which is refused")
    return StorageError(f"cannot {action} {path}: {exc.strerror or exc}")


class RealFiles:
    """Files of one storage root on the local file system.

    Every path below the root is reached one directory at a time, each opened relative to
    the one before with ``O_NOFOLLOW | O_DIRECTORY`` (``dir_fd``), and the file itself with
    ``O_NOFOLLOW``: a directory swapped for a symlink while the library runs is refused, never
    followed out of the root. The root itself may be reached through a symlink (the caller
    chose that path). Where the platform has no ``dir_fd``, each directory component is
    checked with ``lstat`` just before the call instead.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._base = str(self.root)
        self._known: dict[str, str] = {}  # checked relative path -> absolute path
        self._temps = itertools.count()

    def _abs(self, path: str) -> str:
        full = self._known.get(path)
        if full is None:
            parts = path.split("/")
            if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
                raise StorageError(f"refusing a path outside the storage root: {path!r}")
            full = os.path.join(self._base, *parts)
            if not TEMP_NAME.match(parts[-1]):  # temp names are unique: not worth keeping
                self._known[path] = full
        return full

    def _parts(self, path: str) -> list[str]:
        """``path``'s components, after the path rules of :meth:`_abs`."""
        self._abs(path)
        return path.split("/")

    def _open_dir(self, parts: list[str]) -> int:
        """An fd of the directory ``parts`` below the root, no component followed if it is a
        symlink (``ELOOP``; ``ENOTDIR`` for a file). Raises ``OSError``."""
        fd = os.open(self._base, _DIR_FLAGS)
        try:
            for part in parts:
                inner = _open_below(fd, part)
                os.close(fd)
                fd = inner
        except BaseException:
            os.close(fd)
            raise
        return fd

    @contextlib.contextmanager
    def _at(self, parts: list[str]) -> Iterator[tuple[int | None, str]]:
        """``(dir_fd, name)`` to reach the last of ``parts`` without following a symlinked
        directory; without ``dir_fd`` support ``(None, absolute path)`` once every directory
        component was checked with ``lstat``. Raises ``OSError``."""
        if not _AT:
            _check_components(self._base, parts[:-1])
            yield None, os.path.join(self._base, *parts)
            return
        fd = self._open_dir(parts[:-1])
        try:
            yield fd, parts[-1]
        finally:
            os.close(fd)

    def _open(self, path: str, flags: int, mode: int = 0o600) -> int:
        with self._at(self._parts(path)) as (fd, name):
            return os.open(name, flags | _NOFOLLOW | _CLOEXEC, mode, dir_fd=fd)

    def read(self, path: str) -> bytes | None:
        try:
            fd = self._open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _storage_error("read", path, exc) from exc
        try:
            return _read_all(fd)
        except OSError as exc:
            raise _storage_error("read", path, exc) from exc
        finally:
            os.close(fd)

    def read_if_changed(self, path: str, seen: Stamp | None) -> tuple[Stamp | None, bytes | None]:
        full = self._abs(path)
        try:
            if seen is not None:
                # Safe by the absolute path: an equal stamp (device and inode included) is
                # the very file read before; anything else is read again below.
                st = os.stat(full, follow_symlinks=False)
                if _stamp(st) == seen:
                    return seen, None
            fd = self._open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None, None
        except OSError as exc:
            raise _storage_error("read", path, exc) from exc
        try:
            return _stamp(os.fstat(fd)), _read_all(fd)
        except OSError as exc:
            raise _storage_error("read", path, exc) from exc
        finally:
            os.close(fd)

    def write_temp(self, path: str, data: bytes) -> str:
        self._abs(path)  # the target obeys the path rules, not only the temp name
        directory, _, name = path.rpartition("/")
        # pid + time + a per-adapter counter: unique across processes; O_EXCL guards the rest.
        stamp = f"{os.getpid()}.{time.time_ns() // 1_000_000}.{next(self._temps):x}"
        temp = f".{name}.{stamp}.tmp"
        temp_path = f"{directory}/{temp}" if directory else temp
        try:
            with self._at(self._parts(temp_path)) as (dir_fd, leaf):
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
                try:
                    fd = os.open(leaf, flags, 0o600, dir_fd=dir_fd)
                except OSError as exc:
                    raise _storage_error("create", temp_path, exc) from exc
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view) :]
                except OSError as exc:
                    os.close(fd)
                    with contextlib.suppress(OSError):
                        os.unlink(leaf, dir_fd=dir_fd)
                    raise _storage_error("write", temp_path, exc) from exc
                os.close(fd)
        except OSError as exc:  # a directory on the way is missing or a symlink
            raise _storage_error("create", temp_path, exc) from exc
        return temp_path

    def append(self, path: str, data: bytes) -> None:
        try:
            fd = self._open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        except OSError as exc:
            raise _storage_error("append to", path, exc) from exc
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except OSError as exc:
            raise _storage_error("append to", path, exc) from exc
        finally:
            os.close(fd)

    def fsync(self, path: str) -> None:
        try:
            fd = self._open(path, os.O_RDONLY) if path else os.open(self._base, _DIR_FLAGS)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise _storage_error("fsync", path or ".", exc) from exc

    def rename(self, source: str, target: str) -> None:
        try:
            with (
                self._at(self._parts(source)) as (from_fd, old),
                self._at(self._parts(target)) as (to_fd, new),
            ):
                os.replace(old, new, src_dir_fd=from_fd, dst_dir_fd=to_fd)
        except OSError as exc:
            raise _storage_error("rename", f"{source} to {target}", exc) from exc

    def list(self, directory: str) -> tuple[str, ...]:
        try:
            if not directory:
                return tuple(sorted(os.listdir(self._base)))
            parts = self._parts(directory)
            if not _AT:
                _check_components(self._base, parts)
                return tuple(sorted(os.listdir(os.path.join(self._base, *parts))))
            fd = self._open_dir(parts)
            try:
                return tuple(sorted(os.listdir(fd)))
            finally:
                os.close(fd)
        except FileNotFoundError:
            return ()
        except OSError as exc:
            raise _storage_error("list", directory or ".", exc) from exc

    def remove(self, path: str) -> None:
        try:
            with self._at(self._parts(path)) as (fd, name):
                os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise _storage_error("remove", path, exc) from exc

    def ensure_dir(self, directory: str) -> None:
        parts = self._parts(directory) if directory else []
        try:
            _makedirs_private(self._base)  # the root (and its parents) may be symlinks
            if not _AT:  # checked before and after: a symlink is never created through
                _check_components(self._base, parts)
                _makedirs_private(self._abs(directory) if directory else self._base)
                _check_components(self._base, parts)
                return
            fd = os.open(self._base, _DIR_FLAGS)
            try:
                for part in parts:
                    inner = _enter_private(fd, part)
                    os.close(fd)
                    fd = inner
            finally:
                os.close(fd)
        except NotADirectoryError as exc:
            raise StorageError(f"{directory or '.'} is not a directory") from exc
        except OSError as exc:
            raise _storage_error("create directory", directory or ".", exc) from exc


def _enter_private(fd: int, name: str) -> int:
    """Open (creating it 0700 and fsyncing ``fd`` if missing) the directory ``name`` in the
    directory ``fd``, never through a symlink."""
    try:
        return _open_below(fd, name)
    except FileNotFoundError:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o700, dir_fd=fd)
            os.fsync(fd)
        return _open_below(fd, name)


def _open_below(fd: int, name: str) -> int:
    """The directory ``name`` in the directory ``fd``, never through a symlink (``ELOOP``;
    Linux answers ``O_NOFOLLOW | O_DIRECTORY`` on one with ``ENOTDIR``, as for a file)."""
    try:
        return os.open(name, _DIR_FLAGS | _NOFOLLOW, dir_fd=fd)
    except NotADirectoryError:
        if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
            raise OSError(errno.ELOOP, "symbolic link") from None
        raise


def _check_components(base: str, parts: list[str]) -> None:
    """Without ``dir_fd``: every directory in ``parts`` below ``base`` is a real directory
    (not a symlink) right now. Raises ``OSError`` (``ELOOP`` for a symlink)."""
    current = base
    for part in parts:
        current = os.path.join(current, part)
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return  # the call itself reports what is missing
        if stat.S_ISLNK(st.st_mode):
            raise OSError(errno.ELOOP, "symbolic link")
        if not stat.S_ISDIR(st.st_mode):
            raise OSError(errno.ENOTDIR, "not a directory")


def _makedirs_private(path: str) -> None:
    """``os.makedirs`` that creates every missing component with mode 0700 (``makedirs``
    applies its mode to the last component only) and fsyncs the parent of each one it
    creates, so a new directory survives a power loss like the files later put in it."""
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent and parent != path:
        _makedirs_private(parent)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        return
    fd = os.open(parent or ".", os.O_RDONLY | _CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _stamp(st: os.stat_result) -> Stamp:
    if stat.S_ISLNK(st.st_mode):
        raise OSError(errno.ELOOP, "symbolic link")
    token: tuple[int, ...] = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) < _RACY_WINDOW_NS:
        # Too recent to prove anything later: make this stamp unequal to every other one.
        token += (time.perf_counter_ns(),)
    return Stamp(token)


def _read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    data = os.read(fd, size + 1)  # one read when the size is right; loop if it grew
    if len(data) <= size:
        return data
    chunks = [data]
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


class RealLocks:
    """Cross-process locks: ``filelock`` (``flock``) on ``<root>/<name>``, mode 0600."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._files = RealFiles(root)
        self._locks: dict[str, filelock.FileLock] = {}

    def _lock(self, name: str) -> filelock.FileLock:
        lock = self._locks.get(name)
        if lock is None:
            self._files._abs(name)  # same path rules as files
            lock = filelock.FileLock(str(self.root / name), mode=0o600)
            self._locks[name] = lock
        return lock

    def acquire(self, name: str, timeout_ms: int) -> None:
        lock = self._lock(name)
        # filelock would create a missing directory with the umask's permissions; make it
        # ourselves, 0700, like every other directory of the root.
        directory = name.rpartition("/")[0]
        if directory and not os.path.isdir(self._files._abs(directory)):
            self._files.ensure_dir(directory)
        try:
            lock.acquire(timeout=timeout_ms / 1000, poll_interval=_LOCK_POLL_S)
        except filelock.Timeout:
            raise LockTimeout(
                f"timed out after {timeout_ms} ms waiting for the lock {name}"
            ) from None
        except OSError as exc:
            raise _storage_error("lock", name, exc) from exc

    def release(self, name: str) -> None:
        lock = self._locks.get(name)
        if lock is not None and lock.is_locked:
            lock.release(force=True)

    def release_all(self) -> None:
        """Release every lock this object holds (what the kernel does when a process dies)."""
        for name in list(self._locks):
            self.release(name)


class SystemClock:
    """The system's wall clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def wait(self, event: threading.Event, timeout_ms: int) -> bool:
        return event.wait(timeout_ms / 1000)


def real_ports(root: str | Path) -> Ports:
    """Ports on the local file system for the storage root ``root``."""
    return Ports(files=RealFiles(root), locks=RealLocks(root), clock=SystemClock())
