"""Formatting arguments for the ``mnemon`` command line: counts, comma-separated lists, and
the import draft (schema version 1) that merge hands to ``mnemon import``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mnemon_sm.errors import InvalidInput
from mnemon_sm.ports.long_term import checks
from mnemon_sm.ports.long_term.values import DraftEdge


def _positive(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(f"{field} must be a positive integer, not {value!r}")
    return value


def _joined(values: Sequence[str], field: str) -> str:
    for value in values:
        if "," in value:
            raise InvalidInput(f"{field} value {value!r} contains a comma (Mnemon splits on ,)")
    return ",".join(values)


def _draft_json(
    source: str | None, items: Sequence[checks.Prepared], edges: Sequence[DraftEdge]
) -> dict[str, Any]:
    """Mnemon's import draft, schema version 1."""
    insights = []
    for item in items:
        row: dict[str, Any] = {
            "content": item.content,
            "category": item.category,
            "importance": item.importance,
            "tags": list(item.tags),
            "entities": list(item.entities),
            "source": item.source,
        }
        if item.created_at is not None:
            row["created_at"] = item.created_at
        insights.append(row)
    links = []
    for edge in edges:
        link: dict[str, Any] = {
            "source_index": edge.source_index,
            "target_index": edge.target_index,
            "edge_type": edge.edge_type,
            "weight": edge.weight,
        }
        if edge.reason is not None:
            link["reason"] = edge.reason
        links.append(link)
    document: dict[str, Any] = {"schema_version": "1", "insights": insights, "edges": links}
    if source is not None:
        document["source"] = source
    return document
