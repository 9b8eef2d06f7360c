"""The ranking rule of relevance recall (pure): relevance first, bounded signals after.

Theory of operation
-------------------
A candidate is a memory the question found: by its words (lexical relevance, 0..1, see
:mod:`.sqlite.lexical`) or, with an embedder, by its meaning (cosine similarity). Its
**relevance** is

- the lexical relevance alone, without an embedder or without a vector for the memory;
- with one, ``1 - (1 - lexical) x (1 - dense)``, where ``dense`` maps the similarity linearly
  from :data:`DENSE_FLOOR` (0) to :data:`DENSE_CEILING` (1) and clips: either signal alone
  counts, both together count more.

**The rule.** ``score = relevance x (1 + boost) / (1 + BOOST_MAX)``, where ``boost`` in
``[0, BOOST_MAX]`` adds bounded re-ranking signals: recency (up to :data:`RECENCY_MAX`, halving
every :data:`RECENCY_HALF_LIFE_DAYS` days of age), importance (up to :data:`IMPORTANCE_MAX`
for importance 5), access (up to :data:`ACCESS_MAX`, saturating at :data:`ACCESS_SATURATION`
accesses) and graph proximity (up to :data:`GRAPH_MAX`: the heaviest edge, other than temporal
proximity, to one of the :data:`GRAPH_TOP` most relevant other candidates). A memory that a
newer one supersedes is multiplied by :data:`SUPERSEDED_FACTOR`. Consequences:

1. a memory of relevance 0 is never a candidate, whatever its signals: no recent, important,
   often read or well-linked memory is returned for a question it has nothing to do with;
2. signals can only reorder memories whose relevance differs by less than the factor
   ``1 + BOOST_MAX``; a memory at least that much more relevant always ranks first;
3. a memory's score depends only on itself, the question, the candidates' relevance and the
   collection's term statistics, so adding memories irrelevant to the question never moves
   it, except through those statistics (more memories make every term rarer).

Order: score, then relevance, importance, id. Scores are in [0, 1] and comparable across spaces.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Generic, TypeVar

import attrs

__all__ = [
    "BOOST_MAX",
    "DENSE_CEILING",
    "DENSE_FLOOR",
    "Features",
    "Ranked",
    "boost",
    "dense_relevance",
    "graph_proximity",
    "rank",
    "relevance",
    "score",
]

RECENCY_MAX, RECENCY_HALF_LIFE_DAYS = 0.06, 30.0
IMPORTANCE_MAX = 0.06
ACCESS_MAX, ACCESS_SATURATION = 0.03, 20
GRAPH_MAX, GRAPH_TOP = 0.05, 5
BOOST_MAX = RECENCY_MAX + IMPORTANCE_MAX + ACCESS_MAX + GRAPH_MAX
SUPERSEDED_FACTOR = 0.25  # Mnemon's penalty for a superseded insight
DENSE_FLOOR, DENSE_CEILING = 0.25, 0.75

K = TypeVar("K", bound=Hashable)


@attrs.frozen
class Features:
    """What the rule knows of one candidate."""

    lexical: float
    dense: float | None = None  # cosine similarity to the question, when vectors exist
    age_days: float = 0.0
    importance: int = 3
    access_count: int = 0
    graph: float = 0.0  # heaviest qualifying edge weight, 0..1
    superseded: bool = False


@attrs.frozen
class Ranked(Generic[K]):
    key: K
    score: float
    relevance: float
    via: str  # lexical | semantic | hybrid


def _unit(value: float) -> float:
    if not math.isfinite(value):
        return 0.0
    return min(1.0, max(0.0, value))


def dense_relevance(similarity: float | None) -> float:
    """Cosine similarity mapped to 0..1 between the floor and the ceiling."""
    if similarity is None:
        return 0.0
    return _unit((similarity - DENSE_FLOOR) / (DENSE_CEILING - DENSE_FLOOR))


def relevance(features: Features) -> float:
    lexical = _unit(features.lexical)
    dense = dense_relevance(features.dense)
    return 1.0 - (1.0 - lexical) * (1.0 - dense)


def boost(features: Features) -> float:
    """The bounded re-ranking signals, 0..BOOST_MAX."""
    age = max(0.0, features.age_days) if math.isfinite(features.age_days) else 0.0
    recency = RECENCY_MAX * 0.5 ** (age / RECENCY_HALF_LIFE_DAYS)
    importance = IMPORTANCE_MAX * (min(5, max(1, features.importance)) - 1) / 4
    accesses = min(max(0, features.access_count), ACCESS_SATURATION)
    access = ACCESS_MAX * math.log1p(accesses) / math.log1p(ACCESS_SATURATION)
    graph = GRAPH_MAX * _unit(features.graph)
    return float(min(BOOST_MAX, recency + importance + access + graph))


def score(features: Features) -> float:
    value = relevance(features) * (1.0 + boost(features)) / (1.0 + BOOST_MAX)
    if features.superseded:
        value *= SUPERSEDED_FACTOR
    return _unit(value)


def _via(features: Features) -> str:
    lexical = _unit(features.lexical) > 0
    dense = dense_relevance(features.dense) > 0
    if lexical and dense:
        return "hybrid"
    return "lexical" if lexical else "semantic"


def rank(candidates: Mapping[K, Features]) -> list[Ranked[K]]:
    """The candidates of relevance above 0, best first (score, relevance, importance, key)."""
    scored = []
    for key, features in candidates.items():
        rel = relevance(features)
        if rel > 0:
            scored.append((score(features), rel, features.importance, str(key), key, features))
    scored.sort(key=lambda item: (-item[0], -item[1], -item[2], item[3]))
    return [Ranked(key, value, rel, _via(f)) for value, rel, _, _, key, f in scored]


def graph_proximity(
    by_relevance: Sequence[str], edges: Iterable[tuple[str, str, float]]
) -> dict[str, float]:
    """For each candidate, the heaviest edge joining it to one of the :data:`GRAPH_TOP` most
    relevant other candidates (``by_relevance`` is best first; ``edges`` exclude temporal
    proximity and may repeat in either direction)."""
    top = by_relevance[:GRAPH_TOP]
    wanted = set(by_relevance)
    best: dict[str, float] = {}
    for a, b, weight in edges:
        w = _unit(weight)
        for node, other in ((a, b), (b, a)):
            if node in wanted and other in top and other != node:
                best[node] = max(best.get(node, 0.0), w)
    return best
