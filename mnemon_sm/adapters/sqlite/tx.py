"""One write transaction on a store: the primitives every write operation is made of.

Theory of operation
-------------------
A :class:`Tx` lives for one ``BEGIN IMMEDIATE`` transaction, opened and closed by the store. It
carries the connection, the side index and the single clock reading of the operation (so every
timestamp one write leaves behind is the same second), and collects the ids whose effective
importance may need a refresh before commit (``touched``) with the outgoing edges each gained
(``gained``; see :func:`.decay.refresh`).

Rules kept: edge rows are written with ``INSERT OR REPLACE`` (the key is source, target, type);
metadata is compact JSON; the oplog keeps its newest 5000 rows; a soft delete sets
``deleted_at`` and ``updated_at``, hard-deletes every edge touching the insight and drops it
from the side index.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from typing import Any

import attrs

from mnemon_sm.adapters.sqlite.rows import IdSequence, stamp
from mnemon_sm.adapters.sqlite.sideindex import SideIndex

__all__ = ["OPLOG_KEEP", "Tx", "compact"]

OPLOG_KEEP = 5000  # Mnemon trims its oplog to the newest 5000 rows


def compact(value: Any) -> str:
    """JSON as Mnemon writes it: no spaces, UTF-8 kept."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


_META_CACHE: dict[tuple[tuple[str, Any], ...], str] = {}


def _meta_json(meta: dict[str, Any]) -> str:
    """:func:`compact` of an edge's metadata; the few shapes automatic edges repeat (a
    sub-type and a direction) are encoded once."""
    try:
        key = tuple(meta.items())
        found = _META_CACHE.get(key)
    except TypeError:  # an unhashable value: encode it every time
        return compact(meta)
    if found is None:
        found = compact(meta)
        if len(_META_CACHE) < 256 and all(isinstance(v, str) for _, v in key):
            _META_CACHE[key] = found
    return found


@attrs.define
class Tx:
    conn: sqlite3.Connection
    index: SideIndex
    now_ms: int
    touched: set[str] = attrs.Factory(set)
    ids: IdSequence = attrs.Factory(IdSequence)  # the space's, kept by its handle
    gained: Counter[str] = attrs.Factory(Counter)
    stamp: str = attrs.field(init=False)  # the operation's one timestamp, as Mnemon writes it

    def __attrs_post_init__(self) -> None:
        self.stamp = stamp(self.now_ms)

    def new_id(self) -> str:
        """A new insight id (see :mod:`.rows`)."""
        return self.ids.next(self.now_ms)

    def edge(self, src: str, dst: str, kind: str, weight: float, meta: dict[str, Any]) -> None:
        self.edges([(src, dst, kind, weight, meta)])

    def edges(self, rows: list[tuple[str, str, str, float, dict[str, Any]]]) -> None:
        self.conn.executemany(
            "INSERT OR REPLACE INTO main.edges"
            " (source_id, target_id, edge_type, weight, metadata, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [
                (src, dst, kind, w, _meta_json(meta), self.stamp)
                for src, dst, kind, w, meta in rows
            ],
        )
        for src, dst, *_ in rows:
            self.touched.update((src, dst))
            self.gained[src] += 1

    def pair(
        self,
        older: str,
        newer: str,
        kind: str,
        weight: float,
        meta: dict[str, Any],
        *,
        directed: bool = False,
    ) -> None:
        """Both directions; with ``directed`` the metadata says precedes / succeeds."""
        self.pairs([(older, newer, kind, weight, meta)], directed=directed)

    def pairs(
        self,
        rows: list[tuple[str, str, str, float, dict[str, Any]]],
        *,
        directed: bool = False,
    ) -> None:
        """:meth:`pair` for many pairs, written in one statement, in order."""
        out: list[tuple[str, str, str, float, dict[str, Any]]] = []
        for older, newer, kind, weight, meta in rows:
            forward = {**meta, "direction": "precedes"} if directed else meta
            backward = {**meta, "direction": "succeeds"} if directed else meta
            out += [(older, newer, kind, weight, forward), (newer, older, kind, weight, backward)]
        if out:
            self.edges(out)

    def log(self, operation: str, insight_id: str | None, detail: dict[str, Any]) -> None:
        cur = self.conn.execute(
            "INSERT INTO main.oplog (operation, insight_id, detail, created_at)"
            " VALUES (?, ?, ?, ?)",
            (operation, insight_id, compact(detail), self.stamp),
        )
        if cur.lastrowid is not None and cur.lastrowid > OPLOG_KEEP:
            cutoff = cur.lastrowid - OPLOG_KEEP
            self.conn.execute("DELETE FROM main.oplog WHERE id <= ?", (cutoff,))

    def active_rowid(self, insight_id: str) -> int | None:
        row = self.conn.execute(
            "SELECT rowid FROM main.insights WHERE id = ? AND +deleted_at IS NULL", (insight_id,)
        ).fetchone()
        return None if row is None else int(row[0])

    def soft_delete(self, insight_id: str, rowid: int) -> None:
        neighbours = self.conn.execute(
            "SELECT target_id FROM main.edges WHERE source_id = ?"
            " UNION SELECT source_id FROM main.edges WHERE target_id = ?",
            (insight_id, insight_id),
        )
        self.touched.update(node for (node,) in neighbours)
        self.touched.discard(insight_id)
        self.conn.execute(
            "UPDATE main.insights SET deleted_at = ?, updated_at = ? WHERE id = ?",
            (self.stamp, self.stamp, insight_id),
        )
        self.conn.execute(
            "DELETE FROM main.edges WHERE source_id = ? OR target_id = ?",
            (insight_id, insight_id),
        )
        self.index.remove([rowid])
