"""Stateful test: the embedded long-term store against a small reference model.

A ``RuleBasedStateMachine`` drives ``EmbeddedStore`` on a temporary directory with a fake clock
(advanced by a rule, often by zero so equal seconds happen) and mirrors every request in
:class:`Model`: the insights in insertion order with their access counts, and the edge rows
Mnemon's rules predict (temporal backbone per source, 24-hour proximity, entity pairs, explicit
links; the vocabulary has no causal cue words, so no causal edges). Contents come from a small
vocabulary, so exact duplicates and equal-second ties happen often.

Checked on every request: receipts and errors (duplicates skipped with the existing id, unknown
or forgotten ids refused), basic recall and list exactly (substring filter and order), related
exactly (depths; the reaching edge type is one that joins the previous level), smart and keyword
recall exactly against the full-scan reference over the store's rows (the side index must find
the same candidates) plus their invariants (active hits, scores in 0..1 rounded to 3 decimals,
no duplicates, at most ``limit``). Checked after every step: the active set equals the model's;
the edge rows equal the model's (so every edge joins two active insights and every link is
symmetric); access counts equal the model's, incremented only by recall (never by list, graph,
related or status).
"""

from __future__ import annotations

import itertools
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    rule,
)

from mnemon_sm.adapters.sqlite import EmbeddedStore
from mnemon_sm.adapters.sqlite import recall as algo
from mnemon_sm.adapters.sqlite.rows import COLUMNS, insight, stamp
from mnemon_sm.adapters.sqlite.scan import ScanSource
from mnemon_sm.errors import InvalidInput, UnknownInsight
from mnemon_sm.ports.long_term.values import RecallResult
from mnemon_sm.testing.memory import FakeClock
from mnemon_sm.testing.pg_cluster import Cluster
from mnemon_sm.testing.pg_spaces import HostsInTurn

WORDS = ("redis", "cache", "deploy", "rollback", "disk", "billing", "queue", "lunch")
ENTITIES = ("Redis", "redis", "Kafka", "Billing")
SOURCES = ("user", "agent", "external")
CATEGORIES = ("fact", "decision", "general")
EDGE_TYPES = ("semantic", "entity", "temporal", "causal")
STEPS_MS = (0, 0, 1000, 30 * 60_000, 5 * 3_600_000, 23 * 3_600_000, 25 * 3_600_000)

contents = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join)
queries = st.one_of(st.sampled_from(WORDS), st.sampled_from(("", "ca", "DEPLOY", "e r"))).map(str)


@attrs.define
class Row:
    id: str
    content: str
    category: str
    importance: int
    source: str
    entities: tuple[str, ...]
    ts: int  # creation second
    seq: int  # insertion order
    active: bool = True
    access: int = 0


