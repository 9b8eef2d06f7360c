"""Relevance recall (the default mode) of the embedded store, its side index and vectors, the
bulk import and the strict-v2 policy as a host sees them.

Expected rankings are read from the rules of ``longterm/sqlite/lexical.py`` and
``longterm/ranking.py`` (stems, rarity, bounded signals), never from the functions' output.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mnemon_sm.adapters.sqlite import EmbeddedStore
from mnemon_sm.adapters.sqlite.lexical import analyze, edit_distance, query_terms
from mnemon_sm.adapters.sqlite.store import DENSE_UNAVAILABLE
from mnemon_sm.adapters.workers.builtin import BuiltinWorkers
from mnemon_sm.config import Config
from mnemon_sm.errors import CorruptStore, InvalidInput, ReadOnly
from mnemon_sm.ports import Ports
from mnemon_sm.ports.long_term.values import DraftEdge, DraftInsight, ImportDraft
from mnemon_sm.root import MemoryRoot
from mnemon_sm.testing.embed import EMBEDDER_DEFECTS, FakeEmbedder, FaultyEmbedder
from mnemon_sm.testing.memory import FakeClock, MemoryFiles, MemoryLocks
from mnemon_sm.testing.snapshot import root_state

NOW = 1_786_608_000_000
DAY = 86_400_000
SPACE = "default"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


def _store(tmp_path: Path, clock: FakeClock, **kw: object) -> EmbeddedStore:
    store = EmbeddedStore(tmp_path / "root", clock, **kw)  # type: ignore[arg-type]
    store.create_space(SPACE)
    return store


def _contents(store: EmbeddedStore, query: str, **kw: object) -> list[str]:
    found = store.recall(SPACE, query, readonly=True, **kw)  # type: ignore[arg-type]
    return [h.insight.content for h in found.hits]


# -- the analyzer ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Researching", "research"),
        ("signing keys", "signing key"),
        ("relocated", "relocating"),
        ("cats", "cat"),
    ],
)
def test_inflections_share_terms(a: str, b: str) -> None:
    assert analyze(a) == analyze(b)


def test_question_words_are_not_terms() -> None:
    assert query_terms("What did you tell me about Redis?") == ["redi"]
    assert query_terms("what is it") == []


def test_edit_distance_counts_a_swap_as_one() -> None:
    assert edit_distance("lisbon", "lisbno", 1) == 1
    assert edit_distance("restaurant", "resturant", 2) == 1
    assert edit_distance("mango", "melon", 1) == 2  # bound + 1: more than allowed


# -- lexical relevance ----------------------------------------------------------------------


def test_a_user_question_finds_the_fact(tmp_path: Path, clock: FakeClock) -> None:
    store = _store(tmp_path, clock)
    for text in (
        "My cat is named Miso",
        "We deploy with the release script on Tuesdays",
        "Caroline is researching adoption agencies",
        "The signing key lives in the vault",
        "Our database is PostgreSQL 16",
        "I had lunch at a great restaurant in Lisbon",
    ):
        store.remember(SPACE, text)
    assert _contents(store, "what is my cat called")[0] == "My cat is named Miso"
    assert _contents(store, "what did Caroline research?")[0].startswith("Caroline")
    assert _contents(store, "where are the signing keys")[0].startswith("The signing key")
    assert _contents(store, "which postgres version")[0] == "Our database is PostgreSQL 16"
    assert _contents(store, "best resturant in Lisbn")[0].endswith("in Lisbon")
    assert _contents(store, "what is it") == []  # nothing to look for: nothing found


def test_rare_words_outweigh_common_ones(tmp_path: Path, clock: FakeClock) -> None:
    store = _store(tmp_path, clock)
    for i in range(12):
        store.remember(SPACE, f"Maya talked about the weather, part {i}")
    store.remember(SPACE, "The allergy is to peanuts")
    top = _contents(store, "What is Maya's allergy?")
    assert top[0] == "The allergy is to peanuts"


def test_recent_irrelevant_memories_are_never_returned(tmp_path: Path, clock: FakeClock) -> None:
    store = _store(tmp_path, clock)
    old = store.remember(SPACE, "The Falcon project is led by Priya", importance=1)
    clock.advance(300 * DAY)
    for i in range(30):
        new = store.remember(SPACE, f"small talk about lunch number {i}", importance=5)
        store.link(SPACE, new.id, old.id, edge_type="semantic", weight=1.0)
    found = store.recall(SPACE, "who leads Falcon", readonly=True)
    assert [h.insight.id for h in found.hits] == [old.id]


def test_scores_are_normalised_and_ordered(tmp_path: Path, clock: FakeClock) -> None:
    store = _store(tmp_path, clock)
    for text in ("kiwi mango papaya", "kiwi mango", "kiwi", "mango stone river window"):
        store.remember(SPACE, text)
    hits = store.recall(SPACE, "kiwi mango papaya", readonly=True).hits
    scores = [h.score for h in hits]
    assert all(s is not None and 0 < s <= 1 for s in scores)
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    assert hits[0].insight.content == "kiwi mango papaya"
    assert {h.matched_via for h in hits} == {"lexical"}


def test_filters_apply_to_relevance_recall(tmp_path: Path, clock: FakeClock) -> None:
    store = _store(tmp_path, clock)
    store.remember(SPACE, "kiwi from the user", category="fact")
    store.remember(SPACE, "kiwi from the agent", category="fact", source="agent")
    store.remember(SPACE, "kiwi decision", category="decision")
    assert _contents(store, "kiwi", category="decision") == ["kiwi decision"]
    assert _contents(store, "kiwi", source="agent") == ["kiwi from the agent"]


def test_forget_and_rebuild_keep_the_index_true(tmp_path: Path, clock: FakeClock) -> None:
    store = _store(tmp_path, clock)
    a = store.remember(SPACE, "kiwi orchard notes")
    store.remember(SPACE, "kiwi harvest notes")
    store.forget(SPACE, a.id)
    assert _contents(store, "kiwi orchard") == ["kiwi harvest notes"]
    store.rebuild_index(SPACE)
    assert _contents(store, "kiwi orchard") == ["kiwi harvest notes"]


def _vocabulary(tmp_path: Path) -> tuple[dict[str, int], dict[str, int]]:
    """The side index's document frequencies and FTS5's own count of the same index (read
    through its vocabulary table, which walks every posting list)."""
    conn = sqlite3.connect(tmp_path / "root" / "data" / SPACE / "mnemon-sm-index.db")
    try:
        ours = dict(conn.execute("SELECT term, df FROM vocab"))
        conn.execute("CREATE VIRTUAL TABLE temp.counted USING fts5vocab(main, fts, 'row')")
        theirs = dict(conn.execute("SELECT term, doc FROM temp.counted WHERE doc > 0"))
    finally:
        conn.close()
    return ours, theirs


def test_document_frequencies_stay_true(tmp_path: Path, clock: FakeClock) -> None:
    store = _store(tmp_path, clock)
    texts = ["kiwi orchard notes", "kiwi harvest", "orchard ladders and kiwis", "plain words"]
    made = [store.remember(SPACE, text, tags=("fruit",)).id for text in texts]

    def expected() -> dict[str, int]:  # one per active memory holding a term, from the rule
        out: dict[str, int] = {}
        for row in store.list(SPACE):
            for term in set(analyze(" ".join((row.content, *row.tags, *row.entities)))):
                out[term] = out.get(term, 0) + 1
        return out

    assert _vocabulary(tmp_path) == (expected(), expected())
    assert expected()["kiwi"] == 3 and expected()["fruit"] == 4
    store.forget(SPACE, made[0])
    store.remember(SPACE, "kiwi again", entities=("Kiwi",))
    assert _vocabulary(tmp_path) == (expected(), expected())
    conn = sqlite3.connect(tmp_path / "root" / "data" / SPACE / "mnemon.db")
    with conn:  # another program edits one in place and drops another
        conn.execute(
            "UPDATE insights SET content = 'apricot', updated_at = 'z' WHERE id = ?", (made[1],)
        )
        conn.execute("UPDATE insights SET deleted_at = 'z' WHERE id = ?", (made[3],))
    conn.close()
    assert _contents(store, "apricot") == ["apricot"]  # the refresh ran
    assert "plain" not in expected() and _vocabulary(tmp_path) == (expected(), expected())
    store.rebuild_index(SPACE)
    assert _vocabulary(tmp_path) == (expected(), expected())


def test_an_index_of_the_previous_format_is_rebuilt(tmp_path: Path, clock: FakeClock) -> None:
    store = _store(tmp_path, clock)
    store.remember(SPACE, "kiwi orchard notes")
    store.close()
    index = tmp_path / "root" / "data" / SPACE / "mnemon-sm-index.db"
    conn = sqlite3.connect(index)
    conn.execute("UPDATE meta SET value = '1' WHERE key = 'format'")
    conn.execute("DELETE FROM docs")  # what a format-1 index holds is not this format's
    conn.commit()
    conn.close()
    reopened = EmbeddedStore(tmp_path / "root", clock)
    assert _contents(reopened, "orchard") == ["kiwi orchard notes"]


@pytest.mark.parametrize(("durability", "level"), [("full", 2), ("normal", 1), ("off", 0)])
def test_the_store_syncs_as_the_root_asks(
    tmp_path: Path, clock: FakeClock, durability: str, level: int
) -> None:
    store = _store(tmp_path, clock, durability=durability)
    handle = store._handle(SPACE)
    assert handle.conn.execute("PRAGMA main.synchronous").fetchone()[0] == level
    with pytest.raises(InvalidInput):
        EmbeddedStore(tmp_path, clock, durability="sometimes")


# -- dense retrieval ------------------------------------------------------------------------


def test_an_embedder_finds_what_shares_no_word(tmp_path: Path, clock: FakeClock) -> None:
    embedder = FakeEmbedder(synonyms={"gf": "girlfriend"})
    store = _store(tmp_path, clock, embedder=embedder)
    store.remember(SPACE, "My girlfriend loves hiking")
    store.remember(SPACE, "The deploy runs on Tuesdays")
    assert _store_hits(store, "gf") == []  # lexical alone: no shared term
    dense = store.recall(SPACE, "what does my gf love", readonly=True).hits
    assert dense[0].insight.content == "My girlfriend loves hiking"
    assert dense[0].matched_via in {"semantic", "hybrid"}


def _store_hits(store: EmbeddedStore, query: str) -> list[str]:
    plain = EmbeddedStore(store.root, FakeClock(NOW))
    return _contents(plain, query)


def test_vectors_are_computed_lazily_and_kept(tmp_path: Path, clock: FakeClock) -> None:
    embedder = FakeEmbedder()
    store = _store(tmp_path, clock, embedder=embedder)
    store.remember(SPACE, "kiwi orchard notes")
    assert embedder.calls == []  # remember never waits for a model
    store.recall(SPACE, "kiwi", readonly=True)
    assert ("kiwi orchard notes",) in embedder.calls
    calls = len(embedder.calls)
    store.rebuild_index(SPACE)
    store.recall(SPACE, "kiwi", readonly=True)  # same query: cached; vectors survive rebuilds
    assert len(embedder.calls) == calls
    index = tmp_path / "root" / "data" / SPACE / "mnemon-sm-index.db"
    store.forget(SPACE, store.list(SPACE)[0].id)
    assert sqlite3.connect(index).execute("SELECT count(*) FROM vectors").fetchone()[0] == 0


def test_backfill_embeds_everything_with_progress(tmp_path: Path, clock: FakeClock) -> None:
    store = _store(tmp_path, clock)
    for i in range(10):
        store.remember(SPACE, f"note number {i} about kiwi")
    store.close()
    embedder = FakeEmbedder()
    with_model = EmbeddedStore(tmp_path / "root", clock, embedder=embedder)
    seen: list[tuple[int, int]] = []
    assert with_model.embed_missing(SPACE, batch=4, progress=lambda d, t: seen.append((d, t)))
    assert seen == [(4, 10), (8, 10), (10, 10)]
    assert with_model.embed_missing(SPACE) == 0
    other = FakeEmbedder(dimensions=32)  # another model: its own vectors
    assert EmbeddedStore(tmp_path / "root", clock, embedder=other).embed_missing(SPACE) == 10
    with pytest.raises(InvalidInput):
        EmbeddedStore(tmp_path / "root", clock).embed_missing(SPACE)


@pytest.mark.parametrize("kind", [k for k in EMBEDDER_DEFECTS if k != "interrupt"])
def test_a_failing_embedder_never_fails_a_lexical_recall(
    tmp_path: Path, clock: FakeClock, kind: str
) -> None:
    faulty = FaultyEmbedder(FakeEmbedder(), fail_at=range(100), kind=kind)  # type: ignore[arg-type]
    store = _store(tmp_path, clock, embedder=faulty)
    store.remember(SPACE, "kiwi orchard notes")
    found = store.recall(SPACE, "kiwi")
    assert [h.insight.content for h in found.hits] == ["kiwi orchard notes"]
    assert found.hint == DENSE_UNAVAILABLE


def test_an_interrupted_embedder_stops_the_recall_and_nothing_is_held(
    tmp_path: Path, clock: FakeClock
) -> None:
    faulty = FaultyEmbedder(FakeEmbedder(), fail_at=[0], kind="interrupt")
    store = _store(tmp_path, clock, embedder=faulty)
    store.remember(SPACE, "kiwi orchard notes")
    with pytest.raises(KeyboardInterrupt):
        store.recall(SPACE, "kiwi")
    found = store.recall(SPACE, "kiwi")
    assert [h.insight.content for h in found.hits] == ["kiwi orchard notes"]
    assert found.hint != DENSE_UNAVAILABLE and found.hits[0].matched_via == "hybrid"


# -- through the root -----------------------------------------------------------------------


def _root(tmp_path: Path, clock: FakeClock, **config: object) -> MemoryRoot:
    ports = Ports(
        files=MemoryFiles(),
        locks=MemoryLocks(),
        clock=clock,
        long_term=EmbeddedStore(tmp_path / "lt", clock),
        workers=BuiltinWorkers(),
    )
    root = MemoryRoot.open("/root", Config(durability="off"), ports=ports)
    root.long_term.create_space("facts", "facts", active=True)
    if config:
        root.close()
        root = MemoryRoot.open("/root", Config(durability="off", **config), ports=ports)  # type: ignore[arg-type]
    return root


def test_remember_many_checks_everything_first(tmp_path: Path, clock: FakeClock) -> None:
    root = _root(tmp_path, clock)
    lt = root.long_term
    with pytest.raises(InvalidInput):
        lt.remember_many(["kiwi one", {"content": "kiwi two", "importance": 9}])
    with pytest.raises(InvalidInput):
        lt.remember_many(["kiwi one", {"content": "kiwi two", "colour": "red"}])
    assert lt.search("kiwi").hits == ()
    seen: list[tuple[int, int]] = []
    items = [f"kiwi note {i}" for i in range(5)] + [
        {"content": "kiwi note 0"},  # a duplicate: stored once
        {"content": "old kiwi", "createdAt": "2020-01-02T03:04:05Z", "importance": 5},
    ]
    report = lt.remember_many(items, batch=3, progress=lambda d, t: seen.append((d, t))).to_json()
    assert (report["imported"], report["skipped"], len(report["ids"])) == (6, 1, 7)
    assert report["ids"][5] == report["ids"][0]
    assert seen == [(3, 7), (6, 7), (7, 7)]
    old = [h for h in lt.search("old kiwi", limit=50).hits if h.insight.content == "old kiwi"]
    assert old[0].insight.created_at == "2020-01-02T03:04:05Z"


def test_remember_many_is_refused_read_only(tmp_path: Path, clock: FakeClock) -> None:
    root = _root(tmp_path, clock, write_enabled=False)
    with pytest.raises(ReadOnly):
        root.long_term.remember_many(["kiwi"])


def test_search_honours_its_limit_without_tier_quotas(tmp_path: Path, clock: FakeClock) -> None:
    root = _root(tmp_path, clock)
    items = [f"{fruit} note {i}" for i in range(40) for fruit in ("kiwi", "mango")]
    root.long_term.remember_many(items)
    found = root.long_term.search("kiwi mango", limit=50)  # each: half the question
    assert len(found.hits) == 50
    assert sum(h.tier == "medium" for h in found.hits) >= 49  # no quota on a tier
    report = found.sources[0].quality
    assert report.policy_id == "strict-v2" and report.dropped_over_limit > 0
    for bad in (0, 51, True, "5"):
        with pytest.raises(InvalidInput):
            root.long_term.search("kiwi", limit=bad)


def test_a_large_rebuild_reports_progress(tmp_path: Path, clock: FakeClock) -> None:
    from mnemon_sm.adapters.sqlite.sideindex import PROGRESS_FROM

    seen: list[tuple[str, int, int]] = []
    store = _store(tmp_path, clock, progress=lambda *a: seen.append(a))
    items = tuple(DraftInsight(f"note {i} about kiwi") for i in range(PROGRESS_FROM))
    store.import_draft(SPACE, ImportDraft(items))
    assert seen == []  # writes index as they go: nothing to report
    store.rebuild_index(SPACE)
    assert seen[-1] == (SPACE, PROGRESS_FROM, PROGRESS_FROM)
    assert [done for _, done, _ in seen] == sorted(done for _, done, _ in seen)
    assert len(_contents(store, "kiwi note 7", limit=50)) == 50


def test_links_and_supersession_reorder_only_within_the_bound(
    tmp_path: Path, clock: FakeClock
) -> None:
    store = _store(tmp_path, clock)
    top = store.remember(SPACE, "kiwi mango papaya")
    store.remember(SPACE, "unrelated spacer one")  # no backbone edge from top to alpha
    alpha = store.remember(SPACE, "kiwi alpha")
    store.remember(SPACE, "unrelated spacer two")
    store.remember(SPACE, "kiwi beta")
    store.recall(SPACE, "beta")  # one counted access: beta edges ahead of alpha
    assert _contents(store, "kiwi mango papaya")[1:] == ["kiwi beta", "kiwi alpha"]
    store.link(SPACE, alpha.id, top.id, edge_type="semantic", weight=1.0)
    assert _contents(store, "kiwi mango papaya")[1:] == ["kiwi alpha", "kiwi beta"]
    # a one-way supersedes edge (link writes both ways): the old fact scores x0.25
    draft = ImportDraft(
        (DraftInsight("lychee grows in Lisbon"), DraftInsight("lychee grows in Porto now")),
        (DraftEdge(1, 0, "supersedes", 1.0),),
    )
    store.import_draft(SPACE, draft)
    hits = store.recall(SPACE, "where does lychee grow", readonly=True).hits
    by_content = {h.insight.content: h.score for h in hits}
    assert hits[0].insight.content == "lychee grows in Porto now"
    old, new = by_content["lychee grows in Lisbon"], by_content["lychee grows in Porto now"]
    assert old is not None and new is not None and old < 0.3 * new


def test_the_vector_set_follows_remembers_forgets_and_rebuilds(
    tmp_path: Path, clock: FakeClock
) -> None:
    embedder = FakeEmbedder(synonyms={"gf": "girlfriend", "doggo": "dog"})
    store = _store(tmp_path, clock, embedder=embedder)
    first = store.remember(SPACE, "My girlfriend loves hiking")
    assert _contents(store, "gf") == ["My girlfriend loves hiking"]
    store.remember(SPACE, "The dog sleeps all day")
    embedder.calls.clear()
    assert _contents(store, "doggo") == ["The dog sleeps all day"]
    assert embedder.calls == [("The dog sleeps all day",), ("doggo",)]  # only what is new
    store.forget(SPACE, first.id)
    assert _contents(store, "gf") == []  # a forgotten memory leaves the vector set
    store.rebuild_index(SPACE)
    assert _contents(store, "doggo") == ["The dog sleeps all day"]
    other = EmbeddedStore(tmp_path / "root", clock, embedder=embedder)  # another connection
    other.remember(SPACE, "My girlfriend paints on Sundays")
    assert _contents(store, "gf") == ["My girlfriend paints on Sundays"]


def test_vectors_stored_later_reach_the_vector_set(tmp_path: Path, clock: FakeClock) -> None:
    from mnemon_sm.adapters.sqlite.vectors import EMBED_PER_RECALL

    embedder = FakeEmbedder(synonyms={"gf": "girlfriend"})
    store = _store(tmp_path, clock, embedder=embedder)
    store.remember(SPACE, "My girlfriend loves hiking")  # the oldest: embedded last
    for i in range(EMBED_PER_RECALL):
        store.remember(SPACE, f"filler number {i}")
    assert _contents(store, "gf") == []  # this recall embedded the newest ones only
    assert _contents(store, "gf") == ["My girlfriend loves hiking"]


def test_an_edit_in_place_by_another_program_is_embedded_again(
    tmp_path: Path, clock: FakeClock
) -> None:
    embedder = FakeEmbedder(synonyms={"gf": "girlfriend", "doggo": "dog"})
    store = _store(tmp_path, clock, embedder=embedder)
    first = store.remember(SPACE, "My girlfriend loves hiking")
    store.remember(SPACE, "The cat purrs")
    assert _contents(store, "gf") == ["My girlfriend loves hiking"]
    assert len(store._vectors[SPACE]) == 2
    db = sqlite3.connect(tmp_path / "root" / "data" / SPACE / "mnemon.db")
    db.execute(  # Mnemon (or a hand edit) rewrites the insight in place
        "UPDATE insights SET content = 'The dog sleeps all day',"
        " updated_at = '2030-01-01T00:00:00Z' WHERE id = ?",
        (first.id,),
    )
    db.commit()
    db.close()
    assert _contents(store, "gf") == []  # its old vector is gone
    assert _contents(store, "doggo") == ["The dog sleeps all day"]  # and the new one is there
    store.forget(SPACE, first.id)
    _contents(store, "doggo")
    assert len(store._vectors[SPACE]) == 1  # a forgotten memory leaves the vector set


# -- one failing space ----------------------------------------------------------------------


def test_a_failing_space_is_reported_and_the_others_answer(tmp_path: Path) -> None:
    root = MemoryRoot.open(str(tmp_path / "r"), Config(durability="off"))
    root.long_term.remember("The kiwi orchard is watered on Mondays")  # creates "default"
    notes = root.long_term.create_space("Notes", "Project notes", active=True)
    root.long_term.remember("Kiwi harvest notes live in the shared drive", space=notes.id)
    assert notes.id != "default"
    root.close()
    root.long_term.service.store.close()  # close() leaves connections to the collector
    broken = tmp_path / "r" / "data" / notes.id / "mnemon.db"
    broken.write_bytes(b"not a database, a stray text file\n" * 100)
    before = broken.read_bytes()

    root = MemoryRoot.open(str(tmp_path / "r"), Config(durability="off"))
    found = root.long_term.search("kiwi orchard")
    assert [h.insight.content for h in found.hits] == ["The kiwi orchard is watered on Mondays"]
    sources = {s["memoryBodyId"]: s for s in found.to_json()["sources"]}
    assert sources["default"]["status"] == "ready"
    assert sources[notes.id]["status"] == "unavailable"
    assert f"data/{notes.id}/mnemon.db" in sources[notes.id]["reason"]
    recalled = root.long_term.recall("kiwi orchard")  # through the recall worker and flow
    assert recalled.results[0]["content"] == "The kiwi orchard is watered on Mondays"
    with pytest.raises(CorruptStore):  # nothing answered: the failure itself
        root.long_term.search("kiwi", spaces=[notes.id])
    assert broken.read_bytes() == before
    root.close()


@pytest.mark.parametrize(
    ("name", "description"),
    [("Notes \ud800", "Project notes"), ("Notes", "Project \udfff notes")],
)
def test_a_space_with_unencodable_text_is_refused_before_anything_is_written(
    tmp_path: Path, name: str, description: str
) -> None:
    root = MemoryRoot.open(str(tmp_path / "r"), Config(durability="off"))
    root.long_term.remember("The kiwi orchard is watered on Mondays")
    root.close()

    before = root_state(tmp_path / "r")
    root = MemoryRoot.open(str(tmp_path / "r"), Config(durability="off"))
    with pytest.raises(InvalidInput):
        root.long_term.create_space(name, description)
    with pytest.raises(InvalidInput):
        root.long_term.remember("fact \ud800 with a lone surrogate")
    root.close()
    assert root_state(tmp_path / "r") == before
    assert [p.name for p in (tmp_path / "r" / "data").iterdir() if p.is_dir()] == ["default"]


def test_read_only_search_and_recall_change_no_byte(tmp_path: Path) -> None:
    root = MemoryRoot.open(str(tmp_path / "r"), Config(durability="off"))
    root.long_term.remember("The kiwi orchard is watered on Mondays")
    root.close()

    before = root_state(tmp_path / "r")
    reader = MemoryRoot.open(str(tmp_path / "r"), Config(durability="off", write_enabled=False))
    assert reader.long_term.search("kiwi orchard").hits
    assert reader.long_term.recall("kiwi orchard").results
    reader.close()
    assert root_state(tmp_path / "r") == before
