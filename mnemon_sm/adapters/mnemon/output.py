"""Reading Mnemon's JSON output into the long-term values (both recall shapes, bare
arrays, receipts, status, import reports); anything else is a ``StorageError``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from mnemon_sm.errors import StorageError
from mnemon_sm.ports.long_term.values import (
    ImportReport,
    Insight,
    RememberReceipt,
    SpaceStatus,
)

SPARSE_HINT = "sparse_results"
LOW_BELOW, HIGH_FROM = 0.25, 0.6  # Mnemon's confidence cut-offs


# -- reading Mnemon's JSON ------------------------------------------------------------------


def _shape(label: str, what: str) -> StorageError:
    return StorageError(f"{label} returned unexpected JSON: {what}")


def _parse_json(label: str, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise StorageError(f"{label} returned invalid JSON: {text[:200]!r}") from None


def _obj(value: Any, label: str, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _shape(label, f"{what} is not an object")
    return value


def _arr(value: Any, label: str, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise _shape(label, f"{what} is not an array")
    return value


def _text(row: Mapping[str, Any], key: str, label: str, default: str | None = None) -> str:
    value = row.get(key, default)
    if value is None and default is not None:
        return default
    if not isinstance(value, str):
        raise _shape(label, f"{key!r} is not a string")
    return value


def _opt_text(row: Mapping[str, Any], key: str, label: str) -> str | None:
    value = row.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise _shape(label, f"{key!r} is not a string")
    return value


def _int(row: Mapping[str, Any], key: str, label: str, default: int) -> int:
    value = row.get(key, default)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _shape(label, f"{key!r} is not an integer")
    return value


def _number(row: Mapping[str, Any], key: str, label: str) -> float | None:
    value = row.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _shape(label, f"{key!r} is not a number")
    return float(value)


def _strings(row: Mapping[str, Any], key: str, label: str) -> tuple[str, ...]:
    value = row.get(key)
    if value is None:
        return ()
    if isinstance(value, str):  # a JSON list stored as text
        try:
            value = json.loads(value)
        except ValueError:
            raise _shape(label, f"{key!r} is not a list") from None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _shape(label, f"{key!r} is not a list of strings")
    return tuple(value)


def _insight(row: Mapping[str, Any], label: str) -> Insight:
    """An insight from a Mnemon row (missing fields take Mnemon's defaults)."""
    return Insight(
        id=_text(row, "id", label),
        content=_text(row, "content", label, ""),
        category=_text(row, "category", label, "general"),
        importance=_int(row, "importance", label, 3),
        tags=_strings(row, "tags", label),
        entities=_strings(row, "entities", label),
        source=_text(row, "source", label, "user"),
        access_count=_int(row, "access_count", label, 0),
        created_at=_text(row, "created_at", label, ""),
        updated_at=_text(row, "updated_at", label, ""),
    )


def _via(row: Mapping[str, Any], label: str) -> str | None:
    for key in ("matched_via", "via", "via_edge_type"):
        value = _opt_text(row, key, label)
        if value is not None:
            return value
    return None


def _confidence(score: float) -> str:
    if score < LOW_BELOW:
        return "low"
    return "medium" if score < HIGH_FROM else "high"


def _sparse(count: int, limit: int) -> str | None:
    return SPARSE_HINT if count == 0 or count < limit / 2 else None


@attrs.frozen
class _Row:
    """One result row of recall, search or related, before completion."""

    fields: dict[str, Any]  # the insight's own fields, as printed
    extra: dict[str, Any]  # the row around it (score, intent, via, depth ...)


def _rows(data: Any, label: str) -> tuple[list[_Row], dict[str, Any]]:
    """Rows of any of Mnemon's result shapes, and the wrapper around them (``{}`` for a bare
    array): a bare array, ``{results, hint?}`` with flat rows, or ``{results, meta}`` with
    rows ``{insight: {...}, score, intent, via, signals}``."""
    wrapper: dict[str, Any] = {}
    if isinstance(data, dict):
        wrapper = data
        data = data.get("results")
        if data is None:
            data = []
    rows = []
    for item in _arr(data, label, "the result list"):
        extra = _obj(item, label, "a result row")
        nested = extra.get("insight")
        fields = _obj(nested, label, "'insight'") if nested is not None else extra
        _text(fields, "id", label)
        rows.append(_Row(fields, extra))
    return rows, wrapper


def _receipt(data: Any, label: str) -> RememberReceipt:
    row = _obj(data, label, "the receipt")
    action = _text(row, "action", label, "added")
    replaced = _opt_text(row, "replaced_id", label)
    node = _text(row, "id", label)
    if action == "skipped":
        node = replaced or node  # Mnemon prints a fresh id it never saved
    elif action != "added":  # 0.1.x "updated": a new row replaced an old one
        action = "added"
    edges = _obj(row.get("edges_created") or {}, label, "'edges_created'")
    return RememberReceipt(
        id=node,
        content=_text(row, "content", label, ""),
        category=_text(row, "category", label, "general"),
        importance=_int(row, "importance", label, 3),
        tags=_strings(row, "tags", label),
        entities=_strings(row, "entities", label),
        action="skipped" if action == "skipped" else "added",
        created_at=_text(row, "created_at", label, ""),
        replaced_id=replaced,
        edges_created={str(k): _int(edges, k, label, 0) for k in edges},
        auto_pruned_ids=_strings(row, "auto_pruned_ids", label),
    )


def _status(data: Any, label: str) -> SpaceStatus:
    row = _obj(data, label, "the status")
    by_category = _obj(row.get("by_category") or {}, label, "'by_category'")
    top: list[tuple[str, int]] = []
    for item in _arr(row.get("top_entities") or [], label, "'top_entities'"):
        if isinstance(item, list) and len(item) == 2:
            item = {"entity": item[0], "count": item[1]}
        pair = _obj(item, label, "a top entity")
        top.append((_text(pair, "entity", label), _int(pair, "count", label, 0)))
    return SpaceStatus(
        total_insights=_int(row, "total_insights", label, 0),
        deleted_insights=_int(row, "deleted_insights", label, 0),
        by_category={str(k): _int(by_category, k, label, 0) for k in by_category},
        edge_count=_int(row, "edge_count", label, 0),
        top_entities=tuple(top),
        oplog_count=_int(row, "oplog_count", label, 0),
        db_path=_text(row, "db_path", label, ""),
        db_size_bytes=_int(row, "db_size_bytes", label, 0),
    )


def _import_report(data: Any, label: str, count: int) -> ImportReport:
    row = _obj(data, label, "the import report")
    ids = [""] * count
    for item in _arr(row.get("results") or [], label, "'results'"):
        result = _obj(item, label, "an import result")
        index = _int(result, "index", label, -1)
        if 0 <= index < count:
            if result.get("action") == "skipped":
                ids[index] = _opt_text(result, "replaced_id", label) or _text(result, "id", label)
            else:
                ids[index] = _text(result, "id", label, "")
    return ImportReport(
        imported=_int(row, "imported", label, 0),
        skipped=_int(row, "skipped", label, 0),
        errors=_int(row, "errors", label, 0),
        edges_inserted=_int(row, "edges_inserted", label, 0),
        ids=tuple(ids),
        auto_pruned=_int(row, "auto_pruned", label, 0),
    )
