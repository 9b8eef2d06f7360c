"""Merging Memory Spaces on the embedded store never changes a source (INV-MRG-1).

Generated spaces (insights, explicit links, some forgotten) are merged into a target through
the facade's merge flow. Every data file of every source store (``mnemon.db``, its WAL, the
side index) is byte-identical afterwards; the target holds every active source insight
exactly once (exact duplicates of the target's own are mapped, not copied); explicit links
keep their weights; the sources are deactivated unless asked not to.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from mnemon_sm import Config, MemoryRoot

INVARIANT = "INV-MRG-1"

WORDS = ["deploy", "script", "release", "tuesday", "staging", "vpn", "billing", "cache", "redis"]
facts = st.lists(st.sampled_from(WORDS), min_size=2, max_size=5).map(" ".join)
space_plans = st.lists(
    st.tuples(
        st.lists(facts, min_size=1, max_size=6, unique=True),  # contents
        st.lists(
            st.tuples(st.integers(0, 5), st.integers(0, 5), st.floats(0.05, 1.0)), max_size=4
        ),
        st.lists(st.integers(0, 5), max_size=2),  # which to forget
    ),
    min_size=1,
    max_size=3,
)


def digest(directory: Path) -> dict[str, str]:
    """Hashes of a store's files. SQLite's ``-shm`` wal-index is left out: every reader
    writes to it, and it holds no data (it is rebuilt from the WAL when needed)."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.iterdir())
        if p.is_file() and not p.name.endswith("-shm")
    }


@settings(max_examples=max(5, settings.default.max_examples // 4))
@given(
    plans=space_plans,
    target_facts=st.lists(facts, max_size=3, unique=True),
    keep_active=st.booleans(),
)
def test_merge_leaves_every_source_byte_identical(plans, target_facts, keep_active) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = MemoryRoot.open(Path(tmp), Config(durability="off"))
        lt, store = root.long_term, root.long_term.service.store
        target = lt.create_space("Target", "Where everything is merged", active=True)
        for text in target_facts:
            store.remember(target.id, text)
        sources, expected_contents, expected_links = [], set(target_facts), set()
        for i, (contents, links, forgets) in enumerate(plans):
            space = lt.create_space(f"Source {i}", f"Generated source {i}", active=True)
            ids = [store.remember(space.id, text).id for text in contents]
            weights: dict[frozenset[int], float] = {}  # a link replaces the previous one
            for a, b, weight in links:
                if a < len(ids) and b < len(ids) and a != b:
                    store.link(space.id, ids[a], ids[b], edge_type="causal", weight=weight)
                    weights[frozenset((a, b))] = weight
            gone = {ids[f] for f in forgets if f < len(ids)}
            for insight in gone:
                store.forget(space.id, insight)
            kept = {ids[k]: contents[k] for k in range(len(ids)) if ids[k] not in gone}
            expected_contents |= set(kept.values())
            for pair, weight in weights.items():
                a, b = sorted(pair)
                if {ids[a], ids[b]} <= set(kept):
                    expected_links.add((contents[a], contents[b], round(weight, 6)))
                    expected_links.add((contents[b], contents[a], round(weight, 6)))
            sources.append(space.id)
        data = Path(tmp) / "data"
        before = {s: digest(data / s) for s in sources}

        report = lt.merge(target.id, sources, deactivate_sources=not keep_active)

        assert {s: digest(data / s) for s in sources} == before, INVARIANT
        merged = store.list(target.id)
        contents = [i.content for i in merged]
        assert sorted(contents) == sorted(set(contents)), "an insight appears once"
        assert set(contents) == expected_contents
        by_id = {i.id: i.content for i in merged}
        links = {
            (by_id[e.source_id], by_id[e.target_id], round(e.weight, 6))
            for e in store.graph(target.id).edges
            if e.edge_type == "causal"
        }
        assert expected_links <= links, "explicit links keep their weights"
        assert report.memory_body_id == target.id
        active = {s.id: s.active for s in lt.spaces()}
        assert all(active[s] == keep_active for s in sources)
        assert active[target.id]
