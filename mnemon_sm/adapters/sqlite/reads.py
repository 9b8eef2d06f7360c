"""The read side of the embedded store: recall's data source and the read-only operations.

Theory of operation
-------------------
:func:`relevance_recall` (the default mode) gathers candidates from the FTS5 side index
(:func:`lexical.candidate_pool`: each term's newest matches and the memories holding every
term, a bounded number whatever the store's size) and, with an embedder, from the vector set
(:class:`Dense`); scores the best of them exactly (:func:`lexical.lexical_score`); reads the
signals (importance, creation, accesses, supersession, and the edges of the top candidates
only) and ranks them with :func:`..ranking.rank`. Full rows are read for the hits alone.

:class:`SqliteSource` is the :class:`recall.RecallSource` of Mnemon's smart recall: keyword
and recency anchors and tokens come from the side index, edges and rows from ``mnemon.db``;
the scoring is :mod:`.recall`'s, shared with the full-scan reference. The category and source
filters are the source's set, so anchors, traversal and results all stay inside it.

Everything here only reads; access counting is the store's job after a recall returns. Orders:
basic recall and list go by importance, creation time and insertion, all descending; graph
nodes and edges by insertion; related by breadth-first depth, then by the order of discovery
(frontier order, then neighbour id, then edge type).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import Any, Protocol

from mnemon_sm.adapters.sqlite import lexical, recall
from mnemon_sm.adapters.sqlite.recall import Doc, Neighbor
from mnemon_sm.adapters.sqlite.rows import COLUMNS, insight
from mnemon_sm.adapters.sqlite.sideindex import SideIndex
from mnemon_sm.adapters.sqlite.tokens import EntityMatcher, token_set
from mnemon_sm.errors import UnknownInsight
from mnemon_sm.ports.long_term import ranking
from mnemon_sm.ports.long_term.values import (
    GraphEdge,
    GraphSnapshot,
    Insight,
    RecallHit,
    RecallResult,
    RelatedHit,
    SpaceStatus,
)

__all__ = [
    "Dense",
    "SqliteSource",
    "graph",
    "list_rows",
    "recall_rows",
    "related",
    "relevance_recall",
    "rows_by_id",
    "status",
]

_CHUNK = 500


def _marks(items: Sequence[Any]) -> str:
    return ",".join("?" * len(items))


def _parts(items: Collection[str]) -> Iterator[list[str]]:
    listed = list(items)
    for start in range(0, len(listed), _CHUNK):
        yield listed[start : start + _CHUNK]


class SqliteSource:
    """The filtered active insights of one store, for :mod:`.recall`."""

    def __init__(
        self, conn: sqlite3.Connection, index: SideIndex, category: str | None, source: str | None
    ) -> None:
        self._conn = conn
        self._index = index
        self._category = category
        self._source = source
        self._adjacency: dict[str, tuple[int, list[Neighbor]]] = {}  # node: (rows asked, rows)
        filters = [(c, v) for c, v in (("category", category), ("source", source)) if v]
        self._filter_sql = "".join(f" AND d.{column} = ?" for column, _ in filters)
        self._filter_args = [value for _, value in filters]

    def keyword_top(self, tokens: frozenset[str], k: int) -> list[str]:
        return self._index.keyword_top(tokens, k, self._category, self._source)

    def newest(self, k: int) -> list[str]:
        return self._index.newest(k, self._category, self._source)

    def neighbors(self, node: str, limit: int) -> list[Neighbor]:
        """Reads only what the search can look at: with at most two rows per (neighbour,
        type), the first ``2 x limit`` rows in visiting order hold the first ``limit``."""
        cached = self._adjacency.get(node)
        if cached is not None and (len(cached[1]) < cached[0] or cached[0] >= 2 * limit):
            return recall.first_neighbors(cached[1], limit)
        rows = self._conn.execute(
            "SELECT other, kind, weight FROM ("
            " SELECT e.target_id AS other, e.edge_type AS kind, coalesce(e.weight, 1.0) AS weight"
            " FROM main.edges e JOIN idx.docs d ON d.id = e.target_id"
            f" WHERE e.source_id = ?{self._filter_sql}"
            " UNION ALL SELECT e.source_id, e.edge_type, coalesce(e.weight, 1.0)"
            " FROM main.edges e JOIN idx.docs d ON d.id = e.source_id"
            f" WHERE e.target_id = ?{self._filter_sql})"
            " ORDER BY weight DESC, other, kind LIMIT ?",
            (node, *self._filter_args, node, *self._filter_args, 2 * limit),
        )
        found = [Neighbor(other, kind, float(weight)) for other, kind, weight in rows]
        self._adjacency[node] = (2 * limit, found)
        return recall.first_neighbors(found, limit)

    def docs(self, ids: Collection[str]) -> dict[str, Doc]:
        out: dict[str, Doc] = {}
        tokens = self._index.tokens(list(ids))
        for part in _parts(ids):
            rows = self._conn.execute(
                f"SELECT {COLUMNS} FROM main.insights"
                f" WHERE id IN ({_marks(part)}) AND +deleted_at IS NULL",
                part,
            )
            for row in rows:
                item = insight(row)
                if self._category not in (None, item.category):
                    continue
                if self._source not in (None, item.source):
                    continue
                found = tokens.get(item.id)
                if found is None:
                    found = token_set(item.content, *item.tags, *item.entities)
                out[item.id] = Doc(item, found)
        return out

    def _edges_among(self, kind: str, ids: Collection[str]) -> list[tuple[str, str]]:
        wanted = set(ids)
        out: list[tuple[str, str]] = []
        for part in _parts(ids):
            rows = self._conn.execute(
                "SELECT source_id, target_id FROM main.edges"
                f" WHERE edge_type = ? AND target_id IN ({_marks(part)})",
                (kind, *part),
            )
            out.extend(
                (str(src), str(dst)) for src, dst in rows if kind != "causal" or src in wanted
            )
        return out

    def superseded(self, ids: Collection[str]) -> set[str]:
        return {dst for _, dst in self._edges_among("supersedes", ids)}

    def causal_pairs(self, ids: Collection[str]) -> list[tuple[str, str]]:
        return self._edges_among("causal", ids)

    def entity_matcher(self) -> EntityMatcher:
        return self._index.matcher()


def _ordered(
    conn: sqlite3.Connection, category: str | None, source: str | None
) -> Iterator[Insight]:
    where, args = ["deleted_at IS NULL"], []
    for column, value in (("category", category), ("source", source)):
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    rows = conn.execute(
        f"SELECT {COLUMNS} FROM main.insights WHERE {' AND '.join(where)}"
        " ORDER BY importance DESC, created_at DESC, rowid DESC",
        args,
    )
    try:
        for row in rows:
            yield insight(row)
    finally:
        rows.close()


def list_rows(
    conn: sqlite3.Connection,
    query: str,
    category: str | None,
    source: str | None,
    limit: int,
) -> list[Insight]:
    """Basic recall and list: substring matches in importance, creation, insertion order."""
    out: list[Insight] = []
    for item in _ordered(conn, category, source):
        if recall.basic_matches(item.content, query):
            out.append(item)
            if len(out) == limit:
                break
    return out


POOL_MIN = 100  # candidates each retriever hands to the ranking, at least
_DAY_MS = 86_400_000


class Dense(Protocol):
    """Dense retrieval over a store's vectors (see :mod:`.vectors`)."""

    def similar(
        self, query: str, k: int, also: Sequence[int], allowed: Collection[int] | None
    ) -> dict[int, float]:
        """Cosine similarity to ``query`` of the ``k`` most similar rowids (among ``allowed``
        when given) and of every rowid in ``also`` that has a vector."""
        ...


