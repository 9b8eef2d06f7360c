"""Stories of ``store_upkeep`` on the recording fakes: a bulk import a batch per step, the
vector backfill and the side-index rebuild a space per step, every outcome edge, the port
calls of each state against its spec, and other operations going between two steps."""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable

import attrs
import pytest

from mnemon_sm import (
    Config,
    EmbeddingFailed,
    InvalidInput,
    MemoryRoot,
    ReadOnly,
    StorageError,
    UnknownSpace,
)
from mnemon_sm.flows.long_term.upkeep import ImportRun
from mnemon_sm.ports import Ports
from mnemon_sm.testing.embed import FakeEmbedder, FaultyEmbedder
from mnemon_sm.testing.faults import RaisingPort
from mnemon_sm.testing.longterm import MemoryUpkeepStore
from mnemon_sm.testing.maintenance import held_run_data, world
from mnemon_sm.testing.memory import memory_ports

from ._flow_probe import assert_pure, calls_by_state, flow_probe, port_gaps

FLOW = "store_upkeep"
ITEMS = [f"Imported fact number {i} about the kiwi orchard" for i in range(7)]


def opened(ports: Ports, config: Config | None = None) -> MemoryRoot:
    return MemoryRoot.open("/unused", config or Config(), ports=ports)


def one_space(ports: Ports) -> MemoryRoot:
    """A root with one active space, ``default``, and nothing in it."""
    root = opened(ports)
    assert root.long_term.create_space("General", "Everything", active=True).id == "default"
    return root


def with_spaces(ports: Ports) -> MemoryRoot:
    """A root with the spaces ``default`` (two facts) and ``notes`` (one)."""
    root = opened(ports)
    lt = root.long_term
    lt.remember("The deploy script lives in tools/deploy.sh", space="default")
    lt.remember("Releases are cut every second Tuesday", space="default")
    notes = lt.create_space("Notes", "Loose notes", active=True)
    lt.remember("The wiki moved in 2024", space=notes.id)
    return root


def contents(ports: Ports, space: str) -> list[str]:
    assert ports.long_term is not None
    return sorted(i.content for i in ports.long_term.list(space))


# -- bulk import -------------------------------------------------------------------------


def test_an_import_writes_a_batch_per_step_and_reports_progress() -> None:
    ports, log = memory_ports(upkeep=True)
    lt = one_space(ports).long_term
    seen: list[tuple[int, int]] = []
    items: list[object] = [*ITEMS, ITEMS[0], {"content": "A mapping item", "importance": 5}]
    log.clear()
    report = lt.remember_many(
        items, space=None, batch=3, progress=lambda d, t: seen.append((d, t))
    ).to_json()
    assert seen == [(3, 9), (6, 9), (9, 9)]  # one step per batch, the duplicate included
    assert log.names().count("long_term.import_draft") == 3
    assert (report["imported"], report["skipped"], len(report["ids"])) == (8, 1, 9)
    assert report["memoryBodyId"] == "default"
    assert contents(ports, "default") == sorted([*ITEMS, "A mapping item"])
    assert lt._upkeep.state == "idle"


def test_an_import_checks_every_item_before_writing_anything() -> None:
    ports, _ = memory_ports(upkeep=True)
    lt = with_spaces(ports).long_term
    before = world(ports)
    bad_items: list[list[object]] = [
        [*ITEMS, {"content": "x", "colour": "red"}],  # an unknown field, last
        [{"content": ""}, *ITEMS],  # empty content, first
        [*ITEMS, {"content": "x", "importance": 9}],
        [*ITEMS, 42],
        [*ITEMS, {"content": "x", "tags": "fruit"}],  # was stored as the tags f, r, u, i, t
    ]
    for items in bad_items:
        with pytest.raises(InvalidInput):
            lt.remember_many(items, space="default", batch=2)
        assert world(ports) == before, items
    with pytest.raises(UnknownSpace):
        lt.remember_many(ITEMS, space="missing")
    for batch in (0, 10_001, True, "3"):
        with pytest.raises(InvalidInput, match="batch"):
            lt.remember_many(ITEMS, batch=batch)  # type: ignore[arg-type]
    assert world(ports) == before and lt._upkeep.state == "idle"


def test_a_read_only_root_refuses_an_import_before_any_port_call() -> None:
    ports, log = memory_ports(upkeep=True)
    with_spaces(ports)
    lt = opened(ports, Config(write_enabled=False)).long_term
    log.clear()
    with pytest.raises(ReadOnly):
        lt.remember_many(ITEMS)
    assert log.calls == []
    with pytest.raises(InvalidInput, match="batch"):  # the batch is checked first, as before
        lt.remember_many(ITEMS, batch=0)


