"""In-memory fakes of every port; each call is recorded as a frozen :class:`Call`.

The fakes keep the contract of the real adapters (see :mod:`mnemon_sm.testing.contract`):
paths relative to the root, no ``..``, temp files beside their target, atomic rename,
``StorageError`` for misuse. They are deterministic and never sleep: a held lock times out at
once, and :class:`FakeClock` only moves when told to.

``MemoryFiles`` can also model a power loss: with ``track_durability=True`` it remembers
what reached stable storage (file contents after ``fsync`` of the file, directory entries after
``fsync`` of the directory; directories made by ``ensure_dir`` are durable at once, as the
port promises) and :meth:`MemoryFiles.lose_power` reverts everything else. Lost data comes
back empty, never torn: the model checks ordering, not partial writes.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Callable

from mnemon_sm.adapters.workers.builtin import BuiltinWorkers
from mnemon_sm.errors import LockTimeout, StorageError
from mnemon_sm.ports import Ports, Stamp, path_parts
from mnemon_sm.ports.embedder import Embedder
from mnemon_sm.testing.calls import Call, CallLog
from mnemon_sm.testing.longterm import MemoryLongTermStore, MemoryUpkeepStore

__all__ = [
    "Call",
    "CallLog",
    "FakeClock",
    "MemoryFiles",
    "MemoryIds",
    "MemoryLocks",
    "memory_ports",
]


def _check(path: str) -> None:
    path_parts(path)


def _parent(path: str) -> str:
    return path.rpartition("/")[0]


class MemoryFiles:
    """A dict-backed file tree."""

    def __init__(self, log: CallLog | None = None, *, track_durability: bool = False) -> None:
        self.log = log if log is not None else CallLog()
        self.files: dict[str, bytes] = {}
        self.dirs: set[str] = {""}
        self.modes: dict[str, int] = {}
        self._versions: dict[str, int] = {}
        self._counter = itertools.count(1)
        self.track_durability = track_durability
        self.durable_files: dict[str, bytes] = {}  # content known to be on stable storage
        self.durable_names: dict[str, int] = {}  # name -> version durable in its directory
        self._contents: dict[int, bytes] = {}  # version -> content (for durability tracking)

    # -- port methods ----------------------------------------------------------------------

    def read(self, path: str) -> bytes | None:
        self.log.record("files", "read", path)
        _check(path)
        return self.files.get(path)

    def read_if_changed(self, path: str, seen: Stamp | None) -> tuple[Stamp | None, bytes | None]:
        self.log.record("files", "read_if_changed", path)
        _check(path)
        if path not in self.files:
            return None, None
        stamp = Stamp((self._versions[path],))
        return (seen, None) if stamp == seen else (stamp, self.files[path])

    def write_temp(self, path: str, data: bytes) -> str:
        self.log.record("files", "write_temp", path, len(data))
        _check(path)
        self._need_dir(_parent(path))
        directory, _, name = path.rpartition("/")
        temp = f".{name}.4242.{next(self._counter)}.{next(self._counter):08x}.tmp"
        temp = f"{directory}/{temp}" if directory else temp
        self._put(temp, bytes(data), mode=0o600)
        return temp

    def append(self, path: str, data: bytes) -> None:
        self.log.record("files", "append", path, len(data))
        _check(path)
        self._need_dir(_parent(path))
        old = self._versions.get(path)
        self._put(path, self.files.get(path, b"") + bytes(data), mode=self.modes.get(path, 0o600))
        if self.track_durability and old is not None:
            # The same file, grown: its name stays as durable as it was, and only what was
            # fsynced of it before is durable until it is fsynced again.
            new = self._versions[path]
            self._contents[new] = self._contents.get(old, b"")
            if self.durable_names.get(path) == old:
                self.durable_names[path] = new

    def fsync(self, path: str) -> None:
        self.log.record("files", "fsync", path)
        if path in self.dirs:
            if self.track_durability:
                prefix = f"{path}/" if path else ""
                for name in list(self.durable_names):
                    if _parent(name) == path and name not in self.files:
                        del self.durable_names[name]
                for name, version in self._versions.items():
                    if name.startswith(prefix) and _parent(name) == path:
                        self.durable_names[name] = version
            return
        _check(path)
        if path not in self.files:
            raise StorageError(f"cannot fsync {path}: no such file")
        if self.track_durability:
            self._contents[self._versions[path]] = self.files[path]

    def rename(self, source: str, target: str) -> None:
        self.log.record("files", "rename", source, target)
        _check(source)
        _check(target)
        if source not in self.files:
            raise StorageError(f"cannot rename {source} to {target}: no such file")
        if _parent(source) != _parent(target):
            raise StorageError(f"cannot rename {source} to {target}: not the same directory")
        self.files[target] = self.files.pop(source)
        self.modes[target] = self.modes.pop(source)
        self._versions[target] = self._versions.pop(source)

    def list(self, directory: str) -> tuple[str, ...]:
        self.log.record("files", "list", directory)
        if directory not in self.dirs:
            return ()
        prefix = f"{directory}/" if directory else ""
        names = {p[len(prefix) :].split("/")[0] for p in [*self.files, *self.dirs]}
        names = {
            n for n in names if n and (f"{prefix}{n}" in self.files or f"{prefix}{n}" in self.dirs)
        }
        return tuple(sorted(n for n in names if _parent(f"{prefix}{n}") == directory))

    def walk(self) -> tuple[str, ...]:
        """Every file's path, sorted (the ``FileTree`` capability)."""
        self.log.record("files", "walk", "")
        return tuple(sorted(self.files))

    def remove(self, path: str) -> None:
        self.log.record("files", "remove", path)
        _check(path)
        self.files.pop(path, None)
        self.modes.pop(path, None)
        self._versions.pop(path, None)

    def ensure_dir(self, directory: str) -> None:
        self.log.record("files", "ensure_dir", directory)
        if directory:
            _check(directory)
        if directory in self.files:
            raise StorageError(f"{directory} is not a directory")
        parts = directory.split("/") if directory else []
        for i in range(1, len(parts) + 1):
            self.dirs.add("/".join(parts[:i]))

    # -- helpers for tests -----------------------------------------------------------------

    def _need_dir(self, directory: str) -> None:
        if directory not in self.dirs:
            raise StorageError(f"cannot create a file in {directory}: no such directory")

    def _put(self, path: str, data: bytes, *, mode: int = 0o600) -> None:
        version = next(self._counter)
        self.files[path], self.modes[path], self._versions[path] = data, mode, version
        if self.track_durability:
            self._contents.setdefault(version, b"")  # created empty; data not yet durable

    def put(self, path: str, data: bytes) -> None:
        """Create or overwrite a file directly (test setup; not recorded; durable)."""
        parts = path.split("/")[:-1]
        self.dirs.update("/".join(parts[: i + 1]) for i in range(len(parts)))
        self._put(path, data)
        if self.track_durability:
            self._contents[self._versions[path]] = data
            self.durable_names[path] = self._versions[path]

    def lose_power(self) -> None:
        """Revert to what reached stable storage (requires ``track_durability``)."""
        if not self.track_durability:
            raise RuntimeError("lose_power needs MemoryFiles(track_durability=True)")
        self.files = {
            name: self._contents.get(version, b"") for name, version in self.durable_names.items()
        }
        # Every file gets a new version: a stamp taken before the power loss must never
        # match what is there afterwards, whose content may differ.
        self._versions = {name: next(self._counter) for name in self.files}
        self.durable_names = dict(self._versions)
        for name, version in self._versions.items():
            self._contents[version] = self.files[name]
        self.modes = {name: 0o600 for name in self.files}