def _filtered(
    conn: sqlite3.Connection, category: str | None, source: str | None
) -> set[int] | None:
    filters = [(c, v) for c, v in (("category", category), ("source", source)) if v]
    if not filters:
        return None
    clause = " AND ".join(f"{column} = ?" for column, _ in filters)
    rows = conn.execute(f"SELECT doc FROM idx.docs WHERE {clause}", [v for _, v in filters])
    return {int(doc) for (doc,) in rows}


def _signals(
    conn: sqlite3.Connection, docs: Sequence[int]
) -> dict[int, tuple[str, int, str, int]]:
    """(id, importance, created_at, access count) of the active insights among ``docs``."""
    out: dict[int, tuple[str, int, str, int]] = {}
    for start in range(0, len(docs), _CHUNK):
        part = docs[start : start + _CHUNK]
        rows = conn.execute(
            "SELECT rowid, id, importance, created_at, access_count FROM main.insights"
            f" WHERE rowid IN ({_marks(part)}) AND +deleted_at IS NULL",
            part,
        )
        for doc, node, importance, created_at, accesses in rows:
            out[int(doc)] = (str(node), int(importance), str(created_at), int(accesses or 0))
    return out


def _rows_by_rowid(conn: sqlite3.Connection, docs: Sequence[int]) -> dict[int, Insight]:
    out: dict[int, Insight] = {}
    for start in range(0, len(docs), _CHUNK):
        part = docs[start : start + _CHUNK]
        rows = conn.execute(
            f"SELECT {COLUMNS} FROM main.insights"
            f" WHERE rowid IN ({_marks(part)}) AND +deleted_at IS NULL",
            part,
        )
        out.update((int(row[0]), insight(row)) for row in rows)
    return out


