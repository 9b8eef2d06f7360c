"""Crash injection at every port call of a maintenance round, then recovery.

For a generated full target (USER.md with merge-able duplicates, or MEMORY.md) the unfaulted
maintenance add is run once to count its port calls ``N`` and record the state it leads to.
The same round is then repeated once per call index ``k`` in ``0..N-1`` and per crash kind
(before the call takes effect, after it took effect but before its result was seen). After
each crash the dead process's locks are released, the root is reopened on the unfaulted ports
and the test checks:

- INV-MNT-4: hot memory is exactly the state before the round, or exactly the state after it
  (the compaction together with the add); the add is present at most once;
- INV-MNT-2 (no acknowledged entry lost): every MEMORY.md entry is in hot memory or is an
  active long-term insight; a USER.md entry is in hot memory or the compaction committed;
- the same add, retried on the recovered root, succeeds and leads to the unfaulted state;
- INV-MNT-6: no space holds two insights with the same content, before or after the retry;
- INV-MNT-9: the crashed root's flows, back at rest, hold nothing of the interrupted run (no
  run value, no worker tool box).

Generated rounds run on the in-memory fakes; one fixed MEMORY.md round also runs on the real
file system with the embedded SQLite long-term store.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from mnemon_sm import Config, MemoryRoot
from mnemon_sm.adapters.postgres import PgBackend, PgLocks, PgSpaces
from mnemon_sm.adapters.real import RealLocks, SystemClock, real_ports
from mnemon_sm.adapters.sqlite import EmbeddedStore
from mnemon_sm.flows.hot.model import SOURCE_PATH, HotEntry, HotStore
from mnemon_sm.ports import Ports
from mnemon_sm.testing.faults import Fault, FaultInjector, SimulatedCrash, faulty_ports
from mnemon_sm.testing.longterm import MemoryLongTermStore
from mnemon_sm.testing.maintenance import held_run_data, seed
from mnemon_sm.testing.memory import MemoryLocks, memory_ports
from mnemon_sm.testing.pg_cluster import Cluster

AT_MOST_ONCE = "INV-MNT-4"
NOTHING_LOST = "INV-MNT-2"
NO_SECOND_COPY = "INV-MNT-6"
RUN_DROPPED = "INV-MNT-9"
CONFIG = Config(durability="full", user_limit=512, memory_limit=1024)
EXAMPLES = settings(
    max_examples=max(4, settings().max_examples // 8),
    phases=[p for p in settings().phases if p is not Phase.explain],
)
levels = st.sampled_from(("critical", "normal", "low"))


@attrs.frozen
class Round:
    target: str
    entries: tuple[tuple[str, str, str], ...]
    pending: str


@st.composite
def rounds(draw: Any) -> Round:
    if draw(st.booleans()):
        dark = ("User prefers dark mode " + "everywhere " * 9).strip()
        entries = [
            ("user", dark, draw(levels)),
            ("user", dark.upper(), draw(levels)),
            ("user", dark + " too", draw(levels)),
            ("user", "User works in UTC " + "u" * 40, draw(levels)),
        ]
        return Round("user", tuple(entries), "User drinks tea " + "t" * 84)
    n = draw(st.integers(3, 5))
    entries = [
        ("memory", f"Fact {i} about the build: " + "m" * (900 // n - 28), draw(levels))
        for i in range(n)
    ]
    return Round("memory", tuple(entries), "New durable fact: " + "n" * 182)


World = Callable[[Round], Ports]


def memory_world(r: Round) -> Ports:
    ports, _ = memory_ports()
    seed(ports, r.entries)  # type: ignore[arg-type]
    return ports


def real_world(base: Path) -> World:
    """Fresh storage roots under ``base``: real files and locks, the embedded store."""
    made = iter(range(10**6))

    def make(r: Round) -> Ports:
        path = base / f"root-{next(made)}"
        (path / "runtime").mkdir(parents=True)
        stamp = "2026-01-01T00:00:00.000Z"
        store = HotStore(tuple(HotEntry(c, stamp, stamp, t, i) for t, c, i in r.entries))  # type: ignore[arg-type]
        (path / SOURCE_PATH).write_bytes(store.encode())
        ports = real_ports(path)
        return attrs.evolve(ports, long_term=EmbeddedStore(path, ports.clock))

    return make


def postgres_world(cluster: Cluster, base: Path, opened: list[PgBackend]) -> World:
    """Fresh roots on a PostgreSQL server: its files, locks and Memory Spaces (replicas under
    ``base``); every backend opened is appended to ``opened``, for the caller to close."""
    made = iter(range(10**6))

    def make(r: Round) -> Ports:
        n = next(made)
        backend = PgBackend(cluster.url(f"maintenance-crash-{base.name}-{n}"))
        opened.append(backend)
        stamp = "2026-01-01T00:00:00.000Z"
        store = HotStore(tuple(HotEntry(c, stamp, stamp, t, i) for t, c, i in r.entries))  # type: ignore[arg-type]
        backend.files.ensure_dir("runtime")
        backend.files.rename(backend.files.write_temp(SOURCE_PATH, store.encode()), SOURCE_PATH)
        clock = SystemClock()
        spaces = PgSpaces(backend, clock, cache=base / f"cache-{n}")
        return Ports(files=backend.files, locks=backend.locks, clock=clock, long_term=spaces)

    return make


def _release_dead_locks(ports: Ports) -> None:
    """What the kernel (or the server, for a dead session) does when the crashed process
    dies."""
    locks = ports.locks
    if isinstance(locks, MemoryLocks):
        locks.registry.clear()
    else:
        assert isinstance(locks, RealLocks | PgLocks)
        locks.release_all()


def _contents(ports: Ports) -> dict[str, list[str]]:
    store = ports.long_term
    if isinstance(store, MemoryLongTermStore):
        return {space: [i.content for i in s.insights.values()] for space, s in store.data.items()}
    assert store is not None
    return {space: [i.content for i in store.list(space)] for space in store.spaces()}


def _hot(root: MemoryRoot, target: str) -> list[str]:
    return [e.content for e in root.hot.snapshot().of(target)]  # type: ignore[arg-type]


def _no_second_copy(ports: Ports) -> None:
    for space, contents in _contents(ports).items():
        twice = [c for c, k in Counter(contents).items() if k > 1]
        assert not twice, (NO_SECOND_COPY, space, twice)


@EXAMPLES
@given(rounds())
def test_a_crash_anywhere_in_maintenance_loses_nothing_and_repeats_nothing(r: Round) -> None:
    enumerate_crashes(r, memory_world)


def test_a_crash_anywhere_in_an_archive_on_the_real_file_system() -> None:
    entries = tuple(
        ("memory", f"Fact {i} about the build: " + "m" * 200, ("critical", "normal", "low")[i % 3])
        for i in range(4)
    )
    base = Path(tempfile.mkdtemp(prefix="mnemon-maintenance-crash-"))
    try:
        enumerate_crashes(
            Round("memory", entries, "New durable fact: " + "n" * 182), real_world(base)
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_crash_anywhere_in_an_archive_on_postgres(postgres_cluster: Cluster) -> None:
    """The same round on a root on PostgreSQL: its Memory Spaces are there too, so every
    statement of the archive's long-term writes is among the calls crashed."""
    entries = tuple(
        ("memory", f"Fact {i} about the build: " + "m" * 200, ("critical", "normal", "low")[i % 3])
        for i in range(4)
    )
    base = Path(tempfile.mkdtemp(prefix="mnemon-maintenance-crash-pg-"))
    opened: list[PgBackend] = []
    try:
        enumerate_crashes(
            Round("memory", entries, "New durable fact: " + "n" * 182),
            postgres_world(postgres_cluster, base, opened),
        )
    finally:
        for backend in opened:
            backend.close()
        shutil.rmtree(base, ignore_errors=True)