@attrs.define
class Model:
    rows: list[Row] = attrs.Factory(list)
    edges: dict[tuple[str, str, str], float] = attrs.Factory(dict)

    def active(self) -> list[Row]:
        return [row for row in self.rows if row.active]

    def by_id(self, node: str) -> Row | None:
        return next((row for row in self.rows if row.id == node and row.active), None)

    def pair(self, a: str, b: str, kind: str, weight: float) -> None:
        self.edges[(a, b, kind)] = weight
        self.edges[(b, a, kind)] = weight

    def remember(self, new: Row) -> dict[str, int]:
        others = [row for row in self.active() if row.id != new.id]
        made = {"temporal": 0, "entity": 0}
        same = [row for row in others if row.source == new.source]
        backbone = max(same, key=lambda r: (r.ts, r.seq), default=None)
        if backbone is not None:
            self.pair(backbone.id, new.id, "temporal", 1.0)
            made["temporal"] += 1
        near = [row for row in others if new.ts - 86400 <= row.ts <= new.ts]
        near.sort(key=lambda r: (r.ts, r.seq), reverse=True)
        near = [row for row in near[:11] if row is not backbone][:10]
        for row in near:
            self.pair(row.id, new.id, "temporal", 1 / (1 + (new.ts - row.ts) / 3600))
            made["temporal"] += 1
        linked: list[str] = []
        for key in dict.fromkeys(e.lower() for e in new.entities):
            carrying = [r for r in others if key in {e.lower() for e in r.entities}]
            for row in sorted(carrying, key=lambda r: r.seq, reverse=True)[:5]:
                if row.id not in linked:
                    self.pair(row.id, new.id, "entity", 1.0)
                    linked.append(row.id)
        made["entity"] = len(linked)
        self.rows.append(new)
        return made

    def forget(self, node: str) -> None:
        row = self.by_id(node)
        assert row is not None
        row.active = False
        self.edges = {k: w for k, w in self.edges.items() if node not in k[:2]}

    def ordered(self, query: str, category: str | None) -> list[Row]:
        rows = [
            row
            for row in self.active()
            if query.lower() in row.content.lower() and category in (None, row.category)
        ]
        return sorted(rows, key=lambda r: (r.importance, stamp(r.ts * 1000), r.seq), reverse=True)

    def bfs(self, start: str, depth: int, kind: str | None) -> dict[str, int]:
        levels = {start: 0}
        frontier = [start]
        for level in range(1, depth + 1):
            nxt = []
            for src, dst, edge_kind in self.edges:
                if kind not in (None, edge_kind):
                    continue
                for a, b in ((src, dst), (dst, src)):
                    if a in frontier and b not in levels:
                        levels[b] = level
                        nxt.append(b)
            frontier = nxt
        del levels[start]
        return levels