def _edges_for_ranking(
    conn: sqlite3.Connection, ids: Sequence[str]
) -> tuple[list[tuple[str, str, float]], set[str]]:
    """The edges joining one of the :data:`ranking.GRAPH_TOP` first ``ids`` to another of
    ``ids`` (temporal proximity left out), and those of ``ids`` a ``supersedes`` edge targets.
    Both reads go through ``mnemon.db``'s edge indexes: the cost follows the top candidates'
    degree and the candidate count, never the store's size."""
    wanted = set(ids)
    top = list(ids[: ranking.GRAPH_TOP])
    edges: list[tuple[str, str, float]] = []
    if top:
        marks = _marks(top)
        rows = conn.execute(
            "SELECT source_id, target_id, edge_type, coalesce(weight, 1.0), metadata"
            f" FROM main.edges WHERE source_id IN ({marks})"
            " UNION ALL SELECT source_id, target_id, edge_type, coalesce(weight, 1.0), metadata"
            f" FROM main.edges WHERE target_id IN ({marks})",
            (*top, *top),
        )
        for src, dst, kind, weight, meta in rows:
            if src not in wanted or dst not in wanted or kind == "supersedes":
                continue
            if kind == "temporal" and _label(kind, meta) == "proximity":
                continue
            edges.append((str(src), str(dst), float(weight)))
    superseded: set[str] = set()
    for part in _parts(ids):
        rows = conn.execute(
            "SELECT target_id FROM main.edges"
            f" WHERE edge_type = 'supersedes' AND target_id IN ({_marks(part)})",
            part,
        )
        superseded.update(str(dst) for (dst,) in rows)
    return edges, superseded


