"""Deterministic long-term services: what the ``mnemon_*`` tools reach, with the host's rules.

Theory of operation
-------------------
Workers never touch a store directly: their granted tools call these methods, and so do the
flows, the CLI and the host's own direct paths. Nobody reaches through the service to its
catalog or its store: what a caller needs is a named method here (the space a reference
names, the insights among some ids, the store's optional capabilities...). Rules kept here:

- a search request is checked once, by :func:`search_query`, into a :class:`SearchQuery`
  (the query text, the filters, the mode, the limit); :meth:`LongTermService.retrieve` takes
  that checked value as it is, and :meth:`LongTermService.search` (a worker's recall tool)
  builds it with the same function;
- a search reads the active spaces (or the named ones, each of which must exist and be active),
  asks each for ``min(50, max(L, 3L))`` candidates, annotates every hit with the space's id and
  name, orders by score and applies the ``strict-v2`` quality policy; ``limit`` is honoured
  from 1 to :data:`LIMIT_MAX` (50);
- a write (remember, link, forget) goes to the named space, or the only active one; it is
  refused entirely when the root is read-only, and activates an inactive target once it
  succeeded;
- a remember's insight is checked once, by :meth:`LongTermService.check_remember` (a worker's
  tool stages what it returned); :meth:`LongTermService.remember_checked` stores that checked
  value and the store takes it as it is, while a store called with raw text checks it itself;
- merge reads the sources read-only, imports into the target (new ids, edges with their
  weights) and never writes to a source; sources are then deactivated, each recording the
  target as where its memories went, unless asked not to.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import attrs

from mnemon_sm.convert import camel_case
from mnemon_sm.errors import InvalidInput, MnemonError, ReadOnly, StorageError, UnknownSpace
from mnemon_sm.flows.long_term.catalog import Catalog, Space, check_space_fields, check_space_id
from mnemon_sm.flows.long_term.quality import (
    QualityReport,
    Tier,
    apply_policy,
    candidate_limit,
    low_cutoff,
)
from mnemon_sm.ports.long_term import checks
from mnemon_sm.ports.long_term.port import DenseBackfill, LongTermStore, SideIndex
from mnemon_sm.ports.long_term.values import (
    Capabilities,
    DraftEdge,
    DraftInsight,
    ImportDraft,
    ImportReport,
    Insight,
    RecallHit,
    RecallResult,
    RelatedHit,
    SpaceStatus,
)

__all__ = [
    "LIMIT_MAX",
    "LongTermService",
    "Retrieved",
    "SearchHit",
    "SearchQuery",
    "SearchResult",
    "SourceReport",
    "search_limit",
    "search_query",
    "select_evidence",
]

PROVIDER = "mnemon-native"
LIMIT_MAX = 50  # the most hits one search or recall returns


def search_limit(value: object) -> int:
    """A search or recall limit: an integer from 1 to :data:`LIMIT_MAX`."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= LIMIT_MAX:
        raise InvalidInput(f"limit must be an integer from 1 to {LIMIT_MAX}, not {value!r}")
    return value


@attrs.frozen
class SearchQuery:
    """A checked search request (build it with :func:`search_query`)."""

    text: str  # the query, stripped, never empty
    space_ids: Sequence[str] | None  # the spaces named (None: every active one)
    mode: str
    limit: int | None  # None: the service's default
    category: str | None
    source: str | None
    intent: str | None


def search_query(
    query: object,
    *,
    space_ids: Sequence[str] | None = None,
    mode: object = "relevance",
    limit: object = None,
    category: object = None,
    source: object = None,
    intent: object = None,
) -> SearchQuery:
    """Every rule of a search request, in this order (pure): the query (a string of at most
    the store's length, not blank), the mode, the limit (1 to :data:`LIMIT_MAX`), the category
    and source filters, the intent. Whether the named spaces exist and are active is not a
    rule of the request: the catalog answers that when the search runs."""
    text = checks.query(query).strip()
    if not text:
        raise InvalidInput("query is required")
    return SearchQuery(
        text,
        space_ids,
        checks.mode(mode),
        None if limit is None else search_limit(limit),
        checks.category_filter(category),
        checks.source_filter(source),
        checks.intent(intent),
    )


