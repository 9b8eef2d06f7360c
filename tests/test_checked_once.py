"""Each archived entry is checked once on its way to the store, and a store called directly
still refuses bad input and writes nothing.

A worker's remember is checked when its tool stages it (:meth:`ScopedTools._remember`); the
service stores the checked insight (:meth:`LongTermService.remember_checked`) and the store
takes it as it is. These tests run the path with the embedded store, whose ``remember`` checks
the text it is given, and count the calls of the check (``checks.prepare``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from mnemon_sm import Config, InvalidInput, MemoryRoot
from mnemon_sm.adapters.sqlite import EmbeddedStore
from mnemon_sm.ports import Ports
from mnemon_sm.ports.long_term import checks
from mnemon_sm.testing.maintenance import seed
from mnemon_sm.testing.memory import memory_ports

CONFIG = Config(durability="off")


def embedded_ports(tmp_path: Path) -> Ports:
    """The recording fakes, with the embedded store for the long-term tier."""
    ports, _ = memory_ports()
    return attrs.evolve(ports, long_term=EmbeddedStore(tmp_path, ports.clock, durability="off"))


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Patch the check with a counter: one item per call, the content it checked."""
    seen: list[str] = []
    original = checks.prepare

    def prepare(content: Any, *args: Any, **kwargs: Any) -> checks.Prepared:
        seen.append(str(content))
        return original(content, *args, **kwargs)

    monkeypatch.setattr(checks, "prepare", prepare)
    return seen


def test_an_overflow_add_checks_each_archived_entry_once(
    tmp_path: Path, counted: list[str]
) -> None:
    ports = embedded_ports(tmp_path)
    facts = [
        ("memory", (f"Fact {i:03d} about the build: " + "detail " * 28).strip(), "low")
        for i in range(49)
    ]
    seed(ports, facts)  # type: ignore[arg-type]
    root = MemoryRoot.open("/unused", CONFIG, ports=ports)
    receipt = root.hot.add("memory", "New durable fact: deploys need two approvals.")
    assert receipt.maintenance is not None
    assert receipt.maintenance.kind == "long-term-archive"
    stored = [i.content for i in ports.long_term.list("default")]
    archived = sorted(content for _, content, _ in facts if content in stored)
    assert archived, "the archive stored nothing"
    assert sorted(counted) == archived, "each archived entry is checked once, nothing else"


def test_a_worker_remember_is_checked_once_and_the_store_stores_that_value(
    tmp_path: Path, counted: list[str]
) -> None:
    root = MemoryRoot.open("/unused", CONFIG, ports=embedded_ports(tmp_path))
    root.long_term.create_space("General memory", "Facts", active=True)
    receipt = root.long_term.remember("  Deploys need two approvals.  ", space="default")
    assert receipt.action == "stored"
    assert counted == ["  Deploys need two approvals.  "]
    (insight,) = root.long_term.service.insights("default", [receipt.writes[0].receipt["id"]])
    assert insight.content == "Deploys need two approvals."  # trimmed by that one check


def test_the_store_called_directly_still_checks_and_writes_nothing_on_bad_input(
    tmp_path: Path, counted: list[str]
) -> None:
    store = EmbeddedStore(tmp_path, memory_ports()[0].clock, durability="off")
    store.create_space("default")
    bad: list[tuple[str, dict[str, Any]]] = [
        ("", {}),
        ("x" * 9000, {}),
        ("fine", {"importance": 9}),
        ("fine", {"category": "gossip"}),
        ("fine", {"tags": ("a,b",)}),
        ("fine", {"source": "nobody"}),
    ]
    for content, fields in bad:
        with pytest.raises(InvalidInput):
            store.remember("default", content, **fields)
    assert len(counted) == len(bad)  # the store checked each
    item = checks.prepare("A checked fact", "general", 3, (), (), "user")
    with pytest.raises(InvalidInput, match="carries its own fields"):
        store.remember("default", item, importance=5)  # type: ignore[arg-type]
    assert store.status("default").total_insights == 0
    assert store.remember("default", item).content == "A checked fact"
    assert store.status("default").total_insights == 1