def relevance_recall(
    conn: sqlite3.Connection,
    index: SideIndex,
    query: str,
    *,
    limit: int,
    category: str | None,
    source: str | None,
    now_ms: int,
    dense: Dense | None = None,
) -> RecallResult:
    """Relevance recall (the default mode): lexical and, with vectors, dense candidates
    ranked by :mod:`..ranking`. Reads only."""
    terms = lexical.expand(
        lexical.query_terms(query), index.frequency, index.extensions, index.neighbours
    )
    pool = max(POOL_MIN, 3 * limit)
    stats = index.stats([variant for term in terms for variant, _ in term.variants])
    matches = [
        index.matching(lexical.term_expression(term), lexical.TERM_MATCHES, category, source)
        for term in terms
    ]
    everything: Sequence[int] | lexical.Rowids = []
    if len(terms) > 1:
        everything = index.matching(lexical.all_terms_expression(terms), pool, category, source)
    found = lexical.candidate_pool(terms, matches, everything, stats, pool)
    similar: dict[int, float] = {}
    if dense is not None:
        similar = dense.similar(query, pool, found, _filtered(conn, category, source))
    docs = list(dict.fromkeys([*found, *similar]))
    signals = _signals(conn, docs)
    stored = index.terms_of(found)
    lexical_of = {doc: lexical.lexical_score(terms, stored.get(doc, []), stats) for doc in signals}
    order = sorted(
        signals,
        key=lambda doc: -ranking.relevance(ranking.Features(lexical_of[doc], similar.get(doc))),
    )
    ids = [signals[doc][0] for doc in order]
    edges, superseded = _edges_for_ranking(conn, ids)
    near = ranking.graph_proximity(ids, edges)
    features = {}
    for doc, (node, importance, created_at, accesses) in signals.items():
        age = (now_ms - recall.ts_key(created_at) * 1000) / _DAY_MS
        features[doc] = ranking.Features(
            lexical_of[doc],
            similar.get(doc),
            age_days=age,
            importance=importance,
            access_count=accesses,
            graph=near.get(node, 0.0),
            superseded=node in superseded,
        )
    ranked = ranking.rank(features)[:limit]
    rows = _rows_by_rowid(conn, [entry.key for entry in ranked])
    hits = []
    for entry in ranked:
        value = round(entry.score, 3)
        item = rows[entry.key]
        hits.append(RecallHit(item, value, None, entry.via, recall.confidence(value)))
    return RecallResult(tuple(hits), recall.SPARSE_HINT if len(hits) < limit / 2 else None)


def recall_rows(
    conn: sqlite3.Connection,
    index: SideIndex,
    query: str,
    *,
    mode: str,
    limit: int,
    category: str | None,
    source: str | None,
    intent: str | None,
    now_ms: int,
    dense: Dense | None = None,
) -> RecallResult:
    """Recall without side effects (relevance, smart, keyword or basic)."""
    if mode == "relevance":
        return relevance_recall(
            conn,
            index,
            query,
            limit=limit,
            category=category,
            source=source,
            now_ms=now_ms,
            dense=dense,
        )
    if mode == "basic":
        found = list_rows(conn, query, category, source, limit)
        hits = tuple(RecallHit(item) for item in found)
        return RecallResult(hits, recall.SPARSE_HINT if len(hits) < limit / 2 else None)
    data = SqliteSource(conn, index, category, source)
    if mode == "keyword":
        return recall.keyword_recall(data, query, limit=limit)
    return recall.smart_recall(data, query, limit=limit, intent=intent)


def rows_by_id(
    conn: sqlite3.Connection, ids: Collection[str], *, active_only: bool = True
) -> dict[str, Insight]:
    """The rows of ``ids`` that exist (and are active, unless ``active_only`` is off)."""
    active = " AND +deleted_at IS NULL" if active_only else ""
    out: dict[str, Insight] = {}
    for part in _parts(ids):
        rows = conn.execute(
            f"SELECT {COLUMNS} FROM main.insights WHERE id IN ({_marks(part)}){active}", part
        )
        out.update((item.id, item) for item in map(insight, rows))
    return out


def in_order(found: dict[str, Insight], ids: Iterable[str]) -> tuple[Insight, ...]:
    """The rows of ``found`` in the order of ``ids``, each once."""
    return tuple(found[i] for i in dict.fromkeys(ids) if i in found)


