"""Memory Spaces on PostgreSQL: the truth in the database, a replica on each host.

Theory of operation
-------------------
A space is a row of ``mnemon_spaces`` (its ``incarnation``, drawn from a sequence when it is
created, and ``seq``, the number of its last change) and Mnemon's three tables, one row per
row of ``mnemon.db`` (``mnemon_insights``, ``mnemon_edges``, ``mnemon_oplog``: the same
columns, plus the row's rowid ``rid`` and the ``seq`` that last wrote it); a deleted row leaves
a tombstone in ``mnemon_space_deletions``. :class:`PgSpaces` is the embedded store running on
a local replica of each space (a cache directory of the host, see :func:`default_cache`),
kept by :class:`PgUpstream` (the local half is :mod:`mnemon_sm.adapters.sqlite.replica`):

- **Reads** ask for the space's ``seq`` (one statement); a replica behind it pulls the rows
  and tombstones written since, in one ``REPEATABLE READ`` snapshot, and applies them. Then
  the read runs locally: the same ranking, side index and receipts as a root in a directory.
- **Writes** run in the replica's write transaction and, inside it, in one PostgreSQL
  transaction that locks the space's row (``FOR UPDATE``, within the root's lock timeout:
  hosts write a space one at a time), catches up, runs the operation, writes the rows it
  changed with ``seq + 1`` and commits, with ``synchronous_commit`` on when the root's
  durability is ``full``; the replica commits after. A failure anywhere before that commit
  rolls both back; a replica that missed its own commit pulls it on its next call.
- **Tombstones** older than :data:`TOMBSTONES_KEPT` changes are dropped every
  :data:`TOMBSTONE_SWEEP` changes, raising the space's ``horizon``: a replica further behind,
  of another incarnation (the space was deleted and created again) or ahead of the database
  (restored from a backup) is emptied and loaded again in full, rows streamed in batches.

**Vectors** of the embedder are shared: a host that embeds insights stores the vectors in
``mnemon_vectors`` (by model and content hash, numbered from a sequence), and a host about to
embed first fetches those numbered past what it fetched before, so a text is embedded once per
model, not once per host. Ranking with them stays on the host (in memory, as in a directory).

The replica is a cache: it is written with ``synchronous = NORMAL`` (a crash may lose its last
commits, which it pulls again), holds what this host computed itself (the side index), and can
be deleted at any time. A root whose writes are
disabled, or a database user that may only read, still reads: only the cache is written.
Driver errors become ``StorageError`` (``LockTimeout`` for a space locked past the timeout).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

import attrs

from mnemon_sm.adapters.postgres import backend as driver
from mnemon_sm.adapters.postgres.backend import PgBackend
from mnemon_sm.adapters.sqlite import EmbeddedStore, replica, vectors
from mnemon_sm.adapters.sqlite.replica import COLUMNS, TABLES, Changes
from mnemon_sm.adapters.sqlite.tx import Tx
from mnemon_sm.errors import InvalidInput, LockTimeout, StorageError, UnknownSpace
from mnemon_sm.ports import Clock
from mnemon_sm.ports.embedder import Embedder
from mnemon_sm.ports.long_term import checks
from mnemon_sm.ports.long_term.digest import keyset_pages
from mnemon_sm.ports.long_term.port import Rows

__all__ = ["TOMBSTONES_KEPT", "TOMBSTONE_SWEEP", "PgSpaces", "PgUpstream", "default_cache"]

T = TypeVar("T")

TOMBSTONES_KEPT = 10_000  # changes a replica may lag behind and still catch up row by row
TOMBSTONE_SWEEP = 256  # a space's tombstones are swept every this many changes
_BATCH = 2000  # rows per batch of a full load


@attrs.frozen
class Head:
    incarnation: int
    seq: int
    horizon: int


def default_cache(backend: PgBackend) -> Path:
    """The host's replica directory of a root: ``$XDG_CACHE_HOME/mnemon-sm/pg-<hash>`` (else
    ``~/.cache/...``), the hash taken from the server address, database and root name."""
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.expanduser("~/.cache")
    digest = hashlib.sha256(backend.identity.encode()).hexdigest()[:20]
    return Path(base) / "mnemon-sm" / f"pg-{digest}"


def _select(table: str) -> str:
    columns = ", ".join(COLUMNS[table])
    return (
        f"SELECT rid, {columns} FROM mnemon_{table}"
        " WHERE root = %s AND space = %s AND seq > %s ORDER BY rid"
    )


def _upsert(table: str) -> str:
    columns = COLUMNS[table]
    names = ", ".join(columns)
    marks = ", ".join(["%s"] * (len(columns) + 4))
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in ("seq", *columns))
    return (
        f"INSERT INTO mnemon_{table} (root, space, rid, seq, {names}) VALUES ({marks})"
        f" ON CONFLICT (root, space, rid) DO UPDATE SET {updates}"
    )


_SELECT = {table: _select(table) for table in TABLES}
_UPSERT = {table: _upsert(table) for table in TABLES}
_HEAD = "SELECT incarnation, seq, horizon FROM mnemon_spaces WHERE root = %s AND space = %s"


class PgUpstream:
    """The :class:`~mnemon_sm.adapters.sqlite.replica.Upstream` of a root's spaces."""

    def __init__(
        self, backend: PgBackend, *, durable: bool, readonly: bool, lock_timeout_ms: int
    ) -> None:
        self._b = backend
        self._root = backend.root
        self._durable = durable
        self._readonly = readonly
        self._lock_timeout_ms = lock_timeout_ms

    @contextmanager
    def _connection(self, what: str, space: str) -> Iterator[Any]:
        """A pooled connection; driver errors become ``StorageError``."""
        try:
            with self._b.connection() as conn:
                yield conn
        except driver.psycopg.errors.LockNotAvailable as exc:
            raise LockTimeout(
                f"space {space!r} stayed locked by another host for {self._lock_timeout_ms} ms"
            ) from exc
        except driver.psycopg.Error as exc:
            self._b.after(exc)
            raise StorageError(f"{what} on space {space!r} failed: {driver.reason(exc)}") from exc

    def _head(self, conn: Any, space: str, *, lock: bool = False) -> Head:
        row = conn.execute(_HEAD + (" FOR UPDATE" if lock else ""), [self._root, space]).fetchone()
        if row is None:
            raise UnknownSpace(f"no space {space!r}")
        return Head(int(row[0]), int(row[1]), int(row[2]))

    # -- the catalog -------------------------------------------------------------------------

    def spaces(self) -> tuple[str, ...]:
        with self._connection("listing", "*") as conn:
            rows = conn.execute(
                "SELECT space FROM mnemon_spaces WHERE root = %s", [self._root]
            ).fetchall()
        return tuple(sorted(str(row[0]) for row in rows))

    def exists(self, space: str) -> bool:
        with self._connection("looking up", space) as conn:
            return conn.execute(_HEAD, [self._root, space]).fetchone() is not None

    def create(self, space: str) -> int:
        """Create the space; returns its incarnation. ``InvalidInput`` when it exists."""
        self._writable()
        with self._connection("creating", space) as conn, conn.transaction():
            self._sync_setting(conn)
            return self._new_space(conn, space, 0)

    def _new_space(self, conn: Any, space: str, seq: int) -> int:
        """Insert the space's row at change ``seq``; its incarnation. ``InvalidInput`` when
        the space exists."""
        row = conn.execute(
            "INSERT INTO mnemon_spaces (root, space, incarnation, seq, horizon)"
            " VALUES (%s, %s, nextval('mnemon_space_incarnations'), %s, 0)"
            " ON CONFLICT (root, space) DO NOTHING RETURNING incarnation",
            [self._root, space, seq],
        ).fetchone()
        if row is None:
            raise InvalidInput(f"space {space!r} already exists")
        return int(row[0])

    def delete(self, space: str, incarnation: int | None = None) -> None:
        """Delete the space and its rows (only that incarnation of it, when given)."""
        self._writable()
        with self._connection("deleting", space) as conn, conn.transaction():
            self._sync_setting(conn)
            row = conn.execute(
                "DELETE FROM mnemon_spaces WHERE root = %s AND space = %s"
                " AND (%s::bigint IS NULL OR incarnation = %s::bigint) RETURNING 1",
                [self._root, space, incarnation, incarnation],
            ).fetchone()
        if row is None and incarnation is None:
            raise UnknownSpace(f"no space {space!r}")

    def _writable(self) -> None:
        if self._readonly:
            raise StorageError("this root is read-only: its Memory Spaces cannot be changed")

    def _sync_setting(self, conn: Any) -> None:
        if self._durable:
            conn.execute("SELECT set_config('synchronous_commit', 'on', true)")

    # -- rows (a migration's copy) -------------------------------------------------------------

    def export(self, space: str, batch: int) -> Iterator[tuple[str, Rows]]:
        """The space's rows as the database holds them, in keyset pages (``UnknownSpace`` at
        once for a missing space)."""
        with self._connection("exporting", space) as pg:
            self._head(pg, space)
        sql = {
            table: f"SELECT rid, {', '.join(COLUMNS[table])} FROM mnemon_{table}"
            " WHERE root = %s AND space = %s AND rid > %s ORDER BY rid LIMIT %s"
            for table in TABLES
        }

        def page(table: str, after: int) -> Rows:
            with self._connection("exporting", space) as pg:
                found = pg.execute(sql[table], [self._root, space, after, batch])
                return [tuple(row) for row in found]

        return keyset_pages(page)

    def import_rows(self, space: str, batches: Iterable[tuple[str, Rows]]) -> None:
        """Create the space holding these rows (change 1), in one transaction, with COPY."""
        self._writable()
        with self._connection("importing", space) as pg, pg.transaction():
            self._sync_setting(pg)
            self._new_space(pg, space, 1)
            for table, rows in batches:
                if table not in TABLES:
                    raise InvalidInput(f"no table {table!r} in a Mnemon store")
                columns = ", ".join(COLUMNS[table])
                with pg.cursor().copy(
                    f"COPY mnemon_{table} (root, space, rid, seq, {columns}) FROM STDIN"
                ) as copy:
                    for row in rows:
                        copy.write_row((self._root, space, row[0], 1, *row[1:]))

    # -- shared vectors ----------------------------------------------------------------------

    def fetch_vectors(
        self,
        space: str,
        model: str,
        conn: sqlite3.Connection,
        run: Callable[[Callable[[Tx], None]], None],
    ) -> None:
        key = f"vectors:{model}"
        seen = replica.mark(conn, key)
        with self._connection("reading vectors", space) as pg:
            rows = pg.execute(
                "SELECT hash, vec, version FROM mnemon_vectors WHERE root = %s AND space = %s"
                " AND model = %s AND version > %s ORDER BY version",
                [self._root, space, model, seen],
            ).fetchall()
        if not rows:
            return
        items = [(int(digest), bytes(data)) for digest, data, _ in rows]
        top = int(rows[-1][2])

        def store(tx: Tx) -> None:
            vectors.store_vectors(tx.conn, model, items)
            replica.set_mark(tx.conn, key, top)

        run(store)

    def share_vectors(self, space: str, model: str, items: Sequence[tuple[int, bytes]]) -> None:
        if self._readonly or not items:
            return  # a read-only host keeps what it computed to itself
        with self._connection("sharing vectors", space) as pg, pg.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO mnemon_vectors (root, space, model, hash, vec, version)"
                " VALUES (%s, %s, %s, %s, %s, nextval('mnemon_vector_versions'))"
                " ON CONFLICT (root, space, model, hash) DO NOTHING",
                [(self._root, space, model, digest, data) for digest, data in items],
            )

    # -- the replica's upstream --------------------------------------------------------------

    def catch_up(
        self, space: str, conn: sqlite3.Connection, run: Callable[[Callable[[Tx], None]], None]
    ) -> None:
        local = replica.local_state(conn)
        with self._connection("reading", space) as pg:
            head = self._head(pg, space)
            if local == (head.incarnation, head.seq):
                return
            with pg.transaction():
                pg.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                head = self._head(pg, space)
                run(lambda tx: self._bring(tx, pg, space, head))

    def write(self, space: str, tx: Tx, body: Callable[[Tx], T]) -> T:
        self._writable()
        with self._connection("writing", space) as pg, pg.transaction():
            self._sync_setting(pg)
            pg.execute(
                "SELECT set_config('lock_timeout', %s, true)", [f"{self._lock_timeout_ms}ms"]
            )
            head = self._head(pg, space, lock=True)
            self._bring(tx, pg, space, head)
            replica.reset_capture(tx.conn)
            result = body(tx)
            changes = replica.captured(tx.conn)
            if changes:
                seq = head.seq + 1
                self._push(pg, space, changes, seq, head)
                replica.set_state(tx.conn, head.incarnation, seq)
        return result

    def _bring(self, tx: Tx, pg: Any, space: str, head: Head) -> None:
        """Bring the replica to ``head`` (``pg`` sees the database as of ``head``)."""
        local = replica.local_state(tx.conn)
        if local == (head.incarnation, head.seq):
            return
        # Row by row when the replica is of this incarnation, not past the horizon of the
        # tombstones kept, and not ahead of the database (restored from a backup).
        incarnation, seq = local if local is not None else (None, -1)
        if incarnation == head.incarnation and head.horizon <= seq <= head.seq:
            tx.conn.execute("SAVEPOINT mnemon_sm_apply")
            try:
                replica.apply(tx, self._pull(pg, space, seq), head.incarnation, head.seq)
            except sqlite3.Error:  # does not fit: load it in full below
                tx.conn.execute("ROLLBACK TO mnemon_sm_apply")
            else:
                tx.conn.execute("RELEASE mnemon_sm_apply")
                return
            tx.conn.execute("RELEASE mnemon_sm_apply")
        self._load(tx, pg, space, head)

    def _pull(self, pg: Any, space: str, since: int) -> Changes:
        changes = Changes()
        for table in TABLES:
            changes.rows[table] = [
                tuple(row) for row in pg.execute(_SELECT[table], [self._root, space, since])
            ]
            changes.deleted[table] = []
        rows = pg.execute(
            "SELECT tbl, rid FROM mnemon_space_deletions"
            " WHERE root = %s AND space = %s AND seq > %s",
            [self._root, space, since],
        )
        for code, rid in rows:
            changes.deleted[TABLES[code]].append(int(rid))
        return changes

    def _load(self, tx: Tx, pg: Any, space: str, head: Head) -> None:
        """Empty the replica and load the space in full, in batches."""
        replica.wipe(tx)
        for table in TABLES:
            with pg.cursor(name=f"mnemon_sm_load_{table}") as cursor:
                cursor.itersize = _BATCH
                cursor.execute(_SELECT[table], [self._root, space, -1])
                while batch := cursor.fetchmany(_BATCH):
                    replica.insert_rows(tx, table, [tuple(row) for row in batch])
        replica.set_state(tx.conn, head.incarnation, head.seq)
        tx.index.sync(force=True)

    def _push(self, pg: Any, space: str, changes: Changes, seq: int, head: Head) -> None:
        with pg.pipeline():
            for code, table in enumerate(TABLES):
                gone = changes.deleted.get(table, [])
                if gone:
                    pg.execute(
                        f"DELETE FROM mnemon_{table}"
                        " WHERE root = %s AND space = %s AND rid = ANY(%s)",
                        [self._root, space, gone],
                    )
                    pg.execute(
                        "INSERT INTO mnemon_space_deletions (root, space, tbl, rid, seq)"
                        " SELECT %s, %s, %s, unnest(%s::bigint[]), %s"
                        " ON CONFLICT (root, space, tbl, rid) DO UPDATE SET seq = EXCLUDED.seq",
                        [self._root, space, code, gone, seq],
                    )
                rows = changes.rows.get(table, [])
                if rows:
                    with pg.cursor() as cursor:
                        cursor.executemany(
                            _UPSERT[table],
                            [(self._root, space, row[0], seq, *row[1:]) for row in rows],
                        )
            horizon = head.horizon
            if seq % TOMBSTONE_SWEEP == 0 and seq - TOMBSTONES_KEPT > horizon:
                horizon = seq - TOMBSTONES_KEPT
                pg.execute(
                    "DELETE FROM mnemon_space_deletions"
                    " WHERE root = %s AND space = %s AND seq <= %s",
                    [self._root, space, horizon],
                )
            pg.execute(
                "UPDATE mnemon_spaces SET seq = %s, horizon = %s WHERE root = %s AND space = %s",
                [seq, horizon, self._root, space],
            )