@attrs.frozen
class SearchHit:
    """A recalled insight with its space and the host's relevance judgement."""

    space_id: str
    space_name: str
    hit: RecallHit
    tier: Tier

    @property
    def insight(self) -> Insight:
        return self.hit.insight

    @property
    def citation(self) -> str:
        """``<memoryBodyId>/<id>``, how answers cite evidence."""
        return f"{self.space_id}/{self.insight.id}"

    def to_json(self) -> dict[str, Any]:
        i, h = self.insight, self.hit
        out: dict[str, Any] = {
            "id": i.id,
            "content": i.content,
            "memoryBodyId": self.space_id,
            "memoryBodyName": self.space_name,
            "memoryProviderId": PROVIDER,
            "category": i.category,
            "importance": i.importance,
            "tags": list(i.tags),
            "entities": list(i.entities),
            "relevanceTier": self.tier,
        }
        if h.score is not None:
            out["score"] = h.score
            out["normalizedScore"] = h.score
        for key, value in (
            ("intent", h.intent),
            ("matchedVia", h.matched_via),
            ("confidence", h.confidence),
        ):
            if value is not None:
                out[key] = value
        return out


@attrs.frozen
class MergeReceipt:
    """What a merge of Memory Spaces copied: into which space, from which sources, how many
    insights were imported or skipped as already there, and how many edges were inserted."""

    memory_body_id: str
    memory_body_name: str
    sources: tuple[str, ...]
    imported: int
    skipped: int
    edges_inserted: int

    def to_json(self) -> dict[str, Any]:
        """``{"memoryBodyId", "memoryBodyName", "sources", "imported", "skipped",
        "edgesInserted"}``."""
        return {
            "memoryBodyId": self.memory_body_id,
            "memoryBodyName": self.memory_body_name,
            "sources": list(self.sources),
            "imported": self.imported,
            "skipped": self.skipped,
            "edgesInserted": self.edges_inserted,
        }


@attrs.frozen
class RelatedItem:
    """An insight reached from another by following links (``related``): the hit, with the
    space it lives in."""

    space_id: str
    space_name: str
    hit: RelatedHit

    def to_json(self) -> dict[str, Any]:
        """The insight's JSON with ``depth``, ``via_edge_type``, ``memoryBodyId`` and
        ``memoryBodyName``."""
        return {
            **self.hit.to_json(),
            "memoryBodyId": self.space_id,
            "memoryBodyName": self.space_name,
        }


@attrs.frozen
class SourceReport:
    space_id: str
    space_name: str
    status: str  # ready | empty | unavailable
    item_count: int
    quality: QualityReport
    hint: str | None = None
    reason: str | None = None  # why an unavailable space could not be searched

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "memoryBodyId": self.space_id,
            "memoryBodyName": self.space_name,
            "providerId": PROVIDER,
            "status": self.status,
            "itemCount": self.item_count,
            "quality": {camel_case(k): v for k, v in attrs.asdict(self.quality).items()},
        }
        if self.hint:
            out["hint"] = self.hint
        if self.reason:
            out["reason"] = self.reason
        return out


@attrs.frozen
class SearchResult:
    query: str
    mode: str
    hits: tuple[SearchHit, ...]
    sources: tuple[SourceReport, ...]
    hint: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "query": self.query,
            "mode": self.mode,
            "results": [h.to_json() for h in self.hits],
            "sources": [s.to_json() for s in self.sources],
        }
        if self.hint:
            out["hint"] = self.hint
        return out


@attrs.frozen
class Unavailable:
    """A space that could not be searched this time (its store failed), and why."""

    reason: str


@attrs.frozen
class Retrieved:
    """What each space returned for one search, before the quality policy, in the spaces'
    order; a space whose store failed is :class:`Unavailable`."""

    query: str
    mode: str
    limit: int
    found: tuple[tuple[Space, RecallResult | Unavailable], ...]


