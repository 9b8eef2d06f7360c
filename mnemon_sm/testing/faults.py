"""Fault injection for any port bundle: fail a call, or crash before or after it.

Calls are numbered across every port of the bundle in the order they happen (0, 1, 2, ...).
A :class:`Fault` names a call number and what happens there:

- ``fail``: the call raises ``error`` (a ``StorageError`` by default) and has no effect;
- ``crash_before``: the process "dies" before the call: :class:`SimulatedCrash` is raised and
  the call has no effect;
- ``crash_after``: the call takes effect, then the process dies before seeing its result (the
  lost acknowledgement).

``SimulatedCrash`` derives from ``BaseException`` so no ``except Exception`` in production code
can swallow it. After a crash the injector is dead: every further call raises it again, as a
dead process makes no more calls. Tests then reopen the storage (a new root on the same inner
ports, with the locks released as the kernel would).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Literal, TypeVar

import attrs

from ..errors import StorageError
from ..ports import Clock, Files, Locks, Ports, Stamp

__all__ = ["Fault", "FaultInjector", "SimulatedCrash", "faulty_ports"]

T = TypeVar("T")
FaultKind = Literal["fail", "crash_before", "crash_after"]


class SimulatedCrash(BaseException):
    """The process died here (injected). Not an ``Exception``: nothing may catch it."""


@attrs.frozen
class Fault:
    at: int
    kind: FaultKind
    error: StorageError | None = None


class FaultInjector:
    """Counts port calls and applies the planned faults."""

    def __init__(self, faults: Iterable[Fault] = ()) -> None:
        self.faults = {f.at: f for f in faults}
        self.count = 0
        self.crashed = False
        self.names: list[str] = []

    def call(self, name: str, fn: Callable[..., T], *args: object) -> T:
        if self.crashed:
            raise SimulatedCrash(f"{name} called after the process crashed")
        index = self.count
        self.count += 1
        self.names.append(name)
        fault = self.faults.get(index)
        if fault is None:
            return fn(*args)
        if fault.kind == "fail":
            raise fault.error or StorageError(f"injected failure of {name} (call {index})")
        if fault.kind == "crash_before":
            self.crashed = True
            raise SimulatedCrash(f"crash before {name} (call {index})")
        fn(*args)
        self.crashed = True
        raise SimulatedCrash(f"crash after {name} (call {index})")


@attrs.frozen
class _FaultyFiles:
    inner: Files
    injector: FaultInjector

    def read(self, path: str) -> bytes | None:
        return self.injector.call("files.read", self.inner.read, path)

    def read_if_changed(self, path: str, seen: Stamp | None) -> tuple[Stamp | None, bytes | None]:
        return self.injector.call(
            "files.read_if_changed",
            self.inner.read_if_changed,
            path,
            seen,
        )

    def write_temp(self, path: str, data: bytes) -> str:
        return self.injector.call("files.write_temp", self.inner.write_temp, path, data)

    def fsync(self, path: str) -> None:
        self.injector.call("files.fsync", self.inner.fsync, path)

    def rename(self, source: str, target: str) -> None:
        self.injector.call("files.rename", self.inner.rename, source, target)

    def list(self, directory: str) -> tuple[str, ...]:
        return self.injector.call("files.list", self.inner.list, directory)

    def remove(self, path: str) -> None:
        self.injector.call("files.remove", self.inner.remove, path)

    def ensure_dir(self, directory: str) -> None:
        self.injector.call("files.ensure_dir", self.inner.ensure_dir, directory)


@attrs.frozen
class _FaultyLocks:
    inner: Locks
    injector: FaultInjector

    def acquire(self, name: str, timeout_ms: int) -> None:
        self.injector.call("locks.acquire", self.inner.acquire, name, timeout_ms)

    def release(self, name: str) -> None:
        self.injector.call("locks.release", self.inner.release, name)


@attrs.frozen
class _FaultyClock:
    inner: Clock
    injector: FaultInjector

    def now_ms(self) -> int:
        return self.injector.call("clock.now_ms", self.inner.now_ms)


def faulty_ports(inner: Ports, injector: FaultInjector) -> Ports:
    """Wrap every port of ``inner`` so that ``injector`` sees (and may fault) each call."""
    return Ports(
        files=_FaultyFiles(inner.files, injector),
        locks=_FaultyLocks(inner.locks, injector),
        clock=_FaultyClock(inner.clock, injector),
    )
