"""Putting back what a failed sequence of document writes changed (see :class:`Undo`)."""

from __future__ import annotations

import contextlib

from mnemon_sm.errors import StorageError
from mnemon_sm.ports import Files
from mnemon_sm.ports.storage import durable_append, durable_replace

__all__ = ["Undo"]


class Undo:
    """Puts back what a failed sequence of file replacements changed (call under the lock).

    :meth:`write` remembers what a path held (None: nothing) before replacing it;
    :meth:`rollback` restores, last first, every such path whose bytes differ from what it
    held, so a replacement that failed half-way (renamed, then the directory fsync failed) is
    undone as well as a complete one. Rollback is best effort: if it fails too, what is left
    is a crash window that opening repairs.
    """

    def __init__(self, files: Files, durability: str = "full") -> None:
        self._files, self._durability = files, durability
        self._done: list[tuple[str, bytes | None]] = []

    def write(self, path: str, data: bytes) -> None:
        """Replace ``path``'s bytes, remembering what it held. A file that cannot be read
        (a symlink, which the replacement replaces) cannot be put back: it is left out of the
        rollback rather than removed."""
        try:
            before = self._files.read(path)
        except StorageError:
            durable_replace(self._files, path, data, self._durability)
            return
        self.write_over(path, data, before)

    def write_over(self, path: str, data: bytes, before: bytes | None) -> None:
        """Replace ``path``, whose bytes the caller read (under the lock) as ``before``."""
        self._done.append((path, before))
        durable_replace(self._files, path, data, self._durability)

    def append(self, path: str, lines: bytes, before: bytes | None) -> None:
        """Append ``lines`` to ``path``, whose bytes the caller read (under the lock) as
        ``before`` (see :func:`~mnemon_sm.ports.storage.durable_append`)."""
        self._done.append((path, before))
        durable_append(self._files, path, lines, before, self._durability)

    def rollback(self) -> None:
        for path, before in reversed(self._done):
            with contextlib.suppress(StorageError):
                if self._files.read(path) == before:
                    continue
                if before is None:
                    self._files.remove(path)
                else:
                    durable_replace(self._files, path, before, self._durability)
        self._done.clear()
