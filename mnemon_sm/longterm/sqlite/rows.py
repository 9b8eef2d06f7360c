"""Rows of ``mnemon.db`` as values: the insight column list, decoding, Mnemon's time format.

Theory of operation
-------------------
Every query that reads insights selects :data:`COLUMNS` (``rowid`` first) and decodes with
:func:`insight`, so extra columns of a store written by another program are never read, and a
row with odd values (NULL importance, malformed JSON lists) still decodes: tags and entities
that are not JSON string lists read as empty, a NULL number as Mnemon's default.

Rule for every query by id or rowid: write the activity test as ``+deleted_at IS NULL``. Mnemon's
stores carry no planner statistics, and without them SQLite answers ``id IN (10 or more ids) AND
deleted_at IS NULL`` by walking every active row through the ``deleted_at`` index; the unary
``+`` keeps that index out of such lookups.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from ..values import Insight

__all__ = ["COLUMNS", "insight", "json_list", "stamp"]

COLUMNS = (
    "rowid, id, content, category, importance, tags, entities, source, access_count, "
    "created_at, updated_at"
)


def stamp(epoch_ms: int) -> str:
    """Mnemon's timestamp: ``YYYY-MM-DDTHH:MM:SSZ`` (UTC, whole seconds)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_ms // 1000))


def json_list(text: Any) -> tuple[str, ...]:
    """A JSON array of strings, or () for anything else."""
    if not isinstance(text, str):
        return ()
    try:
        value = json.loads(text)
    except ValueError:
        return ()
    if not isinstance(value, list):
        return ()
    return tuple(item for item in value if isinstance(item, str))


def insight(row: Sequence[Any]) -> Insight:
    """Decode a row selected with :data:`COLUMNS` (the leading rowid is skipped)."""
    _, id_, content, category, importance, tags, entities, source, count, created, updated = row
    return Insight(
        id=str(id_),
        content=str(content or ""),
        category=str(category or "general"),
        importance=3 if importance is None else int(importance),
        tags=json_list(tags),
        entities=json_list(entities),
        source=str(source or "user"),
        access_count=int(count or 0),
        created_at=str(created or ""),
        updated_at=str(updated or ""),
    )
