"""A call-log probe that tags each port call with the flow state it is made in, rest states
included.

The per-flow port tests compare the calls made in each state with the ports the spec declares
for it. A call is tagged ``<flow>:<state>``:

- when a flow context's own code is on the calling thread's stack (a validator, a guard, an
  action, the entry of the initial state while the context is being built), with the state
  that context is in at that moment, the innermost context winning. A validator runs in the
  state its event leaves and so does a transition's ``on`` action (the configuration changes
  after them), so a call made there is tagged with a rest state such as ``idle``, whose
  declared ports are usually none;
- otherwise (a worker's tool calls run on a thread of their own), with the state of the first
  of ``contexts()`` that is not at rest: the flow waiting for that worker;
- otherwise (a facade's own reads) it is not tagged.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterable

from mnemon_sm.engine.context import FlowContext
from mnemon_sm.engine.spec import load_flow
from mnemon_sm.errors import MnemonError
from mnemon_sm.testing.calls import Call, CallLog

__all__ = ["assert_pure", "calls_by_state", "flow_probe", "port_gaps"]


def flow_probe(contexts: Callable[[], Iterable[FlowContext]]) -> Callable[[], str | None]:
    def probe() -> str | None:
        frame = sys._getframe(1)
        while frame is not None:
            owner = frame.f_locals.get("self")
            if isinstance(owner, FlowContext):
                return f"{owner.FLOW}:{owner.state}"
            frame = frame.f_back  # type: ignore[assignment]
        for context in contexts():
            if context.state not in load_flow(context.FLOW).spec.resting:
                return f"{context.FLOW}:{context.state}"
        return None

    return probe


def calls_by_state(calls: Iterable[Call]) -> dict[tuple[str, str], set[str]]:
    """``{(flow, state): {port.method, ...}}`` of the tagged calls of a call log."""
    observed: dict[tuple[str, str], set[str]] = {}
    for call in calls:
        if call.state is not None:
            flow, _, state = call.state.partition(":")
            observed.setdefault((flow, state), set()).add(call.name)
    return observed


def port_gaps(
    observed: dict[tuple[str, str], set[str]], flows: Iterable[str]
) -> dict[str, tuple[set[str], set[str]]]:
    """``{"flow.state": (undeclared, unused)}`` for every state of ``flows`` whose observed
    calls differ from the ports its spec declares: a call the state is not declared to make,
    or a declared port no call of the run reached (declared but impossible, or untested).
    Empty when the run reached exactly what each state of those flows declares."""
    gaps = {}
    for flow in flows:
        for state, doc in load_flow(flow).spec.states.items():
            calls, declared = observed.get((flow, state), set()), set(doc.ports)
            if calls != declared:
                gaps[f"{flow}.{state}"] = (calls - declared, declared - calls)
    return gaps


def assert_pure(checks: Iterable[tuple[object, Callable[[], object]]], log: CallLog) -> None:
    """Each ``(context, check)``: running the check (it may refuse with a ``MnemonError``)
    makes no port call and changes nothing on its context."""
    for context, check in checks:
        before = dict(vars(context))
        log.clear()
        with contextlib.suppress(MnemonError):
            check()
        assert (dict(vars(context)), log.calls) == (before, []), check
