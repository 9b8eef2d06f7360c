"""Mnemon's recall algorithms as pure functions over a read-only view of one space.

Theory of operation
-------------------
Smart recall (Mnemon's default, here without embeddings) runs in five steps over a
:class:`RecallSource`, the filtered set of active insights and the edges between them:

1. intent: the caller's, or read from the query's cue words (:func:`tokens.detect_intent`);
2. anchors: the top 20 insights by keyword overlap and the 20 newest, fused by reciprocal rank
   (``1 / (60 + rank)``, ranks from 1), divided by the best fused score; an insight found by
   both signals is matched ``via`` "hybrid", otherwise "keyword" or "recency";
3. beam search from each anchor, strongest first: a hop adds ``intent weight of the edge type x
   edge weight`` to the path score; a node keeps its best score and the edge type it was reached
   by (anchors keep their anchor signal). Each step keeps the ``width`` best new nodes. Edges
   are followed in both directions; a node's neighbours are looked at heaviest edge first (then
   by id and type), each spending one unit of the visit budget, and the whole search stops
   when the budget is spent, even in the middle of a node (so a hub costs at most the budget);
4. re-rank: ``.45 keyword + .25 entity + .30 graph``, keyword being the share of query tokens in
   the insight's content, tags and entities, entity the share of query entities among its
   entities, graph the path score min-max normalised over the candidates (all equal: 1). An
   insight that another one ``supersedes`` scores x0.25. Order: score, importance, id; cut to
   the limit; for WHY, causes move before their effects (Kahn's sort over causal edges, ties and
   cycles broken by rank);
5. output: scores rounded to 3 decimals, confidence low (< 0.25), medium (< 0.6) or high, and the
   hint "sparse_results" when fewer than ``limit / 2`` insights came back.

Keyword recall returns the overlap ratio alone (zero dropped); basic recall is a case-insensitive
substring filter ordered by importance then creation time, newest first, with no score.

Rules kept: nothing here does I/O or reads a clock. Ties are broken by fixed keys (the keyword
ranking by importance, creation second and insertion order, all descending), so a source that
finds candidates through an index returns exactly what the full scan (:mod:`.scan`) does.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Protocol

import attrs

from mnemon_sm.adapters.sqlite.tokens import (
    EntityMatcher,
    detect_intent,
    entity_key,
    query_entities,
    token_set,
)
from mnemon_sm.ports.long_term.values import Insight, RecallHit, RecallResult

__all__ = [
    "ANCHORS_PER_SIGNAL",
    "BEAM",
    "INTENT_WEIGHTS",
    "RRF_K",
    "Doc",
    "Neighbor",
    "Reach",
    "RecallSource",
    "basic_matches",
    "basic_recall",
    "beam_search",
    "confidence",
    "first_neighbors",
    "fuse_anchors",
    "keyword_recall",
    "rank_key",
    "rerank",
    "smart_recall",
    "ts_key",
    "why_order",
]

ANCHORS_PER_SIGNAL = 20  # Mnemon: top 20 by keyword overlap plus the 20 newest
RRF_K = 60  # reciprocal-rank fusion constant
KEYWORD_W, ENTITY_W, GRAPH_W = 0.45, 0.25, 0.30  # Mnemon's weights without embeddings
SUPERSEDED_FACTOR = 0.25
LOW_BELOW, HIGH_FROM = 0.25, 0.6  # confidence cut-offs (also dsh-mnemon's quality tiers)
SPARSE_HINT = "sparse_results"

INTENT_WEIGHTS: dict[str, dict[str, float]] = {
    "WHY": {"causal": 0.70, "temporal": 0.20, "entity": 0.05, "semantic": 0.05},
    "WHEN": {"causal": 0.15, "temporal": 0.65, "entity": 0.10, "semantic": 0.10},
    "ENTITY": {"causal": 0.10, "temporal": 0.05, "entity": 0.55, "semantic": 0.30},
    "GENERAL": {"causal": 0.25, "temporal": 0.25, "entity": 0.25, "semantic": 0.25},
}
# (beam width, max depth, visit budget) per intent
BEAM: dict[str, tuple[int, int, int]] = {
    "WHY": (15, 5, 500),
    "WHEN": (10, 5, 400),
    "ENTITY": (10, 4, 400),
    "GENERAL": (10, 4, 500),
}


@attrs.frozen
class Neighbor:
    """One edge seen from a node: the node at the other end, the edge's type and weight."""

    id: str
    edge_type: str
    weight: float


@attrs.frozen
class Reach:
    """How the search reached a candidate: its best path score and the signal or edge type."""

    score: float
    via: str


@attrs.frozen
class Doc:
    """A candidate insight with its distinct tokens (content, tags and entities)."""

    insight: Insight
    tokens: frozenset[str]


