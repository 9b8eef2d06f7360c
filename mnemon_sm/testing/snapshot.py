"""What a storage root holds, for tests that require a call to change nothing on disk.

Every file by its bytes, except SQLite databases, which are compared by their rows (a
checkpoint moves pages between a database and its WAL without changing a row, and closing
a store checkpoints); WAL, shared-memory and lock files are left out for the same reason.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

__all__ = ["root_state"]

_SKIPPED = ("-shm", "-wal", ".lock", ".flock")


def root_state(root: str | Path) -> dict[str, object]:
    """``{relative path: bytes, or the database's SQL dump}`` for every file under ``root``."""
    base = Path(root)
    out: dict[str, object] = {}
    for path in sorted(base.rglob("*")):
        if not path.is_file() or path.name.endswith(_SKIPPED):
            continue
        name = str(path.relative_to(base))
        if path.read_bytes()[:16] == b"SQLite format 3\x00":
            uri = path.absolute().as_uri() + "?mode=ro"
            with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
                out[name] = list(conn.iterdump())
        else:
            out[name] = path.read_bytes()
    return out
