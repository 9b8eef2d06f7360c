"""Every (state, event) pair a spec does not allow raises IllegalEvent and changes nothing.

For every flow, pairs come from the loaded spec. The machine is restored in each state through
its model (no entry action runs), the event is sent, and the test checks the error, that the
state did not move and that no port was called. Internal events (raised by callbacks) may never
be sent from outside, in any state. States left only by eventless transitions (``opening`` of
the hot-memory flow) cannot be restored at rest: the engine takes their eventless edge before
any event, which a separate test shows.
"""

from __future__ import annotations

import pytest

from mnemon_sm import Config, IllegalEvent, LockTimeout, MemoryRoot
from mnemon_sm.engine.flow import send
from mnemon_sm.engine.spec import flow_names, load_flow
from mnemon_sm.flows.hot.model import LOCK_NAME
from mnemon_sm.testing.flows import flow_contexts
from mnemon_sm.testing.memory import memory_ports

REQUEST = {"action": "add", "target": "user", "content": "text"}


def restorable_states(flow: str) -> list[str]:
    spec = load_flow(flow).spec
    return [s for s, d in spec.state_defs.items() if not d["transitions"]]


def illegal_pairs() -> list[tuple[str, str, str]]:
    pairs = []
    for flow in flow_names():
        spec = load_flow(flow).spec
        for state in restorable_states(flow):
            for event in spec.events:
                allowed = event in spec.state_defs[state]["on"]
                if not allowed or event not in spec.external_events:
                    pairs.append((flow, state, event))
    return pairs


def test_every_flow_has_a_context_and_illegal_pairs() -> None:
    ports, _ = memory_ports()
    assert set(flow_contexts(MemoryRoot.open("/unused", Config(), ports=ports))) == set(
        flow_names()
    )
    flows = {f for f, _, _ in illegal_pairs()}
    assert flows == set(flow_names())
    assert ("hot_memory_mutation", "closed", "add") in illegal_pairs()
    assert ("recall", "verifying", "recall") in illegal_pairs()
    assert ("long_term_write", "idle", "writes_applied") in illegal_pairs()  # internal event


@pytest.mark.parametrize(("flow", "state", "event"), illegal_pairs())
def test_illegal_event_raises_and_the_state_does_not_move(
    flow: str, state: str, event: str
) -> None:
    ports, log = memory_ports()
    root = MemoryRoot.open("/unused", Config(), ports=ports)
    context = flow_contexts(root)[flow]()
    context.state = state  # restore: the machine starts here without entry actions
    machine = load_flow(flow).machine_class(model=context)
    log.clear()
    with pytest.raises(IllegalEvent) as caught:
        send(machine, flow, event, request=REQUEST)
    assert (caught.value.flow, caught.value.state, caught.value.event) == (flow, state, event)
    assert machine.current_state_value == state
    assert log.calls == []
    assert not ports.locks.held


def test_unknown_events_are_illegal_too() -> None:
    ports, _ = memory_ports()
    root = MemoryRoot.open("/unused", Config(), ports=ports)
    for flow, make in flow_contexts(root).items():
        machine = make()._machine
        state = machine.current_state_value
        for event in ("bogus", "send", "__init__", "add_listener"):
            with pytest.raises(IllegalEvent):
                send(machine, flow, event)
        assert machine.current_state_value == state


def test_opening_is_never_observed_at_rest() -> None:
    ports, _ = memory_ports()
    assert MemoryRoot.open("/unused", Config(), ports=ports)._flow.state == "ready"
    ports.locks.hold(LOCK_NAME)
    with pytest.raises(LockTimeout):
        MemoryRoot.open("/unused", Config(), ports=ports)
