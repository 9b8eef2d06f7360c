"""The base of flow contexts: one machine, a caller event in, a result or a typed error out.

A context owns one machine (started once) and the data of the operation in flight. The facade
calls :meth:`FlowContext.perform` with a caller event; entry actions do the work and end by
calling :meth:`FlowContext.settle` (a result) or :meth:`FlowContext.refuse` (a typed error),
each of which raises the spec's internal outcome event; a context whose outcomes are guarded
edges instead (hot memory's) records them in :meth:`FlowContext.conclude`. When the machine is
back at rest, ``perform`` returns the result or raises the error. Nothing is swallowed: an
exception that is not a ``MnemonError`` propagates out of the engine with the state unchanged.
"""

from __future__ import annotations

from typing import Any, ClassVar

from mnemon_sm.engine.audit import AuditSink
from mnemon_sm.engine.flow import Machine, send, start
from mnemon_sm.errors import MnemonError

__all__ = ["FlowContext"]


class FlowContext:
    """Base of every flow context."""

    FLOW: ClassVar[str]
    #: Where transitions and outcomes are told (see :mod:`.audit`); None tells nobody.
    audit: AuditSink | None = None
    audit_run: str | None = None  # the run of the caller event in flight

    def __init__(self, state: str | None = None) -> None:
        """``state``: a persisted state to resume in (its entry actions do not run again);
        None enters the initial state."""
        self.state: str | None = state  # the machine writes its state value here
        self.audit_run = None  # an attribute from the start: a request adds none
        self._result: Any = None
        self._error: MnemonError | None = None
        self._machine: Machine = start(self.FLOW, self)

    def perform(self, event: str, **kwargs: Any) -> Any:
        """Send a caller event; return the operation's result or raise its error."""
        self._result, self._error = None, None
        sink = self.audit
        if sink is not None:
            self.audit_run = sink.new_run()
        outcome: BaseException | None = None
        try:
            send(self._machine, self.FLOW, event, **kwargs)
            self.conclude()
            if self._error is not None:
                outcome = self._error
                raise self._error
            return self._result
        except BaseException as exc:
            outcome = exc
            raise
        finally:
            self._result, self._error = None, None
            self.reset()
            if sink is not None:
                self._report(sink, event, outcome)

    def _report(self, sink: AuditSink, event: str, error: BaseException | None) -> None:
        run, self.audit_run = self.audit_run or "-", None
        kind = "ok" if error is None else type(error).__name__
        detail = None if error is None else str(error)
        sink.outcome(run, self.FLOW, event, kind, str(self.state), detail)

    def close(self) -> None:
        sink = self.audit
        if sink is not None:  # the close's transitions are one run of their own
            self.audit_run = sink.new_run()
        try:
            send(self._machine, self.FLOW, "close")
        finally:
            self.audit_run = None

    def conclude(self) -> None:
        """Called when the machine is back at rest after a caller event, before the result is
        read: a context whose outcomes are guarded edges (not outcome events) records its
        result or error here."""

    def settle(self, machine: Machine, event: str, result: Any = None, **event_args: Any) -> None:
        """Record the result and raise the outcome event ``event`` (with ``event_args``: the
        run's data, for a guard on its edge)."""
        self._result = result
        machine.raise_(event, **event_args)

    def refuse(self, machine: Machine, event: str, error: MnemonError, **event_args: Any) -> None:
        """Record the error and raise the outcome event ``event`` (with ``event_args``)."""
        self._error = error
        machine.raise_(event, **event_args)

    def answer(self, result: Any = None, error: MnemonError | None = None) -> None:
        """Record the operation's result or error without raising an event: for an outcome
        that is a guarded edge already taken (or about to be, in :meth:`conclude`)."""
        self._result, self._error = result, error

    def reset(self) -> None:
        """Drop the data of the operation that just ended (subclasses extend)."""
