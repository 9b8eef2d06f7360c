"""Running a flow: one machine instance per context object, events in, typed errors out.

A context object (an instance of the class registered under the name a spec gives in
``context``, see :mod:`.registry`) owns a flow's data and callbacks and creates its machine
once with :func:`start`; the machine is reused for every operation (an
instance costs about as much as two events). :func:`send` is the only place events enter a
machine, and the only place the engine's ``TransitionNotAllowed`` is translated into
``IllegalEvent``.

Any exception that escapes a step, ``BaseException`` included (a worker's
``KeyboardInterrupt``, a cancellation, a simulated crash), may leave the machine in the middle
of a run. :func:`send` then puts it back at rest before the exception goes on, unchanged: it
drops the events the interrupted step had queued and, when the current state declares the
spec's ``abort`` transition (every state that is not resting must; a resting one may, to undo
work in flight there), fires it; its action drops the run's data. So one bad step never jams
a flow: the next operation works.

Observers (for example the test suite's transition recorder) are registered process-wide with
:func:`add_observer` and attached to every machine created afterwards; production code
registers none, so they cost nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from statemachine import StateChart
from statemachine.exceptions import TransitionNotAllowed

from mnemon_sm.engine.spec import ABORT, FlowSpec, load_flow
from mnemon_sm.errors import IllegalEvent

__all__ = ["Machine", "add_observer", "remove_observer", "send", "start", "state_of"]

Machine = StateChart[Any]
ObserverFactory = Callable[[str], object]
_observers: list[ObserverFactory] = []


def add_observer(factory: ObserverFactory) -> None:
    """Attach ``factory(flow_name)`` as a listener to every machine started from now on."""
    _observers.append(factory)


def remove_observer(factory: ObserverFactory) -> None:
    """Stop attaching ``factory`` to new machines."""
    _observers.remove(factory)


def start(flow: str, context: object, **initial_kwargs: Any) -> Machine:
    """Create the machine of ``flow`` driven by ``context`` and enter its initial state.

    The context is the machine's model: callbacks named in the spec are its methods, and the
    current state value is stored on ``context.state``.
    """
    loaded = load_flow(flow)
    listeners = [factory(flow) for factory in _observers]
    return loaded.machine_class(model=context, listeners=listeners, **initial_kwargs)


def send(machine: Machine, flow: str, event: str, **kwargs: Any) -> None:
    """Send ``event``; an event the current state does not allow raises ``IllegalEvent``, as
    does an internal event (one the spec says a callback raises) or an unknown one. Whatever
    escapes the step leaves the machine at rest (see the module)."""
    spec = load_flow(flow).spec
    if event not in spec.external_events:
        raise IllegalEvent(flow=flow, state=state_of(machine), event=event)
    try:
        getattr(machine, event)(**kwargs)  # the bound event: a little cheaper than send()
    except TransitionNotAllowed:  # the state did not move
        raise IllegalEvent(flow=flow, state=state_of(machine), event=event) from None
    except BaseException:
        _recover(machine, spec)
        raise


def _recover(machine: Machine, spec: FlowSpec) -> None:
    """Put a machine whose step was interrupted back at rest (the caller re-raises)."""
    # The engine drops its queues only for an ``Exception``; a ``BaseException`` leaves the
    # events the interrupted step raised, which would run before the next caller's event.
    machine._engine.clear()
    state = state_of(machine)
    if not any(t.source == state and t.event == ABORT for t in spec.transitions):
        return  # at rest, nothing to undo
    with contextlib.suppress(Exception):  # never hide the original exception
        getattr(machine, ABORT)()


def state_of(machine: Machine) -> str:
    """The id of the machine's current (flat) state."""
    return str(machine.current_state_value)