def second_call_fails(ports: Ports, method: str, error: StorageError) -> Ports:
    """``ports`` whose long-term store raises ``error`` on its second call of ``method``."""
    count = itertools.count()
    store = RaisingPort(ports.long_term, method, error, when=lambda: next(count) == 1)
    store.armed = True
    return attrs.evolve(ports, long_term=store)


def test_a_failed_batch_ends_the_import_with_the_batches_before_it_kept() -> None:
    inner, _ = memory_ports(upkeep=True)
    with_spaces(inner)
    lt = opened(second_call_fails(inner, "import_draft", StorageError("disk full"))).long_term
    with pytest.raises(StorageError, match="disk full"):
        lt.remember_many(ITEMS, space="default", batch=3)
    stored = [c for c in contents(inner, "default") if c.startswith("Imported")]
    assert stored == sorted(ITEMS[:3])  # the first batch, and only it
    assert lt._upkeep.state == "idle"
    assert lt.remember_many(ITEMS, space="default", batch=3).skipped == 3  # usable


def test_an_import_run_travels_with_its_events() -> None:
    """While an import runs, its data is on no attribute of the flow's context (it travels
    in event arguments, which an engine may hold while it dispatches them), and nothing of it
    is reachable from the root once the import ended."""
    ports, _ = memory_ports(upkeep=True)
    root = one_space(ports)
    lt = root.long_term
    on_context: list[object] = []

    def look(done: int, total: int) -> None:
        own = {k: v for k, v in vars(lt._upkeep).items() if k != "_machine"}
        on_context.extend(held_run_data(own, (ImportRun,)))

    lt.remember_many(ITEMS, batch=3, progress=look)
    assert on_context == []
    assert held_run_data(root, (ImportRun,)) == []


# -- vector backfill ---------------------------------------------------------------------


def test_a_backfill_embeds_each_space_a_step_at_a_time_and_then_nothing() -> None:
    ports, log = memory_ports(embedder=FakeEmbedder())
    lt = with_spaces(ports).long_term
    seen: list[tuple[str, int, int]] = []
    log.clear()
    assert lt.embed_missing(progress=lambda s, d, t: seen.append((s, d, t))) == 3
    spaces = [c.args[0] for c in log.calls if c.name == "long_term.embed_missing"]
    assert spaces == [s.id for s in lt.spaces()] and len(spaces) == 2
    assert sorted(seen) == sorted([("default", 2, 2), (spaces[1], 1, 1)])
    assert lt.embed_missing() == 0
    assert lt._upkeep.state == "idle"


def test_a_backfill_is_refused_without_an_embedder_or_the_capability() -> None:
    for ports, why in (
        (memory_ports(upkeep=True)[0], "no embedder"),
        (memory_ports()[0], "computes no vectors"),
    ):
        lt = with_spaces(ports).long_term
        with pytest.raises(InvalidInput, match=why):
            lt.embed_missing()
        assert lt._upkeep.state == "idle"


def test_a_failing_embedder_ends_the_backfill_with_earlier_vectors_kept() -> None:
    embedder = FaultyEmbedder(FakeEmbedder(), fail_at=[1])
    ports, _ = memory_ports(embedder=embedder)
    lt = with_spaces(ports).long_term
    with pytest.raises(EmbeddingFailed):
        lt.embed_missing()  # the first space's batch passes, the second space's fails
    store = ports.long_term
    assert isinstance(store, MemoryUpkeepStore)
    assert {space for space, _ in store.vectors} == {"default"}
    assert lt._upkeep.state == "idle"
    assert lt.embed_missing() == 1  # usable: only what is still missing


# -- side-index rebuild ------------------------------------------------------------------


def test_a_rebuild_goes_over_every_space_or_the_one_named() -> None:
    ports, _ = memory_ports(upkeep=True)
    lt = with_spaces(ports).long_term
    store = ports.long_term
    assert isinstance(store, MemoryUpkeepStore)
    every = [s.id for s in lt.spaces()]
    assert lt.rebuild_index() == every and store.rebuilt == every
    assert lt.rebuild_index("default") == ["default"]
    with pytest.raises(UnknownSpace):
        lt.rebuild_index("missing")
    assert store.rebuilt == [*every, "default"] and lt._upkeep.state == "idle"
    lt_plain = with_spaces(memory_ports()[0]).long_term
    with pytest.raises(InvalidInput, match="side index"):
        lt_plain.rebuild_index()


