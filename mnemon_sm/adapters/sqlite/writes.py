"""The write operations of the embedded store, each inside one transaction (:class:`Tx`).

Theory of operation
-------------------
The store validates arguments, opens ``BEGIN IMMEDIATE``, brings the side index up to date and
calls one function here; on any exception the whole transaction rolls back. Each function:

1. checks what only the database can tell (a duplicate, a missing or deleted insight);
2. writes the rows and their automatic edges (:mod:`.edges`), keeping the side index in step;
3. auto-prunes when a ceiling is set (:mod:`.decay`), refreshes the effective importance of
   everything it touched, writes exactly one oplog row for the operation (plus one ``prune``
   row per pruned insight) and carries the side index's fingerprint forward.

Rules kept: byte-identical content of an active insight is never stored twice (remember reports
``skipped`` with the existing id, import maps the draft entry to it); recall's access counting
adds 1 and sets ``last_accessed_at`` on every returned insight and never touches ``updated_at``.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from mnemon_sm.adapters.sqlite import decay, edges
from mnemon_sm.adapters.sqlite.recall import ts_key
from mnemon_sm.adapters.sqlite.rows import COLUMNS, insight
from mnemon_sm.adapters.sqlite.tokens import token_set
from mnemon_sm.adapters.sqlite.tx import Tx, compact
from mnemon_sm.errors import UnknownInsight
from mnemon_sm.ports.long_term.checks import Prepared
from mnemon_sm.ports.long_term.values import (
    DraftEdge,
    ForgetReceipt,
    ImportReport,
    Insight,
    LinkReceipt,
    RememberReceipt,
)

__all__ = ["count_access", "forget", "import_draft", "link", "remember"]

_NO_EDGES = {"temporal": 0, "entity": 0, "causal": 0, "semantic": 0}


def _insert(tx: Tx, item: Prepared, created_at: str) -> edges.NewInsight:
    node = tx.new_id()
    cur = tx.conn.execute(
        "INSERT INTO main.insights (id, content, category, importance, tags, entities, source,"
        " access_count, created_at, updated_at, effective_importance)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?)",
        (
            node,
            item.content,
            item.category,
            item.importance,
            compact(list(item.tags)),
            compact(list(item.entities)),
            item.source,
            created_at,
            tx.stamp,
            decay.BASE[item.importance],
        ),
    )
    assert cur.lastrowid is not None  # an INSERT into a rowid table always sets it
    tx.index.add([cur.lastrowid])
    tx.touched.add(node)
    return edges.NewInsight(
        node,
        cur.lastrowid,
        ts_key(created_at),
        item.source,
        item.content,
        item.entities,
        token_set(item.content, *item.tags, *item.entities),
    )


def _finish(tx: Tx, ceiling: int, protect: set[str]) -> list[str]:
    """Auto-prune, then refresh effective importance; returns the pruned ids."""
    pruned = decay.weakest(tx.conn, ceiling, protect, tx.now_ms)
    for node in pruned:
        rowid = tx.active_rowid(node)
        if rowid is not None:
            tx.soft_delete(node, rowid)
            tx.log("prune", node, {})
    tx.touched.difference_update(pruned)
    decay.refresh(tx.conn, tx.touched, tx.now_ms, tx.gained)
    return pruned


def _read(tx: Tx, insight_id: str) -> Insight:
    row = tx.conn.execute(f"SELECT {COLUMNS} FROM main.insights WHERE id = ?", (insight_id,))
    return insight(row.fetchone())


def remember(tx: Tx, item: Prepared, ceiling: int) -> RememberReceipt:
    existing = tx.index.duplicate(item.content)
    if existing is not None:
        old = _read(tx, existing)
        tx.log("diff-skip", existing, {"action": "skipped"})
        tx.index.note_write(0, None)
        return RememberReceipt(
            id=old.id,
            content=old.content,
            category=old.category,
            importance=old.importance,
            tags=old.tags,
            entities=old.entities,
            action="skipped",
            created_at=old.created_at,
            replaced_id=old.id,
            edges_created=dict(_NO_EDGES),
        )
    new = _insert(tx, item, tx.stamp)
    made = edges.automatic(tx, new, temporal=True)
    pruned = _finish(tx, ceiling, {new.id})
    tx.log("remember", new.id, {"category": item.category, "edges": made})
    tx.index.note_write(1, tx.stamp)
    return RememberReceipt(
        id=new.id,
        content=item.content,
        category=item.category,
        importance=item.importance,
        tags=item.tags,
        entities=item.entities,
        action="added",
        created_at=tx.stamp,
        edges_created=made,
        auto_pruned_ids=tuple(pruned),
    )


def import_draft(
    tx: Tx, items: Sequence[Prepared], draft_edges: Sequence[DraftEdge], ceiling: int
) -> ImportReport:
    ids: list[str] = []
    new_ids: set[str] = set()
    sources: set[str] = set()
    for item in items:
        existing = tx.index.duplicate(item.content)
        if existing is not None:
            ids.append(existing)
            continue
        new = _insert(tx, item, item.created_at or tx.stamp)
        edges.automatic(tx, new, temporal=False)
        ids.append(new.id)
        new_ids.add(new.id)
        sources.add(item.source)
    inserted = 0
    for link_ in draft_edges:
        src, dst = ids[link_.source_index], ids[link_.target_index]
        if src != dst:
            meta = {} if link_.reason is None else {"reason": link_.reason}
            tx.edge(src, dst, link_.edge_type, link_.weight, meta)
            inserted += 1
    for source in sorted(sources):
        edges.rebuild_backbone(tx, source, new_ids)
    pruned = _finish(tx, ceiling, new_ids)
    skipped = len(items) - len(new_ids)
    tx.log("import", None, {"imported": len(new_ids), "skipped": skipped, "edges": inserted})
    tx.index.note_write(len(new_ids), tx.stamp)
    return ImportReport(
        imported=len(new_ids),
        skipped=skipped,
        errors=0,
        edges_inserted=inserted,
        ids=tuple(ids),
        auto_pruned=len(pruned),
    )


def forget(tx: Tx, insight_id: str) -> ForgetReceipt:
    rowid = tx.active_rowid(insight_id)
    if rowid is None:
        raise UnknownInsight(f"no active insight has id {insight_id!r}")
    tx.soft_delete(insight_id, rowid)
    decay.refresh(tx.conn, tx.touched, tx.now_ms, tx.gained)
    tx.log("forget", insight_id, {})
    tx.index.note_write(0, tx.stamp)
    return ForgetReceipt(insight_id)


def link(tx: Tx, src: str, dst: str, kind: str, weight: float, reason: str | None) -> LinkReceipt:
    for node in (src, dst):
        if tx.active_rowid(node) is None:
            raise UnknownInsight(f"no active insight has id {node!r}")
    meta: dict[str, str] = {"created_by": "mnemon-sm"}
    if reason is not None:
        meta["reason"] = reason
    tx.pair(src, dst, kind, weight, meta)
    decay.refresh(tx.conn, tx.touched, tx.now_ms, tx.gained)
    tx.log("link", src, {"target_id": dst, "edge_type": kind, "weight": weight})
    tx.index.note_write(0, None)
    return LinkReceipt(src, dst, kind, weight, dict(meta))


def count_access(
    tx: Tx, hits: Sequence[Insight], operation: str, query: str
) -> dict[str, Insight]:
    """Count one access on each hit; returns the hits as they now are, by id."""
    ids = [hit.id for hit in hits]
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        tx.conn.execute(
            "UPDATE main.insights SET access_count = access_count + 1, last_accessed_at = ?"
            f" WHERE id IN ({','.join('?' * len(part))})",
            (tx.stamp, *part),
        )
    decay.refresh(tx.conn, ids, tx.now_ms)
    tx.log(operation, None, {"query": query[:200], "results": len(ids)})
    tx.index.note_write(0, None)
    return {hit.id: attrs.evolve(hit, access_count=hit.access_count + 1) for hit in hits}
