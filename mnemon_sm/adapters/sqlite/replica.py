"""A store kept as a replica of an upstream that holds the truth (the PostgreSQL adapter).

Theory of operation
-------------------
An :class:`Upstream` owns the rows of ``mnemon.db`` (``insights``, ``edges``, ``oplog``), each
row keyed by its rowid and stamped with the number (``seq``) of the upstream change that last
wrote it, a deleted row leaving a tombstone with that number. The embedded store keeps a local
``mnemon.db`` as a replica and runs every operation on it, unchanged: the same SQL, side index,
ranking and receipts, so a space answers the same on either backend. This module is the local
half, shared by every upstream:

- **Capture.** Temporary triggers on the replica's connection record the rowid of every row an
  operation inserts, updates or deletes (an ``INSERT OR REPLACE`` of an edge records the row
  it replaces too, before it goes); :func:`captured` turns them into :class:`Changes`.
- **Apply.** :func:`apply` writes an upstream's :class:`Changes` into the replica inside the
  store's write transaction: tombstones first, then rows by rowid (an existing row updated in
  place, so no cascade fires; a new one inserted with its rowid, so every replica numbers its
  rows as the upstream does), then re-indexes the insights whose indexed columns changed and
  takes the side index's fingerprint as current (no full scan follows).
- **State.** The table ``mnemon_sm_replica`` of the replica holds the upstream's
  ``incarnation`` (a space deleted and created again is another) and ``seq`` it reflects,
  written in the same transaction as the rows.

The upstream serialises writers (a lock of its own, taken inside the replica's write
transaction) and brings the replica to its newest ``seq`` before an operation runs, so rowids,
ids and oplog numbers an operation allocates are the ones any replica would; it commits the
captured changes before the replica commits, so a replica never holds a change its upstream
lacks. A replica that fails to apply (or that lost its last commits in a crash) is wiped and
loaded again in full.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

import attrs

from mnemon_sm.adapters.sqlite.tx import Tx
from mnemon_sm.ports.long_term.digest import COLUMNS
from mnemon_sm.ports.long_term.port import ROW_TABLES

__all__ = [
    "COLUMNS",
    "TABLES",
    "Changes",
    "Upstream",
    "apply",
    "captured",
    "insert_rows",
    "local_state",
    "mark",
    "reset_capture",
    "set_mark",
    "set_state",
    "wipe",
]

T = TypeVar("T")

# The replicated tables of mnemon.db and their columns (the rowid comes first in every row):
# the ones a migration copies.
TABLES = ROW_TABLES
_CODE = {name: i for i, name in enumerate(TABLES)}  # the table numbers of the capture table
_CHUNK = 500

_STATE_DDL = (
    "CREATE TABLE IF NOT EXISTS main.mnemon_sm_replica"
    " (key TEXT PRIMARY KEY, value INTEGER NOT NULL)"
)
_CAPTURE_DDL = (
    "CREATE TEMP TABLE IF NOT EXISTS mnemon_sm_changed"
    " (tbl INTEGER NOT NULL, rid INTEGER NOT NULL, PRIMARY KEY (tbl, rid)) WITHOUT ROWID",
    *(
        f"CREATE TEMP TRIGGER IF NOT EXISTS mnemon_sm_{table}_{event.lower()}"
        f" AFTER {event} ON main.{table} BEGIN"
        f" INSERT OR IGNORE INTO mnemon_sm_changed VALUES ({_CODE[table]}, {row}.rowid);"
        " END"
        for table in TABLES
        for event, row in (("INSERT", "new"), ("UPDATE", "new"), ("DELETE", "old"))
    ),
    # REPLACE deletes a conflicting row without firing delete triggers: note it beforehand.
    "CREATE TEMP TRIGGER IF NOT EXISTS mnemon_sm_edges_replace BEFORE INSERT ON main.edges"
    " BEGIN INSERT OR IGNORE INTO mnemon_sm_changed SELECT 1, rowid FROM main.edges"
    " WHERE source_id = new.source_id AND target_id = new.target_id"
    " AND edge_type = new.edge_type; END",
)


@attrs.frozen
class Changes:
    """Rows written (rowid first, then :data:`COLUMNS`) and rowids deleted, per table."""

    rows: dict[str, list[tuple[Any, ...]]] = attrs.field(factory=dict)
    deleted: dict[str, list[int]] = attrs.field(factory=dict)

    def __bool__(self) -> bool:
        return any(self.rows.values()) or any(self.deleted.values())


class Upstream(Protocol):
    """Where the truth of a replicated store lives (see the module)."""

    def catch_up(
        self, space: str, conn: sqlite3.Connection, run: Callable[[Callable[[Tx], None]], None]
    ) -> None:
        """Bring the replica of ``space`` (``conn``, outside a transaction) to the upstream's
        newest state; ``run(body)`` runs ``body`` in one write transaction of the replica."""
        ...

    def write(self, space: str, tx: Tx, body: Callable[[Tx], T]) -> T:
        """Inside the replica's write transaction: take the upstream's lock, catch up, run
        ``body``, and commit what it changed upstream before the replica commits."""
        ...

    def fetch_vectors(
        self,
        space: str,
        model: str,
        conn: sqlite3.Connection,
        run: Callable[[Callable[[Tx], None]], None],
    ) -> None:
        """Store in the replica the vectors of ``model`` other hosts shared since the last
        fetch (``conn`` and ``run`` as for :meth:`catch_up`)."""
        ...

    def share_vectors(self, space: str, model: str, items: Sequence[tuple[int, bytes]]) -> None:
        """Offer vectors this host computed (content hash, float32 bytes) to the others."""
        ...


def local_state(conn: sqlite3.Connection) -> tuple[int, int] | None:
    """``(incarnation, seq)`` the replica reflects, None for a replica never loaded."""
    try:
        rows = dict(conn.execute("SELECT key, value FROM main.mnemon_sm_replica").fetchall())
    except sqlite3.OperationalError:  # no such table yet
        return None
    if "incarnation" not in rows or "seq" not in rows:
        return None
    return int(rows["incarnation"]), int(rows["seq"])


def mark(conn: sqlite3.Connection, key: str) -> int:
    """A number the upstream keeps in the replica's state table (0 when unset)."""
    try:
        row = conn.execute(
            "SELECT value FROM main.mnemon_sm_replica WHERE key = ?", (key,)
        ).fetchone()
    except sqlite3.OperationalError:  # no such table yet
        return 0
    return 0 if row is None else int(row[0])