IMPORT_SOURCE = "mnemon-sm-import"
_IMPORT_KEYS = {"content", "category", "importance", "tags", "entities", "source", "createdAt"}


def _import_item(item: object, index: int) -> DraftInsight:
    if isinstance(item, str):
        return DraftInsight(item, source="user")
    if not isinstance(item, Mapping):
        raise InvalidInput(f"item {index} must be a string or a mapping")
    unknown = set(item) - _IMPORT_KEYS
    if unknown:
        raise InvalidInput(
            f"item {index} has unknown field(s): {', '.join(sorted(map(str, unknown)))}"
        )
    if "content" not in item:
        raise InvalidInput(f"item {index} has no content")
    fields = {k: item[k] for k in ("category", "importance", "source") if k in item}
    try:
        return DraftInsight(
            item["content"],
            tags=item.get("tags", ()),
            entities=item.get("entities", ()),
            created_at=item.get("createdAt"),
            **{"source": "user", **fields},
        )
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"item {index} is malformed: {exc}") from None


def select_evidence(retrieved: Retrieved) -> SearchResult:
    """The ranking step across spaces (pure): the quality policy per space, then every kept
    hit by score (ties keep the spaces' order), cut to the limit."""
    scored: list[SearchHit] = []
    reports = []
    limit = retrieved.limit
    for space, found in retrieved.found:
        if isinstance(found, Unavailable):
            _, nothing = apply_policy((), [], limit, low=low_cutoff(retrieved.mode))
            reports.append(
                SourceReport(space.id, space.name, "unavailable", 0, nothing, reason=found.reason)
            )
            continue
        scores = [h.score for h in found.hits]
        chosen, quality = apply_policy(found.hits, scores, limit, low=low_cutoff(retrieved.mode))
        scored += [SearchHit(space.id, space.name, hit, tier) for hit, tier in chosen]
        status = "ready" if found.hits else "empty"
        reports.append(
            SourceReport(space.id, space.name, status, len(chosen), quality, found.hint)
        )
    scored.sort(key=lambda h: -(h.hit.score if h.hit.score is not None else 0.0))
    hint = "sparse_results" if len(scored) < math.ceil(limit / 2) else None
    return SearchResult(
        retrieved.query, retrieved.mode, tuple(scored[:limit]), tuple(reports), hint
    )


