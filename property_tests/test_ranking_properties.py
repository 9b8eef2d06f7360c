"""Properties of the relevance ranking rule (``longterm/ranking.py``, ``direct_search``).

The rule, from the module: ``score = relevance x (1 + boost) / (1 + BOOST_MAX)`` with ``boost``
in ``[0, BOOST_MAX]``; relevance 0 is never a candidate. What must follow, checked here:

- pure: a candidate of relevance 0 is never ranked, whatever its recency, importance, accesses
  or links; a candidate at least ``1 + BOOST_MAX`` times more relevant than another always
  ranks before it; every score is in [0, 1] and the order is by score;
- the lexical candidate pool (``lexical.candidate_pool``) is the first ``k`` memories by
  reach (the sum of the best ``weight x idf`` of each term a memory matches; the sum over all
  terms for one holding every term), then by rowid, highest first, with BM25's idf
  ``ln(1 + (N - df + 0.5) / (df + 0.5))``: an oracle written from that rule;
- through a real root (embedded store, direct search flow): memories that share no term with
  the question, made as recent, important, often read and well linked as they can be, are
  never returned (INV-SEA-3) and never push a relevant memory out of the top k: the top k
  equals the top k of a twin root holding the same memories with the irrelevant ones old,
  unimportant, unread and unlinked. (Both roots hold the same texts, so the collection's term
  statistics are equal; what differs is only what the re-ranking signals see.)
"""

from __future__ import annotations

import math
import tempfile
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from mnemon_sm.adapters.sqlite import EmbeddedStore, lexical
from mnemon_sm.adapters.workers.builtin import BuiltinWorkers
from mnemon_sm.config import Config
from mnemon_sm.ports import Ports
from mnemon_sm.ports.long_term import ranking
from mnemon_sm.root import MemoryRoot
from mnemon_sm.testing.memory import FakeClock, MemoryFiles, MemoryLocks

IRRELEVANT_NEVER_RETURNED = "INV-SEA-3"

DAY_MS = 86_400_000
START_MS = 1_786_608_000_000

unit = st.floats(0, 1, allow_nan=False)
features = st.builds(
    ranking.Features,
    lexical=unit,
    dense=st.none() | st.floats(-1, 1, allow_nan=False),
    age_days=st.floats(0, 3650, allow_nan=False),
    importance=st.integers(1, 5),
    access_count=st.integers(0, 1000),
    graph=unit,
    superseded=st.booleans(),
)


@given(st.dictionaries(st.integers(0, 50), features, max_size=30))
def test_the_rule_ranks_by_bounded_score(candidates: dict[int, ranking.Features]) -> None:
    ranked = ranking.rank(candidates)
    keys = [r.key for r in ranked]
    assert set(keys) == {k for k, f in candidates.items() if ranking.relevance(f) > 0}
    assert all(0 <= r.score <= 1 for r in ranked)
    assert [r.score for r in ranked] == sorted((r.score for r in ranked), reverse=True)
    position = {key: i for i, key in enumerate(keys)}
    factor = 1 + ranking.BOOST_MAX
    plain = {k: f for k, f in candidates.items() if k in position and not f.superseded}
    for a, fa in plain.items():
        for b, fb in plain.items():
            if a != b and ranking.relevance(fa) >= factor * ranking.relevance(fb):
                assert position[a] < position[b], (fa, fb)


@st.composite
def pools(draw: st.DrawFn) -> tuple[Any, ...]:
    vocabulary = [f"w{n}" for n in range(8)]
    frequency = {word: draw(st.integers(1, 60)) for word in vocabulary}
    stats = lexical.Stats(draw(st.integers(60, 200)), 10.0, frequency)
    terms = []
    for n in range(draw(st.integers(1, 4))):
        picked = draw(st.lists(st.sampled_from(vocabulary), min_size=1, max_size=3, unique=True))
        weights = [1.0, *(draw(st.sampled_from((0.7, 0.6))) for _ in picked[1:])]
        terms.append(lexical.QueryTerm(f"q{n}", tuple(zip(picked, weights, strict=True))))
    rowids = st.lists(st.integers(1, 40), unique=True, max_size=25)
    matches = [draw(rowids) for _ in terms]
    everything = draw(rowids) if len(terms) > 1 else []
    return terms, matches, everything, stats, draw(st.integers(1, 30))


@given(pools())
def test_the_candidate_pool_is_the_best_reach_then_the_newest(case: tuple[Any, ...]) -> None:
    terms, matches, everything, stats, k = case

    def idf(term: str) -> float:
        df = stats.frequency[term]
        return math.log(1.0 + (stats.docs - df + 0.5) / (df + 0.5))

    best = [max(weight * idf(variant) for variant, weight in term.variants) for term in terms]
    reach: dict[int, float] = {}
    for value, docs in zip(best, matches, strict=True):
        for doc in docs:
            reach[doc] = reach.get(doc, 0.0) + value
    for doc in everything:
        reach[doc] = sum(best)
    expected = sorted(reach, key=lambda doc: (-reach[doc], -doc))[:k]
    assert lexical.candidate_pool(terms, matches, everything, stats, k) == expected


