"""Fault injection for any port bundle: fail a call, or crash before or after it.

Calls are numbered across every port of the bundle in the order they happen (0, 1, 2, ...),
the root's audit log's apart: those pass through unnumbered and never fail (they are listed in
:attr:`FaultInjector.audit_names`), so a call number means the same call whether the audit log is
on or off, and a fault planned for a flow's call lands on that call. (The audit log's own
failures are ``tests/test_audit.py``'s business: they are logged, never an operation's.)
A :class:`Fault` names a call number and what happens there:

- ``fail``: the call raises ``error`` (a ``StorageError`` by default) and has no effect;
- ``crash_before``: the process "dies" before the call: :class:`SimulatedCrash` is raised and
  the call has no effect;
- ``crash_after``: the call takes effect, then the process dies before seeing its result (the
  lost acknowledgement).

``SimulatedCrash`` derives from ``BaseException`` so no ``except Exception`` in production code
can swallow it. After a crash the injector is dead: every further call (the audit log's too)
raises it again, as a dead process makes no more calls. Tests then reopen the storage (a new
root on the same inner ports, with the locks released as the kernel would).

:class:`RaisingPort` injects the other kind of fault: an error the library does not expect
(a ``RuntimeError``, a ``KeyError``, a ``KeyboardInterrupt``) from one named method, chosen by
name and, optionally, by the state the caller is in rather than by call number. Such an error
must reach the caller unchanged and leave every flow at rest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal, TypeVar

import attrs

from mnemon_sm.errors import StorageError
from mnemon_sm.ports import Ports
from mnemon_sm.testing.calls import by_audit_log
from mnemon_sm.testing.wrap import PortProxy

__all__ = [
    "Fault",
    "FaultInjector",
    "FaultyPort",
    "RaisingPort",
    "SimulatedCrash",
    "faulty_ports",
]

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
        self.audit_names: list[str] = []  # the audit log's calls, not numbered

    def call(self, name: str, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
        if self.crashed:
            raise SimulatedCrash(f"{name} called after the process crashed")
        if by_audit_log():
            self.audit_names.append(name)
            return fn(*args, **kwargs)
        index = self.count
        self.count += 1
        self.names.append(name)
        fault = self.faults.get(index)
        if fault is None:
            return fn(*args, **kwargs)
        if fault.kind == "fail":
            raise fault.error or StorageError(f"injected failure of {name} (call {index})")
        if fault.kind == "crash_before":
            self.crashed = True
            raise SimulatedCrash(f"crash before {name} (call {index})")
        fn(*args, **kwargs)
        self.crashed = True
        raise SimulatedCrash(f"crash after {name} (call {index})")


class FaultyPort(PortProxy):
    """Wraps any port object: each public method call goes through the injector as
    ``<port>.<method>``; attributes that are not methods pass through unchanged."""

    def __init__(self, port: str, inner: object, injector: FaultInjector) -> None:
        super().__init__(port, inner)
        self.injector = injector

    def intercept(
        self, name: str, method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        return self.injector.call(f"{self.port}.{name}", method, *args, **kwargs)


def faulty_ports(inner: Ports, injector: FaultInjector) -> Ports:
    """Wrap every port of ``inner`` so that ``injector`` sees (and may fault) each call."""
    wrapped: dict[str, Any] = {
        field.name: None if port is None else FaultyPort(field.name, port, injector)
        for field in attrs.fields(Ports)
        for port in [getattr(inner, field.name)]
    }
    return Ports(**wrapped)


class RaisingPort:
    """Wraps any port object: once :attr:`armed`, the first call of ``method`` made while
    ``when()`` holds raises ``error`` instead of running (the call has no effect); every other
    call, and every other attribute, passes through unchanged. :attr:`fired` tells whether it
    raised."""

    def __init__(
        self,
        inner: object,
        method: str,
        error: BaseException,
        *,
        when: Callable[[], bool] | None = None,
    ) -> None:
        self.inner, self.method, self.error, self.when = inner, method, error, when
        self.armed = self.fired = False

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.inner, name)
        if name != self.method:
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.armed and not self.fired and (self.when is None or self.when()):
                self.fired = True
                raise self.error
            return value(*args, **kwargs)

        return call
