"""The embedded long-term store on real SQLite files: Mnemon's schema and semantics, access
counting, validation, the side index's staleness detection, files and modes."""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mnemon_sm.adapters.sqlite import EmbeddedStore
from mnemon_sm.adapters.sqlite import recall as algo
from mnemon_sm.adapters.sqlite.decay import effective_importance
from mnemon_sm.adapters.sqlite.rows import COLUMNS, insight
from mnemon_sm.adapters.sqlite.scan import ScanSource
from mnemon_sm.errors import (
    CorruptStore,
    InvalidInput,
    StorageError,
    UnknownInsight,
    UnknownSpace,
)
from mnemon_sm.ports.long_term.port import LongTermStore
from mnemon_sm.ports.long_term.values import DraftEdge, DraftInsight, ImportDraft, Insight
from mnemon_sm.testing.memory import FakeClock

HOUR = 3_600_000
DAY = 24 * HOUR
START = "2026-08-13T08:00:00Z"  # FakeClock's first reading


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock) -> Iterator[EmbeddedStore]:
    s = EmbeddedStore(tmp_path, clock)
    s.create_space("default")
    yield s
    s.close()


def db_path(root: Path, space: str = "default") -> Path:
    return root / "data" / space / "mnemon.db"


def raw(root: Path, space: str = "default") -> sqlite3.Connection:
    """A plain connection, as another program (or real Mnemon) would open the store."""
    conn = sqlite3.connect(db_path(root, space), isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def snapshot(root: Path) -> tuple[list[Insight], list[tuple[str, str, str, float]]]:
    """Active insights in insertion order and every edge row, read behind the store's back."""
    with raw(root) as conn:
        active = f"SELECT {COLUMNS} FROM insights WHERE deleted_at IS NULL ORDER BY rowid"
        rows = [insight(r) for r in conn.execute(active)]
        graph = conn.execute("SELECT source_id, target_id, edge_type, weight FROM edges")
        return rows, [(a, b, t, float(w)) for a, b, t, w in graph]


def edges(root: Path) -> set[tuple[str, str, str, float, str]]:
    with raw(root) as conn:
        rows = conn.execute("SELECT source_id, target_id, edge_type, weight, metadata FROM edges")
        return {(a, b, t, round(w, 6), m) for a, b, t, w, m in rows}


def access(root: Path) -> tuple[Any, ...]:
    """Everything access counting could change: counters, access times, the oplog."""
    with raw(root) as conn:
        counts = conn.execute(
            "SELECT id, access_count, last_accessed_at FROM insights ORDER BY id"
        ).fetchall()
        oplog = conn.execute("SELECT count(*), max(id) FROM oplog").fetchone()
    return (tuple(counts), oplog)


def isolated(store: EmbeddedStore, *contents: str) -> list[str]:
    """Insights with no automatic edges: each alone in its own source, no entities."""
    draft = ImportDraft(
        insights=tuple(DraftInsight(c, source=f"solo-{i}") for i, c in enumerate(contents))
    )
    return list(store.import_draft("default", draft).ids)


def test_it_implements_the_port(store: EmbeddedStore) -> None:
    assert isinstance(store, LongTermStore)
    caps = store.capabilities
    assert (caps.write_mode, caps.deletion_mode, caps.score_semantics) == (
        "exact",
        "soft",
        "normalized-relevance",
    )


# -- schema ----------------------------------------------------------------------------------


def test_schema_matches_mnemon(tmp_path: Path, store: EmbeddedStore) -> None:
    with raw(tmp_path) as conn:
        cols = {
            table: [tuple(r[1:6]) for r in conn.execute(f"PRAGMA table_info({table})")]
            for table in ("insights", "edges", "oplog")
        }
        assert cols["insights"] == [
            ("id", "TEXT", 0, None, 1),
            ("content", "TEXT", 1, None, 0),
            ("category", "TEXT", 1, "'general'", 0),
            ("importance", "INTEGER", 1, "3", 0),
            ("tags", "TEXT", 1, "'[]'", 0),
            ("entities", "TEXT", 1, "'[]'", 0),
            ("source", "TEXT", 1, "'user'", 0),
            ("access_count", "INTEGER", 1, "0", 0),
            ("created_at", "TEXT", 1, None, 0),
            ("updated_at", "TEXT", 1, None, 0),
            ("deleted_at", "TEXT", 0, None, 0),
            ("last_accessed_at", "TEXT", 0, None, 0),
            ("embedding", "BLOB", 0, None, 0),
            ("effective_importance", "REAL", 0, "0.5", 0),
        ]
        assert cols["edges"] == [
            ("source_id", "TEXT", 1, None, 1),
            ("target_id", "TEXT", 1, None, 2),
            ("edge_type", "TEXT", 1, None, 3),
            ("weight", "REAL", 1, "1.0", 0),
            ("metadata", "TEXT", 1, "'{}'", 0),
            ("created_at", "TEXT", 1, None, 0),
        ]
        assert [c[0] for c in cols["oplog"]] == [
            "id",
            "operation",
            "insight_id",
            "detail",
            "created_at",
        ]
        oplog_sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'oplog'").fetchone()
        assert "AUTOINCREMENT" in oplog_sql[0]
        fks = conn.execute("PRAGMA foreign_key_list(edges)").fetchall()
        assert sorted((fk[2], fk[3], fk[4], fk[6]) for fk in fks) == [
            ("insights", "source_id", "id", "CASCADE"),
            ("insights", "target_id", "id", "CASCADE"),
        ]

        def indexed(table: str) -> set[tuple[str, ...]]:
            out = set()
            for row in conn.execute(f"PRAGMA index_list({table})"):
                if row[3] == "c":  # created by CREATE INDEX, not by a constraint
                    info = conn.execute(f"PRAGMA index_info({row[1]})").fetchall()
                    out.add(tuple(col[2] for col in info))
            return out

        insight_indexes = indexed("insights")
        for column in ("category", "importance", "created_at", "deleted_at", "source"):
            assert (column,) in insight_indexes
        assert ("effective_importance",) in insight_indexes
        assert any(len(ix) > 1 and "effective_importance" in ix for ix in insight_indexes)
        assert indexed("edges") == {
            ("source_id",),
            ("target_id",),
            ("edge_type",),
            ("source_id", "edge_type"),
            ("target_id", "edge_type"),
        }
        assert conn.execute("PRAGMA user_version").fetchone() == (1,)
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert tables == {"insights", "edges", "oplog", "sqlite_sequence"}


def test_edge_type_check_and_cascade(tmp_path: Path, store: EmbeddedStore) -> None:
    a, b = isolated(store, "first", "second")
    with raw(tmp_path) as conn:
        for kind in ("temporal", "semantic", "causal", "entity", "supersedes"):
            conn.execute(
                "INSERT INTO edges (source_id, target_id, edge_type, created_at) VALUES (?,?,?,?)",
                (a, b, kind, START),
            )
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute(
                "INSERT INTO edges (source_id, target_id, edge_type, created_at)"
                " VALUES (?, ?, 'narrative', ?)",
                (a, b, START),
            )
        conn.execute("DELETE FROM insights WHERE id = ?", (a,))
        assert conn.execute("SELECT count(*) FROM edges").fetchone() == (0,)


# A store as another program would create it: the documented columns, other index names, an
# extra column of its own.
FOREIGN_DDL = """
CREATE TABLE insights (id TEXT PRIMARY KEY, content TEXT NOT NULL,
  category TEXT DEFAULT 'general', importance INTEGER DEFAULT 3, tags TEXT DEFAULT '[]',
  entities TEXT DEFAULT '[]', source TEXT DEFAULT 'user', access_count INTEGER DEFAULT 0,
  created_at TEXT, updated_at TEXT, deleted_at TEXT, last_accessed_at TEXT, embedding BLOB,
  effective_importance REAL DEFAULT 0.5, their_extra TEXT);
CREATE INDEX insights_by_cat ON insights(category);
CREATE TABLE edges (source_id TEXT NOT NULL REFERENCES insights(id) ON DELETE CASCADE,
  target_id TEXT NOT NULL REFERENCES insights(id) ON DELETE CASCADE,
  edge_type TEXT NOT NULL CHECK (edge_type IN
    ('temporal','semantic','causal','entity','supersedes')),
  weight REAL DEFAULT 1.0, metadata TEXT DEFAULT '{}', created_at TEXT,
  PRIMARY KEY (source_id, target_id, edge_type));
CREATE TABLE oplog (id INTEGER PRIMARY KEY AUTOINCREMENT, operation TEXT, insight_id TEXT,
  detail TEXT, created_at TEXT);
PRAGMA user_version = 1;
"""


def foreign_store(root: Path, ddl: str = FOREIGN_DDL) -> sqlite3.Connection:
    (root / "data" / "theirs").mkdir(parents=True)
    conn = sqlite3.connect(root / "data" / "theirs" / "mnemon.db", isolation_level=None)
    conn.executescript(ddl)
    return conn


def test_a_store_created_by_another_program_opens_and_works(
    tmp_path: Path, clock: FakeClock
) -> None:
    conn = foreign_store(tmp_path)
    rows = [
        ("i1", "Kafka retention is seven days", '["Kafka"]', None),
        ("i2", "Kafka consumers lag at night", '["Kafka"]', None),
        ("i3", "old Kafka note", '["Kafka"]', "2026-08-01T00:00:00Z"),
    ]
    for node, content, ents, deleted in rows:
        conn.execute(
            "INSERT INTO insights (id, content, entities, created_at, updated_at, deleted_at,"
            " their_extra) VALUES (?, ?, ?, '2026-08-01T00:00:00Z', '2026-08-01T00:00:00Z', ?,"
            " 'x')",
            (node, content, ents, deleted),
        )
    conn.execute(
        "INSERT INTO edges (source_id, target_id, edge_type, weight, created_at)"
        " VALUES ('i1', 'i2', 'semantic', 0.4, '2026-08-01T00:00:00Z')"
    )
    conn.close()
    store = EmbeddedStore(tmp_path, clock)
    assert store.spaces() == ("theirs",)
    status = store.status("theirs")
    assert (status.total_insights, status.deleted_insights, status.edge_count) == (2, 1, 1)
    hits = store.recall("theirs", "kafka retention", mode="keyword").hits
    assert [h.insight.id for h in hits] == ["i1", "i2"]
    assert [h.insight.id for h in store.related("theirs", "i2")] == ["i1"]
    receipt = store.remember("theirs", "Kafka brokers upgraded", entities=("kafka",))
    assert receipt.edges_created["entity"] == 2
    store.close()
    with sqlite3.connect(db_path(tmp_path, "theirs")) as check:
        names = {r[0] for r in check.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        assert "idx_insights_category" not in names  # their indexes are theirs
        assert check.execute("SELECT their_extra FROM insights WHERE id='i1'").fetchone() == ("x",)


def test_an_older_store_gets_missing_columns_but_keeps_its_version(
    tmp_path: Path, clock: FakeClock
) -> None:
    ddl = FOREIGN_DDL.replace(
        "last_accessed_at TEXT, embedding BLOB,\n  effective_importance REAL DEFAULT 0.5, ", ""
    ).replace("PRAGMA user_version = 1;", "")
    assert "effective_importance" not in ddl
    foreign_store(tmp_path, ddl).close()
    store = EmbeddedStore(tmp_path, clock)
    store.remember("theirs", "first memory")
    store.close()
    with sqlite3.connect(db_path(tmp_path, "theirs")) as check:
        columns = [r[1] for r in check.execute("PRAGMA table_info(insights)")]
        assert columns[-3:] == ["last_accessed_at", "embedding", "effective_importance"]
        assert check.execute("PRAGMA user_version").fetchone() == (0,)


def test_a_database_without_mnemon_columns_is_refused(tmp_path: Path, clock: FakeClock) -> None:
    foreign_store(tmp_path, "CREATE TABLE insights (id TEXT);").close()
    with pytest.raises(CorruptStore) as caught:
        EmbeddedStore(tmp_path, clock).status("theirs")
    assert caught.value.path == "data/theirs/mnemon.db"


@pytest.mark.parametrize(
    "content",
    [b"", b"plain text, not a database\n" * 200, b"SQLite format 3\x00" + b"\xff" * 4080],
    ids=["empty", "text", "torn-header"],
)
def test_a_file_that_is_no_database_is_corrupt_and_left_alone(
    tmp_path: Path, clock: FakeClock, content: bytes
) -> None:
    folder = tmp_path / "data" / "theirs"
    folder.mkdir(parents=True)
    (folder / "mnemon.db").write_bytes(content)
    store = EmbeddedStore(tmp_path, clock)
    for call in (
        lambda: store.status("theirs"),
        lambda: store.remember("theirs", "a memory"),
        lambda: store.recall("theirs", "memory"),
    ):
        with pytest.raises(CorruptStore) as caught:
            call()
        assert caught.value.path == "data/theirs/mnemon.db"
    assert (folder / "mnemon.db").read_bytes() == content
    assert sorted(p.name for p in folder.iterdir()) == ["mnemon.db"]  # nothing created beside


def test_a_new_space_appears_with_its_schema_in_one_step(tmp_path: Path, clock: FakeClock) -> None:
    store = EmbeddedStore(tmp_path, clock)
    seen: list[int] = []
    real_link = os.link

    def link(source: object, target: object, **kw: object) -> None:
        seen.append(os.stat(source).st_size)  # type: ignore[arg-type]
        real_link(source, target, **kw)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "link", link)
        store.create_space("fresh")
    assert seen and seen[0] > 0  # the name appears only for a file that holds the schema
    folder = tmp_path / "data" / "fresh"
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".")]  # no draft left
    assert store.status("fresh").total_insights == 0
    with pytest.raises(InvalidInput):
        store.create_space("fresh")