class EmbeddedStoreMachine(RuleBasedStateMachine):
    ids = Bundle("ids")

    @initialize(
        target=ids,
        seeds=st.lists(st.tuples(contents, st.sampled_from(SOURCES), st.sampled_from(STEPS_MS))),
    )
    def open_store(self, seeds: list[tuple[str, str, int]]) -> MultipleResults[str]:
        """Open the store and remember a first batch, so most runs start with a graph."""
        self.dir = Path(tempfile.mkdtemp(prefix="lt-state-"))
        self.clock = FakeClock()
        self.store = self.make_store()
        self.store.create_space("s")
        self.model = Model()
        made = []
        for i, (content, source, ms) in enumerate(seeds):
            self.clock.advance(ms)
            entities = (ENTITIES[i % len(ENTITIES)],) if i % 3 else ()
            made.append(self.remember(content, CATEGORIES[i % 3], 1 + i % 5, source, entities))
        return multiple(*made)

    def teardown(self) -> None:
        if hasattr(self, "store"):
            self.store.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    def make_store(self) -> Any:
        return EmbeddedStore(self.dir, self.clock)

    def databases(self) -> list[Path]:
        """The ``mnemon.db`` files that must match the model."""
        return [self.dir / "data" / "s" / "mnemon.db"]

    def db(self) -> sqlite3.Connection:
        return sqlite3.connect(self.databases()[0])

    # -- rules --------------------------------------------------------------------------------

    @rule(ms=st.sampled_from(STEPS_MS))
    def advance_clock(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule(
        target=ids,
        content=contents,
        category=st.sampled_from(CATEGORIES),
        importance=st.integers(1, 5),
        source=st.sampled_from(SOURCES),
        entities=st.lists(st.sampled_from(ENTITIES), max_size=2, unique=True).map(tuple),
    )
    def remember(
        self, content: str, category: str, importance: int, source: str, entities: tuple[str, ...]
    ) -> str:
        receipt = self.store.remember(
            "s",
            content,
            category=category,
            importance=importance,
            source=source,
            entities=entities,
        )
        twin = next((row for row in self.model.active() if row.content == content), None)
        if twin is not None:
            assert (receipt.action, receipt.id, receipt.replaced_id) == (
                "skipped",
                twin.id,
                twin.id,
            )
            return twin.id
        assert receipt.action == "added"
        now = self.clock.ms // 1000
        row = Row(
            receipt.id, content, category, importance, source, entities, now, len(self.model.rows)
        )
        made = self.model.remember(row)
        assert receipt.edges_created == {**made, "causal": 0, "semantic": 0}
        return receipt.id

    @rule(node=st.one_of(ids, st.just("never-seen")))
    def forget(self, node: str) -> None:
        if self.model.by_id(node) is None:
            with pytest.raises(UnknownInsight):
                self.store.forget("s", node)
            return
        assert self.store.forget("s", node).id == node
        self.model.forget(node)

    @rule(
        a=ids,
        b=ids,
        kind=st.sampled_from(EDGE_TYPES),
        weight=st.sampled_from((0.0, 0.3, 1.0)),
    )
    def link(self, a: str, b: str, kind: str, weight: float) -> None:
        if a == b:
            with pytest.raises(InvalidInput):
                self.store.link("s", a, b, edge_type=kind, weight=weight)
        elif self.model.by_id(a) is None or self.model.by_id(b) is None:
            with pytest.raises(UnknownInsight):
                self.store.link("s", a, b, edge_type=kind, weight=weight)
        else:
            self.store.link("s", a, b, edge_type=kind, weight=weight, reason="test")
            self.model.pair(a, b, kind, weight)

    def count(self, result: RecallResult, readonly: bool) -> None:
        if readonly:
            return
        for hit in result.hits:
            row = self.model.by_id(hit.insight.id)
            assert row is not None
            row.access += 1
            assert hit.insight.access_count == row.access

    @rule(query=queries, limit=st.integers(1, 6), readonly=st.booleans())
    def recall_basic(self, query: str, limit: int, readonly: bool) -> None:
        result = self.store.recall("s", query, mode="basic", limit=limit, readonly=readonly)
        want = [row.id for row in self.model.ordered(query, None)][:limit]
        assert [hit.insight.id for hit in result.hits] == want
        assert all(hit.score is None for hit in result.hits)
        self.count(result, readonly)

    def reference(self, category: str | None) -> ScanSource:
        with self.db() as conn:
            rows = [
                insight(r)
                for r in conn.execute(
                    f"SELECT {COLUMNS} FROM insights WHERE deleted_at IS NULL ORDER BY rowid"
                )
            ]
            graph = conn.execute("SELECT source_id, target_id, edge_type, weight FROM edges")
            edges = [(a, b, kind, float(w)) for a, b, kind, w in graph]
        return ScanSource(rows, edges, category=category)

    @rule(
        query=queries,
        limit=st.integers(1, 8),
        category=st.one_of(st.none(), st.sampled_from(CATEGORIES)),
        mode=st.sampled_from(("smart", "smart", "keyword")),
        readonly=st.booleans(),
    )
    def recall_scored(
        self, query: str, limit: int, category: str | None, mode: str, readonly: bool
    ) -> None:
        source = self.reference(category)
        if mode == "smart":
            want = algo.smart_recall(source, query, limit=limit)
        else:
            want = algo.keyword_recall(source, query, limit=limit)
        result = self.store.recall(
            "s", query, mode=mode, limit=limit, category=category, readonly=readonly
        )

        def shape(res: RecallResult) -> list[tuple[Any, ...]]:
            return [(h.insight.id, h.score, h.matched_via, h.confidence) for h in res.hits]

        assert shape(result) == shape(want)
        assert result.hint == want.hint
        ids = [hit.insight.id for hit in result.hits]
        assert len(ids) == len(set(ids)) <= limit
        for hit in result.hits:
            row = self.model.by_id(hit.insight.id)
            assert row is not None and category in (None, row.category)
            assert hit.score is not None and 0.0 <= hit.score <= 1.0
            assert hit.score == round(hit.score, 3)
        self.count(result, readonly)

    @rule(
        node=ids,
        depth=st.integers(1, 5),
        kind=st.one_of(st.none(), st.sampled_from(EDGE_TYPES)),
    )
    def related(self, node: str, depth: int, kind: str | None) -> None:
        if self.model.by_id(node) is None:
            with pytest.raises(UnknownInsight):
                self.store.related("s", node, depth=depth, edge_type=kind)
            return
        hits = self.store.related("s", node, depth=depth, edge_type=kind)
        levels = self.model.bfs(node, depth, kind)
        assert {hit.insight.id: hit.depth for hit in hits} == levels
        levels[node] = 0
        for hit in hits:
            joined = {
                k for (a, b, k) in self.model.edges
                if b == hit.insight.id and levels.get(a) == hit.depth - 1
            }  # fmt: skip
            assert hit.via_edge_type in joined

    @rule(
        query=st.one_of(st.none(), queries),
        category=st.one_of(st.none(), st.sampled_from(CATEGORIES)),
        limit=st.integers(1, 10),
    )
    def list_insights(self, query: str | None, category: str | None, limit: int) -> None:
        found = self.store.list("s", query=query, category=category, limit=limit)
        want = self.model.ordered(query or "", category)[:limit]
        assert [row.id for row in found] == [row.id for row in want]

    @rule()
    def graph_and_status(self) -> None:
        snapshot = self.store.graph("s")
        assert {node.id for node in snapshot.nodes} == {row.id for row in self.model.active()}
        assert {(e.source_id, e.target_id, e.edge_type) for e in snapshot.edges} == set(
            self.model.edges
        )
        status = self.store.status("s")
        assert status.total_insights == len(self.model.active())
        assert status.deleted_insights == len(self.model.rows) - len(self.model.active())
        assert status.edge_count == len(self.model.edges)

    # -- invariants ---------------------------------------------------------------------------

    @invariant()
    def database_matches_the_model(self) -> None:
        if not hasattr(self, "store"):
            return
        for path in self.databases():
            with sqlite3.connect(path) as conn:
                rows = conn.execute("SELECT id, deleted_at IS NULL, access_count FROM insights")
                state = {node: (bool(active), count) for node, active, count in rows}
                edge_rows = conn.execute(
                    "SELECT source_id, target_id, edge_type, weight FROM edges"
                )
                found = {(a, b, k): round(w, 9) for a, b, k, w in edge_rows}
            assert state == {row.id: (row.active, row.access) for row in self.model.rows}
            assert found == {key: round(w, 9) for key, w in self.model.edges.items()}
            for a, b, kind in found:
                assert state[a][0] and state[b][0]  # both ends active: forgotten ids are gone
                assert (b, a, kind) in found  # every link is symmetric


EmbeddedStoreMachine.TestCase.settings = settings(  # the conftest.py profile, scaled
    max_examples=2 * settings().max_examples,
    stateful_step_count=2 * settings().stateful_step_count,
)
TestEmbeddedStoreStateful = EmbeddedStoreMachine.TestCase


_CLUSTER: list[Cluster] = []  # the session's PostgreSQL server, handed over by the fixture below
_pg_roots = itertools.count()


@pytest.fixture(autouse=True)
def _postgres_for_the_stateful_machine(request: pytest.FixtureRequest) -> None:
    if request.cls is TestPostgresStoreStateful and not _CLUSTER:
        _CLUSTER.append(request.getfixturevalue("postgres_cluster"))


class PostgresStoreMachine(EmbeddedStoreMachine):
    """The same machine on Memory Spaces on PostgreSQL, two hosts taking calls in turn (each
    call runs on a replica that must catch up with the other host's last one); after every
    step both replicas, caught up, must match the model."""

    def make_store(self) -> Any:
        url = _CLUSTER[0].url(f"lt-stateful-{next(_pg_roots)}")
        return HostsInTurn(url, self.clock, self.dir, hosts=2)

    def databases(self) -> list[Path]:
        for host in self.store.hosts:
            host.status("s")  # catch up
        return [self.dir / f"host-{i}" / "data" / "s" / "mnemon.db" for i in (0, 1)]


PostgresStoreMachine.TestCase.settings = settings(
    max_examples=settings().max_examples // 2,
    stateful_step_count=2 * settings().stateful_step_count,
)
TestPostgresStoreStateful = PostgresStoreMachine.TestCase
