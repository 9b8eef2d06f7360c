"""Validation of every argument a long-term adapter accepts, before anything is touched.

Theory of operation
-------------------
Each function takes a caller's value and returns it normalised (content trimmed, tags deduped,
times in Mnemon's format) or raises ``InvalidInput`` naming the field. Both adapters (the
embedded store and the Mnemon CLI) call these before they take a lock, open a transaction or
start a process, so a rejected request never writes and both refuse the same requests.

Limits are Mnemon's, counted in UTF-8 bytes as its code does: content at most 8000 bytes; at most
20 tags of at most 100 bytes and at most 50 entities of at most 200 bytes, none with a comma
(the CLI passes both comma-separated). Queries and reasons are counted in UTF-16 units like
dsh-mnemon's checks (2000 and 1000).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import attrs

from mnemon_sm import inputs
from mnemon_sm.errors import InvalidInput
from mnemon_sm.ports.long_term.values import (
    CATEGORIES,
    CONTENT_MAX_BYTES,
    EDGE_TYPES,
    ENTITIES_MAX,
    ENTITY_MAX_BYTES,
    INTENTS,
    MODES,
    QUERY_MAX_CHARS,
    SOURCES,
    TAG_MAX_BYTES,
    TAGS_MAX,
    DraftEdge,
    DraftInsight,
    ImportDraft,
)
from mnemon_sm.text import strip_whitespace, utf8_len, utf16_len

__all__ = [
    "SPACE_ID",
    "Prepared",
    "category_filter",
    "depth",
    "draft",
    "edge_type",
    "insight_id",
    "intent",
    "limit",
    "mode",
    "prepare",
    "query",
    "reason",
    "remembered",
    "source_filter",
    "space_id",
    "weight",
]

SPACE_ID = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_-]*")
REASON_MAX_CHARS = 1000
ID_MAX_CHARS = 2000
LIMIT_MAX = 100_000  # dsh-mnemon lists a space with a basic recall of this size
SOURCE_MAX_BYTES = 100
DEPTH_RANGE = (1, 5)


@attrs.frozen
class Prepared:
    """A validated insight, ready to write."""

    content: str
    category: str
    importance: int
    tags: tuple[str, ...]
    entities: tuple[str, ...]
    source: str
    created_at: str | None = None


def _text(value: Any, field: str) -> str:
    return inputs.text(value, field)


def _int(value: Any, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(f"{field} must be an integer from {low} to {high}, not {value!r}")
    return value


def space_id(value: Any) -> str:
    text = _text(value, "space")
    if not SPACE_ID.fullmatch(text):
        raise InvalidInput(f"space id {text!r} must match [a-zA-Z0-9][a-zA-Z0-9_-]*")
    return text


def content(value: Any, field: str = "content") -> str:
    text = strip_whitespace(_text(value, field))
    if not text:
        raise InvalidInput(f"{field} is required")
    if utf8_len(text) > CONTENT_MAX_BYTES:
        raise InvalidInput(f"{field} is {utf8_len(text)} bytes; the limit is {CONTENT_MAX_BYTES}")
    return text


def category(value: Any) -> str:
    if value not in CATEGORIES:
        raise InvalidInput(f"category must be one of {', '.join(CATEGORIES)}, not {value!r}")
    return str(value)


def _labels(values: Any, field: str, most: int, max_bytes: int, comma_ok: bool) -> tuple[str, ...]:
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise InvalidInput(f"{field} must be a sequence of strings")
    out: list[str] = []
    for raw in values:
        label = strip_whitespace(_text(raw, field))
        if not label:
            raise InvalidInput(f"{field} may not contain an empty value")
        if utf8_len(label) > max_bytes:
            raise InvalidInput(f"{field} value {label[:40]!r} is over {max_bytes} bytes")
        if not comma_ok and "," in label:
            raise InvalidInput(f"{field} value {label!r} contains a comma")
        if label not in out:
            out.append(label)
    if len(out) > most:
        raise InvalidInput(f"at most {most} {field} are allowed, got {len(out)}")
    return tuple(out)


def _any_source(value: Any, field: str) -> str:
    text = strip_whitespace(_text(value, field))
    if not text or utf8_len(text) > SOURCE_MAX_BYTES:
        raise InvalidInput(f"{field} must be 1 to {SOURCE_MAX_BYTES} bytes")
    return text


def prepare(
    content_: Any,
    category_: Any,
    importance: Any,
    tags: Any,
    entities: Any,
    source: Any,
    *,
    field: str = "content",
) -> Prepared:
    """Validate ``remember``'s arguments (source one of user, agent, external)."""
    if source not in SOURCES:
        raise InvalidInput(f"source must be one of {', '.join(SOURCES)}, not {source!r}")
    return Prepared(
        content(content_, field),
        category(category_),
        _int(importance, "importance", 1, 5),
        _labels(tags, "tags", TAGS_MAX, TAG_MAX_BYTES, comma_ok=False),
        _labels(entities, "entities", ENTITIES_MAX, ENTITY_MAX_BYTES, comma_ok=False),
        str(source),
    )