class PgSpaces(EmbeddedStore):
    """The ``LongTermStore`` of a root on PostgreSQL (see the module).

    Args:
        backend: the root's backend (its pool; the root closes it).
        cache: this host's replica directory for the root (default :func:`default_cache`).
        clock, prune_ceiling, embedder, progress: as for :class:`EmbeddedStore`.
        durability: ``full`` commits wait for the server's WAL flush; ``normal`` and ``off``
            do not.
        readonly: change nothing in the database (reads still fill the cache).
        lock_timeout_ms: how long a write waits for another host's write of the same space.
    """

    def __init__(
        self,
        backend: PgBackend,
        clock: Clock,
        *,
        cache: str | Path | None = None,
        prune_ceiling: int = 0,
        embedder: Embedder | None = None,
        durability: str = "full",
        progress: Callable[[str, int, int], None] | None = None,
        readonly: bool = False,
        lock_timeout_ms: int = 10_000,
    ) -> None:
        if durability not in ("full", "normal", "off"):
            raise InvalidInput("durability must be full, normal or off")
        self._upstream_pg = PgUpstream(
            backend,
            durable=durability == "full",
            readonly=readonly,
            lock_timeout_ms=lock_timeout_ms,
        )
        where = Path(cache) if cache is not None else default_cache(backend)
        try:
            where.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create the replica directory: {exc}") from exc
        super().__init__(
            where,
            clock,
            prune_ceiling=prune_ceiling,
            embedder=embedder,
            durability="normal",  # a cache: what a crash loses is pulled again
            progress=progress,
            upstream=self._upstream_pg,
        )

    def spaces(self) -> tuple[str, ...]:
        return self._upstream_pg.spaces()

    def create_space(self, space: str) -> None:
        space = checks.space_id(space)
        incarnation = self._upstream_pg.create(space)
        try:
            self._fresh_replica(space)
        except BaseException:
            self._upstream_pg.delete(space, incarnation)
            raise

    def delete_space(self, space: str) -> None:
        space = checks.space_id(space)
        self._upstream_pg.delete(space)
        self._drop_replica(space)

    def _fresh_replica(self, space: str) -> None:
        """A replica of ``space`` unless one exists (one of an earlier incarnation of the
        space is loaded again in full by its next call; dropping it here could pull it from
        under another thread of this host)."""
        with suppress(InvalidInput):  # another thread or process of this host made it meanwhile
            super().create_space(space)

    def _drop_replica(self, space: str) -> None:
        with suppress(UnknownSpace):
            super().delete_space(space)

    def _handle(self, space: str) -> Any:
        try:
            return super()._handle(space)
        except UnknownSpace:
            if not self._upstream_pg.exists(checks.space_id(space)):
                raise
        self._fresh_replica(space)
        return super()._handle(space)

    def _read(self, space: str, what: str, body: Callable[[Any], T], *, index: bool) -> T:
        try:
            return super()._read(space, what, body, index=index)
        except UnknownSpace:
            self._drop_replica(space)  # deleted by another host: its replica goes too
            raise

    def export_rows(self, space: str, batch: int = 2000) -> Iterator[tuple[str, Rows]]:
        """The space's rows as the database holds them (the truth, not this host's replica)."""
        return self._upstream_pg.export(checks.space_id(space), max(1, batch))

    def import_rows(self, space: str, batches: Iterable[tuple[str, Rows]]) -> None:
        """Create ``space`` in the database holding these rows, in one transaction; this
        host's replica is loaded by the space's first use."""
        self._upstream_pg.import_rows(checks.space_id(space), batches)

    def _write(self, space: str, what: str, body: Callable[[Tx], T], *, local: bool = False) -> T:
        try:
            return super()._write(space, what, body, local=local)
        except UnknownSpace:
            self._drop_replica(space)
            raise