@given(features, features)
def test_signals_cannot_lift_an_irrelevant_candidate(relevant: Any, other: Any) -> None:
    irrelevant = ranking.Features(
        0.0, None, age_days=0.0, importance=5, access_count=10**6, graph=1.0
    )
    ranked = ranking.rank({"irrelevant": irrelevant, "relevant": relevant, "other": other})
    assert "irrelevant" not in [r.key for r in ranked]


# -- through a real root --------------------------------------------------------------------

QUERY_WORDS = ("kiwi", "mango", "papaya", "lychee")
RELEVANT_FILLER = ("river", "stone", "garden", "window", "ticket")
IRRELEVANT_WORDS = ("violet", "amber", "cobalt", "tundra", "zephyr", "quartz", "harbor")

relevant_texts = st.lists(
    st.tuples(
        st.lists(st.sampled_from(QUERY_WORDS), min_size=1, max_size=3),
        st.lists(st.sampled_from(RELEVANT_FILLER), max_size=4),
    ).map(lambda t: " ".join(t[0] + t[1])),
    min_size=1,
    max_size=7,
    unique=True,
)
irrelevant_texts = st.lists(
    st.lists(st.sampled_from(IRRELEVANT_WORDS), min_size=1, max_size=5).map(" ".join),
    min_size=1,
    max_size=6,
    unique=True,
)


def _root(clock: FakeClock, directory: str) -> tuple[MemoryRoot, str]:
    store = EmbeddedStore(directory, clock)
    ports = Ports(
        files=MemoryFiles(),
        locks=MemoryLocks(),
        clock=clock,
        long_term=store,
        workers=BuiltinWorkers(),
    )
    root = MemoryRoot.open("/root", Config(durability="off"), ports=ports)
    space = root.long_term.create_space("facts", "test facts", active=True)
    return root, space.id


def _build(
    relevant: list[str], irrelevant: list[str], linked: set[int], directory: str, *, boosted: bool
) -> MemoryRoot:
    """Relevant memories at the same instants in both roots; the irrelevant ones either long
    before them (plain) or after them, important, read and linked to the relevant ones whose
    positions are in ``linked``."""
    clock = FakeClock(START_MS)
    root, space = _root(clock, directory)
    service = root.long_term.service
    if not boosted:
        for text in irrelevant:
            service.remember(text, space_id=space, importance=1)
    clock.ms = START_MS + 400 * DAY_MS
    ids = []
    for text in relevant:
        ids.append(service.remember(text, space_id=space, importance=3)["id"])
        clock.advance(DAY_MS)
    if boosted:
        clock.ms = START_MS + 800 * DAY_MS
        for text in irrelevant:
            new = service.remember(text, space_id=space, importance=5)["id"]
            for i, target in enumerate(ids):
                if i in linked:
                    service.link(space, new, target, edge_type="semantic", weight=1.0)
            for _ in range(3):
                service.search(text, limit=50)  # counted accesses
    clock.ms = START_MS + 801 * DAY_MS
    return root


def _top(root: MemoryRoot, query: str, k: int) -> list[str]:
    found = root.long_term.search(query, limit=k)
    return [h.insight.content for h in found.hits]


@settings(max_examples=30, deadline=None)
@given(
    relevant_texts,
    irrelevant_texts,
    st.lists(st.sampled_from(QUERY_WORDS), min_size=1, max_size=3, unique=True),
    st.integers(1, 5),
    st.sets(st.integers(0, 6)),
)
def test_irrelevant_memories_never_displace_relevant_ones(
    relevant: list[str], irrelevant: list[str], words: list[str], k: int, linked: set[int]
) -> None:
    query = "what about " + " and ".join(words)
    with tempfile.TemporaryDirectory(prefix="rank-") as directory:
        plain = _build(relevant, irrelevant, linked, f"{directory}/plain", boosted=False)
        boosted = _build(relevant, irrelevant, linked, f"{directory}/boosted", boosted=True)
        _compare(plain, boosted, query, k, irrelevant)


def _compare(
    plain: MemoryRoot, boosted: MemoryRoot, query: str, k: int, irrelevant: list[str]
) -> None:
    try:
        expected = _top(plain, query, k)
        got = _top(boosted, query, k)
        event(f"hits {len(got)}")
        assert not set(got) & set(irrelevant), IRRELEVANT_NEVER_RETURNED
        assert not set(expected) & set(irrelevant), IRRELEVANT_NEVER_RETURNED
        assert got == expected, IRRELEVANT_NEVER_RETURNED
    finally:
        plain.close()
        boosted.close()