REMEMBER_DEFAULTS = ("general", 3, (), (), "user")  # remember's keyword fields, unset


def remembered(
    content_: Any, category_: Any, importance: Any, tags: Any, entities: Any, source: Any
) -> Prepared:
    """The insight a store's ``remember`` is asked to store: ``content_`` checked with the
    fields (:func:`prepare`), or, when it is a :class:`Prepared` (checked already, by the
    caller), that value as it is. A checked insight carries its own fields: given with other
    fields than the defaults it is refused, never silently preferred."""
    if isinstance(content_, Prepared):
        if (category_, importance, tags, entities, source) != REMEMBER_DEFAULTS:
            raise InvalidInput("a checked insight carries its own fields; give no others")
        return content_
    return prepare(content_, category_, importance, tags, entities, source)


def rfc3339(value: Any, field: str) -> str:
    """An RFC 3339 time as Mnemon stores it: UTC, seconds, ``Z`` (no zone means UTC)."""
    text = _text(value, field)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(f"{field} {text!r} is not an RFC 3339 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _draft_insight(item: Any, index: int, default_source: str) -> Prepared:
    if not isinstance(item, DraftInsight):
        raise InvalidInput(f"insights[{index}] must be a DraftInsight")
    field = f"insights[{index}]"
    base = prepare(item.content, item.category, item.importance, item.tags, item.entities, "user")
    source = default_source if item.source is None else _any_source(item.source, field + ".source")
    created = None if item.created_at is None else rfc3339(item.created_at, field + ".created_at")
    return attrs.evolve(base, source=source, created_at=created)


def _draft_edge(item: Any, index: int, count: int) -> DraftEdge:
    if not isinstance(item, DraftEdge):
        raise InvalidInput(f"edges[{index}] must be a DraftEdge")
    field = f"edges[{index}]"
    src = _int(item.source_index, field + ".source_index", 0, count - 1)
    dst = _int(item.target_index, field + ".target_index", 0, count - 1)
    if src == dst:
        raise InvalidInput(f"{field} links an insight to itself")
    return DraftEdge(src, dst, edge_type(item.edge_type), weight(item.weight), reason(item.reason))


def draft(value: Any) -> tuple[tuple[Prepared, ...], tuple[DraftEdge, ...]]:
    """Validate a whole import draft; an empty one is refused."""
    if not isinstance(value, ImportDraft):
        raise InvalidInput("draft must be an ImportDraft")
    if not value.insights:
        raise InvalidInput("the draft has no insights")
    top = "import" if value.source is None else _any_source(value.source, "draft source")
    items = tuple(_draft_insight(item, i, top) for i, item in enumerate(value.insights))
    edges = tuple(_draft_edge(item, i, len(items)) for i, item in enumerate(value.edges))
    return items, edges


def query(value: Any) -> str:
    text = _text(value, "query")
    if utf16_len(text) > QUERY_MAX_CHARS:
        raise InvalidInput(f"query is over {QUERY_MAX_CHARS} characters")
    return text


def limit(value: Any) -> int:
    return _int(value, "limit", 1, LIMIT_MAX)


def mode(value: Any) -> str:
    if value not in MODES:
        raise InvalidInput(f"mode must be one of {', '.join(MODES)}, not {value!r}")
    return str(value)


def intent(value: Any) -> str | None:
    if value is not None and value not in INTENTS:
        raise InvalidInput(f"intent must be one of {', '.join(INTENTS)}, not {value!r}")
    return None if value is None else str(value)


def category_filter(value: Any) -> str | None:
    return None if value is None else category(value)


def source_filter(value: Any) -> str | None:
    return None if value is None else _any_source(value, "source")


def insight_id(value: Any) -> str:
    text = _text(value, "insight id")
    if not text or len(text) > ID_MAX_CHARS:
        raise InvalidInput(f"insight id must be 1 to {ID_MAX_CHARS} characters")
    return text


def edge_type(value: Any) -> str:
    if value not in EDGE_TYPES:
        raise InvalidInput(f"edge type must be one of {', '.join(EDGE_TYPES)}, not {value!r}")
    return str(value)


def weight(value: Any) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise InvalidInput(f"weight must be a finite number from 0 to 1, not {value!r}")
    return float(value)


def reason(value: Any) -> str | None:
    if value is None:
        return None
    text = _text(value, "reason")
    if utf16_len(text) > REASON_MAX_CHARS:
        raise InvalidInput(f"reason is over {REASON_MAX_CHARS} characters")
    return text


def depth(value: Any) -> int:
    return _int(value, "depth", *DEPTH_RANGE)