class MemoryLocks:
    """Named locks. Instances sharing a ``registry`` contend like processes sharing a root;
    :meth:`hold` makes a lock look held by some other process."""

    def __init__(self, log: CallLog | None = None, registry: dict[str, object] | None = None):
        self.log = log if log is not None else CallLog()
        self.registry: dict[str, object] = registry if registry is not None else {}
        self._threads: dict[str, int] = {}  # name -> the thread of this instance holding it
        self._released = threading.Condition()

    @property
    def held(self) -> set[str]:
        """Names this instance holds."""
        return {name for name, owner in self.registry.items() if owner is self}

    def acquire(self, name: str, timeout_ms: int) -> None:
        """Take ``name``. Held by this instance on the same thread: ``StorageError`` (a
        re-entrant acquire is a bug); on another thread: wait for it, as a real lock taken
        through another descriptor does (up to ``timeout_ms`` of real time, then
        ``LockTimeout``); held by another instance or :meth:`hold`: ``LockTimeout`` at once."""
        self.log.record("locks", "acquire", name, timeout_ms)
        me = threading.get_ident()
        with self._released:
            while True:
                owner = self.registry.get(name)
                if owner is None:
                    break
                if owner is not self:
                    raise LockTimeout(
                        f"timed out after {timeout_ms} ms waiting for the lock {name}"
                    )
                if self._threads.get(name) == me:
                    raise StorageError(f"lock {name} is already held by this process")
                if not self._released.wait(timeout_ms / 1000):
                    raise LockTimeout(
                        f"timed out after {timeout_ms} ms waiting for the lock {name}"
                    )
            self.registry[name] = self
            self._threads[name] = me

    def release(self, name: str) -> None:
        self.log.record("locks", "release", name)
        with self._released:
            if self.registry.get(name) is self:
                del self.registry[name]
                self._threads.pop(name, None)
                self._released.notify_all()

    def hold(self, name: str) -> None:
        """Make ``name`` look held by another process until :meth:`let_go`."""
        self.registry[name] = "another process"

    def let_go(self, name: str) -> None:
        with self._released:
            if self.registry.get(name) == "another process":
                del self.registry[name]
                self._released.notify_all()

    def release_all(self) -> None:
        """Release everything this instance holds (what the kernel does when it dies)."""
        with self._released:
            for name in self.held:
                del self.registry[name]
                self._threads.pop(name, None)
            self._released.notify_all()