# -- remember ---------------------------------------------------------------------------------


def test_remember_writes_the_row_with_clock_times(tmp_path: Path, store: EmbeddedStore) -> None:
    receipt = store.remember(
        "default",
        "  Prefers dark mode  ",
        category="preference",
        importance=5,
        tags=("ui", "ui"),
        entities=("Editor",),
        source="agent",
    )
    assert (receipt.action, receipt.content, receipt.created_at) == (
        "added",
        "Prefers dark mode",
        START,
    )
    assert receipt.tags == ("ui",) and receipt.replaced_id is None
    with raw(tmp_path) as conn:
        row = conn.execute(
            "SELECT content, category, importance, tags, entities, source, access_count,"
            " created_at, updated_at, deleted_at, effective_importance FROM insights WHERE id=?",
            (receipt.id,),
        ).fetchone()
        ops = conn.execute("SELECT operation, insight_id, created_at FROM oplog").fetchall()
    assert row == (
        "Prefers dark mode",
        "preference",
        5,
        '["ui"]',
        '["Editor"]',
        "agent",
        0,
        START,
        START,
        None,
        1.0,
    )
    assert ops == [("remember", receipt.id, START)]


def test_identical_content_of_an_active_insight_is_skipped(
    tmp_path: Path, store: EmbeddedStore, clock: FakeClock
) -> None:
    first = store.remember("default", "Uses pytest")
    clock.advance(HOUR)
    again = store.remember("default", "Uses pytest ", category="fact")
    assert (again.action, again.id, again.replaced_id) == ("skipped", first.id, first.id)
    assert again.category == "general" and again.created_at == START
    assert store.remember("default", "uses pytest").action == "added"  # bytes, not case
    store.forget("default", first.id)
    back = store.remember("default", "Uses pytest")
    assert back.action == "added" and back.id != first.id
    with raw(tmp_path) as conn:
        ops = [r[0] for r in conn.execute("SELECT operation FROM oplog ORDER BY id")]
    assert ops == ["remember", "diff-skip", "remember", "forget", "remember"]


