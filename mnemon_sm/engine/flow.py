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

Two dispatchers run the same specs with the same semantics, and :func:`start` is the one place
that picks one for every machine it creates. The default is the compiled dispatcher
(:mod:`.compiled`, a table built from the spec at load); python-statemachine's own, the
reference, is chosen by setting the environment variable ``MNEMON_SM_ENGINE=statemachine``
(read once, at import; ``compiled`` names the default) or, in a test, by
:func:`use_engine`. :func:`send` and the recovery below take a machine of either kind.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any, Protocol

from statemachine.exceptions import TransitionNotAllowed

from mnemon_sm.engine.audit import AuditListener
from mnemon_sm.engine.compiled import ENGINE_KWARGS, CompiledMachine
from mnemon_sm.engine.spec import ABORT, FlowSpec, load_flow
from mnemon_sm.errors import IllegalEvent, SpecError

__all__ = [
    "ENGINES",
    "ENGINE_VARIABLE",
    "Machine",
    "add_observer",
    "clear_queues",
    "engine",
    "remove_observer",
    "send",
    "start",
    "state_of",
    "use_engine",
]


class Machine(Protocol):
    """What flows use of a running machine, whichever dispatcher runs it."""

    @property
    def current_state_value(self) -> Any: ...

    def raise_(self, event: str, *args: Any, **kwargs: Any) -> Any: ...

    def send(self, event: str, *args: Any, **kwargs: Any) -> Any: ...


ObserverFactory = Callable[[str], object]
_observers: list[ObserverFactory] = []

ENGINE_VARIABLE = "MNEMON_SM_ENGINE"
ENGINES = ("compiled", "statemachine")


def _checked(name: str) -> str:
    if name not in ENGINES:
        raise SpecError(f"{ENGINE_VARIABLE} must be one of {', '.join(ENGINES)}, not {name!r}")
    return name


_engine = _checked(os.environ.get(ENGINE_VARIABLE, "") or "compiled")


def engine() -> str:
    """The dispatcher :func:`start` uses: ``compiled`` or ``statemachine``."""
    return _engine


def use_engine(name: str) -> str:
    """Make :func:`start` use dispatcher ``name`` from now on; return the previous one."""
    global _engine
    previous, _engine = _engine, _checked(name)
    return previous


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
    listeners = [AuditListener(flow, context), *(factory(flow) for factory in _observers)]
    if _engine == "compiled":
        return CompiledMachine(loaded.chart, context, listeners, **initial_kwargs)
    machine: Machine = loaded.machine_class(model=context, listeners=listeners, **initial_kwargs)
    return machine


def send(machine: Machine, flow: str, event: str, **kwargs: Any) -> None:
    """Send ``event``; an event the current state does not allow raises ``IllegalEvent``, as
    does an internal event (one the spec says a callback raises) or an unknown one. Whatever
    escapes the step leaves the machine at rest (see the module)."""
    spec = load_flow(flow).spec
    if event not in spec.external_events:
        raise IllegalEvent(flow=flow, state=state_of(machine), event=event)
    if kwargs and not ENGINE_KWARGS.isdisjoint(kwargs):
        # The engine passes its own value under these names (``source`` is the state left),
        # so an event argument named so would never reach a callback: refuse it loudly.
        reserved = ", ".join(sorted(ENGINE_KWARGS.intersection(kwargs)))
        raise SpecError(f"{flow}: event {event} carries arguments the engine reserves: {reserved}")
    try:
        _fire(machine, event, kwargs)
    except TransitionNotAllowed:  # the state did not move
        raise IllegalEvent(flow=flow, state=state_of(machine), event=event) from None
    except BaseException:
        _recover(machine, spec)
        raise


def _fire(machine: Machine, event: str, kwargs: dict[str, Any]) -> None:
    if type(machine) is CompiledMachine:
        machine.send(event, **kwargs)
    else:  # the reference: its bound event is a little cheaper than send()
        getattr(machine, event)(**kwargs)


def _recover(machine: Machine, spec: FlowSpec) -> None:
    """Put a machine whose step was interrupted back at rest (the caller re-raises)."""
    # The engine drops its queues only for an ``Exception``; a ``BaseException`` leaves the
    # events the interrupted step raised, which would run before the next caller's event.
    clear_queues(machine)
    state = state_of(machine)
    if not any(t.source == state and t.event == ABORT for t in spec.transitions):
        return  # at rest, nothing to undo
    with contextlib.suppress(Exception):  # never hide the original exception
        _fire(machine, ABORT, {})


def clear_queues(machine: Machine) -> None:
    """Drop the events queued on ``machine``, whichever dispatcher runs it."""
    if isinstance(machine, CompiledMachine):
        machine.clear()
    else:
        machine._engine.clear()  # type: ignore[attr-defined]


def state_of(machine: Machine) -> str:
    """The id of the machine's current (flat) state."""
    return str(machine.current_state_value)