class MemoryIds:
    """Ids recorded in the call log: random UUIDs, or with ``seed`` a repeatable sequence of
    UUID-shaped ids (two fakes with different seeds never collide)."""

    def __init__(self, log: CallLog | None = None, *, seed: int | None = None) -> None:
        self.log = log if log is not None else CallLog()
        self._next = None if seed is None else itertools.count(seed << 64)

    def new_id(self) -> str:
        self.log.record("ids", "new_id")
        if self._next is None:
            return str(uuid.uuid4())
        return str(uuid.UUID(int=next(self._next)))


class FakeClock:
    """A clock that moves only when told to.

    :meth:`wait` never lets fake time pass on its own: it waits for the event (a worker that
    finishes), unless :attr:`expire_waits` is set, in which case an event not set yet makes it
    advance the clock by the timeout and report a timeout at once (after calling
    :attr:`on_expire`, which a test may use to let the worker reach a chosen point first). A
    wait that would block longer than :data:`WAIT_CAP_S` of real time fails loudly instead of
    hanging a test.
    """

    WAIT_CAP_S = 120.0

    def __init__(self, start_ms: int = 1_786_608_000_000, log: CallLog | None = None) -> None:
        self.ms = start_ms  # 2026-08-13T08:00:00.000Z
        self.log = log if log is not None else CallLog()
        self.expire_waits = False
        self.on_expire: Callable[[], object] | None = None

    def now_ms(self) -> int:
        self.log.record("clock", "now_ms")
        return self.ms

    def wait(self, event: threading.Event, timeout_ms: int) -> bool:
        self.log.record("clock", "wait", timeout_ms)
        if self.expire_waits:
            if event.wait(0):  # (this also lets the worker start)
                return True
            if self.on_expire is not None:
                self.on_expire()
            if event.is_set():
                return True
            self.ms += timeout_ms
            return False
        if not event.wait(self.WAIT_CAP_S):
            raise AssertionError(f"a fake-clock wait blocked for {self.WAIT_CAP_S} s")
        return True

    def advance(self, ms: int) -> None:
        self.ms += ms


def memory_ports(
    log: CallLog | None = None,
    *,
    track_durability: bool = False,
    embedder: Embedder | None = None,
    upkeep: bool = False,
) -> tuple[Ports, CallLog]:
    """A bundle of fakes sharing one call log (the workers are the built-in ones). With
    ``upkeep`` (or an ``embedder``), the long-term store is a :class:`MemoryUpkeepStore`: it
    can backfill vectors through ``embedder`` and rebuild a side index."""
    log = log if log is not None else CallLog()
    files = MemoryFiles(log, track_durability=track_durability)
    clock = FakeClock(log=log)
    ports = Ports(
        files=files,
        locks=MemoryLocks(log),
        clock=clock,
        long_term=(
            MemoryUpkeepStore(clock, log, embedder=embedder)
            if upkeep or embedder is not None
            else MemoryLongTermStore(clock, log)
        ),
        workers=BuiltinWorkers(),
        ids=MemoryIds(log),
    )
    return ports, log
