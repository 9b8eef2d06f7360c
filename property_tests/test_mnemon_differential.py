"""Differential: ``MnemonCliStore`` over the fake ``mnemon`` behaves as the embedded store.

Each example runs one generated sequence (a few remembers, then a few of remember, forget,
link, recall in every mode, list, related and status) twice: against ``EmbeddedStore``
directly, and against ``MnemonCliStore`` whose child processes are the fake executable (the
same engine behind Mnemon's CLI contract, printing the compact or the verbose recall shape) on
a separate root. Both clocks stand still at the same instant, so timestamps agree too.

What must be equal after every step: the result, or the error class. Ids are generated on each
side, so they are compared by insertion order (``#0``, ``#1``, ...). Where the engine breaks
ties by id, only what ids cannot change is compared:

- smart recall: the (score, importance) sequence and the hits as a set (when the limit cut
  the list, only the hits ranked strictly above the last tie);
- related: the set of (insight, depth), with the edge type at depth 1 only (deeper, it
  depends on which neighbour was reached first);
- the graph's edges, as a set.

After the sequence, a fixed set of reads must agree too: recall in each mode (the first
content remembered as the query), related from the first insight, list, status (path and
size aside) and the graph.

Two things are not generated. A keyword recall with a category or source filter counts no
access through the CLI (Mnemon's ``search`` has no filters; a documented difference), so such
recalls are read-only. A counted smart recall is never cut by its limit: cut inside a tie,
each side would count the insight its ids put first, and later access counts would differ.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemon_sm.adapters.mnemon import MnemonCliStore
from mnemon_sm.adapters.sqlite import EmbeddedStore
from mnemon_sm.errors import MnemonError
from mnemon_sm.ports.long_term.port import LongTermStore
from mnemon_sm.ports.long_term.values import EDGE_TYPES, INTENTS, SOURCES, RecallResult
from mnemon_sm.testing.fake_mnemon import install
from mnemon_sm.testing.memory import FakeClock

CLI_MATCHES_EMBEDDED = "INV-LT-DIFF"  # the CLI adapter over the fake equals the embedded store

NOW_MS = 1_786_608_000_000
SPACE = "default"
MISSING = "00000000-0000-4000-8000-000000000000"
WORDS = ("deploy", "cache", "release", "tuesday", "redis", "why")
CATEGORIES = ("fact", "general", "decision")
UNCUT = 50  # more insights than any sequence remembers

phrases = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join)
refs = st.integers(0, 6)  # 6: an id that never existed; else an index into the ids so far
categories = st.sampled_from((None, None, None, *CATEGORIES))  # unfiltered half the time
sources = st.sampled_from((None, None, None, *SOURCES))


@attrs.frozen
class Remember:
    content: str
    category: str
    importance: int
    tags: tuple[str, ...]
    entities: tuple[str, ...]
    source: str


@attrs.frozen
class Forget:
    ref: int


@attrs.frozen
class Link:
    a: int
    b: int  # an offset from a
    edge_type: str
    weight: float
    reason: str | None


@attrs.frozen
class Recall:
    mode: str
    query: str
    limit: int
    category: str | None
    source: str | None
    intent: str | None
    readonly: bool


@attrs.frozen
class ListOp:
    query: str | None
    category: str | None
    limit: int


@attrs.frozen
class Related:
    ref: int
    depth: int
    edge_type: str | None


@attrs.frozen
class Status:
    pass


Op = Remember | Forget | Link | Recall | ListOp | Related | Status
labels = st.lists(st.sampled_from(("ops", "Redis", "Deploy", "team")), max_size=2, unique=True)
remembers = st.builds(
    Remember,
    content=phrases,
    category=st.sampled_from(CATEGORIES),
    importance=st.integers(1, 5),
    tags=labels.map(tuple),
    entities=labels.map(tuple),
    source=st.sampled_from(SOURCES),
)


def _comparable(op: Recall) -> Recall:
    """A filtered keyword recall is read-only (the documented difference), and a counted smart
    recall is never cut: cut inside a tie, it would count a different insight on each side."""
    if op.mode == "keyword" and (op.category or op.source):
        return attrs.evolve(op, readonly=True)
    if op.mode == "smart" and not op.readonly:
        return attrs.evolve(op, limit=UNCUT)
    return op


recalls = st.builds(
    Recall,
    mode=st.sampled_from(("smart", "keyword", "basic")),
    query=phrases | st.just(""),
    limit=st.sampled_from((1, 3, 10, 10)),
    category=categories,
    source=sources,
    intent=st.none() | st.sampled_from(INTENTS),
    readonly=st.booleans(),
).map(_comparable)
links = st.builds(
    Link,
    refs,
    st.integers(1, 3),  # b = a + this, so most links join two different insights
    st.sampled_from(EDGE_TYPES),
    st.sampled_from((0.0, 0.35, 1.0)),
    st.none() | st.just("because"),
)
ops: st.SearchStrategy[Op] = st.one_of(
    remembers,
    st.builds(Forget, refs),
    links,
    recalls,
    st.builds(ListOp, st.none() | st.sampled_from(WORDS), categories, st.sampled_from((1, 50))),
    st.builds(Related, refs, st.integers(1, 3), st.none() | st.sampled_from(EDGE_TYPES)),
    st.just(Status()),
)
# Few examples run (each step spawns a process), so every example gets the shape that makes
# them count: 2-3 remembers, one more write, one recall, then possibly anything.
sequences = st.tuples(
    st.lists(remembers, min_size=2, max_size=3),
    st.one_of(links, st.builds(Forget, refs), remembers),
    recalls,
    st.lists(ops, max_size=1),
).map(lambda parts: [*parts[0], parts[1], parts[2], *parts[3]])


@attrs.define
class Side:
    """One store under test and the ids its remembers added, in order."""

    store: LongTermStore
    ids: list[str] = attrs.Factory(list)

    def ref(self, index: int) -> str:
        return self.ids[index % len(self.ids)] if self.ids and index != 6 else MISSING

    def canon(self, value: Any) -> Any:
        """``value`` as plain data with every known id replaced by ``#<insertion index>``."""
        if attrs.has(type(value)):
            value = attrs.asdict(value)
        if isinstance(value, dict):
            return {k: self.canon(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.canon(v) for v in value]
        if isinstance(value, str) and value in self.ids:
            return f"#{self.ids.index(value)}"
        return value


def _sorted(items: list[Any]) -> list[Any]:
    return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))


