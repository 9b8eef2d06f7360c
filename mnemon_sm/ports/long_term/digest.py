"""The rows of a Mnemon store as a migration copies them, and their digest.

A store's rows are compared across backends (a SQLite file and PostgreSQL tables), so the
digest is taken over a canonical encoding of the values, not over either backend's bytes:
per table of :data:`~mnemon_sm.ports.long_term.port.ROW_TABLES`, in rowid order, each row as
the JSON array ``[table, rowid, value...]`` (text as is, integers as integers, reals by their
shortest round-trip form, a blob as ``{"hex": ...}``, NULL as null), one per line.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from mnemon_sm.ports.long_term.port import ROW_TABLES, Rows
from mnemon_sm.ports.long_term.values import SpaceDigest

__all__ = ["COLUMNS", "RowsDigest", "keyset_pages"]

#: The columns of each table a migration copies, after the rowid (Mnemon's schema).
COLUMNS: dict[str, tuple[str, ...]] = {
    "insights": (
        "id",
        "content",
        "category",
        "importance",
        "tags",
        "entities",
        "source",
        "access_count",
        "created_at",
        "updated_at",
        "deleted_at",
        "last_accessed_at",
        "embedding",
        "effective_importance",
    ),
    "edges": ("source_id", "target_id", "edge_type", "weight", "metadata", "created_at"),
    "oplog": ("operation", "insight_id", "detail", "created_at"),
}
assert tuple(COLUMNS) == ROW_TABLES


def keyset_pages(page: Callable[[str, int], Rows]) -> Iterator[tuple[str, Rows]]:
    """A store's rows table by table (:data:`ROW_TABLES` order), page by page:
    ``page(table, after)`` reads the next rows of ``table`` with a rowid above ``after``, in
    rowid order; an empty page ends the table. Each page is read on its own, so nothing is
    held between two."""
    for table in ROW_TABLES:
        after = -(2**63)
        while rows := page(table, after):
            yield table, rows
            after = int(rows[-1][0])


def _value(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return {"hex": bytes(value).hex()}
    return value


class RowsDigest:
    """Counts and SHA-256 of rows fed table by table, in :data:`ROW_TABLES` and rowid order."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self._counts = dict.fromkeys(ROW_TABLES, 0)

    def update(self, table: str, rows: Rows) -> None:
        for row in rows:
            line = json.dumps([table, *map(_value, row)], ensure_ascii=False, allow_nan=False)
            self._hash.update(line.encode() + b"\n")
        self._counts[table] += len(rows)

    def feed(self, batches: Iterable[tuple[str, Rows]]) -> RowsDigest:
        for table, rows in batches:
            self.update(table, rows)
        return self

    def result(self) -> SpaceDigest:
        return SpaceDigest(dict(self._counts), self._hash.hexdigest())
