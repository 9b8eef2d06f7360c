"""The audit trail's hook in the engine: every transition of every flow, and each operation's
outcome, told to the context's sink.

A context's ``audit`` attribute is its sink (None: nothing is told, the default). The engine
attaches an :class:`AuditListener` to every machine it starts, so a sink set on a context
after its machine started (the root wires its contexts when it builds them) sees every
transition from then on; :meth:`FlowContext.perform` opens a run per caller event (the run id
ties the transitions of one operation together) and reports its outcome. The sink is the
adapter's business (:mod:`mnemon_sm.flows.audit` writes JSON lines through the Files port); it
is told names and states only, plus an error's message it may keep or drop.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["AuditListener", "AuditSink"]


class AuditSink(Protocol):
    """Where a context's transitions and outcomes go. Its methods never raise."""

    def new_run(self) -> str:
        """An id for one caller event and everything it caused."""
        ...

    def transition(self, run: str, flow: str, source: str, event: str, target: str) -> None:
        """One transition taken (``target`` equals ``source`` for an internal one)."""
        ...

    def outcome(
        self, run: str, flow: str, event: str, outcome: str, state: str, detail: str | None
    ) -> None:
        """How a caller event ended: ``ok`` or the error's type, and the state at rest."""
        ...


class AuditListener:
    """A machine's listener telling its context's sink about each transition."""

    def __init__(self, flow: str, context: Any) -> None:
        self._flow = flow
        self._context = context

    def after_transition(self, event: Any, source: Any, target: Any) -> None:
        context = self._context
        sink: AuditSink | None = getattr(context, "audit", None)
        if sink is None:
            return
        name = getattr(event, "id", event)
        name = "" if name is None else str(name)  # an eventless transition
        to = source.id if target is None else target.id
        run = context.audit_run or sink.new_run()  # a transition outside a caller event
        sink.transition(run, self._flow, str(source.id), name, str(to))
