"""The call log every fake of :mod:`mnemon_sm.testing` records into: one frozen :class:`Call` per
port call, in order, shared by the fakes of one bundle.

The calls of the root's audit log (:mod:`mnemon_sm.flows.audit`) are kept apart: the log reads
the clock as each transition is told and appends when an outcome flushes it
(:meth:`~mnemon_sm.engine.context.FlowContext.perform`), so its calls would interleave with every
flow's own calls, and no state's entry action makes them (no spec declares them). A test of
what a flow calls reads :attr:`CallLog.calls`; one of the audit log, its files or
:attr:`CallLog.audit_calls`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import attrs

from mnemon_sm.flows import audit

__all__ = ["Call", "CallLog", "by_audit_log"]

_AUDIT_MODULE = audit.__name__


_FRAMES = 16  # the audit log's port calls go through a few wrappers at most


def by_audit_log() -> bool:
    """Whether the calling thread is in the audit log's code (:mod:`mnemon_sm.flows.audit`):
    one of the nearest :data:`_FRAMES` callers, so that recording a call costs the same at
    any stack depth."""
    frame = sys._getframe(1)
    for _ in range(_FRAMES):
        if frame is None:
            return False
        if frame.f_globals.get("__name__") == _AUDIT_MODULE:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


@attrs.frozen
class Call:
    """One port call: which port, which method, its arguments and the state it ran in."""

    port: str
    method: str
    args: tuple[object, ...]
    state: str | None = None

    @property
    def name(self) -> str:
        return f"{self.port}.{self.method}"


@attrs.define
class CallLog:
    """Calls shared by the fakes of one bundle. ``probe`` tags each call with a state. The
    audit log's calls go to :attr:`audit_calls` (untagged), every other one to :attr:`calls`."""

    calls: list[Call] = attrs.Factory(list)
    probe: Callable[[], str | None] | None = None
    audit_calls: list[Call] = attrs.Factory(list)

    def record(self, port: str, method: str, *args: object) -> None:
        if by_audit_log():
            self.audit_calls.append(Call(port, method, args))
            return
        state = self.probe() if self.probe is not None else None
        self.calls.append(Call(port, method, args, state))

    def names(self) -> list[str]:
        return [c.name for c in self.calls]

    def clear(self) -> None:
        self.calls.clear()
        self.audit_calls.clear()
