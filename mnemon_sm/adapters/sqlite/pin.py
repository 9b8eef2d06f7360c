"""Opening a store by name without following a symlink: the checks around SQLite's open.

Theory of operation
-------------------
SQLite opens a database by name and follows symbolic links in every component of the name
(it refuses a ``-wal`` or ``-shm`` that is a link itself, but not a linked directory above
it); Python's ``sqlite3`` cannot ask it not to (``SQLITE_OPEN_NOFOLLOW``). So a :class:`Pin`
brackets every open of a store (:meth:`.handles.Handle.open`):

1. Before: :mod:`..layout` lstat's ``data/`` and ``data/<space>/`` (directories, not links)
   and every other file SQLite may open there (:data:`SIDE_FILES`: absent or regular files,
   so a linked one is a ``CorruptStore`` naming it, not SQLite's "unable to open");
   then ``mnemon.db`` is opened with ``O_NOFOLLOW`` and fstat'ed: a regular file whose
   identity (device, inode) is the file this open is about. Its header is read through that
   descriptor. A link anywhere is ``CorruptStore`` naming it, and nothing was opened through it.
2. SQLite opens the name (``mode=rw``: the main file is opened by the open call itself).
3. Before any statement that may write (:meth:`Pin.check_opened`): SQLite resolves every
   link in a name before opening it and reports the name it opened (``PRAGMA
   database_list``), which must be the expected one below the root's real path, so no
   component was a link when SQLite looked; and a fresh lstat of the chain must show the
   directories of step 1 and a ``mnemon.db`` with the pinned identity. Anything else means a
   component was swapped meanwhile: the connection is closed unused, ``CorruptStore``.
4. Right after the side index is attached, before anything is read or written there
   (:meth:`Pin.check_index`), its name is checked like the store's (it was created with
   ``O_NOFOLLOW`` when missing).

The pinned descriptor stays open as long as the connection (:meth:`.handles.Handle.close`
releases it after closing the connection), and even then it is closed only once no pin of
this process holds the same file (:func:`_release`). Closing any descriptor of a file drops
every POSIX lock the process holds on it, SQLite's included, without SQLite knowing: its
WAL connections would then look gone to other processes, and the next one to close would
take the database for unused, checkpoint it and delete its ``-wal`` and ``-shm`` while this
process still writes there, so later commits of this process would be lost to every other.

What is left open: a component swapped to a link and back again within the microseconds
between SQLite's resolution of the name and its ``open()`` of it, which only
``SQLITE_OPEN_NOFOLLOW`` could close. A link that appears after an open is refused by the next
operation, which lstat's the chain again (:meth:`.store.EmbeddedStore._handle`). Where SQLite
does not resolve links (older builds) it reports the name as given, which is accepted too: the
lstat checks of steps 1 and 3 then carry the rule alone.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
import threading
from pathlib import Path

import attrs

from mnemon_sm.adapters.sqlite.sideindex import INDEX_FILE
from mnemon_sm.errors import CorruptStore
from mnemon_sm.ports.long_term import layout
from mnemon_sm.ports.long_term.layout import DB_FILE

__all__ = ["SIDE_FILES", "Pin"]

# Every other file SQLite may open in a space directory: the index, and journals of both.
SIDE_FILES = (
    INDEX_FILE,
    *(f"{base}{end}" for base in (DB_FILE, INDEX_FILE) for end in ("-wal", "-shm", "-journal")),
)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


@attrs.define
class _File:
    """The pins of this process on one file, and the descriptors of those already released."""

    pins: int = 0
    released: list[int] = attrs.Factory(list)


_GUARD = threading.Lock()
_FILES: dict[layout.Identity, _File] = {}


def _hold(identity: layout.Identity) -> None:
    with _GUARD:
        _FILES.setdefault(identity, _File()).pins += 1


def _release(identity: layout.Identity, fd: int) -> None:
    """Close ``fd`` (a descriptor of the file ``identity``) once no pin of this process holds
    that file any more: until then another connection may hold SQLite's locks on it, which
    the close would drop (see the module docstring). This is SQLite's own rule for its
    descriptors, applied to ours."""
    with _GUARD:
        held = _FILES[identity]
        held.pins -= 1
        held.released.append(fd)
        if held.pins:
            return
        del _FILES[identity]
    for released in held.released:
        os.close(released)


class Pin:
    """``data/<space>/mnemon.db`` held open with ``O_NOFOLLOW`` while SQLite opens it by name,
    and as long as the connection SQLite opened (:meth:`close` after the connection's).

    Raises (when made): ``CorruptStore`` for a link or a wrong kind of file anywhere in the
    chain; ``OSError`` (``FileNotFoundError`` included) for the caller to translate.
    """

    def __init__(self, root: Path, space: str) -> None:
        self._root, self._space = root, space
        self.db = root / "data" / space / DB_FILE
        self.where = layout.where(space, DB_FILE)
        self._dirs = layout.check_dirs(root, space)
        self.check_side_files()
        try:
            self.fd = os.open(self.db, os.O_RDONLY | _NOFOLLOW | _CLOEXEC)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise CorruptStore(
                    f"{self.where} is a symbolic link, which is refused", path=self.where
                ) from None
            raise
        try:
            info = os.fstat(self.fd)
            if not stat.S_ISREG(info.st_mode):
                raise CorruptStore(f"{self.where} is not a regular file", path=self.where)
        except BaseException:
            os.close(self.fd)
            raise
        self.identity = layout.identity(info)
        self._closed = False
        _hold(self.identity)

    def close(self) -> None:
        """Release the descriptor (closed once no pin of this process holds the file); call
        after the connection opened through this pin was closed. Idempotent."""
        if not self._closed:
            self._closed = True
            _release(self.identity, self.fd)

    def check_opened(self, conn: sqlite3.Connection) -> None:
        """Step 3: SQLite opened the pinned file, through no link."""
        self._check_name(conn, "main", DB_FILE)
        same_dirs = layout.check_dirs(self._root, self._space) == self._dirs
        now = layout.identity(layout.check_store(self._root, self._space))
        if not same_dirs or now != self.identity:
            raise CorruptStore(
                f"{self.where} was replaced while it was being opened", path=self.where
            )

    def check_index(self, conn: sqlite3.Connection) -> None:
        """Step 4, right after the side index is attached: it was opened through no link."""
        self._check_name(conn, "idx", INDEX_FILE)

    def check_side_files(self) -> None:
        """Step 1: every file SQLite may open beside the store is a regular file, or absent."""
        for name in SIDE_FILES:
            layout.check_side_file(self._root, self._space, name)

    def _check_name(self, conn: sqlite3.Connection, schema: str, file: str) -> None:
        opened = {row[1]: row[2] for row in conn.execute("PRAGMA database_list")}.get(schema)
        parts = ("data", self._space, file)
        expected = {
            os.path.join(os.path.realpath(self._root), *parts),
            os.path.join(os.path.abspath(self._root), *parts),
        }
        if opened not in expected:
            name = layout.where(self._space, file)
            raise CorruptStore(
                f"{name} was opened through a symbolic link (as {opened}), which is refused",
                path=name,
            )