def meta(text: str) -> dict[str, Any]:
    value = json.loads(text)
    assert isinstance(value, dict)
    return value


def test_temporal_backbone_per_source_and_proximity_weights(
    tmp_path: Path, store: EmbeddedStore, clock: FakeClock
) -> None:
    a = store.remember("default", "alpha one").id
    clock.advance(HOUR)
    b = store.remember("default", "beta two", source="agent").id
    clock.advance(HOUR)
    c_receipt = store.remember("default", "gamma three")
    c = c_receipt.id
    clock.advance(28 * HOUR)
    d_receipt = store.remember("default", "delta four")
    d = d_receipt.id
    assert c_receipt.edges_created == {"temporal": 2, "entity": 0, "causal": 0, "semantic": 0}
    assert d_receipt.edges_created["temporal"] == 1
    found = {(s, t): (w, meta(m)) for s, t, kind, w, m in edges(tmp_path) if kind == "temporal"}
    assert found == {
        (a, b): (0.5, {"sub_type": "proximity", "direction": "precedes"}),
        (b, a): (0.5, {"sub_type": "proximity", "direction": "succeeds"}),
        (a, c): (1.0, {"sub_type": "backbone", "direction": "precedes"}),
        (c, a): (1.0, {"sub_type": "backbone", "direction": "succeeds"}),
        (b, c): (0.5, {"sub_type": "proximity", "direction": "precedes"}),
        (c, b): (0.5, {"sub_type": "proximity", "direction": "succeeds"}),
        (c, d): (1.0, {"sub_type": "backbone", "direction": "precedes"}),
        (d, c): (1.0, {"sub_type": "backbone", "direction": "succeeds"}),
    }


def test_at_most_ten_proximity_partners_newest_first(
    tmp_path: Path, store: EmbeddedStore, clock: FakeClock
) -> None:
    ids = []
    for i in range(12):
        ids.append(store.remember("default", f"note {i}", source="external").id)
        clock.advance(HOUR)
    newest = store.remember("default", "final note", source="user")
    assert newest.edges_created["temporal"] == 10
    partners = {s: w for s, t, kind, w, _ in edges(tmp_path) if t == newest.id}
    assert set(partners) == set(ids[2:])
    assert partners[ids[11]] == 0.5  # one hour apart: 1 / (1 + 1)
    assert partners[ids[2]] == round(1 / 11, 6)


def test_entity_edges_link_the_newest_five_per_entity(
    tmp_path: Path, store: EmbeddedStore, clock: FakeClock
) -> None:
    ids = []
    for i in range(7):
        clock.advance(2 * DAY)
        ids.append(store.remember("default", f"kafka fact {i}", entities=("Kafka",)).id)
    clock.advance(2 * DAY)
    last = store.remember("default", "consumer lag", entities=("KAFKA", "Zookeeper"))
    assert last.edges_created["entity"] == 5
    linked = {
        (s, t, meta(m)["entity"]) for s, t, kind, _, m in edges(tmp_path) if kind == "entity"
    }
    for other in ids[2:]:
        assert (other, last.id, "KAFKA") in linked and (last.id, other, "KAFKA") in linked
    assert not any(last.id in (s, t) and ids[1] in (s, t) for s, t, _ in linked)


def test_entity_edges_stop_at_fifty(store: EmbeddedStore, clock: FakeClock) -> None:
    names = [f"E{i}" for i in range(11)]
    for name in names:
        for j in range(5):
            clock.advance(2 * DAY)
            store.remember("default", f"{name} item {j}", entities=(name,))
    receipt = store.remember("default", "everything at once", entities=tuple(names))
    assert receipt.edges_created["entity"] == 50


def test_causal_cue_edges_point_from_the_older_insight(
    tmp_path: Path, store: EmbeddedStore, clock: FakeClock
) -> None:
    first = store.remember("default", "the build broke because the disk filled").id
    clock.advance(2 * DAY)
    second = store.remember("default", "disk filled on the build host")
    clock.advance(2 * DAY)
    unrelated = store.remember("default", "lunch menu for friday")
    assert second.edges_created["causal"] == 1
    assert unrelated.edges_created["causal"] == 0
    causal = [(s, t, w, meta(m)) for s, t, kind, w, m in edges(tmp_path) if kind == "causal"]
    # tokens {build, broke, disk, filled} vs {disk, filled, build, host}: 3 shared of 5
    assert causal == [(first, second.id, 0.6, {"sub_type": "causes"})]


def test_effective_importance_formula() -> None:
    assert effective_importance(3, 0, 30 * 86400, 0) == pytest.approx(0.25)
    assert effective_importance(4, 10, 0, 7) == pytest.approx(0.8 * math.log(11) * 1.5)
    assert effective_importance(1, 1, 0, 1) == pytest.approx(0.15 * 1.1)


def test_effective_importance_is_kept_current(
    tmp_path: Path, store: EmbeddedStore, clock: FakeClock
) -> None:
    a = store.remember("default", "alpha", importance=4).id
    clock.advance(2 * DAY)
    b = store.remember("default", "beta", importance=2).id
    with raw(tmp_path) as conn:
        values = dict(conn.execute("SELECT id, effective_importance FROM insights"))
    # a: one backbone edge, two days old; b: one edge, new
    assert values[a] == pytest.approx(0.8 * 0.5 ** (2 / 30) * 1.1, abs=1e-6)
    assert values[b] == pytest.approx(0.3 * 1.1)


