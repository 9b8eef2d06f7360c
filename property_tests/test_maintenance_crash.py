"""Crash injection at every port call of a maintenance round, then recovery.

For a generated full target (USER.md with merge-able duplicates, or MEMORY.md) the unfaulted
maintenance add is run once to count its port calls ``N`` and record the state it leads to.
The same round is then repeated once per call index ``k`` in ``0..N-1`` and per crash kind
(before the call takes effect, after it took effect but before its result was seen). After
each crash the dead process's locks are released, the root is reopened on the unfaulted ports
and the test checks:

- INV-MNT-4: hot memory is exactly the state before the round, or exactly the state after it
  (the compaction together with the add); the add is present at most once;
- INV-MNT-2 (no acknowledged entry lost): every MEMORY.md entry is in hot memory or is an
  active long-term insight; a USER.md entry is in hot memory or the compaction committed;
- the same add, retried on the recovered root, succeeds and leads to the unfaulted state;
- INV-MNT-6: no space holds two insights with the same content, before or after the retry.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import attrs
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from mnemon_sm import Config, MemoryRoot
from mnemon_sm.ports import Ports
from mnemon_sm.testing.faults import Fault, FaultInjector, SimulatedCrash, faulty_ports
from mnemon_sm.testing.maintenance import insight_contents, seed
from mnemon_sm.testing.memory import MemoryLocks, memory_ports

AT_MOST_ONCE = "INV-MNT-4"
NOTHING_LOST = "INV-MNT-2"
NO_SECOND_COPY = "INV-MNT-6"
CONFIG = Config(durability="full", user_limit=512, memory_limit=1024)
EXAMPLES = settings(
    max_examples=max(4, settings().max_examples // 8),
    phases=[p for p in settings().phases if p is not Phase.explain],
)
levels = st.sampled_from(("critical", "normal", "low"))


@attrs.frozen
class Round:
    target: str
    entries: tuple[tuple[str, str, str], ...]
    pending: str


@st.composite
def rounds(draw: Any) -> Round:
    if draw(st.booleans()):
        dark = ("User prefers dark mode " + "everywhere " * 9).strip()
        entries = [
            ("user", dark, draw(levels)),
            ("user", dark.upper(), draw(levels)),
            ("user", dark + " too", draw(levels)),
            ("user", "User works in UTC " + "u" * 40, draw(levels)),
        ]
        return Round("user", tuple(entries), "User drinks tea " + "t" * 84)
    n = draw(st.integers(3, 5))
    entries = [
        ("memory", f"Fact {i} about the build: " + "m" * (900 // n - 28), draw(levels))
        for i in range(n)
    ]
    return Round("memory", tuple(entries), "New durable fact: " + "n" * 182)


def _world(r: Round) -> Ports:
    ports, _ = memory_ports()
    seed(ports, r.entries)  # type: ignore[arg-type]
    return ports


def _hot(root: MemoryRoot, target: str) -> list[str]:
    return [e.content for e in root.hot.snapshot().of(target)]  # type: ignore[arg-type]


def _no_second_copy(ports: Ports) -> None:
    for space, contents in insight_contents(ports).items():
        twice = [c for c, k in Counter(contents).items() if k > 1]
        assert not twice, (NO_SECOND_COPY, space, twice)


@EXAMPLES
@given(rounds())
def test_a_crash_anywhere_in_maintenance_loses_nothing_and_repeats_nothing(r: Round) -> None:
    before = [c for t, c, _ in r.entries if t == r.target]
    ports = _world(r)
    injector = FaultInjector()
    root = MemoryRoot.open("/unused", CONFIG, ports=faulty_ports(ports, injector))
    start = injector.count
    receipt = root.hot.add(r.target, r.pending)
    assert receipt.maintenance is not None
    calls = injector.count - start
    after = _hot(MemoryRoot.open("/unused", CONFIG, ports=ports), r.target)
    assert after[-1] == " ".join(r.pending.split()) and after != before

    for k in range(calls):
        for kind in ("crash_before", "crash_after"):
            ports = _world(r)
            injector = FaultInjector()
            root = MemoryRoot.open("/unused", CONFIG, ports=faulty_ports(ports, injector))
            injector.faults[injector.count + k] = Fault(injector.count + k, kind)  # type: ignore[arg-type]
            try:
                root.hot.add(r.target, r.pending)
            except SimulatedCrash:
                pass
            else:
                raise AssertionError(f"no crash at call {k}")
            locks = ports.locks
            assert isinstance(locks, MemoryLocks)
            locks.registry.clear()  # the kernel releases a dead process's locks

            recovered = MemoryRoot.open("/unused", CONFIG, ports=ports)
            state = _hot(recovered, r.target)
            where = (k, kind, injector.names[-1])
            assert state in (before, after), (AT_MOST_ONCE, where, state)
            if r.target == "memory":
                stored = {c for cs in insight_contents(ports).values() for c in cs}
                assert all(c in state or c in stored for c in before), (NOTHING_LOST, where)
            _no_second_copy(ports)

            retried = recovered.hot.add(r.target, r.pending)
            assert retried.success
            assert _hot(recovered, r.target) == after, where
            _no_second_copy(ports)
