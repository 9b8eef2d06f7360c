"""The schema of a Mnemon store's ``mnemon.db``, and how a connection to it is opened.

Theory of operation
-------------------
``mnemon.db`` is shared with the real Mnemon: a store created here must look like one its
migration created, and a store it created must open here. So this module owns exactly Mnemon's
three tables (``insights``, ``edges``, ``oplog``), their columns, defaults, the CHECK list of
edge types and the indexes, at ``PRAGMA user_version = 1``, and nothing of our own: the side
index lives in another file (:mod:`.sideindex`).

Rules kept:

- A new store gets the whole DDL in one transaction, then ``user_version = 1``, in a draft
  file beside ``mnemon.db`` that is then linked to that name: no program ever sees an empty
  ``mnemon.db`` of ours. An empty file, or one SQLite does not take for a database, is
  refused as corrupt and left as it is (SQLite would turn an empty file into a new store).
- An existing store is never restructured: a missing table is created and a missing optional
  column (``last_accessed_at``, ``embedding``, ``effective_importance``) is added the way
  Mnemon's own migration adds it; extra columns and foreign index names are left alone, and
  ``user_version`` is not touched (Mnemon's migrations key on it). A store without Mnemon's
  core columns is refused as corrupt.
- Every connection: WAL, ``foreign_keys`` on, a 5 s busy timeout, autocommit (transactions are
  explicit, writes in ``BEGIN IMMEDIATE``), a 64 MiB page cache; it opens an existing file only.
  A read-only connection (``mode=ro`` or ``immutable=1``) changes nothing and creates no file.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from mnemon_sm.errors import CorruptStore
from mnemon_sm.ports.long_term.digest import COLUMNS
from mnemon_sm.ports.long_term.values import EDGE_TYPES

__all__ = [
    "BUSY_TIMEOUT_MS",
    "DDL",
    "SCHEMA_VERSION",
    "check_header",
    "check_schema",
    "configure",
    "configure_read_only",
    "create",
    "ensure_schema",
    "not_a_database",
    "open_connection",
]

SCHEMA_VERSION = 1
BUSY_TIMEOUT_MS = 5000
CACHE_KIB = 64 * 1024  # per-connection page cache: edge and index b-trees of a 100k store
_TYPES = ", ".join(f"'{kind}'" for kind in EDGE_TYPES)

DDL = f"""
CREATE TABLE IF NOT EXISTS insights (
    id                   TEXT PRIMARY KEY,
    content              TEXT NOT NULL,
    category             TEXT NOT NULL DEFAULT 'general',
    importance           INTEGER NOT NULL DEFAULT 3,
    tags                 TEXT NOT NULL DEFAULT '[]',
    entities             TEXT NOT NULL DEFAULT '[]',
    source               TEXT NOT NULL DEFAULT 'user',
    access_count         INTEGER NOT NULL DEFAULT 0,
    created_at           TEXT NOT NULL,
    updated_at           TEXT NOT NULL,
    deleted_at           TEXT,
    last_accessed_at     TEXT,
    embedding            BLOB,
    effective_importance REAL DEFAULT 0.5
);
CREATE INDEX IF NOT EXISTS idx_insights_category ON insights(category);
CREATE INDEX IF NOT EXISTS idx_insights_importance ON insights(importance);
CREATE INDEX IF NOT EXISTS idx_insights_created_at ON insights(created_at);
CREATE INDEX IF NOT EXISTS idx_insights_deleted_at ON insights(deleted_at);
CREATE INDEX IF NOT EXISTS idx_insights_source ON insights(source);
CREATE INDEX IF NOT EXISTS idx_insights_effective_importance ON insights(effective_importance);
CREATE INDEX IF NOT EXISTS idx_insights_prune
    ON insights(deleted_at, importance, access_count, effective_importance);

CREATE TABLE IF NOT EXISTS edges (
    source_id  TEXT NOT NULL REFERENCES insights(id) ON DELETE CASCADE,
    target_id  TEXT NOT NULL REFERENCES insights(id) ON DELETE CASCADE,
    edge_type  TEXT NOT NULL CHECK (edge_type IN ({_TYPES})),
    weight     REAL NOT NULL DEFAULT 1.0,
    metadata   TEXT NOT NULL DEFAULT '{{}}',
    created_at TEXT NOT NULL,
    PRIMARY KEY (source_id, target_id, edge_type)
);
CREATE INDEX IF NOT EXISTS idx_edges_source ON edges(source_id);
CREATE INDEX IF NOT EXISTS idx_edges_target ON edges(target_id);
CREATE INDEX IF NOT EXISTS idx_edges_type ON edges(edge_type);
CREATE INDEX IF NOT EXISTS idx_edges_source_type ON edges(source_id, edge_type);
CREATE INDEX IF NOT EXISTS idx_edges_target_type ON edges(target_id, edge_type);