def test_effective_importance_refreshes_only_where_the_edge_bonus_can_move(
    tmp_path: Path, store: EmbeddedStore, clock: FakeClock
) -> None:
    hub, loner, *spokes = isolated(store, "hub", "loner", "s1", "s2", "s3", "s4", "s5")
    for spoke in spokes:
        store.link("default", hub, spoke)  # hub: 5 outgoing edges, its bonus at the cap
    store.link("default", loner, spokes[0])  # loner: 1 outgoing edge
    with raw(tmp_path) as conn:
        before = dict(conn.execute("SELECT id, effective_importance FROM insights"))
    assert before[hub] == pytest.approx(0.5 * 1.5)
    clock.advance(10 * DAY)
    store.link("default", hub, loner)  # one more edge each way
    with raw(tmp_path) as conn:
        after = dict(conn.execute("SELECT id, effective_importance FROM insights"))
    assert after[hub] == before[hub]  # had 5: the bonus could not move, the snapshot stays
    decayed = 0.5 ** (10 / 30)
    assert after[loner] == pytest.approx(0.5 * decayed * 1.2, abs=1e-6)  # had 1, now 2
    assert after[spokes[1]] == before[spokes[1]]  # not touched by this write at all


def test_insight_ids_are_time_ordered_uuids(store: EmbeddedStore, clock: FakeClock) -> None:
    import uuid

    made = [store.remember("default", f"fact number {n}").id for n in range(3)]
    clock.advance(-HOUR)  # a clock that steps back still yields increasing ids
    made.append(store.remember("default", "fact number 3").id)
    clock.advance(2 * DAY)
    made += isolated(store, "fact number 4", "fact number 5")
    parsed = [uuid.UUID(node) for node in made]
    assert [str(p) for p in parsed] == made  # canonical lowercase form
    assert {(p.version, p.variant) for p in parsed} == {(7, uuid.RFC_4122)}
    assert made == sorted(made) and len(set(made)) == len(made)
    assert parsed[-1].int >> 80 == clock.now_ms()  # the store's clock, in the first 48 bits


def test_insight_ids_stay_unique_and_ordered_across_threads() -> None:
    from mnemon_sm.adapters.sqlite.rows import IdSequence

    ids = IdSequence()
    out: list[list[str]] = [[] for _ in range(4)]

    def make(slot: list[str]) -> None:  # 12000 ids in one millisecond: the counter carries
        slot.extend(ids.next(1_770_000_000_000) for _ in range(3000))

    workers = [threading.Thread(target=make, args=(slot,)) for slot in out]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    every = [node for slot in out for node in slot]
    assert len(set(every)) == len(every) == 12000
    assert all(slot == sorted(slot) for slot in out)


# -- link, forget, related --------------------------------------------------------------------


def test_link_writes_both_directions_and_replaces(tmp_path: Path, store: EmbeddedStore) -> None:
    a, b = isolated(store, "one", "two")
    receipt = store.link("default", a, b, edge_type="causal", weight=0.9, reason="follows")
    assert receipt.metadata == {"created_by": "mnemon-sm", "reason": "follows"}
    assert receipt.to_json()["status"] == "linked"
    store.link("default", a, b, edge_type="causal", weight=0.3)
    store.link("default", b, a, edge_type="semantic")
    assert edges(tmp_path) == {
        (a, b, "causal", 0.3, '{"created_by":"mnemon-sm"}'),
        (b, a, "causal", 0.3, '{"created_by":"mnemon-sm"}'),
        (a, b, "semantic", 0.5, '{"created_by":"mnemon-sm"}'),
        (b, a, "semantic", 0.5, '{"created_by":"mnemon-sm"}'),
    }
    assert store.status("default").edge_count == 4


def test_link_needs_two_distinct_active_insights(store: EmbeddedStore) -> None:
    a, b = isolated(store, "one", "two")
    store.forget("default", b)
    with pytest.raises(UnknownInsight):
        store.link("default", a, b)
    with pytest.raises(UnknownInsight):
        store.link("default", "missing", a)
    with pytest.raises(InvalidInput):
        store.link("default", a, a)


def test_forget_soft_deletes_and_drops_every_edge(
    tmp_path: Path, store: EmbeddedStore, clock: FakeClock
) -> None:
    a, b, c = isolated(store, "one", "two", "three")
    store.link("default", a, b)
    store.link("default", b, c)
    clock.advance(HOUR)
    assert store.forget("default", b).to_json() == {"id": b, "status": "deleted"}
    with raw(tmp_path) as conn:
        row = conn.execute("SELECT deleted_at, updated_at FROM insights WHERE id=?", (b,))
        assert row.fetchone() == ("2026-08-13T09:00:00Z", "2026-08-13T09:00:00Z")
    assert edges(tmp_path) == set()
    for again in (b, "never-existed"):
        with pytest.raises(UnknownInsight):
            store.forget("default", again)
    assert b not in [i.id for i in store.list("default")]
    assert b not in [n.id for n in store.graph("default").nodes]
    assert b not in [h.insight.id for h in store.recall("default", "two", mode="basic").hits]
    with pytest.raises(UnknownInsight):
        store.related("default", b)
    status = store.status("default")
    assert (status.total_insights, status.deleted_insights) == (2, 1)


def test_related_is_an_undirected_bfs_with_depths_and_an_edge_filter(
    tmp_path: Path, store: EmbeddedStore
) -> None:
    a, b, c, d, e, x = isolated(store, "a", "b", "c", "d", "e", "x")
    store.link("default", a, b)
    store.link("default", b, c, edge_type="entity")
    store.import_draft(
        "default",
        ImportDraft(
            insights=(DraftInsight("d", source="solo-3"), DraftInsight("c", source="solo-2")),
            edges=(DraftEdge(0, 1, "semantic"),),  # d -> c only: single direction
        ),
    )
    store.link("default", d, e)
    store.link("default", a, x, edge_type="causal")

    def hits(**kw: Any) -> list[tuple[str, int, str]]:
        return [
            (h.insight.id, h.depth, h.via_edge_type) for h in store.related("default", a, **kw)
        ]

    assert hits(depth=1) == sorted([(b, 1, "semantic"), (x, 1, "causal")], key=lambda h: h[0])
    assert {h[0]: h[1] for h in hits(depth=4)} == {b: 1, x: 1, c: 2, d: 3, e: 4}
    assert {h[0]: h[1] for h in hits(depth=5)} == {b: 1, x: 1, c: 2, d: 3, e: 4}
    assert hits(depth=3, edge_type="causal") == [(x, 1, "causal")]
    with raw(tmp_path) as conn:  # a deleted node is neither listed nor passed through
        conn.execute("UPDATE insights SET deleted_at = ? WHERE id = ?", (START, c))
    assert {h[0] for h in hits(depth=5)} == {b, x}
    for bad in (0, 6):
        with pytest.raises(InvalidInput):
            store.related("default", a, depth=bad)