class LongTermService:
    """The host's deterministic long-term operations over a catalog and a store.

    ``mutex`` serializes them inside the process; callers hold it around each operation (a
    worker's tool call holds it for that call only).
    """

    def __init__(
        self, catalog: Catalog, store: LongTermStore, *, write_enabled: bool, default_limit: int
    ) -> None:
        self.catalog, self.store = catalog, store
        self._write_enabled, self._default_limit = write_enabled, default_limit
        self.mutex = threading.RLock()

    # -- reads -----------------------------------------------------------------------------

    def spaces(self) -> tuple[Space, ...]:
        """Every space, stores found on disk included (registering them: a catalog write)."""
        return self.catalog.list()

    def space(self, space_id: str) -> Space:
        """The space ``space_id``, active or not (``UnknownSpace`` if there is none)."""
        return self.catalog.get(space_id)

    def readable_spaces(self, space_ids: Sequence[str] | None = None) -> tuple[Space, ...]:
        """The spaces a read may use: every active one, or the named ones, each of which must
        exist and be active (``UnknownSpace``, ``InactiveSpace``)."""
        return self.catalog.readable(space_ids)

    def write_target(self, space_id: str | None) -> Space:
        """The space a write goes to: the named one (active or not), else the only active
        one (``InvalidInput`` when there is not exactly one)."""
        return self.catalog.writable(space_id)

    def capabilities(self) -> Capabilities:
        """What the long-term store supports."""
        return self.store.capabilities

    def status(self, space_id: str) -> SpaceStatus:
        """Counts and sizes of the space ``space_id``, active or not (read-only)."""
        return self.store.status(self.catalog.get(space_id).id)

    def insights(self, space_id: str, ids: Sequence[str]) -> tuple[Insight, ...]:
        """The active insights among ``ids`` in the store ``space_id``, in the order given
        (unknown, forgotten and repeated ids left out; read-only, no catalog read)."""
        return self.store.insights(space_id, ids)

    def search(self, query: object, *, readonly: bool = False, **options: Any) -> SearchResult:
        """The deterministic search over active (or named) spaces: the request checked by
        :func:`search_query` (``options`` are its keyword arguments), :meth:`retrieve`, then
        :func:`select_evidence`."""
        return select_evidence(self.retrieve(search_query(query, **options), readonly=readonly))

    def retrieve(self, query: SearchQuery, *, readonly: bool = False) -> Retrieved:
        """Each readable space's ranked candidates (``min(150, 3 x limit)`` of them) for a
        checked request, taken as it is.

        ``readonly`` searches count no access (a write worker checking for duplicates); with
        writes disabled (``write_enabled`` false) no search counts access or logs. A
        space whose store fails (corrupt, locked, gone) is reported :class:`Unavailable` and
        the others answer; when no space answers, the first failure is raised.
        """
        text, mode_ = query.text, query.mode
        limit_ = self._default_limit if query.limit is None else query.limit
        found: list[tuple[Space, RecallResult | Unavailable]] = []
        failures: list[MnemonError] = []
        for space in self.catalog.readable(query.space_ids):
            try:
                result = self.store.recall(
                    space.id,
                    text,
                    mode=mode_,
                    limit=candidate_limit(limit_),
                    category=query.category,
                    source=query.source,
                    intent=query.intent,
                    readonly=readonly or not self._write_enabled,
                )
            except (StorageError, UnknownSpace) as exc:
                failures.append(exc)
                found.append((space, Unavailable(str(exc))))
                continue
            found.append((space, result))
        if failures and len(failures) == len(found):
            raise failures[0]
        return Retrieved(text, mode_, limit_, tuple(found))

    def related(
        self, space_id: str, insight_id: str, *, depth: object = 2, edge_type: object = None
    ) -> tuple[RelatedItem, ...]:
        space = self.catalog.readable([space_id])[0]
        hits = self.store.related(
            space.id,
            checks.insight_id(insight_id),
            depth=checks.depth(depth),
            edge_type=None if edge_type is None else checks.edge_type(edge_type),
        )
        return tuple(RelatedItem(space.id, space.name, h) for h in hits)

    # -- writes ----------------------------------------------------------------------------
    #
    # Each write has a ``check_*`` twin that applies every rule without writing, so a worker's
    # staged write is refused at once with the error the real write would give. ``space_id``
    # None means "the only active space"; ``pending`` means a space created later in the
    # same run, checked when it exists.

    def check_write_target(self, space_id: str | None, *, pending: bool = False) -> None:
        self._writable()
        if not pending:
            self.catalog.writable(space_id)

    def check_remember(
        self,
        content: object,
        *,
        space_id: str | None = None,
        pending: bool = False,
        category: object = "general",
        importance: object = 3,
        tags: Sequence[object] = (),
        entities: Sequence[object] = (),
        source: object = "user",
    ) -> checks.Prepared:
        """Every rule of a remember, as the insight it would store."""
        self.check_write_target(space_id, pending=pending)
        return checks.prepare(content, category, importance, tags, entities, source)

    def check_link(
        self, space_id: str | None, edge_type: object, weight: object, *, pending: bool = False
    ) -> tuple[str, float]:
        self.check_write_target(space_id, pending=pending)
        return checks.edge_type(edge_type), checks.weight(weight)

    def remember(
        self,
        content: object,
        *,
        space_id: str | None = None,
        category: object = "general",
        importance: object = 3,
        tags: Sequence[object] = (),
        entities: Sequence[object] = (),
        source: object = "user",
    ) -> dict[str, Any]:
        """Check every rule of a remember (:meth:`check_remember`), then store it
        (:meth:`remember_checked`)."""
        item = self.check_remember(
            content,
            space_id=space_id,
            category=category,
            importance=importance,
            tags=tags,
            entities=entities,
            source=source,
        )
        return self.remember_checked(item, space_id=space_id)

    def remember_checked(
        self, item: checks.Prepared, *, space_id: str | None = None
    ) -> dict[str, Any]:
        """Store ``item``, an insight :meth:`check_remember` returned (a worker's remember is
        checked once, when its tool stages it). The write target is checked again, as the
        catalog may have changed since; the insight is not: the store takes the checked value
        as it is (:meth:`LongTermStore.remember`)."""
        self.check_write_target(space_id)
        space = self.catalog.writable(space_id)
        receipt = self.store.remember(space.id, item)
        try:
            return self._written(space, receipt.to_json())
        except MnemonError as exc:
            # Stored, but activating the space failed: a caller that takes its writes back
            # (a document archive that did not happen) must still learn of this one.
            exc.written = {**receipt.to_json(), "memoryBodyId": space.id}  # type: ignore[attr-defined]
            raise

    def prepare_import(
        self, items: Sequence[object], space_id: str | None
    ) -> tuple[Space, tuple[DraftInsight, ...]]:
        """Check a bulk import completely before anything is written: each item is a content
        string or a mapping with ``content`` and optionally ``category``, ``importance``,
        ``tags``, ``entities``, ``source`` and ``createdAt`` (RFC 3339; default: now)."""
        self._writable()
        if isinstance(items, str | bytes) or not isinstance(items, Sequence):
            raise InvalidInput("items must be a list of memories")
        drafts = tuple(_import_item(item, i) for i, item in enumerate(items))
        if drafts:
            checks.draft(ImportDraft(drafts, (), IMPORT_SOURCE))
        return self.catalog.writable(space_id), drafts

    def import_chunk(self, space: Space, drafts: Sequence[DraftInsight]) -> ImportReport:
        """Write one checked chunk of a bulk import (:meth:`prepare_import`)."""
        self._writable()
        report = self.store.import_draft(space.id, ImportDraft(tuple(drafts), (), IMPORT_SOURCE))
        self.catalog.activate(space.id)
        return report

    def link(
        self,
        space_id: str | None,
        source_id: str,
        target_id: str,
        *,
        edge_type: object = "semantic",
        weight: object = 0.5,
        reason: str | None = None,
    ) -> dict[str, Any]:
        kind, value = self.check_link(space_id, edge_type, weight)
        space = self.catalog.writable(space_id)
        receipt = self.store.link(
            space.id,
            checks.insight_id(source_id),
            checks.insight_id(target_id),
            edge_type=kind,
            weight=value,
            reason=reason,
        )
        return self._written(space, receipt.to_json())

    def forget(self, space_id: str | None, insight_id: str) -> dict[str, Any]:
        self.check_write_target(space_id)
        space = self.catalog.writable(space_id)
        return self._written(
            space, self.store.forget(space.id, checks.insight_id(insight_id)).to_json()
        )

    def _written(self, space: Space, receipt: dict[str, Any]) -> dict[str, Any]:
        """Activate the space a write succeeded on, and name it in the receipt."""
        space = self.catalog.activate(space.id)
        return {**receipt, "memoryBodyId": space.id, "memoryBodyName": space.name}

    def check_space_text(self, name: object, description: object) -> None:
        self._writable()
        check_space_fields(name, description)

    def create_space(
        self,
        name: str,
        description: str,
        *,
        active: bool = False,
        seen: Collection[str] | None = None,
    ) -> Space:
        """Create a space (``seen``: see :meth:`Catalog.create`)."""
        return self.create_or_adopt_space(name, description, active=active, seen=seen)[0]

    def create_or_adopt_space(
        self,
        name: str,
        description: str,
        *,
        active: bool = False,
        seen: Collection[str] | None = None,
    ) -> tuple[Space, bool]:
        """:meth:`create_space`, also saying whether it created the space (False: another
        writer's identical space was adopted, see :meth:`Catalog.create`)."""
        self._writable()
        return self.catalog.create_or_adopt(name, description, active=active, seen=seen)

    def update_space(
        self,
        space_id: str,
        *,
        name: str | None = None,
        description: str | None = None,
        active: bool | None = None,
    ) -> Space:
        self._writable()
        return self.catalog.update(space_id, name=name, description=description, active=active)

    def delete_space(self, space_id: str) -> None:
        """Delete a space and its store (never the last one)."""
        self._writable()
        self.catalog.delete(space_id)

    def merge_spaces(
        self, target: str, sources: Sequence[str], *, deactivate_sources: bool = True
    ) -> MergeReceipt:
        """Copy every insight and edge of ``sources`` into ``target``; sources are only read."""
        self._writable()
        target_space = self.catalog.get(target)
        source_ids = list(dict.fromkeys(check_space_id(s) for s in sources))
        if not source_ids:
            raise InvalidInput("merge needs at least one source memory body")
        if target_space.id in source_ids:
            raise InvalidInput("the merge target cannot also be a source")
        for s in source_ids:
            self.catalog.get(s)
        draft = self._draft(source_ids)
        imported = skipped = edges = 0
        if draft.insights:
            report = self.store.import_draft(target_space.id, draft)
            imported, skipped, edges = report.imported, report.skipped, report.edges_inserted
        target_space = self.catalog.activate(target_space.id)
        if deactivate_sources:
            self.catalog.merged(target_space.id, source_ids)
        return MergeReceipt(
            target_space.id, target_space.name, tuple(source_ids), imported, skipped, edges
        )

    # -- optional capabilities of the store -----------------------------------------------
    #
    # The embedded store computes vectors and keeps a side index; the Mnemon CLI does
    # neither. Each ``check_*`` says whether the store can, without touching it; the
    # operation itself runs without the mutex (it takes the store's own locks).

    def check_dense_backfill(self) -> None:
        """``InvalidInput`` unless the store computes vectors with a configured embedder."""
        self._backfill()

    def embed_missing(
        self, space_id: str, *, progress: Callable[[int, int], None] | None = None
    ) -> int:
        """Compute the vectors the store ``space_id`` lacks; returns how many were computed
        (``progress(done, total)`` after each batch). Raises as :meth:`check_dense_backfill`,
        and ``EmbeddingFailed``."""
        return self._backfill().embed_missing(space_id, progress=progress)

    def check_side_index(self) -> None:
        """``InvalidInput`` unless the store keeps a side index."""
        self._side_index()

    def rebuild_index(self, space_id: str) -> None:
        """Rebuild the side index of the store ``space_id`` from its database."""
        self._side_index().rebuild_index(space_id)

    # -- helpers ---------------------------------------------------------------------------

    def _backfill(self) -> DenseBackfill:
        if not isinstance(self.store, DenseBackfill):
            raise InvalidInput("this long-term store computes no vectors (the Mnemon CLI)")
        if self.store.embedder is None:
            raise InvalidInput("no embedder is configured")
        return self.store

    def _side_index(self) -> SideIndex:
        if not isinstance(self.store, SideIndex):
            raise InvalidInput("this long-term store keeps no side index (the Mnemon CLI)")
        return self.store

    def _writable(self) -> None:
        if not self._write_enabled:
            raise ReadOnly()

    def _draft(self, source_ids: Sequence[str]) -> ImportDraft:
        insights: list[DraftInsight] = []
        edges: list[DraftEdge] = []
        for space in source_ids:
            graph = self.store.graph(space)
            index = {node.id: len(insights) + i for i, node in enumerate(graph.nodes)}
            insights += [
                DraftInsight(
                    n.content, n.category, n.importance, n.tags, n.entities, n.source, n.created_at
                )
                for n in graph.nodes
            ]
            edges += [
                DraftEdge(index[e.source_id], index[e.target_id], e.edge_type, e.weight, e.label)
                for e in graph.edges
                if e.source_id in index and e.target_id in index and e.edge_type != "temporal"
            ]
        return ImportDraft(tuple(insights), tuple(edges), "mnemon-sm-merge")