class RecallSource(Protocol):
    """The filtered active insights of one space and their edges, as recall needs them."""

    def keyword_top(self, tokens: frozenset[str], k: int) -> list[str]:
        """Ids of the ``k`` insights with the most query tokens (at least one), ranked by
        (overlap, importance, creation second, insertion order), all descending."""
        ...

    def newest(self, k: int) -> list[str]:
        """Ids of the ``k`` newest insights: creation second, then insertion order."""
        ...

    def neighbors(self, node: str, limit: int) -> Sequence[Neighbor]:
        """:func:`first_neighbors` of the node's edges, either direction, to the set."""
        ...

    def docs(self, ids: Collection[str]) -> Mapping[str, Doc]:
        """The insights of the set among ``ids``."""
        ...

    def superseded(self, ids: Collection[str]) -> set[str]:
        """Those of ``ids`` that are the target of a ``supersedes`` edge."""
        ...

    def causal_pairs(self, ids: Collection[str]) -> list[tuple[str, str]]:
        """Directed causal edges with both ends in ``ids``."""
        ...

    def entity_matcher(self) -> EntityMatcher:
        """A matcher over every entity stored in the space's active insights."""
        ...


def ts_key(created_at: str) -> int:
    """Seconds since the epoch of an RFC 3339 time (no zone: UTC); 0 when unreadable."""
    try:
        moment = datetime.fromisoformat(created_at)
    except (TypeError, ValueError):
        return 0
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return math.floor(moment.timestamp())


def rank_key(overlap: int, insight: Insight, seq: int) -> tuple[int, int, int, int]:
    """Keyword ranking key, larger first: overlap, importance, creation second, insertion."""
    return (overlap, insight.importance, ts_key(insight.created_at), seq)


def confidence(score: float) -> str:
    if score < LOW_BELOW:
        return "low"
    return "medium" if score < HIGH_FROM else "high"


def fuse_anchors(keyword: Sequence[str], recency: Sequence[str]) -> dict[str, Reach]:
    """Reciprocal-rank fusion of the two anchor lists, normalised by the best score, ordered
    strongest first (ties by id)."""
    fused: dict[str, float] = {}
    signals: dict[str, list[str]] = {}
    for name, ranked in (("keyword", keyword), ("recency", recency)):
        for rank, node in enumerate(ranked, start=1):
            fused[node] = fused.get(node, 0.0) + 1.0 / (RRF_K + rank)
            signals.setdefault(node, []).append(name)
    if not fused:
        return {}
    top = max(fused.values())
    order = sorted(fused, key=lambda node: (-fused[node], node))
    return {
        node: Reach(fused[node] / top, "hybrid" if len(signals[node]) > 1 else signals[node][0])
        for node in order
    }


def first_neighbors(neighbors: Iterable[Neighbor], limit: int) -> list[Neighbor]:
    """The first ``limit`` neighbours in visiting order: one per (id, edge type) with its
    highest weight, then weight descending, id, edge type."""
    best: dict[tuple[str, str], float] = {}
    for nb in neighbors:
        key = (nb.id, nb.edge_type)
        if key not in best or nb.weight > best[key]:
            best[key] = nb.weight
    order = sorted(best.items(), key=lambda item: (-item[1], item[0]))
    return [Neighbor(node, kind, weight) for (node, kind), weight in order[: max(0, limit)]]


def beam_search(
    anchors: Mapping[str, Reach],
    intent: str,
    neighbors: Callable[[str, int], Sequence[Neighbor]],
) -> dict[str, Reach]:
    """Expand the anchors (in the given order) through the graph; see the module steps.

    ``neighbors(node, limit)`` returns :func:`first_neighbors` of the node's edges.
    """
    width, max_depth, budget = BEAM[intent]
    weights = INTENT_WEIGHTS[intent]
    best = dict(anchors)
    spent = 0
    for anchor, reach in anchors.items():
        beam = [(anchor, reach.score)]
        seen = {anchor}
        for _ in range(max_depth):
            frontier: dict[str, tuple[float, str]] = {}
            for node, score in beam:
                if spent >= budget:  # what this step found still counts
                    _settle(best, frontier, width, seen, anchors)
                    return best
                visible = neighbors(node, budget - spent)
                spent += len(visible)
                for nb in visible:
                    if nb.id in seen:
                        continue
                    path = score + weights.get(nb.edge_type, weights["semantic"]) * nb.weight
                    if nb.id not in frontier or path > frontier[nb.id][0]:
                        frontier[nb.id] = (path, nb.edge_type)
            beam = _settle(best, frontier, width, seen, anchors)
            if not beam:
                break
    return best


def _settle(
    best: dict[str, Reach],
    frontier: Mapping[str, tuple[float, str]],
    width: int,
    seen: set[str],
    anchors: Mapping[str, Reach],
) -> list[tuple[str, float]]:
    """Keep the ``width`` best new nodes of a step: record them, return the next beam."""
    ranked = sorted(frontier.items(), key=lambda item: (-item[1][0], item[0]))[:width]
    beam = []
    for node, (path, via) in ranked:
        seen.add(node)
        beam.append((node, path))
        old = best.get(node)
        if old is None or path > old.score:
            best[node] = Reach(path, anchors[node].via if node in anchors else via)
    return beam


def _share(wanted: frozenset[str], present: Collection[str]) -> float:
    if not wanted:
        return 0.0
    return sum(1 for item in wanted if item in present) / len(wanted)


