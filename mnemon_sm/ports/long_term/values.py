"""Values of the long-term tier: insights, edges, recall hits, receipts, drafts, capabilities.

These are Mnemon's data model (one Memory Space is one Mnemon store), as frozen attrs classes.
Every adapter of the ``LongTermStore`` port returns them, so flows never see an adapter's own
shapes (SQLite rows, CLI JSON). Field names follow Mnemon's JSON in snake_case; ``to_json``
gives the CLI's shape.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

import attrs

from mnemon_sm.convert import string_tuple

__all__ = [
    "CATEGORIES",
    "EDGE_TYPES",
    "INTENTS",
    "MODES",
    "SOURCES",
    "Capabilities",
    "DraftEdge",
    "DraftInsight",
    "ForgetReceipt",
    "GraphEdge",
    "GraphSnapshot",
    "ImportDraft",
    "ImportReport",
    "Insight",
    "LinkReceipt",
    "RecallHit",
    "RecallResult",
    "RelatedHit",
    "RememberReceipt",
    "SpaceDigest",
    "SpaceStatus",
]

Category = Literal["preference", "decision", "fact", "insight", "context", "general"]
Source = Literal["user", "agent", "external"]
EdgeType = Literal["temporal", "semantic", "causal", "entity", "supersedes"]
Intent = Literal["WHY", "WHEN", "ENTITY", "GENERAL"]
Mode = Literal["relevance", "smart", "keyword", "basic"]
CATEGORIES: tuple[str, ...] = get_args(Category)
SOURCES: tuple[str, ...] = get_args(Source)
EDGE_TYPES: tuple[str, ...] = get_args(EdgeType)
INTENTS: tuple[str, ...] = get_args(Intent)
MODES: tuple[str, ...] = get_args(Mode)

# Mnemon's limits (its Go code counts bytes; so do we).
CONTENT_MAX_BYTES = 8000
QUERY_MAX_CHARS = 2000
TAGS_MAX, TAG_MAX_BYTES = 20, 100
ENTITIES_MAX, ENTITY_MAX_BYTES = 50, 200


@attrs.frozen
class Insight:
    """One memory of a space (a row of Mnemon's ``insights`` table)."""

    id: str
    content: str
    category: str = "general"
    importance: int = 3
    tags: tuple[str, ...] = attrs.field(default=(), converter=string_tuple)
    entities: tuple[str, ...] = attrs.field(default=(), converter=string_tuple)
    source: str = "user"
    access_count: int = 0
    created_at: str = ""
    updated_at: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "content": self.content,
            "category": self.category,
            "importance": self.importance,
            "tags": list(self.tags),
            "entities": list(self.entities),
            "source": self.source,
            "access_count": self.access_count,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


@attrs.frozen
class RecallHit:
    """A recalled insight. ``score`` is 0..1 for relevance, smart and keyword recall, None for
    basic; ``matched_via`` says which signal found it (relevance: lexical, semantic or
    hybrid; smart: keyword, recency, hybrid or an edge type)."""

    insight: Insight
    score: float | None = None
    intent: str | None = None
    matched_via: str | None = None
    confidence: str | None = None  # low (< 0.25), medium (< 0.6), high

    def to_json(self) -> dict[str, Any]:
        out = self.insight.to_json()
        for key in ("score", "intent", "matched_via", "confidence"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


@attrs.frozen
class RecallResult:
    hits: tuple[RecallHit, ...]
    hint: str | None = None


@attrs.frozen
class RememberReceipt:
    """What a remember did. ``action`` is ``added`` or ``skipped`` (exact duplicate of an
    active insight); on a skip, ``id`` is the existing insight's id (Mnemon would return a
    fresh, unsaved one) and ``replaced_id`` names it too. ``auto_pruned_ids`` are the insights
    auto-prune soft-deleted after this write (only when the store has a prune ceiling)."""

    id: str
    content: str
    category: str
    importance: int
    tags: tuple[str, ...]
    entities: tuple[str, ...]
    action: Literal["added", "skipped"]
    created_at: str
    replaced_id: str | None = None
    edges_created: dict[str, int] = attrs.Factory(dict)
    auto_pruned_ids: tuple[str, ...] = attrs.field(default=(), converter=string_tuple)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "content": self.content,
            "category": self.category,
            "importance": self.importance,
            "tags": list(self.tags),
            "entities": list(self.entities),
            "action": self.action,
            "replaced_id": self.replaced_id,
            "created_at": self.created_at,
            "edges_created": dict(self.edges_created),
            "auto_pruned": len(self.auto_pruned_ids),
            "auto_pruned_ids": list(self.auto_pruned_ids),
        }


@attrs.frozen
class LinkReceipt:
    source_id: str
    target_id: str
    edge_type: str
    weight: float
    metadata: dict[str, Any] = attrs.Factory(dict)

    def to_json(self) -> dict[str, Any]:
        return {"status": "linked", **attrs.asdict(self)}


@attrs.frozen
class ForgetReceipt:
    id: str

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "status": "deleted"}


