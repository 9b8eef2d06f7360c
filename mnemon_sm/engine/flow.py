"""Running a flow: one machine instance per context object, events in, typed errors out.

A context object (the class a spec names in ``context``) owns a flow's data and callbacks and
creates its machine once with :func:`start`; the machine is reused for every operation (an
instance costs about as much as two events). :func:`send` is the only place events enter a
machine, and the only place the engine's ``TransitionNotAllowed`` is translated into
``IllegalEvent``.

Observers (for example the test suite's transition recorder) are registered process-wide with
:func:`add_observer` and attached to every machine created afterwards; production code
registers none, so they cost nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from statemachine import StateChart
from statemachine.exceptions import TransitionNotAllowed

from ..errors import IllegalEvent
from .spec import load_flow

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
    does an internal event (one the spec says a callback raises) or an unknown one."""
    if event not in load_flow(flow).spec.external_events:
        raise IllegalEvent(flow=flow, state=state_of(machine), event=event)
    try:
        getattr(machine, event)(**kwargs)  # the bound event: a little cheaper than send()
    except TransitionNotAllowed:
        raise IllegalEvent(flow=flow, state=state_of(machine), event=event) from None


def state_of(machine: Machine) -> str:
    """The id of the machine's current (flat) state."""
    return str(machine.current_state_value)
