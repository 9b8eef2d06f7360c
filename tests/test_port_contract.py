"""The port contract holds for every adapter: real, in-memory fake and fault-injecting wrapper.

The last tests check the contract itself: adapters broken on purpose must fail it, otherwise
passing it would prove nothing.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from mnemon_sm.adapters.real import (
    REFERENCE_LOCKS,
    RandomIds,
    RealFiles,
    RealLocks,
    SystemClock,
)
from mnemon_sm.ports import Clock, Files, Ids, Locks, Ports, Stamp
from mnemon_sm.testing.contract import (
    check_clock_contract,
    check_files_contract,
    check_ids_contract,
    check_locks_contract,
)
from mnemon_sm.testing.faults import FaultInjector, faulty_ports
from mnemon_sm.testing.memory import CallLog, FakeClock, MemoryFiles, MemoryIds, MemoryLocks


def _wrapped(files: Files, locks: Locks, clock: Clock) -> tuple[Ports, FaultInjector]:
    injector = FaultInjector()
    return faulty_ports(Ports(files=files, locks=locks, clock=clock), injector), injector


# -- real adapters -----------------------------------------------------------------------


def test_real_files(tmp_path: Path) -> None:
    check_files_contract(RealFiles(tmp_path))


@pytest.mark.parametrize("name", ["runtime/.contract.lock", *sorted(REFERENCE_LOCKS)])
def test_real_locks(tmp_path: Path, name: str) -> None:
    check_locks_contract(RealLocks(tmp_path), RealLocks(tmp_path), name)


def test_real_clock() -> None:
    check_clock_contract(SystemClock())


def test_random_ids() -> None:
    check_ids_contract(RandomIds())


# -- in-memory fakes ---------------------------------------------------------------------


def test_memory_files() -> None:
    log = CallLog()
    files = MemoryFiles(log)
    check_files_contract(files)
    assert "files.rename" in log.names()


def test_memory_files_tracking_durability() -> None:
    check_files_contract(MemoryFiles(track_durability=True))


def test_memory_locks() -> None:
    registry: dict[str, object] = {}
    first, second = MemoryLocks(registry=registry), MemoryLocks(registry=registry)
    check_locks_contract(first, second)
    assert registry == {}


def test_fake_clock() -> None:
    check_clock_contract(FakeClock())


def test_memory_ids_record_each_draw_and_repeat_a_seeded_sequence() -> None:
    log = CallLog()
    check_ids_contract(MemoryIds(log))
    assert log.names() == ["ids.new_id"] * 200
    check_ids_contract(MemoryIds(seed=1))
    first, again, other = MemoryIds(seed=1), MemoryIds(seed=1), MemoryIds(seed=2)
    drawn = [first.new_id() for _ in range(3)]
    assert drawn == [again.new_id() for _ in range(3)]
    assert not set(drawn) & {other.new_id() for _ in range(1000)}


def test_faulty_ids_see_each_draw() -> None:
    injector = FaultInjector()
    ports = faulty_ports(
        Ports(files=MemoryFiles(), locks=MemoryLocks(), clock=FakeClock(), ids=MemoryIds()),
        injector,
    )
    assert ports.ids is not None
    check_ids_contract(ports.ids, draws=10)
    assert injector.names == ["ids.new_id"] * 10


# -- fault-injecting wrappers with no faults planned -------------------------------------


def test_faulty_real_ports(tmp_path: Path) -> None:
    ports, injector = _wrapped(RealFiles(tmp_path), RealLocks(tmp_path), SystemClock())
    other, _ = _wrapped(RealFiles(tmp_path), RealLocks(tmp_path), SystemClock())
    check_files_contract(ports.files)
    check_locks_contract(ports.locks, other.locks)
    check_clock_contract(ports.clock)
    assert injector.count == len(injector.names) > 0
    assert "files.rename" in injector.names
    assert "locks.acquire" in injector.names
    assert not injector.crashed


def test_faulty_memory_ports() -> None:
    registry: dict[str, object] = {}
    ports, injector = _wrapped(MemoryFiles(), MemoryLocks(registry=registry), FakeClock())
    other, _ = _wrapped(MemoryFiles(), MemoryLocks(registry=registry), FakeClock())
    check_files_contract(ports.files)
    check_locks_contract(ports.locks, other.locks)
    check_clock_contract(ports.clock)
    assert injector.names[-3:] == ["clock.now_ms", "clock.now_ms", "clock.wait"]
    assert not injector.crashed


# -- the contract catches broken adapters ------------------------------------------------


class RenameKeepsSource(MemoryFiles):
    """Copies instead of moving: the temp file survives a rename."""

    def rename(self, source: str, target: str) -> None:
        data = self.files[source]
        super().rename(source, target)
        self._put(source, data)


class MissingReadsEmpty(MemoryFiles):
    """Reports a missing file as empty instead of None."""

    def read(self, path: str) -> bytes | None:
        found = super().read(path)
        return b"" if found is None else found


class AlwaysUnchanged(MemoryFiles):
    """Claims a file is unchanged whenever the caller has any stamp."""

    def read_if_changed(self, path: str, seen: Stamp | None) -> tuple[Stamp | None, bytes | None]:
        if seen is not None and path in self.files:
            return seen, None
        return super().read_if_changed(path, seen)


class AcceptsDotDot(MemoryFiles):
    """Lets ``..`` through on read."""

    def read(self, path: str) -> bytes | None:
        if ".." in path:
            return None
        return super().read(path)


class ReusesTempNames(MemoryFiles):
    """Hands out the same temp name every time."""

    def write_temp(self, path: str, data: bytes) -> str:
        directory, _, name = path.rpartition("/")
        temp = f"{directory}/.{name}.1.2.a.tmp"
        self._put(temp, bytes(data))
        return temp


@pytest.mark.parametrize(
    ("broken", "promise"),
    [
        (RenameKeepsSource, "rename removes the source name"),
        (MissingReadsEmpty, "a missing file reads as None"),
        (AlwaysUnchanged, "a changed file is never reported unchanged"),
        (AcceptsDotDot, "is refused"),
        (ReusesTempNames, "temp names are unique"),
    ],
)
def test_broken_files_fail_the_contract(broken: type[MemoryFiles], promise: str) -> None:
    with pytest.raises(AssertionError, match=promise):
        check_files_contract(broken())


class NeverExcludes:
    """Every acquire succeeds at once."""

    def acquire(self, name: str, timeout_ms: int) -> None:
        pass

    def release(self, name: str) -> None:
        pass


def test_locks_that_never_exclude_fail_the_contract() -> None:
    locks = NeverExcludes()
    assert isinstance(locks, Locks)
    with pytest.raises(AssertionError, match="a held lock excludes others"):
        check_locks_contract(locks, NeverExcludes())


class BackwardsClock:
    def __init__(self) -> None:
        self.ms = 1_786_608_000_000

    def now_ms(self) -> int:
        self.ms -= 1
        return self.ms


class SecondsClock:
    def now_ms(self) -> int:
        return 1_786_608_000


@pytest.mark.parametrize(
    ("clock", "promise"),
    [(BackwardsClock(), "backwards"), (SecondsClock(), "milliseconds since the epoch")],
)
def test_broken_clocks_fail_the_contract(clock: Clock, promise: str) -> None:
    with pytest.raises(AssertionError, match=promise):
        check_clock_contract(clock)


class RepeatingIds:
    def new_id(self) -> str:
        return "00000000-0000-4000-8000-000000000001"


class ShortIds:
    def __init__(self) -> None:
        self.n = 0

    def new_id(self) -> str:
        self.n += 1
        return f"doc-{self.n}"


class UpperIds:
    def new_id(self) -> str:
        return str(uuid.uuid4()).upper()


@pytest.mark.parametrize(
    ("ids", "promise"),
    [
        (RepeatingIds(), "never repeated"),
        (ShortIds(), "canonical UUID"),
        (UpperIds(), "canonical UUID"),
    ],
)
def test_broken_ids_fail_the_contract(ids: Ids, promise: str) -> None:
    with pytest.raises(AssertionError, match=promise):
        check_ids_contract(ids)
