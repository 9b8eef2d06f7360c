"""The edges a write creates by itself: temporal, entity and causal (no semantic edges).

Theory of operation
-------------------
Called inside the write's transaction, after the new insight is in ``mnemon.db`` and in the side
index; the side index finds every partner without scanning the store.

- temporal (remember only): a backbone pair (weight 1.0, ``sub_type`` backbone) with the newest
  other insight from the same source, plus proximity pairs (``sub_type`` proximity) with up to
  10 other insights created in the 24 hours up to the new one, weighted ``1 / (1 + hours
  apart)``. Pairs carry ``direction`` precedes (older to newer) and succeeds.
- entity: for each of the new insight's entities (case-insensitive), pairs of weight 1.0 with
  the 5 most recently written other insights carrying it, metadata naming the entity; an
  insight is linked once; at most 50 pairs. (Written, not created: an import of old insights
  then chains them among themselves instead of piling every one onto the newest few.)
- causal: when the new insight or one of the 10 most recently written others contains a causal
  cue (:func:`tokens.causal_cue`) and their token sets overlap (Jaccard) by at least 0.15, one
  edge from the older to the newer, weighted by the overlap, ``sub_type`` the cue's relation.
- import turns temporal edges off and, at the end, rebuilds the backbone of each source it
  wrote to: consecutive insights of the source's timeline (creation second, then insertion)
  are paired, and a backbone pair between two old insights that now have new ones between them
  is removed.

Edge counts in receipts count pairs for temporal and entity edges and rows for causal ones.
"""

from __future__ import annotations

import itertools
from typing import Any

import attrs

from mnemon_sm.adapters.sqlite.tokens import causal_cue, entity_key
from mnemon_sm.adapters.sqlite.tx import Tx

__all__ = ["NewInsight", "automatic", "rebuild_backbone"]

WINDOW_S = 24 * 3600
PROXIMITY_MAX = 10
ENTITY_PER_KEY = 5
ENTITY_MAX = 50
CAUSAL_RECENT = 10
CAUSAL_MIN_OVERLAP = 0.15


@attrs.frozen
class NewInsight:
    id: str
    doc: int  # rowid in mnemon.db
    ts: int
    source: str
    content: str
    entities: tuple[str, ...]
    tokens: frozenset[str]


def _temporal(tx: Tx, new: NewInsight) -> int:
    pairs: list[tuple[str, str, str, float, dict[str, Any]]] = []
    latest = tx.index.latest_of_source(new.source, new.doc)
    if latest is not None:
        pairs.append((latest[0], new.id, "temporal", 1.0, {"sub_type": "backbone"}))
    near = tx.index.window(new.ts - WINDOW_S, new.ts, PROXIMITY_MAX + 1, new.doc)
    partners = [(node, ts) for node, ts in near if latest is None or node != latest[0]]
    for node, ts in partners[:PROXIMITY_MAX]:
        weight = 1.0 / (1.0 + (new.ts - ts) / 3600)
        pairs.append((node, new.id, "temporal", weight, {"sub_type": "proximity"}))
    tx.pairs(pairs, directed=True)
    return len(pairs)


def _entity(tx: Tx, new: NewInsight) -> int:
    linked: dict[str, str] = {}  # partner -> the entity that linked it, in linking order
    seen_keys: set[str] = set()
    for entity in new.entities:
        key = entity_key(entity)
        if key in seen_keys:
            continue
        seen_keys.add(key)
        for node in tx.index.with_entity(key, ENTITY_PER_KEY, new.doc):
            if node in linked:
                continue
            if len(linked) == ENTITY_MAX:
                break
            linked[node] = entity
    tx.pairs([(node, new.id, "entity", 1.0, {"entity": e}) for node, e in linked.items()])
    return len(linked)


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def _causal(tx: Tx, new: NewInsight) -> int:
    recent = tx.index.last_written(CAUSAL_RECENT, new.doc)
    if not recent:
        return 0
    own_cue = causal_cue(new.content)
    contents: dict[str, str] = {}
    if own_cue is None:
        marks = ",".join("?" * len(recent))
        rows = tx.conn.execute(
            f"SELECT id, content FROM main.insights WHERE id IN ({marks})",
            [node for node, _, _, _ in recent],
        )
        contents = {str(node): str(text) for node, text in rows}
    made = 0
    for node, ts, doc, tokens in recent:
        cue = own_cue or causal_cue(contents.get(node, ""))
        overlap = _jaccard(new.tokens, tokens)
        if cue is None or overlap < CAUSAL_MIN_OVERLAP:
            continue
        older, newer = (node, new.id) if (ts, doc) <= (new.ts, new.doc) else (new.id, node)
        tx.edge(older, newer, "causal", round(overlap, 3), {"sub_type": cue})
        made += 1
    return made


def automatic(tx: Tx, new: NewInsight, *, temporal: bool) -> dict[str, int]:
    """Create the new insight's automatic edges; returns counts per edge type."""
    return {
        "temporal": _temporal(tx, new) if temporal else 0,
        "entity": _entity(tx, new),
        "causal": _causal(tx, new),
        "semantic": 0,
    }


def rebuild_backbone(tx: Tx, source: str, new_ids: set[str]) -> None:
    """Re-link ``source``'s timeline around the newly written ``new_ids``."""
    timeline = tx.index.timeline(source)
    position = {node: i for i, node in enumerate(timeline)}
    for older, newer in itertools.pairwise(timeline):
        if older in new_ids or newer in new_ids:
            tx.pair(older, newer, "temporal", 1.0, {"sub_type": "backbone"}, directed=True)
    old = [node for node in timeline if node not in new_ids]
    for older, newer in itertools.pairwise(old):
        if position[newer] != position[older] + 1:
            tx.conn.execute(
                "DELETE FROM main.edges WHERE edge_type = 'temporal'"
                " AND ((source_id = ? AND target_id = ?) OR (source_id = ? AND target_id = ?))"
                " AND CASE WHEN json_valid(metadata)"
                " THEN json_extract(metadata, '$.sub_type') END = 'backbone'",
                (older, newer, newer, older),
            )
            tx.touched.update((older, newer))
