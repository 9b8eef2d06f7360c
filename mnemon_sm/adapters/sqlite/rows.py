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

Insight ids are UUIDs, as Mnemon's are, but time-ordered (version 7, RFC 9562: 48 bits of Unix
milliseconds from the store's clock, a 12-bit counter for ids made in the same millisecond, 62
random bits) where Mnemon draws random version-4 ones. Mnemon reads any UUID; the order is what
matters here: a new insight's edges go to recent insights, and with time-ordered ids every
id-keyed index entry such an edge adds lands in the last pages of its b-tree instead of a random
page, which roughly halves the pages a remember writes. Each open space numbers its own
(:class:`IdSequence`): its ids increase even when the clock stands still or steps back.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

from mnemon_sm.ports.long_term.values import Insight

__all__ = ["COLUMNS", "IdSequence", "insight", "json_list", "stamp"]

COLUMNS = (
    "rowid, id, content, category, importance, tags, entities, source, access_count, "
    "created_at, updated_at"
)


class IdSequence:
    """Version-7 UUIDs that increase from call to call even when the clock stands still or
    steps back (the counter runs on, carrying into the next millisecond)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = -1  # (ms << 12) | counter of the last id

    def next(self, epoch_ms: int) -> str:
        with self._lock:
            now = max(0, epoch_ms) << 12
            if now <= self._last:
                now = self._last + 1
            else:
                now |= int.from_bytes(os.urandom(1)) & 0x7F  # a random start leaves room
            self._last = now
        ms, counter = (now >> 12) & ((1 << 48) - 1), now & 0xFFF
        tail = int.from_bytes(os.urandom(8)) & ((1 << 62) - 1)
        value = (ms << 80) | (0x7 << 76) | (counter << 64) | (0b10 << 62) | tail
        return str(uuid.UUID(int=value))


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