def test_reads_never_count_access(tmp_path: Path, store: EmbeddedStore) -> None:
    a, b = isolated(store, "alpha memo", "beta memo")
    store.link("default", a, b)
    before = access(tmp_path)
    store.list("default")
    store.list("default", query="memo", category="general", limit=1)
    store.graph("default")
    store.related("default", a, depth=3)
    store.status("default")
    for mode in ("smart", "keyword", "basic"):
        store.recall("default", "memo", mode=mode, readonly=True)
    assert access(tmp_path) == before


def test_recall_counts_access_once_per_hit_with_one_oplog_row(
    tmp_path: Path, store: EmbeddedStore, clock: FakeClock
) -> None:
    isolated(store, "alpha memo", "beta memo", "gamma")
    clock.advance(HOUR)
    for mode, operation in (("smart", "recall"), ("basic", "recall:basic"), ("keyword", "search")):
        hits = store.recall("default", "memo", mode=mode).hits
        assert hits
        with raw(tmp_path) as conn:
            last = conn.execute("SELECT operation FROM oplog ORDER BY id DESC LIMIT 1")
            assert last.fetchone() == (operation,)
            for hit in hits:
                row = conn.execute(
                    "SELECT access_count, last_accessed_at FROM insights WHERE id=?",
                    (hit.insight.id,),
                ).fetchone()
                assert row == (hit.insight.access_count, "2026-08-13T09:00:00Z")
    counts = {i.content: i.access_count for i in store.list("default")}
    assert counts["alpha memo"] == 3 and counts["beta memo"] == 3
    assert counts["gamma"] == 1  # a smart recall also returns recent rows


def test_list_and_graph(tmp_path: Path, store: EmbeddedStore, clock: FakeClock) -> None:
    a = store.remember("default", "Deploy notes", importance=2).id
    clock.advance(HOUR)
    b = store.remember("default", "deploy checklist", category="fact").id
    clock.advance(HOUR)
    c = store.remember("default", "Lunch", importance=5).id
    assert [i.id for i in store.list("default")] == [c, b, a]
    assert [i.id for i in store.list("default", query="DEPLOY")] == [b, a]
    assert [i.id for i in store.list("default", category="fact")] == [b]
    assert [i.id for i in store.list("default", limit=1)] == [c]
    snapshot = store.graph("default")
    assert [n.id for n in snapshot.nodes] == [a, b, c]
    labels = {(e.source_id, e.target_id): (e.edge_type, e.label) for e in snapshot.edges}
    assert labels[(a, b)] == ("temporal", "backbone")
    assert labels[(b, a)] == ("temporal", "backbone")
    assert labels[(a, c)] == ("temporal", "proximity")
    store.link("default", a, c, edge_type="semantic")
    assert any(e.label == "semantic" for e in store.graph("default").edges)


# -- recall -----------------------------------------------------------------------------------


def test_smart_recall_output(store: EmbeddedStore, clock: FakeClock) -> None:
    for text, ents in (
        ("Redis cache latency budget is 5 ms", ("Redis",)),
        ("Redis config reviewed by ops", ("Redis",)),
        ("Postgres vacuum runs nightly", ("Postgres",)),
    ):
        clock.advance(HOUR)
        store.remember("default", text, entities=ents)
    result = store.recall("default", "Redis latency", mode="smart", limit=2)
    assert len(result.hits) == 2 and result.hint is None
    assert {hit.insight.content[:5] for hit in result.hits} == {"Redis"}
    assert {(hit.intent, hit.matched_via) for hit in result.hits} == {("GENERAL", "hybrid")}
    for hit in result.hits:
        assert hit.score is not None and 0 <= hit.score <= 1 and hit.score == round(hit.score, 3)
        assert hit.confidence == algo.confidence(hit.score)
    assert store.recall("default", "what is Redis", mode="smart").hits[0].intent == "ENTITY"
    assert (
        store.recall("default", "when did Postgres vacuum", mode="smart").hits[0].intent == "WHEN"
    )
    assert store.recall("default", "Redis", mode="smart", intent="WHY").hits[0].intent == "WHY"
    sparse = store.recall("default", "Redis", mode="smart", limit=10)
    assert len(sparse.hits) == 3 and sparse.hint == "sparse_results"
    assert [hit.confidence for hit in result.hits] == ["high", "high"]
    filtered = store.recall("default", "Redis", mode="smart", category="fact")
    assert filtered.hits == () and filtered.hint == "sparse_results"


def test_why_recall_orders_causes_first(store: EmbeddedStore) -> None:
    report = store.import_draft(
        "default",
        ImportDraft(
            insights=(
                DraftInsight("disk full on the build host", source="a"),
                DraftInsight("deploy failed, rollback of the release", source="b"),
            ),
            edges=(DraftEdge(0, 1, "causal", 0.9, "disk caused the failure"),),
        ),
    )
    cause, effect = report.ids
    general = store.recall(
        "default", "deploy failed rollback", mode="smart", intent="GENERAL"
    ).hits
    assert [h.insight.id for h in general] == [effect, cause]
    why = store.recall("default", "why did the deploy fail rollback", mode="smart").hits
    assert [h.insight.id for h in why] == [cause, effect]


def test_keyword_and_basic_recall(store: EmbeddedStore, clock: FakeClock) -> None:
    store.remember("default", "redis cache latency", importance=2)
    clock.advance(HOUR)
    store.remember("default", "Redis config", importance=4)
    store.remember("default", "lunch")
    keyword = store.recall("default", "redis latency", mode="keyword").hits
    assert [(h.insight.content, h.score, h.matched_via) for h in keyword] == [
        ("redis cache latency", 1.0, "keyword"),
        ("Redis config", 0.5, "keyword"),
    ]
    basic = store.recall("default", "REDIS", mode="basic")
    assert [(h.insight.content, h.score) for h in basic.hits] == [
        ("Redis config", None),
        ("redis cache latency", None),
    ]
    assert basic.hits[0].to_json().keys() == basic.hits[0].insight.to_json().keys()


def test_store_recall_equals_the_full_scan_reference(
    tmp_path: Path, store: EmbeddedStore, clock: FakeClock
) -> None:
    """The side index only selects candidates: every result equals :class:`ScanSource`'s."""
    words = ("redis", "kafka", "cache", "latency", "deploy", "rollback", "disk", "billing")
    for i in range(45):
        clock.advance((i % 7) * HOUR + 1000)
        text = " ".join(words[(i * k) % len(words)] for k in (1, 3, 7)) + f" item{i}"
        store.remember(
            "default",
            text + (" because of load" if i % 9 == 0 else ""),
            category=("fact", "decision", "general")[i % 3],
            importance=1 + i % 5,
            entities=(("Redis",), ("Kafka", "Billing"), ())[i % 3],
            source=("user", "agent", "external")[i % 3],
        )
    ids = [i.id for i in store.list("default")]
    store.link("default", ids[0], ids[10], edge_type="supersedes", weight=0.8)
    store.forget("default", ids[5])
    rows, graph = snapshot(tmp_path)
    cases: list[tuple[str, dict[str, Any]]] = [
        ("redis latency", {}),
        ("why the billing invoice rollback", {}),
        ("Kafka queue", {"category": "decision"}),
        ("deploy disk", {"source": "agent", "intent": "WHEN"}),
        ("what is Redis", {"limit": 25}),
        ("", {}),
    ]
    for query, kw in cases:
        limit = kw.pop("limit", 10)
        got = store.recall("default", query, mode="smart", limit=limit, readonly=True, **kw)
        scan = reference(rows, graph, kw)
        want = algo.smart_recall(scan, query, limit=limit, intent=kw.get("intent"))
        assert got == want, query
        kw.pop("intent", None)
        got = store.recall("default", query, mode="keyword", limit=limit, readonly=True, **kw)
        assert got == algo.keyword_recall(reference(rows, graph, kw), query, limit=limit)