def related(
    conn: sqlite3.Connection, start: str, depth: int, edge_type: str | None
) -> tuple[RelatedHit, ...]:
    """Breadth-first neighbours over undirected edges, start excluded."""
    if not rows_by_id(conn, [start]):
        raise UnknownInsight(f"no active insight has id {start!r}")
    seen, frontier, hits = {start}, [start], list[RelatedHit]()
    kind_sql, kind_args = ("", []) if edge_type is None else (" AND edge_type = ?", [edge_type])
    for level in range(1, depth + 1):
        order = {node: i for i, node in enumerate(frontier)}
        found: list[tuple[int, str, str]] = []
        for part in _parts(frontier):
            marks = _marks(part)
            rows = conn.execute(
                f"SELECT source_id, target_id, edge_type FROM main.edges"
                f" WHERE source_id IN ({marks}){kind_sql}"
                f" UNION SELECT target_id, source_id, edge_type FROM main.edges"
                f" WHERE target_id IN ({marks}){kind_sql}",
                (*part, *kind_args, *part, *kind_args),
            )
            found.extend((order[src], str(dst), str(kind)) for src, dst, kind in rows)
        reached: dict[str, str] = {}
        for _, node, kind in sorted(found):
            if node not in seen and node not in reached:
                reached[node] = kind
        seen.update(reached)
        found_rows = rows_by_id(conn, reached)
        frontier = [node for node in reached if node in found_rows]
        hits.extend(RelatedHit(found_rows[node], level, reached[node]) for node in frontier)
        if not frontier:
            break
    return tuple(hits)


def _label(kind: str, metadata: Any) -> str:
    try:
        meta = json.loads(metadata) if isinstance(metadata, str) else None
    except ValueError:
        meta = None
    sub = meta.get("sub_type") if isinstance(meta, dict) else None
    return sub if isinstance(sub, str) and sub else kind


def graph(conn: sqlite3.Connection) -> GraphSnapshot:
    """Active insights and every edge row between two active insights."""
    nodes = conn.execute(
        f"SELECT {COLUMNS} FROM main.insights WHERE deleted_at IS NULL ORDER BY rowid"
    )
    edge_rows = conn.execute(
        "SELECT e.source_id, e.target_id, e.edge_type, e.weight, e.metadata FROM main.edges e"
        " JOIN main.insights a ON a.id = e.source_id AND +a.deleted_at IS NULL"
        " JOIN main.insights b ON b.id = e.target_id AND +b.deleted_at IS NULL"
        " ORDER BY e.rowid"
    )
    return GraphSnapshot(
        tuple(map(insight, nodes)),
        tuple(
            GraphEdge(
                str(src), str(dst), str(kind), 1.0 if w is None else float(w), _label(kind, meta)
            )
            for src, dst, kind, w, meta in edge_rows
        ),
    )


def status(conn: sqlite3.Connection, db_path: str) -> SpaceStatus:
    """Mnemon's ``status`` numbers."""

    def one(sql: str) -> int:
        return int(conn.execute(sql).fetchone()[0])

    by_category = conn.execute(
        "SELECT category, count(*) FROM main.insights WHERE deleted_at IS NULL"
        " GROUP BY category ORDER BY category"
    )
    top = conn.execute(
        "SELECT je.value, count(DISTINCT i.id) AS n FROM main.insights i,"
        " json_each(CASE WHEN json_valid(i.entities) THEN i.entities ELSE '[]' END) je"
        " WHERE i.deleted_at IS NULL AND je.type = 'text'"
        " GROUP BY je.value ORDER BY n DESC, je.value LIMIT 20"
    )
    return SpaceStatus(
        total_insights=one("SELECT count(*) FROM main.insights WHERE deleted_at IS NULL"),
        deleted_insights=one("SELECT count(*) FROM main.insights WHERE deleted_at IS NOT NULL"),
        by_category={str(c): int(n) for c, n in by_category},
        edge_count=one("SELECT count(*) FROM main.edges"),
        top_entities=tuple((str(e), int(n)) for e, n in top),
        oplog_count=one("SELECT count(*) FROM main.oplog"),
        db_path=db_path,
        db_size_bytes=os.path.getsize(db_path),
    )