def set_mark(conn: sqlite3.Connection, key: str, value: int) -> None:
    conn.execute(_STATE_DDL)
    conn.execute("INSERT OR REPLACE INTO main.mnemon_sm_replica VALUES (?, ?)", (key, value))


def set_state(conn: sqlite3.Connection, incarnation: int, seq: int) -> None:
    conn.execute(_STATE_DDL)
    conn.executemany(
        "INSERT OR REPLACE INTO main.mnemon_sm_replica VALUES (?, ?)",
        [("incarnation", incarnation), ("seq", seq)],
    )


def reset_capture(conn: sqlite3.Connection) -> None:
    """Start capturing afresh (installs the triggers on a connection that lacks them)."""
    for statement in _CAPTURE_DDL:
        conn.execute(statement)
    conn.execute("DELETE FROM temp.mnemon_sm_changed")


def captured(conn: sqlite3.Connection) -> Changes:
    """What the operation since :func:`reset_capture` changed, as rows and deletions."""
    marked: dict[str, list[int]] = {table: [] for table in TABLES}
    for code, rid in conn.execute("SELECT tbl, rid FROM temp.mnemon_sm_changed ORDER BY 1, 2"):
        marked[TABLES[code]].append(int(rid))
    changes = Changes()
    for table, rids in marked.items():
        rows = _rows(conn, table, rids)
        present = {row[0] for row in rows}
        changes.rows[table] = rows
        changes.deleted[table] = [rid for rid in rids if rid not in present]
    return changes


def _parts(rids: Sequence[int]) -> Iterator[tuple[Sequence[int], str]]:
    """``rids`` in chunks, each with its ``?`` marks."""
    for start in range(0, len(rids), _CHUNK):
        part = rids[start : start + _CHUNK]
        yield part, ",".join("?" * len(part))


def _rows(conn: sqlite3.Connection, table: str, rids: Sequence[int]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    columns = ", ".join(COLUMNS[table])
    for part, marks in _parts(rids):
        out += conn.execute(
            f"SELECT rowid, {columns} FROM main.{table} WHERE rowid IN ({marks}) ORDER BY rowid",
            part,
        ).fetchall()
    return out


def _present(conn: sqlite3.Connection, table: str, rids: Sequence[int]) -> set[int]:
    """Which of ``rids`` the replica's ``table`` holds (rowids only: no row is read)."""
    found: set[int] = set()
    for part, marks in _parts(rids):
        rows = conn.execute(f"SELECT rowid FROM main.{table} WHERE rowid IN ({marks})", part)
        found.update(int(rid) for (rid,) in rows)
    return found


def apply(tx: Tx, changes: Changes, incarnation: int, seq: int) -> None:
    """Write an upstream's changes into the replica (see the module); raises
    ``sqlite3.Error`` when they do not fit it (the caller then loads it in full)."""
    conn = tx.conn
    insight_rids = sorted(
        {row[0] for row in changes.rows.get("insights", ())}
        | set(changes.deleted.get("insights", ()))
    )
    for table in reversed(TABLES):  # edges before the insights they reference
        for part, marks in _parts(changes.deleted.get(table, [])):
            conn.execute(f"DELETE FROM main.{table} WHERE rowid IN ({marks})", part)
    for table in TABLES:
        rows = changes.rows.get(table, [])
        if not rows:
            continue
        existing = _present(conn, table, [row[0] for row in rows])
        columns = COLUMNS[table]
        settable = [c for c in columns if c != "id"]  # an insight's id never changes
        conn.executemany(
            f"UPDATE main.{table} SET {', '.join(f'{c} = ?' for c in settable)} WHERE rowid = ?",
            [
                (*(value for c, value in zip(columns, row[1:], strict=True) if c != "id"), row[0])
                for row in rows
                if row[0] in existing
            ],
        )
        insert_rows(tx, table, [row for row in rows if row[0] not in existing])
    tx.index.refresh_rows(insight_rids)
    set_state(conn, incarnation, seq)


def insert_rows(tx: Tx, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert rows (rowid first) that the replica does not hold."""
    columns = COLUMNS[table]
    tx.conn.executemany(
        f"INSERT INTO main.{table} (rowid, {', '.join(columns)})"
        f" VALUES ({','.join('?' * (len(columns) + 1))})",
        rows,
    )


def wipe(tx: Tx) -> None:
    """Empty the replica's tables (before a full load)."""
    for table in reversed(TABLES):
        tx.conn.execute(f"DELETE FROM main.{table}")
    tx.conn.execute("DELETE FROM main.sqlite_sequence WHERE name = 'oplog'")
