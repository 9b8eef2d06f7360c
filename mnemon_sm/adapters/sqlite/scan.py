"""The reference :class:`recall.RecallSource`: a full scan over plain data.

Theory of operation
-------------------
Recall's scoring is shared; what differs between sources is how candidates are found. This one
looks at every row and every edge, so it is obviously complete; the store's indexed source must
return exactly what it returns, and the tests hold it to that. It is also the scoring reference
for property tests, which need no SQLite.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from mnemon_sm.adapters.sqlite.recall import Doc, Neighbor, first_neighbors, rank_key, ts_key
from mnemon_sm.adapters.sqlite.tokens import EntityMatcher, entity_key, token_set
from mnemon_sm.ports.long_term.values import Insight

__all__ = ["ScanSource", "doc_of"]


def doc_of(insight: Insight) -> Doc:
    return Doc(insight, token_set(insight.content, *insight.tags, *insight.entities))


class ScanSource:
    """The reference :class:`RecallSource`: a full scan over plain data.

    ``rows`` are the space's active insights in insertion order; ``edges`` are directed
    ``(source_id, target_id, edge_type, weight)`` rows. ``category`` and ``source`` filter the
    set; entities for query matching come from all active rows.
    """

    def __init__(
        self,
        rows: Sequence[Insight],
        edges: Iterable[tuple[str, str, str, float]],
        *,
        category: str | None = None,
        source: str | None = None,
    ) -> None:
        self._all = list(rows)
        self._rows = [
            (seq, row)
            for seq, row in enumerate(self._all)
            if (category is None or row.category == category)
            and (source is None or row.source == source)
        ]
        self._docs = {row.id: doc_of(row) for _, row in self._rows}
        self._edges = [e for e in edges if e[0] in self._docs and e[1] in self._docs]

    def keyword_top(self, tokens: frozenset[str], k: int) -> list[str]:
        scored = []
        for seq, row in self._rows:
            overlap = len(tokens & self._docs[row.id].tokens)
            if overlap:
                scored.append((rank_key(overlap, row, seq), row.id))
        scored.sort(reverse=True)
        return [node for _, node in scored[:k]]

    def newest(self, k: int) -> list[str]:
        order = sorted(self._rows, key=lambda r: (ts_key(r[1].created_at), r[0]), reverse=True)
        return [row.id for _, row in order[:k]]

    def neighbors(self, node: str, limit: int) -> list[Neighbor]:
        found = [Neighbor(dst, kind, w) for src, dst, kind, w in self._edges if src == node]
        found += [Neighbor(src, kind, w) for src, dst, kind, w in self._edges if dst == node]
        return first_neighbors(found, limit)

    def docs(self, ids: Collection[str]) -> dict[str, Doc]:
        return {node: self._docs[node] for node in ids if node in self._docs}

    def superseded(self, ids: Collection[str]) -> set[str]:
        wanted = set(ids)
        return {dst for _, dst, kind, _ in self._edges if kind == "supersedes" and dst in wanted}

    def causal_pairs(self, ids: Collection[str]) -> list[tuple[str, str]]:
        wanted = set(ids)
        return [
            (src, dst)
            for src, dst, kind, _ in self._edges
            if kind == "causal" and src in wanted and dst in wanted
        ]

    def entity_matcher(self) -> EntityMatcher:
        return EntityMatcher({entity_key(e) for row in self._all for e in row.entities})
