"""Reading ``mnemon.db`` read-only (SQLite ``mode=ro``): whole rows and the graph, which
the CLI's JSON and ``viz`` leave incomplete."""

from __future__ import annotations

import json
import sqlite3
import urllib.parse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..sqlite.rows import COLUMNS, insight
from ..values import (
    GraphEdge,
    GraphSnapshot,
    Insight,
)

_SQL_CHUNK = 500


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


def _edge_label(kind: str, metadata: Any) -> str:
    try:
        meta = json.loads(metadata) if isinstance(metadata, str) else None
    except ValueError:
        meta = None
    sub = meta.get("sub_type") if isinstance(meta, dict) else None
    return sub if isinstance(sub, str) and sub else kind


def _db_graph(path: Path) -> GraphSnapshot:
    """Active insights and the edges between them, in insertion order."""
    with _read_db(path) as conn:
        nodes = conn.execute(
            f"SELECT {COLUMNS} FROM insights WHERE deleted_at IS NULL ORDER BY rowid"
        ).fetchall()
        edges = conn.execute(
            "SELECT e.source_id, e.target_id, e.edge_type, e.weight, e.metadata FROM edges e"
            " JOIN insights a ON a.id = e.source_id AND a.deleted_at IS NULL"
            " JOIN insights b ON b.id = e.target_id AND b.deleted_at IS NULL"
            " ORDER BY e.rowid"
        ).fetchall()
    return GraphSnapshot(
        tuple(map(insight, nodes)),
        tuple(
            GraphEdge(
                str(src), str(dst), str(kind), 1.0 if w is None else float(w), _edge_label(kind, m)
            )
            for src, dst, kind, w, m in edges
        ),
    )


def _db_rows(path: Path, ids: Sequence[str]) -> dict[str, Insight]:
    out: dict[str, Insight] = {}
    with _read_db(path) as conn:
        for start in range(0, len(ids), _SQL_CHUNK):
            part = list(ids[start : start + _SQL_CHUNK])
            marks = ",".join("?" * len(part))
            rows = conn.execute(f"SELECT {COLUMNS} FROM insights WHERE id IN ({marks})", part)
            out.update((item.id, item) for item in map(insight, rows))
    return out