def test_a_failed_rebuild_ends_the_run_with_earlier_spaces_rebuilt() -> None:
    inner, _ = memory_ports(upkeep=True)
    lt = with_spaces(inner).long_term
    every = [s.id for s in lt.spaces()]
    failing = second_call_fails(inner, "rebuild_index", StorageError("index write failed"))
    lt = opened(failing).long_term
    with pytest.raises(StorageError, match="index write failed"):
        lt.rebuild_index()
    store = inner.long_term
    assert isinstance(store, MemoryUpkeepStore)
    assert store.rebuilt == every[:1] and lt._upkeep.state == "idle"
    assert lt.rebuild_index() == every  # usable


def test_the_validators_are_pure() -> None:
    """A validator reads its arguments, the configuration and the store's type only: no port
    call and nothing stored on the flow, whether it passes or refuses."""
    for ports, log in (memory_ports(embedder=FakeEmbedder()), memory_ports()):
        upkeep = with_spaces(ports).long_term._upkeep
        ports.long_term.create_space("found-on-disk")  # type: ignore[union-attr]
        checks: list[tuple[object, Callable[[], None]]] = [
            (upkeep, upkeep.check_writable),
            (upkeep, upkeep.check_backfill),
            (upkeep, upkeep.check_side_index),
            *[
                (upkeep, functools.partial(upkeep.check_import, {"batch": batch}))
                for batch in (1, 0, "2")
            ],
        ]
        assert_pure(checks, log)


# -- concurrency -------------------------------------------------------------------------


def test_other_long_term_operations_run_between_two_steps() -> None:
    """A step holds the service's mutex only while it runs: a search from another thread,
    started between two batches, finishes before the next batch."""
    ports, _ = memory_ports(upkeep=True)
    lt = with_spaces(ports).long_term
    finished: list[bool] = []

    def search_from_another_thread(done: int, total: int) -> None:
        thread = threading.Thread(target=lambda: finished.append(bool(lt.search("deploy"))))
        thread.start()
        thread.join(10)
        finished.append(not thread.is_alive())

    lt.remember_many(ITEMS, space="default", batch=4, progress=search_from_another_thread)
    assert finished == [True, True, True, True]


# -- port calls per state ----------------------------------------------------------------


def test_each_state_makes_exactly_the_port_calls_its_spec_declares() -> None:
    """Every call of an import, a backfill and a rebuild is made in a state of the flow
    (none by the facade), and each state makes every call it declares: a store found on disk
    is registered by each run's catalog read (a catalog write); an import's batch activates
    its target in the catalog."""
    config = Config(durability="full")
    ports, log = memory_ports(embedder=FakeEmbedder())
    with_spaces(ports)
    root = opened(ports, config)
    lt = root.long_term
    lt.update_space("default", active=False)  # the import activates it again
    log.probe = flow_probe(lambda: [lt._upkeep])
    observed: dict[tuple[str, str], set[str]] = {}
    operations: list[Callable[[], object]] = [
        lambda: lt.remember_many(ITEMS, space="default", batch=4),
        lambda: lt.embed_missing(),
        lambda: lt.rebuild_index(),
    ]
    assert ports.long_term is not None
    for number, operation in enumerate(operations):
        ports.long_term.create_space(f"found-{number}")  # registered by the next run
        log.clear()
        operation()
        assert [c.name for c in log.calls if c.state is None] == [], operation
        for key, calls in calls_by_state(log.calls).items():
            observed.setdefault(key, set()).update(calls)
    assert port_gaps(observed, [FLOW]) == {}


def test_an_unchanged_import_request_is_not_mutated() -> None:
    """The caller's list is read, never changed (its items are copied into drafts)."""
    ports, _ = memory_ports(upkeep=True)
    lt = one_space(ports).long_term
    items: list[object] = [{"content": "One", "tags": ["a"]}, "Two"]
    copy = [dict(items[0]), items[1]]  # type: ignore[call-overload]
    lt.remember_many(items)
    assert items == copy


@pytest.mark.parametrize("batch", [1, 2, 7, 500])
def test_every_batch_size_stores_the_same(batch: int) -> None:
    ports, _ = memory_ports(upkeep=True)
    lt = one_space(ports).long_term
    report = lt.remember_many(ITEMS, batch=batch)
    assert report.imported == len(ITEMS) and contents(ports, "default") == sorted(ITEMS)
