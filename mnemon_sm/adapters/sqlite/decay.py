"""Effective importance and auto-prune selection (Mnemon's decay rules).

Theory of operation
-------------------
``effective_importance = base(importance) x max(1, ln(1 + access_count)) x 0.5 ^ (days / 30)
x (1 + 0.1 x min(edges, 5))``, with base weights 5: 1.0, 4: .8, 3: .5, 2: .3, 1: .15; days count
from the last access, or from creation when never accessed; edges are the insight's outgoing
edge rows. The stored value is a snapshot, taken when an input other than time changes: it is
recomputed for a new insight, for every recalled one (its access count moved) and for every
insight whose edge bonus may have moved, that is one that had fewer than 5 outgoing edges before
the write (an end of a new edge or a neighbour of a forgotten insight). An insight that had 5 or
more keeps its stored value: its bonus is already at the cap, and rewriting it only to advance
the time decay would cost a remember about half of the pages it writes. Mnemon's own remember
refreshes the new insight only; auto-prune here always computes the value fresh.

Auto-prune (off unless a ceiling is set): when active insights exceed the ceiling, up to 10 of
the weakest are soft-deleted, weakest first by freshly computed effective importance, then
oldest, then id. Immune: importance 4 or more, access count 3 or more, and the insights the
triggering write just made.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from mnemon_sm.adapters.sqlite.recall import ts_key

__all__ = ["effective_importance", "refresh", "weakest"]

BASE = {5: 1.0, 4: 0.8, 3: 0.5, 2: 0.3, 1: 0.15}
HALF_LIFE_DAYS = 30
EDGE_CAP = 5  # outgoing edges past which the edge bonus stops growing
PRUNE_BATCH = 10
_ROW = (
    "SELECT id, importance, access_count, created_at, last_accessed_at,"
    " (SELECT count(*) FROM main.edges e WHERE e.source_id = i.id) FROM main.insights i"
)


def effective_importance(
    importance: int, access_count: int, age_seconds: float, edges: int
) -> float:
    base = BASE[min(5, max(1, importance))]  # out-of-range values from other writers clamp
    usage = max(1.0, math.log1p(max(0, access_count)))
    decay = 0.5 ** (max(0.0, age_seconds) / 86400 / HALF_LIFE_DAYS)
    value: float = base * usage * decay * (1 + 0.1 * min(edges, EDGE_CAP))
    return round(value, 6)


def _value(row: Sequence[Any], now_s: int) -> float:
    _, importance, count, created, accessed, edges = row
    since = ts_key(str(accessed)) if accessed else ts_key(str(created or ""))
    return effective_importance(int(importance or 3), int(count or 0), now_s - since, int(edges))


def refresh(
    conn: sqlite3.Connection,
    ids: Collection[str],
    now_ms: int,
    gained: Mapping[str, int] | None = None,
) -> None:
    """Recompute and store the effective importance of these insights. With ``gained`` (the
    outgoing edges each insight gained in this write) an insight is skipped when it had
    :data:`EDGE_CAP` or more outgoing edges before the write: its edge bonus cannot have moved.
    """
    listed = sorted(ids)
    for start in range(0, len(listed), 500):
        part = listed[start : start + 500]
        rows = conn.execute(f"{_ROW} WHERE id IN ({','.join('?' * len(part))})", part)
        values = [
            (_value(row, now_ms // 1000), row[0])
            for row in rows.fetchall()
            if gained is None or int(row[5]) - gained.get(row[0], 0) < EDGE_CAP
        ]
        conn.executemany("UPDATE main.insights SET effective_importance = ? WHERE id = ?", values)


def weakest(
    conn: sqlite3.Connection, ceiling: int, protect: Collection[str], now_ms: int
) -> list[str]:
    """Ids to prune now (see the module rules); empty when under the ceiling or disabled."""
    if ceiling <= 0:
        return []
    (active,) = conn.execute(
        "SELECT count(*) FROM main.insights WHERE deleted_at IS NULL"
    ).fetchone()
    excess = int(active) - ceiling
    if excess <= 0:
        return []
    rows = conn.execute(
        f"{_ROW} WHERE deleted_at IS NULL AND importance < 4 AND access_count < 3"
    ).fetchall()
    ranked = sorted(
        (_value(row, now_ms // 1000), str(row[3] or ""), str(row[0]))
        for row in rows
        if row[0] not in protect
    )
    return [node for _, _, node in ranked[: min(PRUNE_BATCH, excess)]]
