"""Reading ``mnemon.db`` read-only (SQLite ``mode=ro``): whole rows and the graph, which
the CLI's JSON and ``viz`` leave incomplete."""

from __future__ import annotations

import sqlite3
import urllib.parse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from mnemon_sm.adapters.sqlite import reads
from mnemon_sm.ports.long_term.values import GraphSnapshot, Insight

# -- reading mnemon.db ----------------------------------------------------------------------


@contextmanager
def _read_db(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to ``path`` (SQLite URI ``mode=ro``), in one read transaction."""
    uri = "file:" + urllib.parse.quote(str(path)) + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=5.0, isolation_level=None)
    try:
        conn.execute("PRAGMA query_only = ON")
        conn.execute("BEGIN")
        yield conn
    finally:
        conn.close()


def _db_graph(path: Path) -> GraphSnapshot:
    """Active insights and the edges between them, in insertion order."""
    with _read_db(path) as conn:
        return reads.graph(conn)


def _db_rows(path: Path, ids: Sequence[str], *, active_only: bool = False) -> dict[str, Insight]:
    """Whole rows of ``ids`` (deleted ones too, unless ``active_only``)."""
    with _read_db(path) as conn:
        return reads.rows_by_id(conn, ids, active_only=active_only)
