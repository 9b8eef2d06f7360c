"""Ports: the only way flows touch the outside world.

Theory of operation
-------------------
Each port is a small ``typing.Protocol`` for one capability. Flows receive a frozen
:class:`Ports` bundle and call nothing else that does I/O. Three adapters exist for every
port: the real one (:mod:`mnemon_sm.adapters.real`), an in-memory fake that records every call
(:mod:`mnemon_sm.testing.memory`) and a fault-injecting wrapper
(:mod:`mnemon_sm.testing.faults`). One contract suite (:mod:`mnemon_sm.testing.contract`)
holds all of them to the same behaviour.

Paths are POSIX paths relative to the storage root (``runtime/memories.json``); an adapter
never accepts an absolute path or ``..``. Adapters raise only ``StorageError`` (with the
operating-system error as ``__cause__``) or ``LockTimeout``; never a bare ``OSError``.

Later flows add ports (LLM workers, the long-term store) as new fields of :class:`Ports`;
the ones here do not change shape.
"""

from __future__ import annotations

import re
import threading
from typing import Protocol, runtime_checkable

import attrs

from mnemon_sm.errors import LockTimeout, StorageError
from mnemon_sm.ports.embedder import Embedder
from mnemon_sm.ports.long_term.port import DenseBackfill, LongTermStore, SideIndex, SpaceRows
from mnemon_sm.ports.workers import Workers

__all__ = [
    "PORT_CAPABILITIES",
    "PORT_PROTOCOLS",
    "TEMP_NAME",
    "Clock",
    "FileTree",
    "Files",
    "Ids",
    "Locks",
    "Ports",
    "Stamp",
    "lock_timeout",
    "path_parts",
    "temp_path",
]

#: Every temporary file an adapter creates is named ``.<name>.<pid>.<epoch ms>.<hex>.tmp``
#: (the reference's pattern), so an opener can recognise and remove what a crashed writer left.
TEMP_NAME = re.compile(r"^\..+\.[0-9]+\.[0-9]+\.[0-9a-f]+\.tmp$")


def path_parts(path: str) -> list[str]:
    """The components of ``path``, a path every adapter accepts: relative to the storage root,
    POSIX, with no empty, ``.`` or ``..`` component. Raises ``StorageError`` for any other."""
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise StorageError(f"refusing a path outside the storage root: {path!r}")
    return parts


def lock_timeout(name: str, timeout_ms: int) -> LockTimeout:
    """The error of every ``Locks`` adapter whose lock ``name`` was not granted in time."""
    return LockTimeout(f"timed out after {timeout_ms} ms waiting for the lock {name}")


def temp_path(path: str, pid: int, epoch_ms: int, serial: int) -> str:
    """The path of a temporary file for ``path``, beside it and named by :data:`TEMP_NAME`:
    ``<dir>/.<name>.<pid>.<epoch ms>.<serial in hex>.tmp``."""
    directory, _, name = path.rpartition("/")
    temp = f".{name}.{pid}.{epoch_ms}.{serial:x}.tmp"
    return f"{directory}/{temp}" if directory else temp


@attrs.frozen
class Stamp:
    """What a file looked like when last seen; equal stamps prove the content unchanged.

    Adapters decide what goes in ``token`` (the real one: inode, size, times; the fake: a
    version counter) and must never return an equal stamp for different content.
    """

    token: tuple[int, ...]


