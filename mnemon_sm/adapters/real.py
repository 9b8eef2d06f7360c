"""Real adapters: the local file system, ``flock`` locks and the system clock.

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

Locks and the reference implementation
--------------------------------------
Our processes exclude each other with ``flock`` (the kernel drops it when a process dies, so a
crash never leaves a lock behind). The reference implementation, which may share the root,
locks ``runtime/.memories.lock`` and ``documents/.index.lock`` its own way: it creates the
file exclusively, deletes it when done, and deletes one whose mtime is more than 30 s old. So
for those two names (:data:`REFERENCE_LOCKS`) the ``flock`` is taken on a sibling file
(``.memories.flock``, ``.index.flock``) and, while it is held, the reference's file is held
too, by the reference's rules:

1. ``flock`` the sibling (our processes queue here);
2. set the sibling's mtime to now and hard-link it to the reference's name: the link is the
   exclusive create (it fails when the name exists), it is born with a fresh mtime, and it
   carries our marker: its inode is the sibling's;
3. when the name exists: a symlink is refused (``StorageError``); our marker means a process of
   ours died holding it (it cannot be alive: we hold the ``flock``), so it is removed at once;
   a file older than 30 s is removed (the reference's stale rule; an old version of ours left
   such a file); one that vanished is retried at once; anything else is retried every 20 ms
   until the timeout (``LockTimeout``);
4. release removes the reference's name if it still carries our marker, then drops the
   ``flock``.

Every other lock name is a plain ``flock`` on the file of that name. Where the platform has no
``fcntl`` (not POSIX), the filelock package locks the same file instead; everything else is
unchanged.

Threads of one process first queue on a process-wide ``threading.Lock`` of the lock file (real
root path + name), so a waiting thread is woken at once instead of polling the ``flock``; the
``flock`` is taken on a descriptor opened for each acquire (one ``openat``), which never locks a
file that was replaced since it was last held.

While a lock is held, its directory (reached following no symlink when the lock was taken) is
*pinned* in the root's :class:`RealFiles` for the holding thread (``real_ports`` shares one
:class:`RealFiles` with the locks): every file call of that thread in that directory works in
that very directory without walking to it from the root again, which halves the system calls
of a hot-memory commit. The next acquire walks from the root again, so a directory swapped for
a symlink between two commits is refused as before.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import stat
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from mnemon_sm.errors import MnemonError, StorageError
from mnemon_sm.ports import TEMP_NAME, Ports, Stamp, lock_timeout, path_parts, temp_path

__all__ = ["REFERENCE_LOCKS", "RealFiles", "RealLocks", "SystemClock", "real_ports"]

fcntl: ModuleType | None
try:
    import fcntl
except ImportError:  # not POSIX: the filelock package locks the file instead (see _flock)
    fcntl = None

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_DIR_FLAGS = os.O_RDONLY | _DIRECTORY | _CLOEXEC
# Directories are walked with dir_fd where the platform has it (every POSIX system).
_AT = {
    os.open,
    os.mkdir,
    os.unlink,
    os.rename,
    os.link,
    os.stat,
} <= os.supports_dir_fd and os.listdir in (os.supports_fd)

# A stat-based "unchanged" proof is only trusted once the file's times are this far in the
# past: timestamps are coarse (1 s on ext3, HFS+ and many network mounts, 2 s on FAT, 10 ms on
# exFAT), so two writes inside one tick can leave equal times. Within the window the bytes are
# read again (the "racy clean" rule of git). Times that are whole multiples of 10 ms (every
# decimal tick from 10 ms up) get the wide window; others come from a file system stamping
# with the kernel's clock (ext4, XFS, btrfs, tmpfs: a tick of at most 10 ms, HZ=100), where
# 200 ms is twenty ticks. A fine time is a whole multiple of 10 ms once in 10 million files:
# those get the wide window too, which only costs a re-read.
_RACY_WINDOW_NS = 3_000_000_000
_FINE_RACY_WINDOW_NS = 200_000_000
_COARSE_TICK_NS = 10_000_000
# A contended flock is retried by polling; 2 ms keeps waits short without spinning.
_LOCK_POLL_S = 0.002

#: Locks the reference implementation takes too, by creating the file exclusively (hot memory's
#: and the documents index's); see the module's notes.
REFERENCE_LOCKS = frozenset({"runtime/.memories.lock", "documents/.index.lock"})
_REFERENCE_STALE_NS = 30_000_000_000  # the reference deletes a lock file older than this
_REFERENCE_POLL_S = 0.020  # and retries a held one this often

# Process-wide locks, one per lock file (real root path + name): threads of one process queue
# here before taking the flock. A forked child starts with none held.
_IN_PROCESS_GUARD = threading.Lock()
_IN_PROCESS: dict[str, threading.Lock] = {}


def _forget_in_process_locks() -> None:
    global _IN_PROCESS_GUARD
    _IN_PROCESS_GUARD = threading.Lock()
    _IN_PROCESS.clear()
    _PID[0] = os.getpid()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_process_locks)


_PID = [os.getpid()]  # this process's id, read once (a forked child reads its own)


def _pid() -> int:
    return _PID[0]


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (a write may take less than it was given)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


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
        self._known_parts: dict[str, list[str]] = {}  # checked relative path -> components
        # temporary files this object made and has not renamed or removed yet (bounded)
        self._temp_parts: dict[str, list[str]] = {}
        self._temps = itertools.count()
        # (thread, directory parts) -> directories pinned by locks that thread holds there
        self._pins: dict[tuple[int, tuple[str, ...]], list[_Dir]] = {}

    def pin(self, parts: list[str], where: _Dir) -> None:
        """Let the calling thread reach the directory ``parts`` through ``where`` (opened
        following no symlink) until :meth:`unpin`: a lock held there pins its directory, so
        every step of a locked commit works in that very directory without walking to it
        again."""
        self._pins.setdefault((threading.get_ident(), tuple(parts)), []).append(where)

    def unpin(self, parts: list[str], where: _Dir) -> None:
        for key, pinned in list(self._pins.items()):
            if key[1] == tuple(parts) and where in pinned:
                pinned.remove(where)
                if not pinned:
                    del self._pins[key]

    def _pinned(self, parts: list[str]) -> _Dir | None:
        if not self._pins:
            return None
        pinned = self._pins.get((threading.get_ident(), tuple(parts)))
        return pinned[-1] if pinned else None

    def _abs(self, path: str) -> str:
        full = self._known.get(path)
        if full is None:
            parts = path_parts(path)
            full = os.path.join(self._base, *parts)
            if not TEMP_NAME.match(parts[-1]):  # temp names are unique: not worth keeping
                self._known[path] = full
        return full

    def _parts(self, path: str) -> list[str]:
        """``path``'s components, after the path rules of :meth:`_abs` (a checked path's are
        kept, a temporary file's until it is renamed or removed)."""
        parts = self._known_parts.get(path) or self._temp_parts.get(path)
        if parts is None:
            self._abs(path)
            parts = path.split("/")
            if not TEMP_NAME.match(parts[-1]):
                self._known_parts[path] = parts
        return parts

    def _locate(self, parts: list[str]) -> tuple[_Dir | None, int | None, str]:
        """``(opened, dir_fd, name)`` to reach the last of ``parts`` (see :meth:`_at`);
        ``opened`` is the directory opened for this call, for the caller to close (None when a
        held lock pins it)."""
        pinned = self._pinned(parts[:-1])
        if pinned is not None:
            return None, pinned.fd, pinned.name(parts[-1])
        where = _Dir.open(self, parts[:-1])
        return where, where.fd, where.name(parts[-1])

    def _open_dir(self, parts: list[str], step: Callable[[int, str], int] | None = None) -> int:
        """An fd of the directory ``parts`` below the root, no component followed if it is a
        symlink (``ELOOP``; ``ENOTDIR`` for a file). ``step(fd, name)`` enters one component
        (default: open an existing one; :func:`_enter_private` creates it first). Raises
        ``OSError``."""
        enter = _open_below if step is None else step
        fd = os.open(self._base, _DIR_FLAGS)
        try:
            for part in parts:
                inner = enter(fd, part)
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
        pinned = self._pinned(parts[:-1])
        if pinned is not None:
            yield pinned.fd, pinned.name(parts[-1])
            return
        where = _Dir.open(self, parts[:-1])
        try:
            yield where.fd, where.name(parts[-1])
        finally:
            where.close()

    def _open(self, path: str, flags: int, mode: int = 0o600) -> int:
        opened, fd, name = self._locate(self._parts(path))
        try:
            return os.open(name, flags | _NOFOLLOW | _CLOEXEC, mode, dir_fd=fd)
        finally:
            if opened is not None:
                opened.close()

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
        # pid + time + a per-adapter counter: unique across processes; O_EXCL guards the rest.
        temp_file = temp_path(path, _pid(), time.time_ns() // 1_000_000, next(self._temps))
        temp_parts = temp_file.split("/")
        try:
            opened, dir_fd, leaf = self._locate(temp_parts)
        except OSError as exc:  # a directory on the way is missing or a symlink
            raise _storage_error("create", temp_file, exc) from exc
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
            try:
                fd = os.open(leaf, flags, 0o600, dir_fd=dir_fd)
            except OSError as exc:
                raise _storage_error("create", temp_file, exc) from exc
            try:
                _write_all(fd, data)
            except OSError as exc:
                os.close(fd)
                with contextlib.suppress(OSError):
                    os.unlink(leaf, dir_fd=dir_fd)
                raise _storage_error("write", temp_file, exc) from exc
            os.close(fd)
        finally:
            if opened is not None:
                opened.close()
        if len(self._temp_parts) >= 64:  # temporaries nobody renamed or removed
            self._temp_parts.clear()
        self._temp_parts[temp_file] = temp_parts
        return temp_file

    def append(self, path: str, data: bytes) -> None:
        try:
            fd = self._open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        except OSError as exc:
            raise _storage_error("append to", path, exc) from exc
        try:
            _write_all(fd, data)
        except OSError as exc:
            raise _storage_error("append to", path, exc) from exc
        finally:
            os.close(fd)

    def fsync(self, path: str) -> None:
        pinned = self._pinned(path.split("/")) if path else None
        if pinned is not None and pinned.fd is not None:
            try:
                os.fsync(pinned.fd)  # a pinned directory: no walk, no open
                return
            except OSError as exc:
                raise _storage_error("fsync", path, exc) from exc
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
            source_parts, target_parts = self._parts(source), self._parts(target)
            self._temp_parts.pop(source, None)
            if source_parts[:-1] == target_parts[:-1]:  # one directory: reached once
                opened, fd, old = self._locate(source_parts)
                try:
                    os.replace(
                        old,
                        target_parts[-1]
                        if fd is not None
                        else os.path.join(os.path.dirname(old), target_parts[-1]),
                        src_dir_fd=fd,
                        dst_dir_fd=fd,
                    )
                finally:
                    if opened is not None:
                        opened.close()
                return
            with (
                self._at(source_parts) as (from_fd, old),
                self._at(target_parts) as (to_fd, new),
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

    def walk(self) -> tuple[str, ...]:
        """Every file's path, sorted (the ``FileTree`` capability); a symlink anywhere below
        the root is refused, never followed."""
        found: list[str] = []

        def refuse(exc: OSError) -> None:
            raise exc

        if not os.path.isdir(self._base):
            return ()
        try:
            for directory, dirs, names in os.walk(self._base, onerror=refuse):
                relative = os.path.relpath(directory, self._base)
                for name in [*dirs, *names]:
                    path = name if relative == "." else f"{relative}/{name}"
                    info = os.lstat(os.path.join(directory, name))
                    if stat.S_ISLNK(info.st_mode):
                        raise StorageError(f"cannot copy {path}: it is a symlink")
                    if stat.S_ISREG(info.st_mode):
                        found.append(path.replace(os.sep, "/"))
                    elif not stat.S_ISDIR(info.st_mode):
                        raise StorageError(f"cannot copy {path}: not a regular file")
        except OSError as exc:
            raise _storage_error("list", ".", exc) from exc
        return tuple(sorted(found))

    def remove(self, path: str) -> None:
        try:
            parts = self._parts(path)
            self._temp_parts.pop(path, None)
            with self._at(parts) as (fd, name):
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
            os.close(self._open_dir(parts, _enter_private))
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
    mtime, ctime = st.st_mtime_ns, st.st_ctime_ns
    token: tuple[int, ...] = (st.st_dev, st.st_ino, st.st_size, mtime, ctime)
    coarse = not (mtime % _COARSE_TICK_NS and ctime % _COARSE_TICK_NS)
    window = _RACY_WINDOW_NS if coarse else _FINE_RACY_WINDOW_NS
    if time.time_ns() - max(mtime, ctime) < window:
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
    """Cross-process locks of one storage root (see the module's notes): ``flock`` on
    ``<root>/<name>``, mode 0600; for :data:`REFERENCE_LOCKS`, ``flock`` on a sibling file plus
    the reference's exclusive lock file. A lock's directory is reached like every path of
    :class:`RealFiles` (no symlinked component followed) and held open while the lock is, so
    every later step works in that very directory."""

    def __init__(self, root: str | Path, files: RealFiles | None = None) -> None:
        self.root = Path(root)
        # Given the root's RealFiles, a held lock pins its directory there (RealFiles.pin).
        self._files = files if files is not None else RealFiles(root)
        # name -> (flock fd, its directory, the reference's file name or None, our inode,
        # the process-wide lock of that name)
        self._held: dict[str, tuple[int, _Dir, str | None, tuple[int, int], threading.Lock]] = {}
        self._keys: dict[str, str] = {}  # name -> its process-wide key

    def acquire(self, name: str, timeout_ms: int) -> None:
        deadline = time.monotonic() + timeout_ms / 1000
        parts = self._files._parts(name)  # same path rules as files
        reference = name in REFERENCE_LOCKS
        leaf = parts[-1]
        flock_leaf = leaf.removesuffix(".lock") + ".flock" if reference else leaf
        # Threads of this process queue on a lock of their own first (woken at once, no
        # polling); the flock then excludes other processes.
        queue = self._queue(name)
        if not queue.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise lock_timeout(name, timeout_ms)
        try:
            where = self._directory(name, parts[:-1])
            try:
                fd = _flock(name, where, flock_leaf, deadline, timeout_ms, self._path_of(name))
                try:
                    st = os.fstat(fd)
                    mine = (st.st_dev, st.st_ino)
                    if reference:
                        _claim_reference(
                            name, where, leaf, flock_leaf, fd, mine, deadline, timeout_ms
                        )
                except BaseException:
                    _unlock(fd)
                    raise
            except BaseException:
                where.close()
                raise
        except BaseException:
            queue.release()
            raise
        self._held[name] = (fd, where, leaf if reference else None, mine, queue)
        self._files.pin(parts[:-1], where)

    def _path_of(self, name: str) -> str:
        """The absolute path of the file ``name``'s lock is taken on (for the filelock
        package, where there is no ``fcntl``)."""
        full = self._files._abs(name)
        if name in REFERENCE_LOCKS:
            return full.removesuffix(".lock") + ".flock"
        return full

    def _queue(self, name: str) -> threading.Lock:
        """The process-wide lock of ``name`` in this root (one per real lock file)."""
        key = self._keys.get(name)
        if key is None:
            key = self._keys[name] = os.path.join(os.path.realpath(self.root), name)
        queue = _IN_PROCESS.get(key)
        if queue is None:
            with _IN_PROCESS_GUARD:
                queue = _IN_PROCESS.setdefault(key, threading.Lock())
        return queue

    def _directory(self, name: str, parts: list[str]) -> _Dir:
        """The lock's directory, no component followed if it is a symlink; made (0700, like
        every other directory of the root) when missing."""
        try:
            try:
                return _Dir.open(self._files, parts)
            except FileNotFoundError:
                self._files.ensure_dir("/".join(parts))
                return _Dir.open(self._files, parts)
        except OSError as exc:
            raise _storage_error("lock", name, exc) from exc

    def release(self, name: str) -> None:
        held = self._held.pop(name, None)
        if held is None:
            return
        fd, where, reference, mine, queue = held
        self._files.unpin(self._files._parts(name)[:-1], where)
        try:
            if reference is not None:
                _remove_if(where, reference, mine)
        except OSError as exc:
            # The file keeps our marker: the next holder of the flock removes it at once.
            raise _storage_error("release the lock", name, exc) from exc
        finally:
            _unlock(fd)
            where.close()
            queue.release()

    def release_all(self) -> None:
        """Drop every ``flock`` this object holds and nothing else: what the kernel does when a
        process dies (a reference lock file it created stays, carrying our marker)."""
        held, self._held = self._held, {}
        for name, (fd, where, _, _, queue) in held.items():
            self._files.unpin(self._files._parts(name)[:-1], where)
            _unlock(fd)
            where.close()
            queue.release()

    def __del__(self) -> None:
        # An object dropped while holding locks lets them go as a dead process would.
        with contextlib.suppress(AttributeError, OSError):
            self.release_all()


class _Dir:
    """A directory below the root reached following no symlink: its descriptor (every call
    then names files relative to it) or, where the platform has no ``dir_fd``, its absolute
    path once each component was checked with ``lstat``."""

    def __init__(self, fd: int | None, path: str) -> None:
        self.fd, self._path = fd, path

    @classmethod
    def open(cls, files: RealFiles, parts: list[str]) -> _Dir:
        """Raises ``OSError`` (``ELOOP`` for a symlinked component)."""
        if _AT:
            return cls(files._open_dir(parts), "")
        _check_components(files._base, parts)
        return cls(None, os.path.join(files._base, *parts))

    def name(self, leaf: str) -> str:
        """How to name ``leaf`` in this directory, along with ``dir_fd=self.fd``."""
        return leaf if self.fd is not None else os.path.join(self._path, leaf)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _flock(name: str, where: _Dir, leaf: str, deadline: float, timeout_ms: int, path: str) -> int:
    """Open (creating it 0600, never through a symlink) and lock ``leaf`` of ``where`` (at
    ``path``); return the fd. ``flock`` on POSIX; elsewhere the filelock package locks the
    same file (:func:`_unlock` releases either way)."""
    try:
        fd = os.open(
            where.name(leaf),
            os.O_RDWR | os.O_CREAT | _NOFOLLOW | _CLOEXEC,
            0o600,
            dir_fd=where.fd,
        )
    except OSError as exc:
        raise _storage_error("lock", name, exc) from exc
    if fcntl is None:
        return _portable_lock(name, fd, path, deadline, timeout_ms)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            pass
        except OSError as exc:
            os.close(fd)
            raise _storage_error("lock", name, exc) from exc
        if time.monotonic() >= deadline:
            os.close(fd)
            raise lock_timeout(name, timeout_ms)
        time.sleep(_LOCK_POLL_S)


# fd -> the filelock lock held on that fd's file (platforms without fcntl only)
_PORTABLE: dict[int, Any] = {}


def _portable_lock(name: str, fd: int, path: str, deadline: float, timeout_ms: int) -> int:
    """Without ``fcntl``: lock ``path`` (the file ``fd`` is open on) with the filelock
    package, which the design names for such platforms."""
    import filelock

    lock = filelock.FileLock(path, is_singleton=False, thread_local=False)
    try:
        lock.acquire(timeout=max(0.0, deadline - time.monotonic()), poll_interval=_LOCK_POLL_S)
    except filelock.Timeout:
        os.close(fd)
        raise lock_timeout(name, timeout_ms) from None
    except OSError as exc:
        os.close(fd)
        raise _storage_error("lock", name, exc) from exc
    _PORTABLE[fd] = lock
    return fd


def _unlock(fd: int) -> None:
    """Drop the lock held on ``fd`` and close it (closing drops a ``flock``)."""
    lock = _PORTABLE.pop(fd, None)
    try:
        if lock is not None:
            lock.release(force=True)
    finally:
        os.close(fd)


def _claim_reference(
    name: str,
    where: _Dir,
    leaf: str,
    flock_leaf: str,
    fd: int,
    mine: tuple[int, int],
    deadline: float,
    timeout_ms: int,
) -> None:
    """Create the reference's lock file ``leaf`` of ``where`` by its rules (steps 2 and 3 of
    the module's notes); the caller holds the ``flock`` of ``flock_leaf`` (open as ``fd``)."""
    at = where.fd
    try:
        while True:
            os.utime(fd)  # the link is born with this mtime: fresh for the reference
            try:
                os.link(
                    where.name(flock_leaf),
                    where.name(leaf),
                    src_dir_fd=at,
                    dst_dir_fd=at,
                    follow_symlinks=False,
                )
                return
            except FileExistsError:
                pass
            try:
                st = os.stat(where.name(leaf), dir_fd=at, follow_symlinks=False)
            except FileNotFoundError:
                continue  # vanished: at once
            if stat.S_ISLNK(st.st_mode):
                raise StorageError(f"cannot lock {name}: it is a symbolic link, which is refused")
            found = (st.st_dev, st.st_ino)
            if found == mine or time.time_ns() - st.st_mtime_ns > _REFERENCE_STALE_NS:
                # Ours, from a process that died holding it, or stale by the reference's rule.
                _remove_if(where, leaf, found)
                continue
            if time.monotonic() >= deadline:
                raise lock_timeout(name, timeout_ms)
            time.sleep(_REFERENCE_POLL_S)
    except MnemonError:
        raise  # LockTimeout is an OSError (a TimeoutError) too
    except OSError as exc:
        raise _storage_error("lock", name, exc) from exc


def _remove_if(where: _Dir, leaf: str, identity: tuple[int, int]) -> None:
    """Remove ``leaf`` of ``where`` if the file there is still the one of ``identity``
    (device, inode). The file is first renamed aside (atomically), so a lock another program
    created in its place since it was judged is put back instead of deleted."""
    # A temporary name (``TEMP_NAME``: the lock names start with a dot), cleaned up by openers
    # should this process die here.
    aside = f"{leaf}.{os.getpid()}.{time.time_ns() // 1_000_000}.{threading.get_ident():x}.tmp"
    at = where.fd
    try:
        os.rename(where.name(leaf), where.name(aside), src_dir_fd=at, dst_dir_fd=at)
    except FileNotFoundError:
        return
    try:
        st = os.stat(where.name(aside), dir_fd=at, follow_symlinks=False)
        if (st.st_dev, st.st_ino) != identity:
            with contextlib.suppress(FileExistsError):
                os.link(
                    where.name(aside),
                    where.name(leaf),
                    src_dir_fd=at,
                    dst_dir_fd=at,
                    follow_symlinks=False,
                )
    finally:
        os.unlink(where.name(aside), dir_fd=at)


class SystemClock:
    """The system's wall clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def wait(self, event: threading.Event, timeout_ms: int) -> bool:
        return event.wait(timeout_ms / 1000)


class RandomIds:
    """Random (version 4) UUIDs, as the reference draws them."""

    def new_id(self) -> str:
        return str(uuid.uuid4())


def real_ports(root: str | Path) -> Ports:
    """Ports on the local file system for the storage root ``root`` (the locks pin their
    directories in the files adapter while held)."""
    files = RealFiles(root)
    return Ports(files=files, locks=RealLocks(root, files), clock=SystemClock(), ids=RandomIds())