@attrs.frozen
class RelatedHit:
    insight: Insight
    depth: int
    via_edge_type: str

    def to_json(self) -> dict[str, Any]:
        return {**self.insight.to_json(), "depth": self.depth, "via_edge_type": self.via_edge_type}


@attrs.frozen
class SpaceDigest:
    """What a space holds, to compare two copies: rows per table and the SHA-256 of them all
    (:mod:`mnemon_sm.ports.long_term.digest`)."""

    counts: dict[str, int]
    sha256: str


@attrs.frozen
class SpaceStatus:
    """Mnemon's ``status`` numbers for one space."""

    total_insights: int
    deleted_insights: int
    by_category: dict[str, int]
    edge_count: int
    top_entities: tuple[tuple[str, int], ...]
    oplog_count: int
    db_path: str
    db_size_bytes: int

    def to_json(self) -> dict[str, Any]:
        data = attrs.asdict(self)
        data["top_entities"] = [{"entity": e, "count": c} for e, c in self.top_entities]
        return data


@attrs.frozen
class GraphEdge:
    source_id: str
    target_id: str
    edge_type: str
    weight: float
    label: str


@attrs.frozen
class GraphSnapshot:
    """Active insights and the edges between active insights (both directed rows kept)."""

    nodes: tuple[Insight, ...]
    edges: tuple[GraphEdge, ...]


@attrs.frozen
class DraftInsight:
    content: str
    category: str = "general"
    importance: int = 3
    tags: tuple[str, ...] = attrs.field(default=(), converter=string_tuple)
    entities: tuple[str, ...] = attrs.field(default=(), converter=string_tuple)
    source: str | None = None
    created_at: str | None = None


@attrs.frozen
class DraftEdge:
    source_index: int
    target_index: int
    edge_type: str
    weight: float = 0.5
    reason: str | None = None


@attrs.frozen
class ImportDraft:
    """Mnemon's import draft (schema version 1), used to merge spaces."""

    insights: tuple[DraftInsight, ...]
    edges: tuple[DraftEdge, ...] = ()
    source: str | None = None


@attrs.frozen
class ImportReport:
    imported: int
    skipped: int
    errors: int
    edges_inserted: int
    ids: tuple[str, ...]  # the insight id each draft insight ended up as, in draft order
    auto_pruned: int = 0  # insights auto-prune soft-deleted after the import


@attrs.frozen
class Capabilities:
    """What an adapter supports; the host hides and rejects anything not declared."""

    search: bool = True
    browse: bool = True
    graph: bool = True
    entities: bool = True
    related: bool = True
    remember: bool = True
    link: bool = True
    forget: bool = True
    write_mode: Literal["exact", "async-extracting"] = "exact"
    deletion_mode: Literal["soft", "hard", "unsupported"] = "soft"
    score_semantics: Literal["normalized-relevance", "unscaled"] = "normalized-relevance"