def _recall_view(side: Side, op: Recall, result: RecallResult) -> Any:
    hits = [side.canon(hit) for hit in result.hits]
    if op.mode != "smart":
        return {"hint": result.hint, "hits": hits}
    keys = [(hit.score or 0.0, hit.insight.importance) for hit in result.hits]
    lowest = min(keys, default=(0.0, 0))
    intents = {hit.intent for hit in result.hits}
    return {
        "hint": result.hint,
        "intents": sorted(i or "" for i in intents),
        # WHY moves causes before effects, and which of two tied hits is "first" depends on ids
        "keys": sorted(keys) if "WHY" in intents else keys,
        # a cut may fall inside a tie; without a cut every hit is determined
        "hits": _sorted(
            hits
            if len(hits) < op.limit
            else [h for h, k in zip(hits, keys, strict=True) if k > lowest]
        ),
    }


def _apply(side: Side, op: Op) -> Any:
    store = side.store
    if isinstance(op, Remember):
        receipt = store.remember(
            SPACE,
            op.content,
            category=op.category,
            importance=op.importance,
            tags=op.tags,
            entities=op.entities,
            source=op.source,
        )
        if receipt.action == "added":
            side.ids.append(receipt.id)
        return side.canon(receipt)
    if isinstance(op, Forget):
        return side.canon(store.forget(SPACE, side.ref(op.ref)))
    if isinstance(op, Link):
        linked = store.link(
            SPACE,
            side.ref(op.a),
            side.ref(op.a + op.b),
            edge_type=op.edge_type,
            weight=op.weight,
            reason=op.reason,
        )
        return side.canon(linked)
    if isinstance(op, Recall):
        result = store.recall(
            SPACE,
            op.query,
            mode=op.mode,
            limit=op.limit,
            category=op.category,
            source=op.source,
            intent=op.intent,
            readonly=op.readonly,
        )
        return _recall_view(side, op, result)
    if isinstance(op, ListOp):
        return side.canon(store.list(SPACE, query=op.query, category=op.category, limit=op.limit))
    if isinstance(op, Related):
        hits = store.related(SPACE, side.ref(op.ref), depth=op.depth, edge_type=op.edge_type)
        return _sorted(
            [
                side.canon(attrs.evolve(h, via_edge_type=h.via_edge_type if h.depth == 1 else ""))
                for h in hits
            ]
        )
    status = side.canon(store.status(SPACE))
    del status["db_path"], status["db_size_bytes"]
    return status


def _outcome(side: Side, op: Op) -> Any:
    try:
        return _apply(side, op)
    except MnemonError as exc:
        return {"error": type(exc).__name__}


def _final(side: Side, query: str) -> Any:
    """Reads every example ends with: recall in each mode, related, list, status, graph."""
    reads: list[Op] = [
        Recall("smart", query, UNCUT, None, None, None, False),
        Recall("keyword", query, 10, None, None, None, False),
        Recall("basic", query.split()[0], 10, None, None, None, True),
        Related(0, 3, None),
        ListOp(None, None, 100_000),
        Status(),
    ]
    graph = side.store.graph(SPACE)
    return {
        "reads": [_outcome(side, op) for op in reads],
        "nodes": side.canon(graph.nodes),
        "edges": _sorted(side.canon(list(graph.edges))),
    }


@pytest.fixture(scope="module")
def launchers(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, Path]:
    """The fake mnemon with a clock standing at ``NOW_MS``: compact and verbose recall."""
    out = {}
    for verbose in (False, True):
        directory = tmp_path_factory.mktemp("verbose" if verbose else "compact")
        env = {"FAKE_MNEMON_NOW_MS": str(NOW_MS), "FAKE_MNEMON_VERBOSE": "1" if verbose else "0"}
        out[verbose] = install(directory, env=env)
    return out


@settings(max_examples=min(settings().max_examples, 12), deadline=None)
@given(steps=sequences, verbose=st.booleans())
def test_the_cli_adapter_matches_the_embedded_store(
    launchers: dict[bool, Path], steps: list[Op], verbose: bool
) -> None:
    work = Path(tempfile.mkdtemp(prefix="mnemon-diff-"))
    embedded = EmbeddedStore(work / "embedded", FakeClock(NOW_MS))
    try:
        sides = (
            Side(embedded),
            Side(MnemonCliStore(work / "cli", str(launchers[verbose]), timeout_ms=60_000)),
        )
        for side in sides:
            side.store.create_space(SPACE)
        for number, op in enumerate(steps):
            want, got = (_outcome(side, op) for side in sides)
            assert got == want, f"step {number}: {op}"
        query = next(op.content for op in steps if isinstance(op, Remember))
        want, got = (_final(side, query) for side in sides)
        assert got == want, "the stores differ after the sequence"
    finally:
        embedded.close()
        shutil.rmtree(work, ignore_errors=True)
