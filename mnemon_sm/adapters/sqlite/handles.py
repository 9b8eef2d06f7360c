"""One open store: its connection, side index and lock, and how transactions run on it.

Theory of operation
-------------------
A :class:`Handle` owns the connection to one ``mnemon.db`` with the side index attached, the
process-wide lock of that file (``locks.path_lock``, re-entrant, shared by every store object
of the process) and the identity (device, inode) of the file it opened, so a replaced file is
noticed and reopened by the store. It is opened through a :class:`~.pin.Pin`: no symlink in
``data/<space>/`` is ever followed (the checks, and what they leave open, are there). The pin
is released only after the connection is closed, so no descriptor of the file is closed under
SQLite's locks.

Rules kept:

- A write is one ``BEGIN IMMEDIATE`` transaction: bring the side index up to date, run the
  operation with one clock reading, commit. Anything raised rolls everything back; if the side
  index had changed inside the transaction, it is checked again before its next use.
- A read is one deferred transaction (one snapshot of both files). When asked, it first syncs
  the side index in a short write transaction, if another connection changed either file.
- Closing checkpoints the WAL of both files with ``TRUNCATE`` when asked.
- A read-only handle writes no file: ``mnemon.db`` is opened read-only (immutable when no
  writer has it open, see :func:`.schema.open_connection`), its schema only checked, and
  the side index is a private one in memory (:meth:`.SideIndex.attach`); an immutable
  handle's ``identity`` also holds the file's size and times, so a change is noticed.
- Directories created here are 0700; a ``sqlite3`` or operating-system failure is reported as
  ``StorageError`` with the original as ``__cause__``.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import weakref
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import TypeVar

import attrs

from mnemon_sm.adapters.path_locks import path_lock
from mnemon_sm.adapters.sqlite import schema
from mnemon_sm.adapters.sqlite.pin import Pin
from mnemon_sm.adapters.sqlite.rows import IdSequence
from mnemon_sm.adapters.sqlite.sideindex import INDEX_FILE, SideIndex
from mnemon_sm.adapters.sqlite.tx import Tx
from mnemon_sm.errors import CorruptStore, StorageError
from mnemon_sm.ports import Clock
from mnemon_sm.ports.long_term import layout
from mnemon_sm.ports.long_term.layout import DB_FILE

__all__ = ["Handle", "fsync_directory", "mkdir_private", "storage_error"]

T = TypeVar("T")


def storage_error(what: str, exc: BaseException) -> StorageError:
    error = StorageError(f"{what} failed: {exc}")
    error.__cause__ = exc
    return error


def fsync_directory(path: Path) -> None:
    """Make a new name in ``path`` durable (not followed if ``path`` is a symlink)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_NOFOLLOW)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def mkdir_private(path: Path) -> None:
    """Create a directory with mode 0700 unless it exists."""
    with suppress(FileExistsError):
        path.mkdir(mode=0o700)


def _close(conn: sqlite3.Connection | None, pin: Pin | None) -> None:
    """Close ``conn``, then release ``pin`` (in this order: see :mod:`.pin`)."""
    try:
        if conn is not None:
            conn.close()
    finally:
        if pin is not None:
            pin.close()


@attrs.define
class Handle:
    conn: sqlite3.Connection
    index: SideIndex
    lock: threading.RLock
    identity: tuple[int, ...]
    db_path: str
    closed: bool = False
    ids: IdSequence = attrs.Factory(IdSequence)
    immutable: bool = False
    pin: Pin | None = None  # released after the connection is closed
    _closing: weakref.finalize[[sqlite3.Connection, Pin | None], Handle] | None = attrs.field(
        init=False, default=None
    )

    def __attrs_post_init__(self) -> None:
        # A handle collected unclosed still closes its connection, then releases its pin.
        self._closing = weakref.finalize(self, _close, self.conn, self.pin)

    @classmethod
    def open(
        cls,
        root: Path,
        space: str,
        durability: str = "full",
        progress: Callable[[int, int], None] | None = None,
        *,
        readonly: bool = False,
        immutable: bool = False,
        extra: tuple[int, ...] = (),
    ) -> Handle:
        """Connect to ``data/<space>/mnemon.db`` following no symlink (:mod:`.pin`), complete
        the schema, attach the side index. ``readonly``: change and create nothing (the
        schema only checked, the side index private in memory; ``immutable``: read the file
        as it is, see :func:`.schema.open_connection`). ``extra`` is appended to the file's
        identity (what else the caller compares to know the handle still right)."""
        db = root / "data" / space / DB_FILE
        where = layout.where(space, DB_FILE)
        lock = path_lock(db)
        with lock:
            conn: sqlite3.Connection | None = None
            pin: Pin | None = None
            try:
                pin = Pin(root, space)
                schema.check_header(pin.fd, where)
                mode = "immutable=1" if immutable else "mode=ro" if readonly else "mode=rw"
                conn = schema.open_connection(str(db), mode)
                pin.check_opened(conn)
                index = SideIndex(conn, str(db.parent / INDEX_FILE), progress)
                if readonly:
                    schema.configure_read_only(conn)
                    schema.check_schema(conn, where)
                    index.attach(private=True)
                else:
                    schema.configure(conn, durability)
                    schema.ensure_schema(conn, where)
                    index.attach(pin.check_index)
                identity = (*pin.identity, *extra)
                return cls(conn, index, lock, identity, str(db), immutable=immutable, pin=pin)
            except (sqlite3.Error, OSError) as exc:
                _close(conn, pin)
                if isinstance(exc, sqlite3.Error) and schema.not_a_database(exc):
                    raise CorruptStore(f"{where} is not a SQLite database", path=where) from exc
                raise storage_error(f"opening {where}", exc) from exc
            except BaseException:
                _close(conn, pin)
                raise

    def close(self, *, checkpoint: bool) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            if checkpoint:
                self.conn.execute("PRAGMA main.wal_checkpoint(TRUNCATE)")
                self.conn.execute("PRAGMA idx.wal_checkpoint(TRUNCATE)")
        finally:
            assert self._closing is not None
            self._closing()

    def write(self, body: Callable[[Tx], T], clock: Clock) -> T:
        """Run ``body`` in one write transaction (caller holds :attr:`lock`)."""
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            self.index.sync()
            result = body(Tx(conn, self.index, clock.now_ms(), ids=self.ids))
            conn.execute("COMMIT")
        except BaseException:
            try:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            finally:
                if self.index.dirty:
                    self.index.forget_sync()
            raise
        self.index.dirty = False
        return result

    def read(self, body: Callable[[Handle], T], clock: Clock, *, sync_index: bool) -> T:
        """Run ``body`` on one snapshot (caller holds :attr:`lock`)."""
        if sync_index and self.index.needs_sync():
            self.write(lambda tx: None, clock)
        self.conn.execute("BEGIN")
        try:
            return body(self)
        finally:
            self.conn.execute("ROLLBACK")
