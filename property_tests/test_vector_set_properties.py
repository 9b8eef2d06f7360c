"""The dense retriever's nearest-neighbour rule (``longterm/sqlite/vectors.py``,
``VectorSet.similar``): the ``k`` rowids whose vectors are most similar to the query among the
allowed ones, plus every allowed rowid of ``also``, each with its cosine similarity; a dropped
vector is never returned, whatever slot reuse followed. The oracle scores every live vector by
brute force."""

from __future__ import annotations

import numpy
from hypothesis import given
from hypothesis import strategies as st

from mnemon_sm.adapters.sqlite.vectors import VectorSet

DIMENSIONS = 8


@given(
    seed=st.integers(0, 2**32 - 1),
    size=st.integers(1, 60),
    dropped=st.sets(st.integers(1, 60), max_size=20),
    readded=st.sets(st.integers(1, 60), max_size=5),
    k=st.integers(1, 20),
    also=st.lists(st.integers(1, 70), max_size=10),
    allowed=st.none() | st.sets(st.integers(1, 70), max_size=40),
)
def test_similar_is_the_brute_force_nearest(
    seed: int,
    size: int,
    dropped: set[int],
    readded: set[int],
    k: int,
    also: list[int],
    allowed: set[int] | None,
) -> None:
    rng = numpy.random.default_rng(seed)
    vectors = rng.standard_normal((80, DIMENSIONS)).astype(numpy.float32)
    vectors /= numpy.linalg.norm(vectors, axis=1, keepdims=True)
    live: dict[int, numpy.ndarray] = {}
    found = VectorSet("model", DIMENSIONS)
    for doc in range(1, size + 1):
        found._put(doc, doc, vectors[doc])  # the refresh's primitives, driven directly
        live[doc] = vectors[doc]
    for doc in sorted(dropped & set(live)):
        found._drop(doc)
        del live[doc]
    for doc in sorted(readded - set(live)):  # reuses the freed slots
        found._put(doc, doc + 1000, vectors[doc + 10])
        live[doc] = vectors[doc + 10]
    query = vectors[0]

    result = found.similar(query, k, also, allowed)

    eligible = {
        doc: float(v @ query) for doc, v in live.items() if allowed is None or doc in allowed
    }
    nearest = sorted(eligible, key=lambda doc: -eligible[doc])[:k]
    expected = set(nearest) | {doc for doc in also if doc in eligible}
    assert set(result) == expected
    for doc, value in result.items():
        assert abs(value - eligible[doc]) < 1e-5


def test_a_dropped_vector_never_outranks_a_live_one() -> None:
    """A freed slot holds zeros (similarity 0); a live vector pointing away from the query
    (similarity -1) must still be found when k asks for it."""
    found = VectorSet("model", 2)
    for doc, vector in [(1, (1.0, 0.0)), (2, (-1.0, 0.0)), (3, (0.0, 1.0))]:
        found._put(doc, doc, numpy.array(vector, dtype=numpy.float32))
    found._drop(3)
    query = numpy.array((1.0, 0.0), dtype=numpy.float32)
    assert found.similar(query, 2, [], None) == {1: 1.0, 2: -1.0}
    assert found.similar(query, 2, [3], {1, 2, 3}) == {1: 1.0, 2: -1.0}