CREATE TABLE IF NOT EXISTS oplog (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    operation   TEXT NOT NULL,
    insight_id  TEXT,
    detail      TEXT,
    created_at  TEXT NOT NULL
);
"""

_STATEMENTS = tuple(part.strip() for part in DDL.split(";") if part.strip())
# Columns Mnemon's migration adds to older stores, with the definitions it adds them with.
_ADDED_COLUMNS = {
    "last_accessed_at": "TEXT",
    "embedding": "BLOB",
    "effective_importance": "REAL DEFAULT 0.5",
}
# The columns every Mnemon store has (the ones a migration copies, less those added later).
_CORE_COLUMNS = tuple(c for c in COLUMNS["insights"] if c not in _ADDED_COLUMNS)


SYNCHRONOUS = {"full": "FULL", "normal": "NORMAL", "off": "OFF"}


def open_connection(path: str, mode: str = "mode=rw") -> sqlite3.Connection:
    """Open the existing file ``path`` (never create it: a store is created on purpose, with
    its mode) and run nothing on it: the caller checks which file SQLite opened before the
    first statement that may write (see :mod:`.handles`), then calls :func:`configure` (or
    :func:`configure_read_only`).

    ``mode``: ``mode=rw``; ``mode=ro`` to read through a writer's WAL; ``immutable=1`` when no
    ``-wal`` file exists (no writer has the file open): SQLite reads the file as it is, with no
    locks and no ``-wal``/``-shm`` files (which a plain read-only connection creates when they
    are missing, and cannot create on a read-only mount); the caller must notice a later change
    of the file itself (:class:`~.handles.Handle`)."""
    return sqlite3.connect(
        Path(path).absolute().as_uri() + "?" + mode,
        uri=True,
        timeout=BUSY_TIMEOUT_MS / 1000,
        isolation_level=None,
        check_same_thread=False,
    )


def configure(conn: sqlite3.Connection, durability: str = "full") -> None:
    """The store's settings: autocommit, WAL, foreign keys, busy timeout, and the root's
    durability: ``full`` syncs the WAL on every commit, ``normal`` at checkpoints only (a
    commit may be lost to a power cut, never torn), ``off`` never."""
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA main.synchronous = {SYNCHRONOUS[durability]}")
    conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
    # Statement journals (an INSERT OR REPLACE of edges needs one) and sorter scratch in
    # memory: on disk they spill to a temporary file past 64 KiB and a remember then pays
    # hundreds of small writes to it.
    conn.execute("PRAGMA temp_store = MEMORY")


def configure_read_only(conn: sqlite3.Connection) -> None:
    """What :func:`configure` sets that a read-only connection may: busy timeout, page cache,
    temporary storage in memory."""
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
    conn.execute("PRAGMA temp_store = MEMORY")


def create(path: str, where: str) -> None:
    """Write a new store with the full schema at ``path``, a file that must not exist (mode
    0600, no symlink followed). The caller moves it into place: a ``mnemon.db`` of length
    zero is then never ours (see :func:`check_header`)."""
    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600))
    conn = sqlite3.connect(Path(path).absolute().as_uri() + "?mode=rw", uri=True)
    try:
        conn.isolation_level = None
        conn.execute("PRAGMA synchronous = FULL")
        ensure_schema(conn, where)
    finally:
        conn.close()


SQLITE_HEADER = b"SQLite format 3\x00"  # the first bytes of every SQLite database file
SQLITE_NOTADB = 26  # the primary result code of "file is not a database"


def check_header(fd: int, where: str) -> None:
    """Refuse, before SQLite opens it, a store file (open as ``fd``) no program made as a
    database: empty (SQLite would take it for a new database and write a schema into it) or
    without SQLite's header (with a WAL file beside it, SQLite would replay pages into it)."""
    head = os.pread(fd, len(SQLITE_HEADER), 0)
    if not head:
        raise CorruptStore(f"{where} is empty, not a Mnemon store", path=where)
    if head != SQLITE_HEADER:
        raise CorruptStore(f"{where} is not a SQLite database", path=where)


def not_a_database(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused the file as not being a database at all."""
    code = getattr(exc, "sqlite_errorcode", None)
    return (code is not None and code & 0xFF == SQLITE_NOTADB) or "not a database" in str(exc)


def _tables(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM main.sqlite_master WHERE type = 'table'")
    return {name for (name,) in rows}


def check_schema(conn: sqlite3.Connection, where: str) -> None:
    """Refuse (``CorruptStore``) a store without Mnemon's core columns, changing nothing (what
    :func:`ensure_schema` checks, for a store opened read-only)."""
    tables = _tables(conn)
    columns = {row[1] for row in conn.execute("PRAGMA main.table_info(insights)")}
    missing = [name for name in _CORE_COLUMNS if name not in columns]
    if "insights" not in tables or missing:
        absent = ", ".join(missing) if "insights" in tables else "insights"
        raise CorruptStore(f"{where} is not a Mnemon store (no {absent})", path=where)


def ensure_schema(conn: sqlite3.Connection, where: str) -> None:
    """Create the schema in an empty store or complete an existing one (see module rules).

    ``where`` names the store file relative to the storage root, for ``CorruptStore``.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        tables = _tables(conn)
        if "insights" not in tables:
            for statement in _STATEMENTS:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        else:
            _complete(conn, tables, where)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _complete(conn: sqlite3.Connection, tables: set[str], where: str) -> None:
    columns = {row[1] for row in conn.execute("PRAGMA main.table_info(insights)")}
    missing = [name for name in _CORE_COLUMNS if name not in columns]
    if missing:
        raise CorruptStore(f"{where} is not a Mnemon store (no {', '.join(missing)})", path=where)
    for name, definition in _ADDED_COLUMNS.items():
        if name not in columns:
            conn.execute(f"ALTER TABLE insights ADD COLUMN {name} {definition}")
    for table in ("edges", "oplog"):
        if table not in tables:
            for statement in _STATEMENTS:
                if f"EXISTS {table} (" in statement or f" ON {table}(" in statement:
                    conn.execute(statement)
