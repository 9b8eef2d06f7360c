"""Pure tests of the embedded store's recall algorithms and text analysis (no SQLite).

Expected numbers are worked out by hand from Mnemon's rules (intent weight table, RRF with
k = 60, re-rank .45 / .25 / .30, supersedes x0.25), never read back from the module's constants.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemon_sm.adapters.sqlite import recall
from mnemon_sm.adapters.sqlite.recall import Doc, Neighbor, Reach
from mnemon_sm.adapters.sqlite.scan import ScanSource
from mnemon_sm.adapters.sqlite.tokens import (
    STOP_WORDS,
    EntityMatcher,
    causal_cue,
    detect_intent,
    query_entities,
    token_set,
    tokenize,
)
from mnemon_sm.ports.long_term.values import Insight

# -- tokens ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("Hello, World! foo_bar 42x", ["hello", "world", "foo", "bar", "42x"]),
        ("The cat is on the mat", ["cat", "mat"]),
        ("ÜBER Straße", ["über", "straße"]),
        ("don't stop", ["don", "stop"]),
        ("数据库", ["数据", "据库"]),
        ("好", ["好"]),
        ("用Redis缓存", ["用", "redis", "缓存"]),
        ("数据库 迁移", ["数据", "据库", "迁移"]),
        ("", []),
        ("... --- !!!", []),
    ],
)
def test_tokenize_lowercases_splits_drops_stop_words_and_bigrams_han(
    text: str, tokens: list[str]
) -> None:
    assert tokenize(text) == tokens


def test_stop_word_list_is_about_eighty_english_function_words() -> None:
    assert 70 <= len(STOP_WORDS) <= 100
    assert {"the", "and", "is", "why", "what"} <= STOP_WORDS
    assert "redis" not in STOP_WORDS


@given(st.text(max_size=60))
def test_tokens_are_lowercase_alphanumeric_and_never_stop_words(text: str) -> None:
    for token in tokenize(text):
        assert token not in STOP_WORDS
        assert token == token.lower()
        assert all(ch.isalnum() for ch in token)


def test_token_set_unions_every_text() -> None:
    assert token_set("Redis cache", "ops", "Redis") == {"redis", "cache", "ops"}


@pytest.mark.parametrize(
    ("query", "intent"),
    [
        ("why did we pick Redis", "WHY"),
        ("what was the reason for the rollback", "WHY"),
        ("the rationale behind sharding", "WHY"),
        ("为什么选择这个数据库", "WHY"),
        ("when did we deploy", "WHEN"),
        ("deploys before the freeze", "WHEN"),
        ("timeline of the migration", "WHEN"),
        ("上线是什么时候", "WHEN"),
        ("what is Kafka", "ENTITY"),
        ("who is the owner of billing", "ENTITY"),
        ("tell me about the cache", "ENTITY"),
        ("Redis是什么", "ENTITY"),
        ("why was it slow after the deploy", "WHY"),  # WHY wins over WHEN
        ("reasonable caching defaults", "GENERAL"),  # whole words only
        ("cache eviction policy", "GENERAL"),
        ("", "GENERAL"),
    ],
)
def test_intent_from_cue_words(query: str, intent: str) -> None:
    assert detect_intent(query) == intent


@pytest.mark.parametrize(
    ("text", "relation"),
    [
        ("We switched because the disk filled", "causes"),
        ("Sharding led to simpler backups", "causes"),
        ("Added a cache so that pages load fast", "enables"),
        ("Rate limits prevent abuse", "prevents"),
        ("因为磁盘满了", "causes"),
        ("The cache is warm", None),
    ],
)
def test_causal_cues(text: str, relation: str | None) -> None:
    assert causal_cue(text) == relation


def test_entity_matcher_matches_whole_words_case_insensitively() -> None:
    matcher = EntityMatcher(["node.js", "c++", "go", "new york", "北京"])
    assert matcher.match("Is Node.js faster than C++ here?") == {"node.js", "c++"}
    assert matcher.match("a good idea") == frozenset()  # "go" is not inside "good"
    assert matcher.match("flights to NEW YORK") == {"new york"}
    assert matcher.match("北京天气") == {"北京"}
    matcher.discard("go")
    matcher.add("kafka")
    assert matcher.match("go kafka") == {"kafka"}


def test_query_entities_add_capitalised_words_not_already_matched() -> None:
    matcher = EntityMatcher(["node.js"])
    assert query_entities("Why is Node.js slower than Deno", matcher) == {"node.js", "deno"}


# -- ranking pieces -------------------------------------------------------------------------


def test_rrf_fuses_ranks_and_normalises_by_the_best() -> None:
    fused = recall.fuse_anchors(["a", "b"], ["b", "c"])
    assert list(fused) == ["b", "a", "c"]
    best = 1 / 62 + 1 / 61
    assert fused["b"] == Reach(1.0, "hybrid")
    assert fused["a"].score == pytest.approx((1 / 61) / best)
    assert fused["a"].via == "keyword"
    assert fused["c"].score == pytest.approx((1 / 62) / best)
    assert fused["c"].via == "recency"
    assert recall.fuse_anchors([], []) == {}


def _graph(edges: list[tuple[str, str, str, float]]) -> ScanSource:
    nodes = sorted({e[0] for e in edges} | {e[1] for e in edges})
    rows = [Insight(id=n, content=n, created_at="2026-01-01T00:00:00Z") for n in nodes]
    return ScanSource(rows, edges)


# (causal, temporal, entity, semantic) per intent, from Mnemon's table
WEIGHTS = {
    "WHY": (0.70, 0.20, 0.05, 0.05),
    "WHEN": (0.15, 0.65, 0.10, 0.10),
    "ENTITY": (0.10, 0.05, 0.55, 0.30),
    "GENERAL": (0.25, 0.25, 0.25, 0.25),
}


@pytest.mark.parametrize("intent", sorted(WEIGHTS))
def test_beam_hop_adds_intent_weight_times_edge_weight(intent: str) -> None:
    causal, temporal, entity, semantic = WEIGHTS[intent]
    source = _graph(
        [
            ("x", "c", "causal", 1.0),
            ("x", "t", "temporal", 1.0),
            ("e", "x", "entity", 0.5),  # edges are followed in both directions
            ("x", "s", "semantic", 1.0),
            ("c", "d", "temporal", 0.5),
        ]
    )
    reach = recall.beam_search({"x": Reach(1.0, "keyword")}, intent, source.neighbors)
    assert reach["x"] == Reach(1.0, "keyword")
    assert reach["c"] == Reach(pytest.approx(1 + causal), "causal")
    assert reach["t"] == Reach(pytest.approx(1 + temporal), "temporal")
    assert reach["e"] == Reach(pytest.approx(1 + entity * 0.5), "entity")
    assert reach["s"] == Reach(pytest.approx(1 + semantic), "semantic")
    assert reach["d"] == Reach(pytest.approx(1 + causal + temporal * 0.5), "temporal")


@pytest.mark.parametrize(("intent", "width"), [("GENERAL", 10), ("WHY", 12)])
def test_beam_keeps_width_best_nodes_per_step(intent: str, width: int) -> None:
    edges = [("x", f"n{i:02d}", "semantic", (i + 1) / 20) for i in range(12)]
    reach = recall.beam_search({"x": Reach(1.0, "keyword")}, intent, _graph(edges).neighbors)
    kept = sorted(node for node in reach if node != "x")
    assert kept == [f"n{i:02d}" for i in range(12 - width, 12)]


@pytest.mark.parametrize(("intent", "depth"), [("GENERAL", 4), ("WHEN", 5), ("ENTITY", 4)])
def test_beam_stops_at_max_depth(intent: str, depth: int) -> None:
    chain = [(f"c{i}", f"c{i + 1}", "temporal", 1.0) for i in range(8)]
    reach = recall.beam_search({"c0": Reach(1.0, "recency")}, intent, _graph(chain).neighbors)
    assert sorted(reach) == [f"c{i}" for i in range(depth + 1)]


@pytest.mark.parametrize(("fan_out", "reached"), [(400, True), (500, False)])
def test_visit_budget_stops_the_whole_search(fan_out: int, reached: bool) -> None:
    """GENERAL spends one of its 500 visits per neighbour looked at; a first anchor with 500
    neighbours leaves nothing for the second one."""
    edges = [("a1", f"leaf{i:03d}", "semantic", 0.5) for i in range(fan_out)]
    edges.append(("a2", "z", "semantic", 1.0))
    anchors = {"a1": Reach(1.0, "keyword"), "a2": Reach(0.5, "recency")}
    reach = recall.beam_search(anchors, "GENERAL", _graph(edges).neighbors)
    assert ("z" in reach) is reached


def test_a_hub_is_read_only_as_far_as_the_budget_goes() -> None:
    asked: list[int] = []
    hub = [Neighbor(f"n{i:04d}", "entity", i / 1000) for i in range(1000)]

    def neighbors(node: str, limit: int) -> list[Neighbor]:
        asked.append(limit)
        return recall.first_neighbors(hub if node == "h" else [], limit)

    reach = recall.beam_search({"h": Reach(1.0, "keyword")}, "GENERAL", neighbors)
    assert asked == [500]
    assert sorted(reach) == ["h"] + [f"n{i:04d}" for i in range(990, 1000)]


def test_first_neighbors_dedupes_and_orders_heaviest_first() -> None:
    found = [
        Neighbor("b", "temporal", 0.2),
        Neighbor("a", "entity", 1.0),
        Neighbor("b", "temporal", 0.7),
        Neighbor("c", "causal", 0.7),
    ]
    assert recall.first_neighbors(found, 2) == [
        Neighbor("a", "entity", 1.0),
        Neighbor("b", "temporal", 0.7),
    ]


def _doc(node: str, tokens: set[str], entities: tuple[str, ...] = (), imp: int = 3) -> Doc:
    return Doc(
        Insight(id=node, content=node, importance=imp, entities=entities), frozenset(tokens)
    )


def test_rerank_formula_on_a_hand_computed_example() -> None:
    docs = {
        "a": _doc("a", {"redis", "cache", "config"}, ("Redis",)),
        "b": _doc("b", {"latency", "budget"}),
        "c": _doc("c", {"unrelated"}),
    }
    reach = {"a": Reach(1.0, "keyword"), "b": Reach(1.5, "entity"), "c": Reach(0.5, "recency")}
    q_tokens = frozenset({"redis", "cache", "latency"})
    ranked = recall.rerank(docs, reach, q_tokens, frozenset({"redis"}), superseded=())
    # a: .45 * 2/3 + .25 * 1 + .30 * 0.5 ; b: .45 * 1/3 + .30 * 1 ; c: 0
    assert [(doc.insight.id, via) for _, doc, via in ranked] == [
        ("a", "keyword"),
        ("b", "entity"),
        ("c", "recency"),
    ]
    assert [score for score, _, _ in ranked] == pytest.approx([0.7, 0.45, 0.0])
    penalised = recall.rerank(docs, reach, q_tokens, frozenset({"redis"}), superseded={"a"})
    assert [score for score, _, _ in penalised] == pytest.approx([0.45, 0.175, 0.0])


def test_rerank_ties_go_to_importance_and_equal_graph_scores_count_fully() -> None:
    docs = {"a": _doc("a", set(), imp=2), "b": _doc("b", set(), imp=5)}
    reach = {"a": Reach(0.4, "recency"), "b": Reach(0.4, "recency")}
    ranked = recall.rerank(docs, reach, frozenset(), frozenset(), superseded=())
    assert [(doc.insight.id, score) for score, doc, _ in ranked] == [("b", 0.3), ("a", 0.3)]


@given(
    st.dictionaries(
        st.sampled_from("abcdefgh"),
        st.tuples(st.floats(0, 5), st.sets(st.sampled_from("pqrstu")), st.booleans()),
        min_size=1,
    ),
    st.sets(st.sampled_from("pqrstu")),
)
def test_rerank_scores_stay_within_zero_and_one(
    spec: dict[str, tuple[float, set[str], bool]], q_tokens: set[str]
) -> None:
    docs = {node: _doc(node, tokens, ("P",)) for node, (_, tokens, _) in spec.items()}
    reach = {node: Reach(score, "recency") for node, (score, _, _) in spec.items()}
    superseded = {node for node, (_, _, flag) in spec.items() if flag}
    ranked = recall.rerank(docs, reach, frozenset(q_tokens), frozenset({"p"}), superseded)
    assert len(ranked) == len(spec)
    assert all(0.0 <= score <= 1.0 for score, _, _ in ranked)


def test_why_order_puts_causes_before_effects() -> None:
    assert recall.why_order(["e", "c", "x"], [("c", "e")]) == ["c", "e", "x"]
    assert recall.why_order(["x", "e", "c"], [("c", "e")]) == ["x", "c", "e"]
    assert recall.why_order(["c", "b", "a"], [("a", "b"), ("b", "c")]) == ["a", "b", "c"]
    assert recall.why_order(["b", "a"], [("a", "b"), ("b", "a")]) == ["b", "a"]  # cycle
    assert recall.why_order(["a", "b"], [("a", "zzz")]) == ["a", "b"]


@given(st.permutations(range(8)), st.sets(st.tuples(st.integers(0, 7), st.integers(0, 7))))
def test_why_order_is_a_permutation_respecting_acyclic_pairs(
    ranks: list[int], raw: set[tuple[int, int]]
) -> None:
    ids = [f"n{i}" for i in ranks]
    pairs = [(f"n{a}", f"n{b}") for a, b in raw if a < b]  # acyclic: causes have lower numbers
    out = recall.why_order(ids, pairs)
    assert sorted(out) == sorted(ids)
    position = {node: i for i, node in enumerate(out)}
    assert all(position[cause] < position[effect] for cause, effect in pairs)


@pytest.mark.parametrize(
    ("score", "label"),
    [
        (0.0, "low"),
        (0.249, "low"),
        (0.25, "medium"),
        (0.599, "medium"),
        (0.6, "high"),
        (1, "high"),
    ],
)
def test_confidence_tiers(score: float, label: str) -> None:
    assert recall.confidence(score) == label


def test_ts_key_reads_rfc3339_and_defaults_to_zero() -> None:
    assert recall.ts_key("1970-01-01T00:01:00Z") == 60
    assert recall.ts_key("1970-01-01T02:00:00+02:00") == 0
    assert recall.ts_key("1970-01-01T00:00:30") == 30
    assert recall.ts_key("not a time") == 0


# -- whole recalls over the reference source -------------------------------------------------


def _row(node: str, content: str, minute: int, **fields: object) -> Insight:
    return Insight(
        id=node, content=content, created_at=f"2026-01-01T00:{minute:02d}:00Z", **fields
    )  # type: ignore[arg-type]


ROWS = [
    _row("disk", "disk full on the build host", 0, category="fact"),
    _row("deploy", "deploy failed, rollback of the release", 1, importance=4),
    _row("cache", "Redis cache latency budget", 2, entities=("Redis",), category="decision"),
    _row("redis", "Redis config reviewed", 3, entities=("Redis",), importance=2),
    _row("lunch", "lunch order for friday", 4),
]
EDGES = [
    ("disk", "deploy", "causal", 0.9),
    ("cache", "redis", "entity", 1.0),
    ("redis", "cache", "entity", 1.0),
]


def test_smart_recall_scores_confidence_and_hint() -> None:
    result = recall.smart_recall(ScanSource(ROWS, EDGES), "Redis latency", limit=3)
    assert len(result.hits) == 3
    assert result.hits[0].insight.id == "cache"
    for hit in result.hits:
        assert hit.score is not None and 0.0 <= hit.score <= 1.0
        assert hit.score == round(hit.score, 3)
        assert hit.confidence == recall.confidence(hit.score)
        assert hit.intent == "GENERAL"
    assert result.hint is None
    sparse = recall.smart_recall(ScanSource(ROWS[:1], []), "disk", limit=10)
    assert len(sparse.hits) == 1 and sparse.hint == "sparse_results"
    empty = recall.smart_recall(ScanSource([], []), "anything", limit=1)
    assert empty.hits == () and empty.hint == "sparse_results"


def test_why_recall_lists_the_cause_before_the_better_scoring_effect() -> None:
    source = ScanSource(ROWS, EDGES)
    plain = recall.smart_recall(source, "deploy failed rollback", limit=5, intent="GENERAL")
    ids = [hit.insight.id for hit in plain.hits]
    assert ids.index("deploy") < ids.index("disk")
    why = recall.smart_recall(source, "why did the deploy fail", limit=5)
    ids = [hit.insight.id for hit in why.hits]
    assert why.hits[0].intent == "WHY"
    assert ids.index("disk") < ids.index("deploy")


def test_filters_apply_before_anchoring() -> None:
    source = ScanSource(ROWS, EDGES, category="decision")
    result = recall.smart_recall(source, "Redis config", limit=10)
    assert [hit.insight.id for hit in result.hits] == ["cache"]


def test_keyword_recall_is_the_overlap_ratio_with_importance_ties() -> None:
    result = recall.keyword_recall(ScanSource(ROWS, EDGES), "redis latency", limit=10)
    assert [(hit.insight.id, hit.score) for hit in result.hits] == [("cache", 1.0), ("redis", 0.5)]
    rows = [
        _row("low", "alpha beta", 0, importance=2),
        _row("high", "alpha gamma", 1, importance=4),
    ]
    tied = recall.keyword_recall(ScanSource(rows, []), "alpha", limit=10)
    assert [hit.insight.id for hit in tied.hits] == ["high", "low"]
    assert recall.keyword_recall(ScanSource(rows, []), "the of", limit=5).hits == ()


def test_basic_recall_is_a_case_insensitive_substring_in_importance_then_time_order() -> None:
    rows = [
        _row("old", "Deploy notes", 0),
        _row("new", "deploy checklist", 5),
        _row("vip", "DEPLOY freeze", 1, importance=5),
        _row("twin", "deploy checklist again", 5),
        _row("other", "lunch", 9),
    ]
    found = recall.basic_recall(rows, "dEpLoY", limit=10)
    assert [row.id for row in found] == ["vip", "twin", "new", "old"]
    assert [row.id for row in recall.basic_recall(rows, "", limit=2)] == ["vip", "other"]
