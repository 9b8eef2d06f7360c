"""Crash and failure injection at every port call, then recovery.

For a generated run (some requests already applied, then ``MemoryRoot.open`` and 2-6 more
operations) the number of port calls ``N`` of the unfaulted run is measured first; the run is
then repeated once per call index ``k`` in ``0..N`` and per fault kind:

- ``crash_before`` / ``crash_after``: the process dies at call ``k`` (during opening, a
  mutation or a context render). Its locks are released as the kernel would, a new root is
  opened on the inner (unfaulted) ports, and then: the source parses (INV-HOT-1); it holds
  every acknowledged mutation and the in-flight one wholly or not at all (INV-HOT-2); the
  projections are repaired (INV-HOT-3); no temporary file is left under ``runtime/``; the
  recovered root answers the next request as the model says; the lock is free (INV-HOT-8).
- ``fail``: call ``k`` raises ``StorageError`` and has no effect. The operation must report a
  typed ``StorageError``, leave the lock free (INV-HOT-8) and its mutation wholly present or
  absent (INV-HOT-2), and the same root must keep answering like the model.

The enumeration runs on the in-memory fakes for generated runs, and once on the real file
system for a fixed run.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import attrs
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from mnemon_sm.adapters.postgres import PgBackend, PgLocks
from mnemon_sm.adapters.real import RealLocks, SystemClock, real_ports
from mnemon_sm.config import Config
from mnemon_sm.errors import LockTimeout, MnemonError, StorageError
from mnemon_sm.flows.hot.invariants import check
from mnemon_sm.flows.hot.model import LOCK_NAME, RUNTIME_DIR, SOURCE_PATH, parse_source
from mnemon_sm.ports import TEMP_NAME, Files, Ports
from mnemon_sm.root import MemoryRoot
from mnemon_sm.testing.faults import Fault, FaultInjector, FaultKind, SimulatedCrash, faulty_ports
from mnemon_sm.testing.memory import MemoryLocks, memory_ports
from mnemon_sm.testing.pg_cluster import Cluster
from mnemon_sm.testing.strategies import MutationRequest, mutation_requests
from property_tests.model import TARGETS, Entry, HotModel, Prediction, entries_of, mismatch

ACKNOWLEDGED_KEPT = "INV-HOT-2"  # acknowledged: present; in flight: wholly present or absent
LOCK_FREE = "INV-HOT-8"  # the lock is never held between operations
CONFIG = Config(durability="full")
LIMITS = {t: CONFIG.limit(t) for t in TARGETS}
MakeWorld = Callable[[], AbstractContextManager["World"]]
RENDER = None  # an operation that renders the per-turn context instead of mutating
Op = MutationRequest | None
PROBE = MutationRequest("add", "memory", "Recovery probe: the root still works", None, "low")
# Crash enumeration multiplies each example by ~3N runs: fewer examples than the profile's,
# and no explain phase (its line tracing makes each failing example hundreds of times slower).
EXAMPLES = settings(
    max_examples=max(5, settings().max_examples // 4),
    phases=[p for p in settings().phases if p is not Phase.explain],
)


# -- the world a run happens in ----------------------------------------------------------------


@attrs.define
class World:
    """Inner (unfaulted) ports of one storage root and how to use them."""

    inner: Ports
    root_path: str
    lock_free: Callable[[], bool]

    @property
    def files(self) -> Files:
        return self.inner.files

    def open(self, ports: Ports | None = None) -> MemoryRoot:
        return MemoryRoot.open(self.root_path, CONFIG, ports=ports or self.inner)

    def release_dead_locks(self) -> None:
        """What the kernel does when the crashed process dies."""
        locks = self.inner.locks
        assert isinstance(locks, MemoryLocks | RealLocks | PgLocks)
        locks.release_all()

    def entries(self) -> tuple[Entry, ...]:
        return entries_of(parse_source(self.files.read(SOURCE_PATH)).entries)

    def temp_files(self) -> list[str]:
        return [n for n in self.files.list(RUNTIME_DIR) if TEMP_NAME.match(n)]


@contextmanager
def memory_world() -> Iterator[World]:
    ports, _ = memory_ports()
    locks = ports.locks
    assert isinstance(locks, MemoryLocks)
    yield World(ports, "/mnemon-memory-root", lambda: not locks.registry)


@contextmanager
def real_world() -> Iterator[World]:
    directory = Path(tempfile.mkdtemp(prefix="mnemon-crash-"))
    try:

        def lock_free() -> bool:
            probe = RealLocks(directory)
            try:
                probe.acquire(LOCK_NAME, 100)
            except LockTimeout:
                return False
            probe.release(LOCK_NAME)
            return True

        yield World(real_ports(directory), str(directory), lock_free)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


_pg_roots = itertools.count()


def postgres_world(cluster: Cluster) -> MakeWorld:
    """Worlds on a PostgreSQL server: each a new root of one database."""

    @contextmanager
    def world() -> Iterator[World]:
        url = cluster.url(f"crash-{next(_pg_roots)}")
        backend = PgBackend(url)
        try:

            def lock_free() -> bool:
                probe = PgBackend(url)
                try:
                    probe.locks.acquire(LOCK_NAME, 100)
                except LockTimeout:
                    return False
                finally:
                    probe.close()
                return True

            ports = Ports(files=backend.files, locks=backend.locks, clock=SystemClock())
            yield World(ports, url, lock_free)
        finally:
            backend.close()

    return world


# -- runs ---------------------------------------------------------------------------------------


@attrs.frozen
class Scenario:
    """``prefix`` is applied before the run under test; then a root is opened (faulted) and
    ``ops`` are performed; ``debris`` plants a stale temp file and a hand-edited projection
    before that open, so opening has work to do."""

    prefix: tuple[MutationRequest, ...]
    ops: tuple[Op, ...]
    debris: bool

    def predictions(self) -> tuple[list[Prediction | None], list[tuple[Entry, ...]]]:
        """Model outcome of each op of ``prefix + ops`` and the entries before/after each."""
        model = HotModel(LIMITS)
        predictions: list[Prediction | None] = []
        states = [model.entries]
        for op in (*self.prefix, *self.ops):
            prediction = None if op is None else model.predict(**op.kwargs())
            if prediction is not None:
                model.apply(prediction)
            predictions.append(prediction)
            states.append(model.entries)
        return predictions, states


def perform(root: MemoryRoot, op: Op) -> object:
    """Run one operation; the receipt, the rendered text, or the typed error raised."""
    if op is None:
        try:
            return root.context.runtime_memory()
        except MnemonError as exc:
            return exc
    return op.send(root.hot)


def expect(prediction: Prediction | None, outcome: object, where: str) -> None:
    if prediction is None:
        assert isinstance(outcome, str), f"{where}: rendering failed: {outcome!r}"
        return
    problem = mismatch(prediction, outcome)
    assert problem is None, f"{where}: {problem}"


def prepare(world: World, scenario: Scenario) -> None:
    """The part of the run before the faulted process starts (no faults)."""
    if not scenario.prefix and not scenario.debris:
        return
    root = world.open()
    predictions, _ = scenario.predictions()
    for i, op in enumerate(scenario.prefix):
        expect(predictions[i], perform(root, op), f"prefix op {i}")
    root.close()
    if scenario.debris:
        world.files.ensure_dir(RUNTIME_DIR)
        temp = world.files.write_temp("runtime/USER.md", b"left by a crashed writer")
        assert TEMP_NAME.match(temp.rpartition("/")[2])
        world.files.write_temp(SOURCE_PATH, b'{"version": 1, "entr')
        stale = world.files.write_temp("runtime/USER.md", b"edited by hand\n")
        world.files.rename(stale, "runtime/USER.md")


def count_calls(make_world: MakeWorld, scenario: Scenario) -> int:
    """How many port calls the run under test makes without faults (and that it is right)."""
    with make_world() as world:
        prepare(world, scenario)
        injector = FaultInjector()
        root = world.open(faulty_ports(world.inner, injector))
        predictions, _ = scenario.predictions()
        start = len(scenario.prefix)
        for i, op in enumerate(scenario.ops):
            expect(predictions[start + i], perform(root, op), f"unfaulted op {i}")
        return injector.count


def check_recovered(world: World, allowed: Sequence[tuple[Entry, ...]], where: str) -> None:
    """Open a fresh root on the inner ports and check everything a recovery must give."""
    world.release_dead_locks()
    root = world.open()
    problems = check(world.files, CONFIG, "INV-HOT-1", "INV-HOT-3", "INV-HOT-5", "INV-HOT-6")
    assert not problems, f"{where}: {problems}"
    actual = world.entries()
    assert actual in allowed, (
        f"{ACKNOWLEDGED_KEPT} ({where}): the source holds {actual}, not one of {list(allowed)}"
    )
    assert world.temp_files() == [], f"{where}: temporary files remain: {world.temp_files()}"
    assert entries_of(root.hot.snapshot().entries) == actual
    model = HotModel(LIMITS, actual)
    prediction = model.predict(**PROBE.kwargs())
    expect(prediction, perform(root, PROBE), f"{where}: first request after recovery")
    assert world.entries() == prediction.entries
    assert world.lock_free(), f"{LOCK_FREE} ({where}): the lock is held after recovery"


def run_crash(make_world: MakeWorld, scenario: Scenario, fault: Fault, calls: int) -> None:
    predictions, states = scenario.predictions()
    start = len(scenario.prefix)
    where = f"{fault.kind} at call {fault.at} of {calls}"
    with make_world() as world:
        prepare(world, scenario)
        injector = FaultInjector([fault])
        done, opened, crashed = 0, False, False
        try:
            root = world.open(faulty_ports(world.inner, injector))
            opened = True
            for i, op in enumerate(scenario.ops):
                expect(predictions[start + i], perform(root, op), f"{where}, op {i}")
                done += 1
        except SimulatedCrash:
            crashed = True
        assert crashed == (fault.at < calls), f"{where}: the run is not deterministic"
        where += f" ({injector.names[-1] if crashed else 'no crash'}, {done} ops acknowledged)"
        allowed = [states[start + done]]
        if opened and done < len(scenario.ops):
            allowed.append(states[start + done + 1])  # the in-flight operation, if it landed
        check_recovered(world, allowed, where)


def run_failure(make_world: MakeWorld, scenario: Scenario, fault: Fault, calls: int) -> None:
    _, states = scenario.predictions()
    where = f"fail at call {fault.at} of {calls}"
    with make_world() as world:
        prepare(world, scenario)
        injector = FaultInjector([fault])
        ports = faulty_ports(world.inner, injector)
        failed: MnemonError | None = None
        try:
            root = world.open(ports)
        except MnemonError as exc:
            failed = exc
        if failed is not None:
            assert isinstance(failed, StorageError), f"{where}: opening raised {failed!r}"
            assert world.lock_free(), f"{LOCK_FREE} ({where}): a failed open left the lock held"
            root = world.open(ports)  # the fault is spent: opening again must work
        model = HotModel(LIMITS, states[len(scenario.prefix)])
        for i, op in enumerate((*scenario.ops, PROBE)):
            before = injector.count
            prediction = None if op is None else model.predict(**op.kwargs())
            outcome = perform(root, op)
            fired = before <= fault.at < injector.count
            here = f"{where} ({injector.names[fault.at] if fired else 'not fired'}), op {i}"
            if fired and isinstance(outcome, StorageError):
                actual = world.entries()
                allowed = [model.entries] + ([prediction.entries] if prediction else [])
                assert actual in allowed, (
                    f"{ACKNOWLEDGED_KEPT} ({here}): {actual} not in {allowed}"
                )
                model.entries = actual
            else:
                expect(prediction, outcome, here)
                if prediction is not None:
                    model.apply(prediction)
            assert world.lock_free(), f"{LOCK_FREE} ({here}): the lock is held after the operation"
            assert world.entries() == model.entries, f"{here}: source differs from the model"
            problems = check(world.files, CONFIG, "INV-HOT-1", "INV-HOT-5", "INV-HOT-6")
            assert not problems, f"{here}: {problems}"
        root = world.open()
        assert check(world.files, CONFIG, "INV-HOT-3") == [], f"{where}: after reopening"
        assert world.temp_files() == [], f"{where}: temporary files remain after reopening"


def enumerate_faults(
    make_world: MakeWorld,
    scenario: Scenario,
    kinds: Sequence[FaultKind],
) -> None:
    calls = count_calls(make_world, scenario)
    for at in range(calls + 1):
        for kind in kinds:
            fault = Fault(at, kind)
            if kind == "fail":
                run_failure(make_world, scenario, fault, calls)
            else:
                run_crash(make_world, scenario, fault, calls)


# -- generated scenarios ------------------------------------------------------------------------


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    model = HotModel(LIMITS)
    prefix: list[MutationRequest] = []
    ops: list[Op] = []
    for _ in range(draw(st.integers(0, 3))):
        request = draw(mutation_requests(model.contents(), LIMITS, invalid=False))
        model.apply(model.predict(**request.kwargs()))
        prefix.append(request)
    for _ in range(draw(st.integers(2, 6))):
        if draw(st.integers(0, 5)) == 0:
            ops.append(RENDER)
        request = draw(mutation_requests(model.contents(), LIMITS, invalid=False))
        model.apply(model.predict(**request.kwargs()))
        ops.append(request)
    return Scenario(tuple(prefix), tuple(ops), draw(st.booleans()))


@EXAMPLES
@given(scenarios())
def test_crash_at_every_port_call_keeps_acknowledged_mutations(scenario: Scenario) -> None:
    enumerate_faults(memory_world, scenario, ("crash_before", "crash_after"))


@EXAMPLES
@given(scenarios())
def test_failure_at_every_port_call_is_typed_and_recoverable(scenario: Scenario) -> None:
    enumerate_faults(memory_world, scenario, ("fail",))


# -- the real file system ------------------------------------------------------------------------

REAL_SCENARIO = Scenario(
    prefix=(
        MutationRequest("add", "user", "User prefers concise replies", importance="critical"),
        MutationRequest("add", "memory", "Project uses pnpm workspaces"),
    ),
    ops=(
        MutationRequest("add", "memory", "Release checks run with\u3000pnpm verify"),
        MutationRequest(
            "replace", "user", content="User prefers 简洁 replies 😀", old_text="concise"
        ),
        RENDER,
        MutationRequest("remove", "memory", old_text="workspaces"),
        MutationRequest("add", "user", "  User prefers 简洁 replies 😀 "),  # duplicate
        MutationRequest("remove", "user", old_text="nothing like this"),  # NoMatch
    ),
    debris=True,
)


def test_real_file_system_crash_at_every_port_call() -> None:
    enumerate_faults(real_world, REAL_SCENARIO, ("crash_before", "crash_after"))


def test_real_file_system_failure_at_every_port_call() -> None:
    enumerate_faults(real_world, REAL_SCENARIO, ("fail",))


# -- PostgreSQL ----------------------------------------------------------------------------------


def test_postgres_crash_at_every_port_call(postgres_cluster: Cluster) -> None:
    enumerate_faults(
        postgres_world(postgres_cluster), REAL_SCENARIO, ("crash_before", "crash_after")
    )


def test_postgres_failure_at_every_port_call(postgres_cluster: Cluster) -> None:
    enumerate_faults(postgres_world(postgres_cluster), REAL_SCENARIO, ("fail",))
