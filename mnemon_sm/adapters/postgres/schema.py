"""The backend's tables, created and upgraded when a root is opened.

Migrations are numbered; ``mnemon_schema`` holds the number applied. Opening runs the missing
ones in one transaction under a transaction-level advisory lock (two hosts opening at once
apply each migration once) and refuses a database whose schema is newer than this library's,
so an old host never writes a layout it does not know.
"""

from __future__ import annotations

from typing import Any

from mnemon_sm.errors import StorageError

__all__ = ["SCHEMA_VERSION", "migrate"]

# The advisory lock key of migrations (a constant of this library: "mnemon-s" in ASCII).
_MIGRATION_KEY = 0x6D6E656D6F6E2D73

_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE mnemon_files (
            root text NOT NULL,
            path text NOT NULL,
            parent text NOT NULL,
            name text NOT NULL,
            is_dir boolean NOT NULL,
            data bytea,
            version bigint NOT NULL,
            PRIMARY KEY (root, path),
            CHECK (is_dir = (data IS NULL))
        )""",
        "CREATE INDEX mnemon_files_by_parent ON mnemon_files (root, parent)",
        "CREATE SEQUENCE mnemon_file_versions",
    ),
    # A row per root that every durable point updates: a transaction that wrote nothing
    # would commit without waiting for the WAL flush, whatever synchronous_commit says.
    2: ("CREATE TABLE mnemon_flushes (root text PRIMARY KEY, count bigint NOT NULL)",),
}

SCHEMA_VERSION = max(_MIGRATIONS)


def migrate(conn: Any) -> int:
    """Bring the database's schema to :data:`SCHEMA_VERSION` (``conn``: a psycopg connection
    in autocommit mode); returns the version found before. An up-to-date schema is only read
    (a user with read access alone can open a read-only root). Raises ``StorageError`` for a
    newer schema."""
    found = _version(conn)
    if found == SCHEMA_VERSION:
        return found
    _refuse_newer(found)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", [_MIGRATION_KEY])
        conn.execute(
            "CREATE TABLE IF NOT EXISTS mnemon_schema ("
            "id int PRIMARY KEY CHECK (id = 1), version int NOT NULL)"
        )
        current = _version(conn)  # another host may have migrated while we waited
        _refuse_newer(current)
        for version in range(current + 1, SCHEMA_VERSION + 1):
            for statement in _MIGRATIONS[version]:
                conn.execute(statement)
        conn.execute(
            "INSERT INTO mnemon_schema (id, version) VALUES (1, %s) "
            "ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version",
            [SCHEMA_VERSION],
        )
    return found


def _version(conn: Any) -> int:
    """The schema version the database holds (0: none yet)."""
    if not conn.execute("SELECT to_regclass('mnemon_schema') IS NOT NULL").fetchone()[0]:
        return 0
    row = conn.execute("SELECT version FROM mnemon_schema").fetchone()
    return int(row[0]) if row else 0


def _refuse_newer(found: int) -> None:
    if found > SCHEMA_VERSION:
        raise StorageError(
            f"the database's mnemon schema is version {found}, newer than this library's "
            f"({SCHEMA_VERSION}): upgrade mnemon-sm to use it"
        )
