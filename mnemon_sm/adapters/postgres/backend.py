"""The ``Files`` and ``Locks`` ports of one root on PostgreSQL (see the package's notes).

Every method is one SQL statement (one transaction) on a connection of the backend's pool, or,
in a thread that holds a lock, on the lock's own connection. Errors of the driver become
``StorageError`` (``LockTimeout`` for a lock not granted in time), with the driver's error as
``__cause__``; after a lost connection the pool drops its idle connections that no longer
work, so the next call reconnects.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import secrets
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from mnemon_sm.adapters.postgres.schema import migrate
from mnemon_sm.adapters.postgres.url import parse_url, redacted
from mnemon_sm.errors import StorageError
from mnemon_sm.ports import TEMP_NAME, Stamp, lock_timeout, path_parts, temp_path

__all__ = ["PgBackend", "PgFiles", "PgLocks"]

# The driver (the ``postgres`` extra) is imported by the first backend opened, so importing the
# package costs nothing without it and no time with it.
psycopg: Any = None
psycopg_pool: Any = None


def _load_driver() -> None:
    global psycopg, psycopg_pool
    if psycopg is None:
        try:
            driver = importlib.import_module("psycopg")
            importlib.import_module("psycopg.errors")
            importlib.import_module("psycopg.conninfo")
            pool = importlib.import_module("psycopg_pool")
        except ImportError as exc:
            raise StorageError(
                "a PostgreSQL root needs the postgres extra: pip install 'mnemon-sm[postgres]'"
            ) from exc
        psycopg, psycopg_pool = driver, pool


_Params = Sequence[Any] | Mapping[str, Any]

_PARENT_IS_DIR = (
    "(%(parent)s = '' OR EXISTS (SELECT 1 FROM mnemon_files "
    "WHERE root = %(root)s AND path = %(parent)s AND is_dir))"
)

_WRITE_NEW = (
    "INSERT INTO mnemon_files (root, path, parent, name, is_dir, data, version) "
    "SELECT %(root)s, %(path)s, %(parent)s, %(name)s, false, %(data)b, "
    "nextval('mnemon_file_versions') WHERE " + _PARENT_IS_DIR
)

_APPEND = (
    _WRITE_NEW + " ON CONFLICT (root, path) DO UPDATE SET data = mnemon_files.data || "
    "EXCLUDED.data, version = EXCLUDED.version WHERE NOT mnemon_files.is_dir"
)

# One statement, so the move is atomic; the source is deleted only when the target can be
# written (its directory exists and it is not a directory itself).
_RENAME = (
    "WITH target_ok AS (SELECT 1 WHERE " + _PARENT_IS_DIR + " AND NOT EXISTS (SELECT 1 FROM "
    "mnemon_files WHERE root = %(root)s AND path = %(path)s AND is_dir)), "
    "moved AS (DELETE FROM mnemon_files WHERE root = %(root)s AND path = %(source)s "
    "AND NOT is_dir AND EXISTS (SELECT 1 FROM target_ok) RETURNING data) "
    "INSERT INTO mnemon_files (root, path, parent, name, is_dir, data, version) "
    "SELECT %(root)s, %(path)s, %(parent)s, %(name)s, false, data, "
    "nextval('mnemon_file_versions') FROM moved "
    "ON CONFLICT (root, path) DO UPDATE SET data = EXCLUDED.data, version = EXCLUDED.version"
)

_REMOVE = (
    "WITH gone AS (DELETE FROM mnemon_files WHERE root = %(root)s AND path = %(path)s "
    "AND NOT is_dir RETURNING 1) SELECT EXISTS (SELECT 1 FROM mnemon_files "
    "WHERE root = %(root)s AND path = %(path)s AND is_dir)"
)

_MAKE_DIRS = (
    "INSERT INTO mnemon_files (root, path, parent, name, is_dir, data, version) "
    "SELECT %(root)s, w.path, w.parent, w.name, true, NULL, nextval('mnemon_file_versions') "
    "FROM unnest(%(paths)s::text[], %(parents)s::text[], %(names)s::text[]) "
    "AS w(path, parent, name) ON CONFLICT (root, path) DO NOTHING"
)


def _lock_key(root: str, name: str) -> int:
    """The advisory lock key of ``name`` in ``root``: 64 bits of SHA-256, signed."""
    digest = hashlib.sha256(f"mnemon-sm\0{root}\0{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class PgBackend:
    """One root on PostgreSQL: its pool, its ``files`` and its ``locks``.

    ``url`` is ``postgresql://...?root=NAME``; ``max_connections`` bounds the pool, which the
    roots of one database share in a process (each lock held, or waited for, takes one of its
    connections while it is). Opening applies the schema's migrations.
    Raises ``StorageError`` when the server cannot be reached or its schema is newer.
    """

    def __init__(self, url: str, *, max_connections: int = 16, connect_timeout_s: float = 10.0):
        _load_driver()
        conninfo, self.root = parse_url(url)
        self.display = redacted(url)  # where the root lives, for people
        self.identity = _identity(conninfo, self.root)  # the same root, whoever logs in
        # thread id -> the connections of the locks that thread holds (the last one serves it)
        self._bound: dict[int, list[Any]] = {}
        # Threads of this backend wait for each other here before they wait on the server, so
        # one lock never takes more than one connection of the pool to wait for it.
        self._queues: dict[str, threading.Lock] = {}
        self._queues_guard = threading.Lock()
        try:  # one direct connection first: a bad address or login fails at once
            with psycopg.connect(
                conninfo, autocommit=True, connect_timeout=max(1, round(connect_timeout_s))
            ) as conn:
                migrate(conn)
        except psycopg.Error as exc:
            raise StorageError(
                f"cannot open the PostgreSQL root {self.root}: {reason(exc)}"
            ) from exc
        self._conninfo = conninfo
        self._pool = _Pools.take(conninfo, max_connections, connect_timeout_s)
        self.files = PgFiles(self)
        self.locks = PgLocks(self)

    def close(self) -> None:
        """Release every lock still held and give the pool back (the last root of its
        database to close closes the pool's connections)."""
        if self._pool is None:
            return
        self.locks.release_all()
        self._pool = None
        _Pools.give_back(self._conninfo)

    def _live(self) -> Any:
        if self._pool is None:
            raise StorageError(f"the PostgreSQL root {self.root} is closed")
        return self._pool

    # -- statements ------------------------------------------------------------------------

    def run(self, what: str, path: str, sql: str, params: _Params) -> tuple[int, list[Any]]:
        """Execute one statement; returns its row count and rows."""
        bound = self._bound.get(threading.get_ident())
        try:
            if bound:
                return _execute(bound[-1], sql, params)
            with self._live().connection() as conn:
                return _execute(conn, sql, params)
        except psycopg.Error as exc:
            self.after(exc)
            raise StorageError(f"cannot {what} {path}: {reason(exc)}") from exc

    def connection(self) -> Any:
        """A connection of the pool, as a context manager (autocommit; the caller translates
        driver errors and calls :meth:`after` with them)."""
        return self._live().connection()

    def after(self, exc: BaseException) -> None:
        """After a lost connection, drop the idle ones that no longer work."""
        if isinstance(exc, psycopg.OperationalError):
            with contextlib.suppress(psycopg.Error):  # still away: the next call tries again
                self._live().check()

    # -- connections of locks --------------------------------------------------------------

    def checkout(self, timeout_s: float) -> Any:
        return self._live().getconn(timeout=max(0.001, timeout_s))

    def checkin(self, conn: Any) -> None:
        if self._pool is not None:
            self._pool.putconn(conn)
        else:  # closed meanwhile: the pool may be gone too
            conn.close()

    def bind(self, thread: int, conn: Any) -> None:
        self._bound.setdefault(thread, []).append(conn)

    def unbind(self, thread: int, conn: Any) -> None:
        held = self._bound.get(thread)
        if held is not None:
            held[:] = [c for c in held if c is not conn]
            if not held:
                del self._bound[thread]

    def queue(self, name: str) -> threading.Lock:
        with self._queues_guard:
            return self._queues.setdefault(name, threading.Lock())


class _Pools:
    """One pool per database address in a process, shared by the roots (tenants) opened on
    it, so a host serving many roots keeps few connections and one set of pool threads; the
    first root's ``max_connections`` sizes it, and the last root to close closes it."""

    _guard = threading.Lock()
    _open: ClassVar[dict[str, tuple[Any, int]]] = {}

    @classmethod
    def take(cls, conninfo: str, max_connections: int, timeout_s: float) -> Any:
        with cls._guard:
            pool, users = cls._open.get(conninfo, (None, 0))
            if pool is None:
                pool = psycopg_pool.ConnectionPool(
                    conninfo,
                    kwargs={"autocommit": True, "application_name": "mnemon-sm"},
                    configure=_configure,
                    min_size=1,
                    max_size=max_connections,
                    open=False,
                    timeout=timeout_s,
                    name="mnemon-sm",
                )
                pool.open(wait=False)
            cls._open[conninfo] = (pool, users + 1)
            return pool

    @classmethod
    def give_back(cls, conninfo: str) -> None:
        with cls._guard:
            pool, users = cls._open[conninfo]
            if users > 1:
                cls._open[conninfo] = (pool, users - 1)
                return
            del cls._open[conninfo]
        pool.close()


def _configure(conn: Any) -> None:
    """A new pooled connection commits without waiting for its WAL to reach the disk: the
    statements of a port call are as durable as a file written without ``fsync``, and only
    :data:`_FLUSH` (``fsync``, ``ensure_dir``) waits, for everything committed before it."""
    conn.execute("SET synchronous_commit = off")


# A durable point, in one statement: it writes (the root's row of mnemon_flushes: a transaction
# that wrote nothing commits without waiting, whatever the setting) with synchronous_commit on
# for its own transaction, so its commit returns once the WAL is flushed up to it, which covers
# every transaction committed before it, by any session (the WAL is one sequence). It also
# tells whether the path exists.
_FLUSH = (
    "WITH setting AS (SELECT set_config('synchronous_commit', 'on', true)) "
    "INSERT INTO mnemon_flushes (root, count) SELECT %(root)s, 1 FROM setting "
    "ON CONFLICT (root) DO UPDATE SET count = mnemon_flushes.count + 1 "
    "RETURNING EXISTS (SELECT 1 FROM mnemon_files WHERE root = %(root)s AND path = %(path)s)"
)


_EXISTS = "SELECT EXISTS (SELECT 1 FROM mnemon_files WHERE root = %(root)s AND path = %(path)s)"


def _execute(conn: Any, sql: str, params: _Params) -> tuple[int, list[Any]]:
    cur = conn.execute(sql, params)
    rows = cur.fetchall() if cur.description is not None else []
    return cur.rowcount, rows


def _identity(conninfo: str, root: str) -> str:
    """Server, port, database and root of a connection string (no user, no password)."""
    info = psycopg.conninfo.conninfo_to_dict(conninfo)
    where = [str(info.get(key) or "") for key in ("host", "hostaddr", "port", "dbname")]
    return "\0".join([*where, root])


def reason(exc: BaseException) -> str:
    """The first line of a driver error, for messages."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _split(path: str) -> tuple[str, str]:
    parts = path_parts(path)
    return "/".join(parts[:-1]), parts[-1]


class PgFiles:
    """The ``Files`` port on the ``mnemon_files`` table (see the package)."""

    def __init__(self, backend: PgBackend) -> None:
        self._b = backend
        self._root = backend.root
        self._temps: set[str] = set()  # temporary files written here, not renamed or removed

    def read(self, path: str) -> bytes | None:
        path_parts(path)
        _, rows = self._b.run(
            "read",
            path,
            "SELECT data, is_dir FROM mnemon_files WHERE root = %s AND path = %s",
            [self._root, path],
        )
        if not rows:
            return None
        data, is_dir = rows[0]
        if is_dir:
            raise StorageError(f"cannot read {path}: it is a directory")
        return bytes(data)

    def read_if_changed(self, path: str, seen: Stamp | None) -> tuple[Stamp | None, bytes | None]:
        path_parts(path)
        known = seen.token[0] if seen is not None and len(seen.token) == 1 else -1
        _, rows = self._b.run(
            "read",
            path,
            "SELECT version, is_dir, CASE WHEN version = %s THEN NULL ELSE data END "
            "FROM mnemon_files WHERE root = %s AND path = %s",
            [known, self._root, path],
        )
        if not rows:
            return None, None
        version, is_dir, data = rows[0]
        if is_dir:
            raise StorageError(f"cannot read {path}: it is a directory")
        if data is None:
            return seen, None
        return Stamp((int(version),)), bytes(data)

    def write_temp(self, path: str, data: bytes) -> str:
        path_parts(path)
        # pid + time + 48 random bits: unique across hosts (a pid alone is not)
        temp = temp_path(path, os.getpid(), time.time_ns() // 1_000_000, secrets.randbits(48))
        parent, name = _split(temp)
        params = {"root": self._root, "path": temp, "parent": parent, "name": name, "data": data}
        count, _ = self._b.run("create", temp, _WRITE_NEW, params)
        if count != 1:
            raise StorageError(f"cannot create {temp}: no such directory")
        if len(self._temps) >= 64:  # temporaries nobody renamed or removed
            self._temps.clear()
        self._temps.add(temp)
        return temp

    def append(self, path: str, data: bytes) -> None:
        parent, name = _split(path)
        params = {"root": self._root, "path": path, "parent": parent, "name": name, "data": data}
        count, _ = self._b.run("append to", path, _APPEND, params)
        if count != 1:
            raise StorageError(f"cannot append to {path}: no such directory, or a directory")

    def fsync(self, path: str) -> None:
        # Flushes everything committed so far, this path's last change included (see _FLUSH).
        # Except for a temporary file: a file system must have its bytes on disk before the
        # rename, else a crash could leave the target renamed but empty; here the rename's
        # commit follows the write's in the one WAL, so whenever the rename survives a crash,
        # so do the bytes, and the flush after the rename makes both durable at once.
        # A temporary file this object wrote and has not renamed or removed needs no call at
        # all (had another host removed it, the rename would say so).
        if path in self._temps:
            return
        params = {"root": self._root, "path": path}
        if path != "" and TEMP_NAME.match(path_parts(path)[-1]):
            _, rows = self._b.run("fsync", path, _EXISTS, params)
        else:
            _, rows = self._b.run("fsync", path or ".", _FLUSH, params)
        if path != "" and not rows[0][0]:
            raise StorageError(f"cannot fsync {path}: no such file or directory")

    def rename(self, source: str, target: str) -> None:
        path_parts(source)
        parent, name = _split(target)
        if source == target:
            if self.read(source) is None:
                raise StorageError(f"cannot rename {source}: no such file")
            return
        self._temps.discard(source)
        params = {
            "root": self._root,
            "source": source,
            "path": target,
            "parent": parent,
            "name": name,
        }
        count, _ = self._b.run("rename", source, _RENAME, params)
        if count != 1:
            raise StorageError(
                f"cannot rename {source} to {target}: no such file, no such directory, or "
                "the target is a directory"
            )

    def list(self, directory: str) -> tuple[str, ...]:
        if directory:
            path_parts(directory)
        _, rows = self._b.run(
            "list",
            directory or ".",
            "SELECT name FROM mnemon_files WHERE root = %s AND parent = %s",
            [self._root, directory],
        )
        return tuple(sorted(row[0] for row in rows))

    def walk(self) -> tuple[str, ...]:
        """Every file's path, sorted (the ``FileTree`` capability)."""
        _, rows = self._b.run(
            "list",
            ".",
            "SELECT path FROM mnemon_files WHERE root = %s AND NOT is_dir",
            [self._root],
        )
        return tuple(sorted(str(row[0]) for row in rows))

    def remove(self, path: str) -> None:
        path_parts(path)
        self._temps.discard(path)
        _, rows = self._b.run("remove", path, _REMOVE, {"root": self._root, "path": path})
        if rows and rows[0][0]:
            raise StorageError(f"cannot remove {path}: it is a directory")

    def ensure_dir(self, directory: str) -> None:
        parts = path_parts(directory)
        paths = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        _, rows = self._b.run(
            "create the directory",
            directory,
            "SELECT path, is_dir FROM mnemon_files WHERE root = %s AND path = ANY(%s)",
            [self._root, paths],
        )
        files = [path for path, is_dir in rows if not is_dir]
        if files:
            raise StorageError(f"cannot create the directory {directory}: {files[0]} is a file")
        if len(rows) == len(paths):  # all there already: nothing to write or to wait for
            return
        params = {
            "root": self._root,
            "paths": paths,
            "parents": ["/".join(parts[:i]) for i in range(len(parts))],
            "names": parts,
        }
        self._b.run("create the directory", directory, _MAKE_DIRS, params)
        self._b.run("create the directory", directory, _FLUSH, {"root": self._root, "path": ""})


class PgLocks:
    """The ``Locks`` port on session-level advisory locks (see the package)."""

    def __init__(self, backend: PgBackend) -> None:
        self._b = backend
        self._held: dict[str, tuple[Any, threading.Lock, int]] = {}

    def acquire(self, name: str, timeout_ms: int) -> None:
        path_parts(name)
        deadline = time.monotonic() + max(0, timeout_ms) / 1000
        queue = self._b.queue(name)
        if not queue.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise lock_timeout(name, timeout_ms)
        try:
            try:
                conn = self._b.checkout(deadline - time.monotonic())
            except psycopg.Error as exc:
                self._b.after(exc)
                raise StorageError(f"cannot lock {name}: {reason(exc)}") from exc
            try:
                _lock(conn, _lock_key(self._b.root, name), name, timeout_ms, deadline)
            except BaseException:
                conn.close()  # whatever the server granted goes with the session
                self._b.checkin(conn)
                raise
        except BaseException:
            queue.release()
            raise
        thread = threading.get_ident()
        self._held[name] = (conn, queue, thread)
        self._b.bind(thread, conn)

    def release(self, name: str) -> None:
        held = self._held.pop(name, None)
        if held is None:
            return
        conn, queue, thread = held
        self._b.unbind(thread, conn)
        try:
            if not conn.closed:
                conn.execute("SELECT pg_advisory_unlock(%s)", [_lock_key(self._b.root, name)])
        except psycopg.Error:
            # The session is gone, and its locks with it: the lock is released either way.
            conn.close()
        finally:
            self._b.checkin(conn)
            queue.release()

    def release_all(self) -> None:
        for name in list(self._held):
            self.release(name)


def _lock(conn: Any, key: int, name: str, timeout_ms: int, deadline: float) -> None:
    """Take the advisory lock ``key`` on ``conn`` before ``deadline`` or raise."""
    try:
        got = conn.execute("SELECT pg_try_advisory_lock(%s)", [key]).fetchone()[0]
        remaining_ms = int((deadline - time.monotonic()) * 1000)
        if not got and remaining_ms > 0:
            conn.execute("SELECT set_config('lock_timeout', %s, false)", [f"{remaining_ms}ms"])
            try:
                conn.execute("SELECT pg_advisory_lock(%s)", [key])
                got = True
            except psycopg.errors.LockNotAvailable:
                got = False
            finally:
                conn.execute("SELECT set_config('lock_timeout', '0', false)")
    except psycopg.Error as exc:
        raise StorageError(f"cannot lock {name}: {reason(exc)}") from exc
    if not got:
        raise lock_timeout(name, timeout_ms)
