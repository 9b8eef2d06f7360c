"""Every (state, event) pair a spec does not allow raises IllegalEvent and changes nothing.

Pairs come from the loaded spec; for each resting state the machine is restored there through
its model (no entry action runs), the event is sent, and the test checks the error, that the
state did not move and that no port was called. States left only by eventless transitions
(``opening``) are never at rest, which a separate test shows.
"""

from __future__ import annotations

import pytest

from mnemon_sm import Config, IllegalEvent, LockTimeout, MemoryRoot
from mnemon_sm.engine.flow import send
from mnemon_sm.engine.spec import flow_names, load_flow
from mnemon_sm.hot.model import LOCK_NAME
from mnemon_sm.testing.memory import memory_ports

FLOW = "hot_memory_mutation"
REQUEST = {"action": "add", "target": "user", "content": "text"}


def resting_states(flow: str) -> list[str]:
    spec = load_flow(flow).spec
    return [
        s for s, d in spec.state_defs.items() if d["on"] or d.get("final") or not d["transitions"]
    ]


def illegal_pairs(flow: str) -> list[tuple[str, str]]:
    spec = load_flow(flow).spec
    return [
        (state, event)
        for state in resting_states(flow)
        for event in spec.events
        if event not in spec.state_defs[state]["on"] or event not in spec.external_events
    ]


def test_every_spec_has_illegal_pairs_to_check() -> None:
    assert flow_names() == ("hot_memory_mutation",)
    assert ("closed", "add") in illegal_pairs(FLOW)
    assert ("ready", "duplicate_found") in illegal_pairs(FLOW)
    assert ("committed", "storage_failed") in illegal_pairs(FLOW)  # internal: not sendable


@pytest.mark.parametrize(("state", "event"), illegal_pairs(FLOW))
def test_illegal_event_raises_and_the_state_does_not_move(state: str, event: str) -> None:
    ports, log = memory_ports()
    root = MemoryRoot.open("/unused", Config(), ports=ports)
    context = root._flow
    context.state = state  # restore: the machine starts here without entry actions
    machine = load_flow(FLOW).machine_class(model=context)
    log.clear()
    with pytest.raises(IllegalEvent) as caught:
        send(machine, FLOW, event, request=REQUEST)
    assert (caught.value.flow, caught.value.state, caught.value.event) == (FLOW, state, event)
    assert machine.current_state_value == state
    assert log.calls == []
    assert not ports.locks.held


def test_unknown_events_are_illegal_too() -> None:
    ports, _ = memory_ports()
    root = MemoryRoot.open("/unused", Config(), ports=ports)
    machine = root._flow._machine
    for event in ("bogus", "send", "__init__", "add_listener"):
        with pytest.raises(IllegalEvent):
            send(machine, FLOW, event)
    assert machine.current_state_value == "ready"


def test_opening_is_never_observed_at_rest() -> None:
    ports, _ = memory_ports()
    assert MemoryRoot.open("/unused", Config(), ports=ports)._flow.state == "ready"
    ports.locks.hold(LOCK_NAME)
    with pytest.raises(LockTimeout):
        MemoryRoot.open("/unused", Config(), ports=ports)