def enumerate_crashes(r: Round, make: World) -> None:
    before = [c for t, c, _ in r.entries if t == r.target]
    ports = make(r)
    injector = FaultInjector()
    root = MemoryRoot.open("/unused", CONFIG, ports=faulty_ports(ports, injector))
    start = injector.count
    receipt = root.hot.add(r.target, r.pending)
    assert receipt.maintenance is not None
    calls = injector.count - start
    after = _hot(MemoryRoot.open("/unused", CONFIG, ports=ports), r.target)
    assert calls > 10  # the round did real work: lock, reads, worker, commit
    assert after[-1] == " ".join(r.pending.split()) and after != before

    for k in range(calls):
        for kind in ("crash_before", "crash_after"):
            ports = make(r)
            injector = FaultInjector()
            root = MemoryRoot.open("/unused", CONFIG, ports=faulty_ports(ports, injector))
            injector.faults[injector.count + k] = Fault(injector.count + k, kind)  # type: ignore[arg-type]
            try:
                root.hot.add(r.target, r.pending)
            except SimulatedCrash:
                pass
            else:
                raise AssertionError(f"no crash at call {k}")
            assert held_run_data(root) == [], (RUN_DROPPED, k, kind, injector.names[-1])
            _release_dead_locks(ports)

            recovered = MemoryRoot.open("/unused", CONFIG, ports=ports)
            state = _hot(recovered, r.target)
            where = (k, kind, injector.names[-1])
            assert state in (before, after), (AT_MOST_ONCE, where, state)
            assert len(set(state)) == len(state), (AT_MOST_ONCE, where, "an entry twice")
            if r.target == "memory":
                stored = {c for cs in _contents(ports).values() for c in cs}
                assert all(c in state or c in stored for c in before), (NOTHING_LOST, where)
            _no_second_copy(ports)

            retried = recovered.hot.add(r.target, r.pending)
            assert retried.success
            assert _hot(recovered, r.target) == after, where
            _no_second_copy(ports)
