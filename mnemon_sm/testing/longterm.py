"""In-memory fakes of the long-term and worker ports, recording every call.

:class:`MemoryLongTermStore` keeps spaces in dicts and follows the port's contract (unknown
spaces and insights raise, skipped duplicates report the existing id, forget drops edges, list
and graph never count access) with simple scoring: smart and keyword recall rank by the share
of query words present (rounded to 3 decimals), basic recall filters by substring. It is for
testing flows, not for judging recall quality (the embedded store implements Mnemon's
algorithm).

:class:`ScriptedWorkers` returns, per worker kind, results produced by a callable the test
gives (which may use the tool box, raise, or return garbage), and records every request.

:class:`MemoryUpkeepStore` is :class:`MemoryLongTermStore` with the embedded store's optional
capabilities (:class:`~mnemon_sm.ports.long_term.port.DenseBackfill`,
:class:`~mnemon_sm.ports.long_term.port.SideIndex`): it embeds, through the embedder given,
the active insights it has no vector for, oldest first, a batch at a time; its side index is
a record of which spaces were rebuilt.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import attrs

from mnemon_sm.errors import InvalidInput, UnknownInsight, UnknownSpace
from mnemon_sm.ports import Clock
from mnemon_sm.ports.embedder import Embedder
from mnemon_sm.ports.embedder_checks import embed_checked
from mnemon_sm.ports.long_term import checks
from mnemon_sm.ports.long_term.checks import Prepared
from mnemon_sm.ports.long_term.values import (
    Capabilities,
    ForgetReceipt,
    GraphEdge,
    GraphSnapshot,
    ImportDraft,
    ImportReport,
    Insight,
    LinkReceipt,
    RecallHit,
    RecallResult,
    RelatedHit,
    RememberReceipt,
    SpaceStatus,
)
from mnemon_sm.ports.workers import ToolBox, WorkerRequest
from mnemon_sm.testing.calls import CallLog
from mnemon_sm.text import iso_ms, words

__all__ = ["MemoryLongTermStore", "MemoryUpkeepStore", "ScriptedWorkers"]


@attrs.define
class _Space:
    insights: dict[str, Insight] = attrs.Factory(dict)  # active
    deleted: dict[str, Insight] = attrs.Factory(dict)
    edges: dict[tuple[str, str, str], float] = attrs.Factory(dict)


class MemoryLongTermStore:
    """Dict-backed Memory Spaces."""

    def __init__(self, clock: Clock, log: CallLog | None = None) -> None:
        self.clock, self.log = clock, log if log is not None else CallLog()
        self.data: dict[str, _Space] = {}
        self._ids = itertools.count(1)

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities()

    def _space(self, space: str) -> _Space:
        found = self.data.get(space)
        if found is None:
            raise UnknownSpace(f"unknown memory body: {space}")
        return found

    def _active(self, space: str, insight_id: str) -> Insight:
        found = self._space(space).insights.get(insight_id)
        if found is None:
            raise UnknownInsight(f"no active insight {insight_id} in {space}")
        return found

    def spaces(self) -> tuple[str, ...]:
        self.log.record("long_term", "spaces")
        return tuple(sorted(self.data))

    def create_space(self, space: str) -> None:
        self.log.record("long_term", "create_space", space)
        if space in self.data:
            raise InvalidInput(f"store {space} already exists")
        self.data[space] = _Space()

    def delete_space(self, space: str) -> None:
        self.log.record("long_term", "delete_space", space)
        self._space(space)
        del self.data[space]

    def status(self, space: str) -> SpaceStatus:
        self.log.record("long_term", "status", space)
        s = self._space(space)
        by_category: dict[str, int] = {}
        for i in s.insights.values():
            by_category[i.category] = by_category.get(i.category, 0) + 1
        return SpaceStatus(
            len(s.insights), len(s.deleted), by_category, len(s.edges), (), 0, f"memory:{space}", 0
        )

    def recall(
        self,
        space: str,
        query: str,
        *,
        mode: str = "relevance",
        limit: int = 10,
        category: str | None = None,
        source: str | None = None,
        intent: str | None = None,
        readonly: bool = False,
    ) -> RecallResult:
        self.log.record("long_term", "recall", space, query, mode, limit)
        s = self._space(space)
        rows = [
            i
            for i in s.insights.values()
            if (category is None or i.category == category)
            and (source is None or i.source == source)
        ]
        if mode == "basic":
            found = [i for i in rows if query.lower() in i.content.lower()]
            found.sort(key=lambda i: (i.importance, i.created_at), reverse=True)
            hits = [RecallHit(i) for i in found[:limit]]
        else:
            wanted = words(query)
            scored = [(len(wanted & words(i.content)) / max(1, len(wanted)), i) for i in rows]
            scored = [(round(sc, 3), i) for sc, i in scored if sc > 0]
            scored.sort(key=lambda p: (p[0], p[1].importance), reverse=True)
            hits = [
                RecallHit(
                    i,
                    sc,
                    intent or "GENERAL",
                    "keyword",
                    "low" if sc < 0.25 else "medium" if sc < 0.6 else "high",
                )
                for sc, i in scored[:limit]
            ]
        if not readonly:
            for h in hits:
                i = s.insights[h.insight.id]
                s.insights[i.id] = attrs.evolve(i, access_count=i.access_count + 1)
            hits = [attrs.evolve(h, insight=s.insights[h.insight.id]) for h in hits]
        hint = "sparse_results" if len(hits) < limit / 2 else None
        return RecallResult(tuple(hits), hint)

    def remember(
        self,
        space: str,
        content: str | Prepared,
        *,
        category: str = "general",
        importance: int = 3,
        tags: tuple[str, ...] = (),
        entities: tuple[str, ...] = (),
        source: str = "user",
    ) -> RememberReceipt:
        if isinstance(content, Prepared):  # checked by the caller: its fields as they are
            item = checks.remembered(content, category, importance, tags, entities, source)
            content, category, importance = item.content, item.category, item.importance
            tags, entities, source = item.tags, item.entities, item.source
        self.log.record("long_term", "remember", space, content)
        s = self._space(space)
        text = content.strip()
        if not text:
            raise InvalidInput("content is required")
        now = iso_ms(self.clock.now_ms())
        for i in s.insights.values():
            if i.content == text:
                return RememberReceipt(
                    i.id,
                    text,
                    category,
                    importance,
                    tags,
                    entities,
                    "skipped",
                    i.created_at,
                    replaced_id=i.id,
                )
        insight = Insight(
            f"ins-{next(self._ids)}",
            text,
            category,
            importance,
            tags,
            entities,
            source,
            0,
            now,
            now,
        )
        s.insights[insight.id] = insight
        return RememberReceipt(
            insight.id, text, category, importance, tags, entities, "added", now
        )

    def related(
        self, space: str, insight_id: str, *, depth: int = 2, edge_type: str | None = None
    ) -> tuple[RelatedHit, ...]:
        self.log.record("long_term", "related", space, insight_id, depth)
        s = self._space(space)
        self._active(space, insight_id)
        seen, frontier, out = {insight_id}, [insight_id], []
        for level in range(1, depth + 1):
            nxt = []
            for node in frontier:
                for a, b, kind in sorted(s.edges):
                    if edge_type is not None and kind != edge_type:
                        continue
                    other = b if a == node else a if b == node else None
                    if other is not None and other not in seen and other in s.insights:
                        seen.add(other)
                        nxt.append(other)
                        out.append(RelatedHit(s.insights[other], level, kind))
            frontier = nxt
        return tuple(out)

    def link(
        self,
        space: str,
        source_id: str,
        target_id: str,
        *,
        edge_type: str = "semantic",
        weight: float = 0.5,
        reason: str | None = None,
    ) -> LinkReceipt:
        self.log.record("long_term", "link", space, source_id, target_id)
        s = self._space(space)
        self._active(space, source_id)
        self._active(space, target_id)
        s.edges[(source_id, target_id, edge_type)] = weight
        s.edges[(target_id, source_id, edge_type)] = weight
        metadata = {"created_by": "mnemon-sm", "reason": reason} if reason else {}
        return LinkReceipt(source_id, target_id, edge_type, weight, metadata)

    def forget(self, space: str, insight_id: str) -> ForgetReceipt:
        self.log.record("long_term", "forget", space, insight_id)
        s = self._space(space)
        s.deleted[insight_id] = self._active(space, insight_id)
        del s.insights[insight_id]
        s.edges = {k: w for k, w in s.edges.items() if insight_id not in k[:2]}
        return ForgetReceipt(insight_id)

    def list(
        self,
        space: str,
        *,
        query: str | None = None,
        category: str | None = None,
        limit: int = 100_000,
    ) -> tuple[Insight, ...]:
        self.log.record("long_term", "list", space)
        rows = [
            i
            for i in self._space(space).insights.values()
            if (query is None or query.lower() in i.content.lower())
            and (category is None or i.category == category)
        ]
        rows.sort(key=lambda i: (i.importance, i.created_at), reverse=True)
        return tuple(rows[:limit])

    def insights(self, space: str, ids: Sequence[str]) -> tuple[Insight, ...]:
        self.log.record("long_term", "insights", space, tuple(ids))
        found = self._space(space).insights
        return tuple(found[i] for i in dict.fromkeys(ids) if i in found)

    def graph(self, space: str) -> GraphSnapshot:
        self.log.record("long_term", "graph", space)
        s = self._space(space)
        edges = tuple(GraphEdge(a, b, k, w, k) for (a, b, k), w in sorted(s.edges.items()))
        return GraphSnapshot(tuple(s.insights.values()), edges)

    def import_draft(self, space: str, draft: ImportDraft) -> ImportReport:
        self.log.record("long_term", "import_draft", space, len(draft.insights))
        if not draft.insights:
            raise InvalidInput("an import draft needs at least one insight")
        ids, imported, skipped = [], 0, 0
        # Storing each insight is part of this one port call, not a ``remember`` call of its
        # own: the log is put aside meanwhile (callers hold the service's mutex).
        log, self.log = self.log, CallLog()
        try:
            for d in draft.insights:
                receipt = self.remember(
                    space,
                    d.content,
                    category=d.category,
                    importance=d.importance,
                    tags=d.tags,
                    entities=d.entities,
                    source=d.source or "user",
                )
                ids.append(receipt.id)
                imported += receipt.action == "added"
                skipped += receipt.action == "skipped"
        finally:
            self.log = log
        s = self._space(space)
        for e in draft.edges:
            s.edges[(ids[e.source_index], ids[e.target_index], e.edge_type)] = e.weight
        return ImportReport(imported, skipped, 0, len(draft.edges), tuple(ids))


Script = Callable[[WorkerRequest, ToolBox], object]


class MemoryUpkeepStore(MemoryLongTermStore):
    """The in-memory store with a vector backfill and a side index to rebuild."""

    def __init__(
        self, clock: Clock, log: CallLog | None = None, *, embedder: Embedder | None = None
    ) -> None:
        super().__init__(clock, log)
        self._embedder = embedder
        self.vectors: dict[tuple[str, str], object] = {}  # (space, insight id) -> vector
        self.rebuilt: list[str] = []

    @property
    def embedder(self) -> Embedder | None:
        return self._embedder

    def embed_missing(
        self, space: str, *, batch: int = 64, progress: Callable[[int, int], None] | None = None
    ) -> int:
        self.log.record("long_term", "embed_missing", space)
        if self._embedder is None:
            raise InvalidInput("no embedder is configured")
        todo = [
            i for k, i in self._space(space).insights.items() if (space, k) not in self.vectors
        ]
        for start in range(0, len(todo), batch):
            chunk = todo[start : start + batch]
            rows = embed_checked(self._embedder, [i.content for i in chunk])
            for insight, row in zip(chunk, rows, strict=True):
                self.vectors[(space, insight.id)] = row
            if progress is not None:
                progress(start + len(chunk), len(todo))
        return len(todo)

    def rebuild_index(self, space: str) -> None:
        self.log.record("long_term", "rebuild_index", space)
        self._space(space)
        self.rebuilt.append(space)


class ScriptedWorkers:
    """Workers whose behaviour per kind is a test-supplied callable; records requests."""

    def __init__(self, scripts: dict[str, Script], log: CallLog | None = None) -> None:
        self.scripts, self.log = scripts, log if log is not None else CallLog()
        self.requests: list[WorkerRequest] = []

    def run(self, request: WorkerRequest, tools: ToolBox) -> object:
        self.log.record("workers", "run", request.kind)
        self.requests.append(request)
        return self.scripts[request.kind](request, tools)