def rerank(
    docs: Mapping[str, Doc],
    reach: Mapping[str, Reach],
    q_tokens: frozenset[str],
    q_entities: frozenset[str],
    superseded: Collection[str],
) -> list[tuple[float, Doc, str]]:
    """(unrounded score, doc, via) for every reached candidate that has a doc, best first."""
    present = [node for node in reach if node in docs]
    if not present:
        return []
    low = min(reach[node].score for node in present)
    high = max(reach[node].score for node in present)
    scored: list[tuple[float, Doc, str]] = []
    for node in present:
        doc = docs[node]
        graph = 1.0 if high == low else (reach[node].score - low) / (high - low)
        entities = {entity_key(e) for e in doc.insight.entities}
        score = (
            KEYWORD_W * _share(q_tokens, doc.tokens)
            + ENTITY_W * _share(q_entities, entities)
            + GRAPH_W * graph
        )
        if node in superseded:
            score *= SUPERSEDED_FACTOR
        scored.append((min(1.0, max(0.0, score)), doc, reach[node].via))
    scored.sort(key=lambda item: (-item[0], -item[1].insight.importance, item[1].insight.id))
    return scored


def why_order(ids: Sequence[str], pairs: Iterable[tuple[str, str]]) -> list[str]:
    """Kahn's topological sort of ``ids`` (best first) by causal ``pairs`` (cause, effect);
    ties and cycles go to the better-ranked id."""
    rank = {node: i for i, node in enumerate(ids)}
    after: dict[str, set[str]] = {node: set() for node in ids}
    incoming = dict.fromkeys(ids, 0)
    for cause, effect in pairs:
        if cause in rank and effect in rank and cause != effect and effect not in after[cause]:
            after[cause].add(effect)
            incoming[effect] += 1
    ready = [(rank[node], node) for node in ids if incoming[node] == 0]
    heapq.heapify(ready)
    remaining = set(ids)
    out: list[str] = []
    while remaining:
        if not ready:  # a cycle: release its best-ranked member
            node = min(remaining, key=rank.__getitem__)
            incoming[node] = 0
            ready.append((rank[node], node))
        _, node = heapq.heappop(ready)
        if node not in remaining:
            continue
        remaining.discard(node)
        out.append(node)
        for effect in sorted(after[node], key=rank.__getitem__):
            incoming[effect] -= 1
            if incoming[effect] == 0 and effect in remaining:
                heapq.heappush(ready, (rank[effect], effect))
    return out


def _hint(count: int, limit: int) -> str | None:
    return SPARSE_HINT if count == 0 or count < limit / 2 else None


def smart_recall(
    source: RecallSource, query: str, *, limit: int, intent: str | None = None
) -> RecallResult:
    """Mnemon's smart recall (steps 1-5 of the module docstring)."""
    intent = intent or detect_intent(query)
    q_tokens = token_set(query)
    keyword = source.keyword_top(q_tokens, ANCHORS_PER_SIGNAL) if q_tokens else []
    anchors = fuse_anchors(keyword, source.newest(ANCHORS_PER_SIGNAL))
    reach = beam_search(anchors, intent, source.neighbors)
    docs = source.docs(list(reach))
    q_entities = query_entities(query, source.entity_matcher())
    ranked = rerank(docs, reach, q_tokens, q_entities, source.superseded(list(docs)))[:limit]
    if intent == "WHY" and len(ranked) > 1:
        by_id = {item[1].insight.id: item for item in ranked}
        order = why_order(list(by_id), source.causal_pairs(list(by_id)))
        ranked = [by_id[node] for node in order]
    hits = []
    for score, doc, via in ranked:
        rounded = round(score, 3)
        hits.append(RecallHit(doc.insight, rounded, intent, via, confidence(rounded)))
    return RecallResult(tuple(hits), _hint(len(hits), limit))


def keyword_recall(source: RecallSource, query: str, *, limit: int) -> RecallResult:
    """Keyword overlap ratio only; insights without a query token are dropped."""
    q_tokens = token_set(query)
    ids = source.keyword_top(q_tokens, limit) if q_tokens else []
    docs = source.docs(ids)
    hits = []
    for node in ids:
        if node in docs:
            score = round(_share(q_tokens, docs[node].tokens), 3)
            hits.append(RecallHit(docs[node].insight, score, None, "keyword", confidence(score)))
    return RecallResult(tuple(hits), _hint(len(hits), limit))


def basic_matches(content: str, query: str) -> bool:
    """Basic recall's filter: ``query`` is a case-insensitive substring of ``content``."""
    return query.lower() in content.lower()


def basic_recall(rows: Sequence[Insight], query: str, *, limit: int) -> list[Insight]:
    """Basic recall over rows in insertion order: matches by importance, then creation time,
    then insertion order, all descending."""
    order = sorted(
        range(len(rows)), key=lambda i: (rows[i].importance, rows[i].created_at, i), reverse=True
    )
    return [rows[i] for i in order if basic_matches(rows[i].content, query)][:limit]
