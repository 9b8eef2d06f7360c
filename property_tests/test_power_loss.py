"""Power loss: what an acknowledged mutation is worth at each durability level.

``memory_ports(track_durability=True)`` remembers what reached stable storage (a file's
content after ``fsync`` of the file, directory entries after ``fsync`` of the directory) and
``lose_power()`` reverts everything else. With ``durability="full"`` (the default) every
acknowledged mutation must survive a power loss, wherever it strikes (INV-HOT-2), and the
reopened root must parse (INV-HOT-1) and repair its projections (INV-HOT-3). The examples at
the end show why ``full`` is the default: ``normal`` can lose an acknowledged write, ``off``
can leave an empty ``memories.json`` behind.
"""

from __future__ import annotations

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from mnemon_sm.config import Config
from mnemon_sm.errors import CorruptStore
from mnemon_sm.flows.hot.invariants import check
from mnemon_sm.flows.hot.model import RUNTIME_DIR, SOURCE_PATH, parse_source
from mnemon_sm.ports import TEMP_NAME, Ports
from mnemon_sm.root import MemoryRoot
from mnemon_sm.testing.faults import Fault, FaultInjector, SimulatedCrash, faulty_ports
from mnemon_sm.testing.memory import MemoryFiles, MemoryLocks, memory_ports
from mnemon_sm.testing.strategies import MutationRequest, mutation_requests
from property_tests.model import TARGETS, Entry, HotModel, entries_of, mismatch