def test_a_hub_is_read_only_up_to_the_visit_budget(tmp_path: Path, store: EmbeddedStore) -> None:
    """The anchor spends 495 of GENERAL's 500 visits, so only 5 of the hub's neighbours can be
    looked at; each hub edge exists in both directions with nearly equal weights, so the store
    must read 2 x 5 edge rows to find them. The result must equal the full-scan reference."""
    hub_leaves = [DraftInsight(f"hub leaf {j}", source=f"h{j}") for j in range(30)]
    anchor_leaves = [DraftInsight(f"anchor leaf {i}", source=f"a{i}") for i in range(494)]
    items = (*hub_leaves, DraftInsight("the hub", source="hub"), *anchor_leaves)
    items = (*items, DraftInsight("alpha anchor", source="anchor"))
    hub, anchor = 30, len(items) - 1
    links = [DraftEdge(anchor, hub, "semantic", 1.0)]
    links += [DraftEdge(anchor, 31 + i, "semantic", 0.1) for i in range(494)]
    for j in range(30):
        links.append(DraftEdge(hub, j, "semantic", 0.95 - j / 100))
        links.append(DraftEdge(j, hub, "semantic", 0.95 - j / 100 - 0.001))
    store.import_draft("default", ImportDraft(insights=items, edges=tuple(links)))
    rows, graph = snapshot(tmp_path)
    got = store.recall("default", "alpha", mode="smart", limit=40, readonly=True)
    want = algo.smart_recall(ScanSource(rows, graph), "alpha", limit=40)
    assert got == want
    reached = {hit.insight.content for hit in got.hits if hit.matched_via == "semantic"}
    assert {f"hub leaf {j}" for j in range(4)} <= reached
    assert "hub leaf 4" not in reached


def reference(
    rows: list[Insight], graph: list[tuple[str, str, str, float]], kw: dict[str, Any]
) -> ScanSource:
    return ScanSource(rows, graph, category=kw.get("category"), source=kw.get("source"))


def test_lookups_by_id_never_walk_the_deleted_at_index(store: EmbeddedStore) -> None:
    """Regression: without statistics, SQLite answered ``id IN (10 or more ids) AND deleted_at
    IS NULL`` by walking every active row through the deleted_at index (27 ms per recall at
    100k insights). Every statement that looks rows up by id must use the id or rowid."""
    ids = isolated(store, *(f"memo {i}" for i in range(25)))
    for other in ids[1:]:
        store.link("default", ids[0], other)
    conn = store._handle("default").conn  # the store's own connection, to trace it
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        store.related("default", ids[0])
        store.recall("default", "memo", limit=30)
        store.recall("default", "memo", mode="keyword", limit=30, readonly=True)
        store.remember("default", "memo 3")
        store.forget("default", ids[5])
        store.graph("default")
    finally:
        conn.set_trace_callback(None)
    lookups = [sql for sql in seen if re.search(r"\b(id|rowid) (IN|=) ", sql)]
    assert any(sql.count(",") >= 20 and "deleted_at" in sql for sql in lookups)
    for sql in lookups:
        plan = " ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql))
        assert "deleted_at" not in plan, (sql, plan)


# -- side index -------------------------------------------------------------------------------


def external_insert(root: Path, node: str, content: str, *, when: str = START) -> None:
    with raw(root) as conn:
        conn.execute(
            "INSERT INTO insights (id, content, created_at, updated_at) VALUES (?, ?, ?, ?)",
            (node, content, when, when),
        )


def test_the_side_index_follows_changes_made_behind_its_back(
    tmp_path: Path, store: EmbeddedStore
) -> None:
    (a,) = isolated(store, "an ordinary memory")
    external_insert(tmp_path, "ext-1", "external zebra sighting")
    assert [h.insight.id for h in store.recall("default", "zebra", mode="keyword").hits] == [
        "ext-1"
    ]
    assert store.recall("default", "zebra").hits[0].insight.id == "ext-1"
    with raw(tmp_path) as conn:
        conn.execute(
            "UPDATE insights SET content = 'external okapi sighting',"
            " updated_at = '2026-08-13T08:00:01Z' WHERE id = 'ext-1'"
        )
    assert store.recall("default", "zebra", mode="keyword").hits == ()
    assert store.recall("default", "okapi", mode="keyword").hits[0].insight.id == "ext-1"
    with raw(tmp_path) as conn:
        conn.execute(
            "UPDATE insights SET deleted_at = ?, updated_at = ? WHERE id = ?",
            (START, "2026-08-13T08:00:02Z", a),
        )
    assert store.recall("default", "ordinary", mode="keyword").hits == ()
    # a remember after the outside change sees the outside row as a duplicate
    assert store.remember("default", "external okapi sighting").action == "skipped"


def test_the_side_index_is_checked_when_a_store_opens(tmp_path: Path, clock: FakeClock) -> None:
    first = EmbeddedStore(tmp_path, clock)
    first.create_space("default")
    first.remember("default", "kept memory")
    first.close()
    external_insert(tmp_path, "ext-2", "walrus report")
    second = EmbeddedStore(tmp_path, clock)
    assert second.recall("default", "walrus", mode="keyword").hits[0].insight.id == "ext-2"
    second.close()
    index = tmp_path / "data" / "default" / "mnemon-sm-index.db"
    index.write_bytes(b"not a database at all" * 100)
    third = EmbeddedStore(tmp_path, clock)
    assert len(third.recall("default", "walrus kept memory", mode="keyword").hits) == 2
    third.close()
    index.unlink()
    fourth = EmbeddedStore(tmp_path, clock)
    assert len(fourth.recall("default", "walrus kept", mode="keyword").hits) == 2
    fourth.rebuild_index("default")
    assert len(fourth.recall("default", "walrus kept", mode="keyword").hits) == 2
    fourth.close()


