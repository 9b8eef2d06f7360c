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
    # Memory Spaces: Mnemon's three tables per (root, space), each row keyed by its rowid in
    # the replicas and stamped with the space's change number (``seq``) that last wrote it; a
    # deleted row leaves a tombstone (see mnemon_sm.adapters.postgres.spaces).
    3: (
        "CREATE SEQUENCE mnemon_space_incarnations",
        """CREATE TABLE mnemon_spaces (
            root text NOT NULL,
            space text NOT NULL,
            incarnation bigint NOT NULL,
            seq bigint NOT NULL,
            horizon bigint NOT NULL,
            PRIMARY KEY (root, space)
        )""",
        """CREATE TABLE mnemon_insights (
            root text NOT NULL,
            space text NOT NULL,
            rid bigint NOT NULL,
            seq bigint NOT NULL,
            id text NOT NULL,
            content text NOT NULL,
            category text NOT NULL,
            importance integer NOT NULL,
            tags text NOT NULL,
            entities text NOT NULL,
            source text NOT NULL,
            access_count integer NOT NULL,
            created_at text NOT NULL,
            updated_at text NOT NULL,
            deleted_at text,
            last_accessed_at text,
            embedding bytea,
            effective_importance double precision,
            PRIMARY KEY (root, space, rid),
            FOREIGN KEY (root, space) REFERENCES mnemon_spaces ON DELETE CASCADE
        )""",
        "CREATE INDEX mnemon_insights_by_seq ON mnemon_insights (root, space, seq)",
        "CREATE UNIQUE INDEX mnemon_insights_by_id ON mnemon_insights (root, space, id)",
        """CREATE TABLE mnemon_edges (
            root text NOT NULL,
            space text NOT NULL,
            rid bigint NOT NULL,
            seq bigint NOT NULL,
            source_id text NOT NULL,
            target_id text NOT NULL,
            edge_type text NOT NULL,
            weight double precision NOT NULL,
            metadata text NOT NULL,
            created_at text NOT NULL,
            PRIMARY KEY (root, space, rid),
            FOREIGN KEY (root, space) REFERENCES mnemon_spaces ON DELETE CASCADE
        )""",
        "CREATE INDEX mnemon_edges_by_seq ON mnemon_edges (root, space, seq)",
        """CREATE TABLE mnemon_oplog (
            root text NOT NULL,
            space text NOT NULL,
            rid bigint NOT NULL,
            seq bigint NOT NULL,
            operation text NOT NULL,
            insight_id text,
            detail text,
            created_at text NOT NULL,
            PRIMARY KEY (root, space, rid),
            FOREIGN KEY (root, space) REFERENCES mnemon_spaces ON DELETE CASCADE
        )""",
        "CREATE INDEX mnemon_oplog_by_seq ON mnemon_oplog (root, space, seq)",
        """CREATE TABLE mnemon_space_deletions (
            root text NOT NULL,
            space text NOT NULL,
            tbl smallint NOT NULL,
            rid bigint NOT NULL,
            seq bigint NOT NULL,
            PRIMARY KEY (root, space, tbl, rid),
            FOREIGN KEY (root, space) REFERENCES mnemon_spaces ON DELETE CASCADE
        )""",
        "CREATE INDEX mnemon_space_deletions_by_seq ON mnemon_space_deletions (root, space, seq)",
    ),
    # The embedder's vectors of a space, by model and content hash, shared by its hosts: one
    # host embeds a text, every other host fetches the vector instead of computing it again.
    4: (
        "CREATE SEQUENCE mnemon_vector_versions",
        """CREATE TABLE mnemon_vectors (
            root text NOT NULL,
            space text NOT NULL,
            model text NOT NULL,
            hash bigint NOT NULL,
            vec bytea NOT NULL,
            version bigint NOT NULL,
            PRIMARY KEY (root, space, model, hash),
            FOREIGN KEY (root, space) REFERENCES mnemon_spaces ON DELETE CASCADE
        )""",
        "CREATE INDEX mnemon_vectors_by_version ON mnemon_vectors (root, space, model, version)",
    ),
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