PATH = "/mnemon-power-root"
FULL = Config(durability="full")
LIMITS = {t: FULL.limit(t) for t in TARGETS}
ENUMERATION = settings(
    max_examples=max(5, settings().max_examples // 4),
    phases=[p for p in settings().phases if p is not Phase.explain],
)


def durable_ports() -> tuple[Ports, MemoryFiles, MemoryLocks]:
    ports, _ = memory_ports(track_durability=True)
    assert isinstance(ports.files, MemoryFiles) and isinstance(ports.locks, MemoryLocks)
    return ports, ports.files, ports.locks


def on_disk(files: MemoryFiles) -> tuple[Entry, ...]:
    return entries_of(parse_source(files.read(SOURCE_PATH)).entries)


def power_cycle(ports: Ports, config: Config) -> MemoryRoot:
    """The machine loses power, every process dies, and the root is opened again."""
    files, locks = ports.files, ports.locks
    assert isinstance(files, MemoryFiles) and isinstance(locks, MemoryLocks)
    files.lose_power()
    locks.release_all()
    return MemoryRoot.open(PATH, config, ports=ports)


def assert_recovered(files: MemoryFiles, allowed: list[tuple[Entry, ...]], where: str) -> None:
    problems = check(files, FULL, "INV-HOT-1", "INV-HOT-3", "INV-HOT-5", "INV-HOT-6")
    assert not problems, f"{where}: {problems}"
    actual = on_disk(files)
    assert actual in allowed, f"INV-HOT-2 ({where}): {actual} is not one of {allowed}"
    temps = [n for n in files.list(RUNTIME_DIR) if TEMP_NAME.match(n)]
    assert temps == [], f"{where}: temporary files survived the reopen: {temps}"


@st.composite
def request_runs(draw: st.DrawFn, min_size: int = 2, max_size: int = 6) -> list[MutationRequest]:
    model = HotModel(LIMITS)
    run = []
    for _ in range(draw(st.integers(min_size, max_size))):
        request = draw(mutation_requests(model.contents(), LIMITS, invalid=False))
        model.apply(model.predict(**request.kwargs()))
        run.append(request)
    return run


@given(request_runs(3, 8), st.data())
def test_full_durability_keeps_every_acknowledged_mutation(
    run: list[MutationRequest], data: st.DataObject
) -> None:
    """INV-HOT-2 under ``full``: power is lost after acknowledged mutations (always after
    the last one), the root is reopened each time and must hold all of them."""
    ports, files, _ = durable_ports()
    model = HotModel(LIMITS)
    root = MemoryRoot.open(PATH, FULL, ports=ports)
    for i, op in enumerate(run):
        prediction = model.predict(**op.kwargs())
        problem = mismatch(prediction, op.send(root.hot))
        assert problem is None, f"op {i}: {problem}"
        model.apply(prediction)
        if i == len(run) - 1 or data.draw(st.booleans()):
            root = power_cycle(ports, FULL)
            assert_recovered(files, [model.entries], f"power lost after op {i}")
            assert entries_of(root.hot.snapshot().entries) == model.entries


@ENUMERATION
@given(request_runs(2, 5), st.booleans())
def test_full_durability_survives_power_loss_at_any_port_call(
    run: list[MutationRequest], journal_commit: bool
) -> None:
    """Power fails just before port call ``k``, for every ``k`` of the run (opening
    included). With ``journal_commit`` the file system had just committed its directory
    metadata (renames, new names) but no file data, the worst moment for a writer that
    relies on rename alone. Acknowledged mutations survive; the in-flight one is wholly
    present or absent (INV-HOT-2)."""
    model = HotModel(LIMITS)
    states = [model.entries]
    for op in run:
        model.apply(model.predict(**op.kwargs()))
        states.append(model.entries)
    counter = FaultInjector()
    ports, _, _ = durable_ports()
    root = MemoryRoot.open(PATH, FULL, ports=faulty_ports(ports, counter))
    for op in run:
        op.send(root.hot)
    for at in range(counter.count + 1):
        ports, files, _ = durable_ports()
        injector = FaultInjector([Fault(at, "crash_before")])
        done, opened = 0, False
        try:
            root = MemoryRoot.open(PATH, FULL, ports=faulty_ports(ports, injector))
            opened = True
            for op in run:
                op.send(root.hot)
                done += 1
        except SimulatedCrash:
            pass
        if journal_commit and RUNTIME_DIR in files.dirs:
            files.fsync(RUNTIME_DIR)
        where = f"power lost before call {at} ({done} ops acknowledged)"
        reopened = power_cycle(ports, FULL)
        allowed = [states[done]] + ([states[done + 1]] if opened and done < len(run) else [])
        assert_recovered(files, allowed, where)
        assert entries_of(reopened.hot.snapshot().entries) == on_disk(files)


# -- why ``full`` is the default --------------------------------------------------------------


def _write_and_lose_power(
    durability: str, *, journal_commit: bool
) -> tuple[MemoryFiles, MemoryRoot]:
    """Add two entries (both acknowledged), maybe let the file system commit its metadata,
    then cut the power and reopen."""
    config = Config(durability=durability)  # type: ignore[arg-type]
    ports, files, _ = durable_ports()
    root = MemoryRoot.open(PATH, config, ports=ports)
    first = root.hot.add("user", "User prefers concise replies")
    second = root.hot.add("memory", "Release checks run with pnpm verify")
    assert first.success and second.success  # both writes were acknowledged
    if journal_commit:
        files.fsync(RUNTIME_DIR)  # what the kernel's periodic metadata commit may do
    return files, power_cycle(ports, config)


ACKNOWLEDGED = (
    Entry("user", "User prefers concise replies", "normal"),
    Entry("memory", "Release checks run with pnpm verify", "normal"),
)


def test_full_keeps_acknowledged_writes_in_both_situations() -> None:
    for journal_commit in (False, True):
        files, root = _write_and_lose_power("full", journal_commit=journal_commit)
        assert on_disk(files) == ACKNOWLEDGED, "INV-HOT-2"
        assert check(files, FULL, "INV-HOT-1", "INV-HOT-3") == []
        assert entries_of(root.hot.snapshot().entries) == ACKNOWLEDGED


def test_normal_durability_can_lose_acknowledged_writes() -> None:
    """``normal`` fsyncs the new file but not the directory: the rename that made the write
    visible is not durable, so after a power loss the old (here: no) source is back."""
    files, root = _write_and_lose_power("normal", journal_commit=False)
    assert files.read(SOURCE_PATH) is None
    assert root.hot.snapshot().entries == ()  # both acknowledged entries are gone


def test_off_durability_can_leave_an_empty_source() -> None:
    """``off`` syncs nothing: if the file system commits the rename (metadata) before the
    data, memories.json comes back empty; INV-HOT-1 no longer holds and the root is unusable
    until repaired by hand."""
    files, root = _write_and_lose_power("off", journal_commit=True)
    assert files.read(SOURCE_PATH) == b""
    assert check(files, FULL, "INV-HOT-1") != []
    with pytest.raises(CorruptStore):
        root.hot.add("user", "anything")


def test_off_durability_can_lose_acknowledged_writes() -> None:
    files, root = _write_and_lose_power("off", journal_commit=False)
    assert files.read(SOURCE_PATH) is None
    assert root.hot.snapshot().entries == ()