@runtime_checkable
class Files(Protocol):
    """The files of one storage root."""

    def read(self, path: str) -> bytes | None:
        """Return the file's bytes, or None when it does not exist.

        Raises:
            StorageError: the file exists but cannot be read (including a symlink).
        """
        ...

    def read_if_changed(self, path: str, seen: Stamp | None) -> tuple[Stamp | None, bytes | None]:
        """Return ``(stamp, data)``; ``data`` is None when the file provably still has ``seen``.

        A missing file gives ``(None, None)``. Adapters that cannot prove a file unchanged
        read it again; they may never report a changed file as unchanged.
        """
        ...

    def write_temp(self, path: str, data: bytes) -> str:
        """Write ``data`` to a new, unique temporary file beside ``path`` (mode 0600),
        named after ``path`` to match :data:`TEMP_NAME`.

        Returns:
            The temporary file's path, to be passed to :meth:`fsync` and :meth:`rename`.
        """
        ...

    def append(self, path: str, data: bytes) -> None:
        """Append ``data`` to ``path`` in one write, creating it (mode 0600) if missing.

        One ``append`` is never interleaved with another writer's; a power loss may leave
        its tail torn, so readers of an appended file must tolerate a truncated last record.
        """
        ...

    def fsync(self, path: str) -> None:
        """Flush a file, or a directory (its entries), to stable storage."""
        ...

    def rename(self, source: str, target: str) -> None:
        """Atomically replace ``target`` with ``source`` (same directory)."""
        ...

    def list(self, directory: str) -> tuple[str, ...]:
        """Names in ``directory``, sorted; empty when the directory does not exist."""
        ...

    def remove(self, path: str) -> None:
        """Delete a file; deleting a missing file is not an error."""
        ...

    def ensure_dir(self, directory: str) -> None:
        """Create ``directory`` (and parents) with mode 0700 if missing; a directory created
        here is durable when the call returns (its parent was fsynced)."""
        ...


@runtime_checkable
class FileTree(Protocol):
    """An optional capability of a ``Files`` adapter: listing every file of the root at once
    (what a migration copies; every adapter of this library has it)."""

    def walk(self) -> tuple[str, ...]:
        """The path of every file under the root, sorted (directories are not listed).

        Raises:
            StorageError: a directory cannot be read, or the tree holds a symlink (never
            followed, never copied).
        """
        ...


@runtime_checkable
class Locks(Protocol):
    """Named exclusive locks shared by every process using the storage root."""

    def acquire(self, name: str, timeout_ms: int) -> None:
        """Block until the lock is held by this process, at most ``timeout_ms``.

        Raises:
            LockTimeout: another holder kept it longer than the timeout.
            StorageError: the lock file cannot be opened (for example it is a symlink).
        """
        ...

    def release(self, name: str) -> None:
        """Release the lock if this process holds it; otherwise do nothing."""
        ...


@runtime_checkable
class Clock(Protocol):
    """Wall-clock time as an input, and the only way the library waits for time to pass."""

    def now_ms(self) -> int:
        """Milliseconds since the Unix epoch."""
        ...

    def wait(self, event: threading.Event, timeout_ms: int) -> bool:
        """Block until ``event`` is set or ``timeout_ms`` passes; True when it was set.

        Adapters must call ``event.wait`` (the library's events do work there, see
        :mod:`mnemon_sm.flows.workers.runner`).
        """
        ...


class Ids(Protocol):
    """Fresh identifiers (a document's id, a Memory Space's id): an input, like the time."""

    def new_id(self) -> str:
        """A new id, unique across processes and time: a UUID in its canonical text form."""
        ...


@attrs.frozen
class Ports:
    """Everything a flow may use to reach the outside world.

    ``long_term`` (a ``LongTermStore``) and ``workers`` (a ``Workers``) are needed only by the
    long-term flows; a bundle for hot memory alone may leave them out. ``embedder`` (an
    ``Embedder``) is optional: without one, relevance recall is lexical. ``ids`` (an ``Ids``)
    is optional too: without one the root draws random UUIDs.
    """

    files: Files
    locks: Locks
    clock: Clock
    long_term: LongTermStore | None = None
    workers: Workers | None = None
    embedder: Embedder | None = None
    ids: Ids | None = None


#: The protocol of every field of :class:`Ports`, by field name: what ``<port>.<method>`` in a
#: spec's ``ports`` list refers to (the spec lint reads this table; it never reads annotations).
PORT_PROTOCOLS: dict[str, type] = {
    "files": Files,
    "locks": Locks,
    "clock": Clock,
    "long_term": LongTermStore,
    "workers": Workers,
    "embedder": Embedder,
    "ids": Ids,
}

#: The optional capabilities a port's adapter may have beyond its protocol, by field name:
#: ``long_term.embed_missing`` in a spec refers to :class:`DenseBackfill`'s method (the spec lint
#: reads this table too). A flow checks the capability before it calls it.
PORT_CAPABILITIES: dict[str, tuple[type, ...]] = {
    "files": (FileTree,),
    "long_term": (DenseBackfill, SideIndex, SpaceRows),
}
