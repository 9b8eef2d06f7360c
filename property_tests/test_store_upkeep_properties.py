"""Properties of a bulk import (``store_upkeep``), against an oracle written from its rules.

The rules (README, ``LongTermMemory.remember_many``): every item is checked before anything is
written, so one malformed item anywhere means nothing is written (INV-UPK-1); byte-identical
content is stored once, the later copies reported as skipped (INV-UPK-1); the items are
written ``batch`` per transaction in order, so a batch that fails ends the import with exactly
the batches before it stored (INV-UPK-2), and the flow is at rest and usable after either.

Defect kinds are enumerated (one test per kind); Hypothesis chooses the contents, the batch
size and where the defect or the failing batch falls.
"""

from __future__ import annotations

import itertools

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemon_sm import Config, InvalidInput, MemoryRoot, StorageError
from mnemon_sm.ports import Ports
from mnemon_sm.testing.faults import RaisingPort
from mnemon_sm.testing.maintenance import insight_contents, world
from mnemon_sm.testing.memory import memory_ports

WORDS = st.sampled_from(["kiwi", "mango", "orchard", "dawn", "pruned", "May", "grove", "tea"])
CONTENTS = st.lists(WORDS, min_size=1, max_size=4).map(" ".join)
ITEMS = st.lists(CONTENTS, min_size=1, max_size=12)
BATCH = st.integers(min_value=1, max_value=5)

#: Every kind of malformed item the import refuses, each as the item itself.
DEFECTS: dict[str, object] = {
    "not a string or mapping": 42,
    "a list": ["kiwi"],
    "no content": {"category": "fact"},
    "empty content": {"content": ""},
    "unknown field": {"content": "kiwi", "colour": "red"},
    "importance too high": {"content": "kiwi", "importance": 6},
    "importance not an integer": {"content": "kiwi", "importance": "high"},
    "unknown category": {"content": "kiwi", "category": "gossip"},
    "bad createdAt": {"content": "kiwi", "createdAt": "yesterday"},
    "tags not a list": {"content": "kiwi", "tags": "fruit"},
}


def _root(ports: Ports) -> MemoryRoot:
    root = MemoryRoot.open("/unused", Config(), ports=ports)
    root.long_term.create_space("General", "Everything", active=True)
    return root


def _distinct(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


@pytest.mark.parametrize("defect", list(DEFECTS), ids=list(DEFECTS))
@given(items=ITEMS, at=st.integers(min_value=0, max_value=12), batch=BATCH)
def test_one_malformed_item_anywhere_means_nothing_is_written(
    defect: str, items: list[str], at: int, batch: int
) -> None:
    ports, _ = memory_ports()
    lt = _root(ports).long_term
    before = world(ports)
    bad: list[object] = list(items)
    bad.insert(min(at, len(bad)), DEFECTS[defect])
    with pytest.raises(InvalidInput):
        lt.remember_many(bad, batch=batch)
    assert world(ports) == before, "INV-UPK-1"
    assert lt._upkeep.state == "idle"
    lt.remember_many(items, batch=batch)  # usable
    assert sorted(insight_contents(ports)["default"]) == sorted(_distinct(items))


@given(items=ITEMS, batch=BATCH)
def test_an_import_stores_each_distinct_content_once_in_order(
    items: list[str], batch: int
) -> None:
    ports, _ = memory_ports()
    lt = _root(ports).long_term
    report = lt.remember_many(items, batch=batch).to_json()
    distinct = _distinct(items)
    assert insight_contents(ports)["default"] == distinct, "INV-UPK-1"
    assert (report["imported"], report["skipped"]) == (len(distinct), len(items) - len(distinct))
    assert len(report["ids"]) == len(items)
    by_content = dict(zip(items, report["ids"], strict=True))  # a skipped copy maps to the first
    assert [by_content[c] for c in items] == report["ids"]


@given(items=ITEMS, batch=BATCH, data=st.data())
def test_a_failing_batch_keeps_exactly_the_batches_before_it(
    items: list[str], batch: int, data: st.DataObject
) -> None:
    batches = [items[i : i + batch] for i in range(0, len(items), batch)]
    failing = data.draw(st.integers(min_value=0, max_value=len(batches) - 1), label="failing")
    inner, _ = memory_ports()
    _root(inner)
    count = itertools.count()
    store = RaisingPort(
        inner.long_term,
        "import_draft",
        StorageError("disk full"),
        when=lambda: next(count) == failing,
    )
    store.armed = True
    lt = MemoryRoot.open("/unused", Config(), ports=attrs.evolve(inner, long_term=store)).long_term
    with pytest.raises(StorageError, match="disk full"):
        lt.remember_many(items, batch=batch)
    kept = [c for b in batches[:failing] for c in b]
    assert insight_contents(inner)["default"] == _distinct(kept), "INV-UPK-2"
    assert lt._upkeep.state == "idle", "INV-UPK-2"
    lt.remember_many(items, batch=batch)  # usable, and the rest goes in
    assert insight_contents(inner)["default"] == _distinct(items)