def test_a_busy_side_index_is_never_deleted_as_if_it_were_damaged(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "database is locked" while attaching means another process uses the index: the error
    is raised and the file stays (only a damaged file is rebuilt)."""
    from mnemon_sm.adapters.sqlite.sideindex import SideIndex

    first = EmbeddedStore(tmp_path, clock)
    first.create_space("default")
    first.remember("default", "kept memory")
    first.close()
    index = tmp_path / "data" / "default" / "mnemon-sm-index.db"
    before = index.read_bytes()

    from mnemon_sm.adapters.sqlite import sideindex

    real_attach = SideIndex._attach
    refusals = [2]  # busy twice, then the other process is done

    def busy(self: SideIndex, *args: Any) -> None:
        if refusals[0] > 0:
            refusals[0] -= 1
            raise sqlite3.OperationalError("database is locked")
        real_attach(self, *args)

    monkeypatch.setattr(SideIndex, "_attach", busy)
    store = EmbeddedStore(tmp_path, clock)
    assert len(store.recall("default", "kept", mode="keyword").hits) == 1  # it waited
    store.close()
    assert refusals == [0]
    refusals[0] = 10**6  # busy for good: refused in the end, the file left alone
    monkeypatch.setattr(sideindex, "ATTACH_WAIT_S", 0.05)
    before = index.read_bytes()
    with pytest.raises(StorageError, match="locked"):
        EmbeddedStore(tmp_path, clock).recall("default", "kept", mode="keyword")
    assert index.read_bytes() == before


def test_two_stores_on_one_root_see_each_other(tmp_path: Path, clock: FakeClock) -> None:
    one, two = EmbeddedStore(tmp_path, clock), EmbeddedStore(tmp_path, clock)
    one.create_space("default")
    assert two.recall("default", "anything").hits == ()
    receipt = one.remember("default", "shared narwhal fact", entities=("Narwhal",))
    assert two.recall("default", "narwhal", mode="keyword").hits[0].insight.id == receipt.id
    assert two.remember("default", "shared narwhal fact").action == "skipped"
    two.forget("default", receipt.id)
    assert one.recall("default", "narwhal", mode="keyword").hits == ()
    one.close()
    two.close()


def test_threads_on_two_store_objects_lose_nothing(tmp_path: Path, clock: FakeClock) -> None:
    stores = [EmbeddedStore(tmp_path, clock), EmbeddedStore(tmp_path, clock)]
    stores[0].create_space("default")
    failures: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(15):
                own = stores[n % 2]
                own.remember("default", f"thread{n} item{i}", entities=("Shared",))
                own.recall("default", f"thread{n}", limit=3)
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    for n in range(4):
        found = stores[n % 2].recall("default", f"thread{n}", mode="keyword", limit=50).hits
        assert len(found) == 15
    assert stores[0].status("default").total_insights == 60
    for own in stores:
        own.close()


# -- import -----------------------------------------------------------------------------------


def test_import_draft(tmp_path: Path, store: EmbeddedStore) -> None:
    existing = store.remember("default", "already here").id
    draft = ImportDraft(
        source="dsh-mnemon-merge",
        insights=(
            DraftInsight("old fact", created_at="2024-05-01T12:00:00+02:00", source="agent"),
            DraftInsight("already here", category="fact"),
            DraftInsight("second old fact", importance=5, tags=("t",), entities=("E",)),
            DraftInsight("old fact"),
        ),
        edges=(
            DraftEdge(0, 1, "semantic", 0.25, "same topic"),
            DraftEdge(2, 0, "causal", 0.8),
            DraftEdge(0, 3, "entity"),  # 3 is a duplicate of 0: nothing to link
        ),
    )
    report = store.import_draft("default", draft)
    assert (report.imported, report.skipped, report.errors, report.edges_inserted) == (2, 2, 0, 2)
    first, mapped, second, again = report.ids
    assert mapped == existing and again == first
    with raw(tmp_path) as conn:
        rows = {
            r[0]: r[1:]
            for r in conn.execute("SELECT id, source, created_at, importance, tags FROM insights")
        }
        ops = [r[0] for r in conn.execute("SELECT operation FROM oplog ORDER BY id")]
    assert rows[first] == ("agent", "2024-05-01T10:00:00Z", 3, "[]")
    assert rows[second] == ("dsh-mnemon-merge", START, 5, '["t"]')
    assert ops == ["remember", "import"]
    found = {(s, t, k): (w, m) for s, t, k, w, m in edges(tmp_path) if k != "temporal"}
    assert found == {
        (first, existing, "semantic"): (0.25, '{"reason":"same topic"}'),
        (second, first, "causal"): (0.8, "{}"),
    }
    plain = ImportDraft(insights=(DraftInsight("x one"), DraftInsight("x two")))
    third, fourth = store.import_draft("default", plain).ids
    with raw(tmp_path) as conn:
        sources = dict(conn.execute("SELECT id, source FROM insights"))
    assert sources[third] == sources[fourth] == "import"


def test_import_rebuilds_each_source_backbone(tmp_path: Path, store: EmbeddedStore) -> None:
    def times(*hours: int) -> ImportDraft:
        return ImportDraft(
            insights=tuple(
                DraftInsight(
                    f"event at {h}", source="log", created_at=f"2026-01-01T{h:02d}:00:00Z"
                )
                for h in hours
            )
        )

    first = store.import_draft("default", times(1, 5)).ids
    middle = store.import_draft("default", times(3)).ids

    def backbone() -> set[tuple[str, str]]:
        return {
            (s, t)
            for s, t, k, _, m in edges(tmp_path)
            if k == "temporal" and meta(m) == {"sub_type": "backbone", "direction": "precedes"}
        }

    assert backbone() == {(first[0], middle[0]), (middle[0], first[1])}


# -- validation, spaces, files ----------------------------------------------------------------

BAD_CALLS: list[tuple[str, Callable[[EmbeddedStore], object]]] = [
    ("empty content", lambda s: s.remember("default", "  \n ")),
    ("content over 8000 bytes", lambda s: s.remember("default", "é" * 4001)),
    ("content not text", lambda s: s.remember("default", b"bytes")),  # type: ignore[arg-type]
    ("lone surrogate", lambda s: s.remember("default", "a\ud800")),
    ("category", lambda s: s.remember("default", "x", category="misc")),
    ("importance 0", lambda s: s.remember("default", "x", importance=0)),
    ("importance 6", lambda s: s.remember("default", "x", importance=6)),
    ("importance bool", lambda s: s.remember("default", "x", importance=True)),
    ("source", lambda s: s.remember("default", "x", source="import")),
    ("21 tags", lambda s: s.remember("default", "x", tags=tuple(f"t{i}" for i in range(21)))),
    ("tag with comma", lambda s: s.remember("default", "x", tags=("a,b",))),
    ("tag over 100 bytes", lambda s: s.remember("default", "x", tags=("t" * 101,))),
    ("tags as a string", lambda s: s.remember("default", "x", tags="abc")),  # type: ignore[arg-type]
    ("51 entities", lambda s: s.remember("default", "x", entities=tuple(map(str, range(51))))),
    ("entity over 200 bytes", lambda s: s.remember("default", "x", entities=("e" * 201,))),
    ("recall mode", lambda s: s.recall("default", "x", mode="fuzzy")),
    ("recall limit 0", lambda s: s.recall("default", "x", limit=0)),
    ("recall query too long", lambda s: s.recall("default", "q" * 2001)),
    ("recall intent", lambda s: s.recall("default", "x", intent="HOW")),
    ("recall category", lambda s: s.recall("default", "x", category="misc")),
    ("list limit", lambda s: s.list("default", limit=-1)),
    ("link weight", lambda s: s.link("default", "a", "b", weight=1.5)),
    ("link weight nan", lambda s: s.link("default", "a", "b", weight=math.nan)),
    ("link type", lambda s: s.link("default", "a", "b", edge_type="narrative")),
    ("link reason", lambda s: s.link("default", "a", "b", reason="r" * 1001)),
    ("related type", lambda s: s.related("default", "a", edge_type="narrative")),
    ("empty draft", lambda s: s.import_draft("default", ImportDraft(insights=()))),
    ("draft edge index", lambda s: s.import_draft("default", ImportDraft(
        insights=(DraftInsight("ok"),), edges=(DraftEdge(0, 1, "semantic"),)))),
    ("draft self edge", lambda s: s.import_draft("default", ImportDraft(
        insights=(DraftInsight("ok"),), edges=(DraftEdge(0, 0, "semantic"),)))),
    ("draft time", lambda s: s.import_draft("default", ImportDraft(
        insights=(DraftInsight("ok"), DraftInsight("bad", created_at="yesterday"))))),
    ("draft category", lambda s: s.import_draft("default", ImportDraft(
        insights=(DraftInsight("ok"), DraftInsight("bad", category="misc"))))),
    ("space id", lambda s: s.recall("bad id", "x")),
    ("space id dash", lambda s: s.create_space("-x")),
]  # fmt: skip


def dump(root: Path) -> list[str]:
    with raw(root) as conn:
        return list(conn.iterdump())


@pytest.mark.parametrize(("name", "call"), BAD_CALLS, ids=[name for name, _ in BAD_CALLS])
def test_invalid_input_changes_nothing(
    tmp_path: Path, store: EmbeddedStore, name: str, call: Callable[[EmbeddedStore], object]
) -> None:
    store.remember("default", "something")
    before = dump(tmp_path)
    with pytest.raises(InvalidInput):
        call(store)
    assert dump(tmp_path) == before


def test_content_limit_is_8000_utf8_bytes(store: EmbeddedStore) -> None:
    assert store.remember("default", "é" * 4000).action == "added"


def test_unknown_space(store: EmbeddedStore) -> None:
    calls: list[Callable[[], object]] = [
        lambda: store.status("nope"),
        lambda: store.recall("nope", "x"),
        lambda: store.remember("nope", "x"),
        lambda: store.related("nope", "x"),
        lambda: store.link("nope", "a", "b"),
        lambda: store.forget("nope", "x"),
        lambda: store.list("nope"),
        lambda: store.graph("nope"),
        lambda: store.import_draft("nope", ImportDraft(insights=(DraftInsight("x"),))),
        lambda: store.delete_space("nope"),
    ]
    for call in calls:
        with pytest.raises(UnknownSpace):
            call()


def test_spaces_create_and_delete(tmp_path: Path, store: EmbeddedStore) -> None:
    store.create_space("work-2")
    (tmp_path / "data" / "not-a-store").mkdir()
    assert store.spaces() == ("default", "work-2")
    with pytest.raises(InvalidInput):
        store.create_space("work-2")
    store.remember("work-2", "soon gone")
    store.delete_space("work-2")
    assert not (tmp_path / "data" / "work-2").exists()
    assert store.spaces() == ("default",)
    with pytest.raises(UnknownSpace):
        store.recall("work-2", "soon")
    store.create_space("work-2")
    assert store.list("work-2") == ()
    assert EmbeddedStore(tmp_path / "elsewhere", FakeClock()).spaces() == ()


@pytest.fixture
def umask_zero() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.usefixtures("umask_zero")
def test_modes_are_owner_only(tmp_path: Path, clock: FakeClock) -> None:
    root = tmp_path / "root"
    store = EmbeddedStore(root, clock)
    store.create_space("default")
    store.remember("default", "private")
    space = root / "data" / "default"
    for directory in (root, root / "data", space):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    names = {p.name for p in space.iterdir()}
    assert {"mnemon.db", "mnemon.db-wal", "mnemon-sm-index.db-wal"} <= names
    for path in space.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path.name
    store.close()
    wal = space / "mnemon.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0


def test_status_has_mnemons_keys(tmp_path: Path, store: EmbeddedStore) -> None:
    store.remember("default", "a", entities=("X", "Y"), category="fact")
    store.remember("default", "b", entities=("X",))
    data = store.status("default").to_json()
    assert list(data) == [
        "total_insights",
        "deleted_insights",
        "by_category",
        "edge_count",
        "top_entities",
        "oplog_count",
        "db_path",
        "db_size_bytes",
    ]
    assert data["by_category"] == {"fact": 1, "general": 1}
    assert data["top_entities"] == [{"entity": "X", "count": 2}, {"entity": "Y", "count": 1}]
    assert data["db_path"] == str(db_path(tmp_path))
    assert data["oplog_count"] == 2 and data["db_size_bytes"] > 0


def test_oplog_keeps_the_newest_5000_rows(tmp_path: Path, store: EmbeddedStore) -> None:
    with raw(tmp_path) as conn:
        conn.executemany(
            "INSERT INTO oplog (operation, created_at) VALUES ('filler', ?)", [(START,)] * 5000
        )
    store.remember("default", "one more")
    with raw(tmp_path) as conn:
        assert conn.execute("SELECT count(*) FROM oplog").fetchone() == (5000,)
        last = conn.execute("SELECT operation FROM oplog ORDER BY id DESC LIMIT 1").fetchone()
        assert last == ("remember",)


def test_auto_prune_only_with_a_ceiling(tmp_path: Path, clock: FakeClock) -> None:
    store = EmbeddedStore(tmp_path, clock, prune_ceiling=3)
    store.create_space("default")
    ids = []
    for i, importance in enumerate((3, 5, 2, 3)):
        clock.advance(10 * DAY)
        receipt = store.remember("default", f"memory {i}", importance=importance)
        ids.append(receipt.id)
    assert receipt.auto_pruned_ids == (ids[0],)  # the oldest unimportant one decayed most
    assert receipt.to_json()["auto_pruned"] == 1
    assert {i.id for i in store.list("default")} == set(ids[1:])
    with raw(tmp_path) as conn:
        pruned = conn.execute("SELECT count(*) FROM oplog WHERE operation = 'prune'")
        assert pruned.fetchone() == (1,)
    store.close()
    unlimited = EmbeddedStore(tmp_path / "other", clock)
    unlimited.create_space("default")
    for i in range(5):
        assert unlimited.remember("default", f"m{i}").auto_pruned_ids == ()
    unlimited.close()
    with pytest.raises(InvalidInput):
        EmbeddedStore(tmp_path, clock, prune_ceiling=-1)


def test_sqlite_failures_become_storage_errors(tmp_path: Path, clock: FakeClock) -> None:
    store = EmbeddedStore(tmp_path, clock)
    store.create_space("default")
    store.close()
    # SQLite's header, then garbage: SQLite itself refuses it, and its error is translated
    db_path(tmp_path).write_bytes(b"SQLite format 3\x00" + b"garbage, not SQLite" * 512)
    with pytest.raises(StorageError) as caught:
        store.status("default")
    assert isinstance(caught.value.__cause__, sqlite3.DatabaseError)
