"""Maintenance under contention: another writer commits while the maintenance worker runs.

A Hypothesis state machine drives one root through adds (with and without maintenance) and
removals, using the built-in workers wrapped so that, when armed, another writer (a second
root on the same storage) commits an add or a removal while the worker is running. Checked
after every step:

- INV-MNT-5: nothing any writer committed and nobody removed is lost: a MEMORY.md entry is in
  hot memory or an active long-term insight; a USER.md entry is in hot memory or folded into
  an entry that contains it (the built-in compactor only merges such entries);
- a maintenance whose worker saw another writer commit fails with ``RevisionConflict`` and
  leaves that writer's change in place;
- INV-MNT-6: no space holds two insights with the same content;
- both targets stay within their limits.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from mnemon_sm import CapacityExceeded, Config, MemoryRoot
from mnemon_sm.adapters.workers.builtin import BuiltinWorkers
from mnemon_sm.errors import MaintenanceRejected, RevisionConflict
from mnemon_sm.flows.hot.model import normalize
from mnemon_sm.ports.workers import ToolBox, WorkerRequest
from mnemon_sm.testing.maintenance import insight_contents
from mnemon_sm.testing.memory import memory_ports
from mnemon_sm.text import collapse_whitespace

KEPT = "INV-MNT-5"
SINGLE_COPY = "INV-MNT-6"
CONFIG = Config(durability="off", user_limit=512, memory_limit=1024)
THINGS = ("dark mode", "tabs over spaces", "short answers", "UTC times", "British spelling")
levels = st.sampled_from(("critical", "normal", "low"))


def fold(text: str) -> str:
    return collapse_whitespace(text).casefold()


class Interfering:
    """Built-in workers; an armed action runs (once) when the next worker starts."""

    def __init__(self) -> None:
        self.inner = BuiltinWorkers()
        self.armed: Callable[[], None] | None = None
        self.fired = False

    def run(self, request: WorkerRequest, tools: ToolBox) -> object:
        if self.armed is not None:
            action, self.armed = self.armed, None
            action()
            self.fired = True
        return self.inner.run(request, tools)


class Contention(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        ports, _ = memory_ports()
        self.workers = Interfering()
        self.ports = attrs.evolve(ports, workers=self.workers)
        self.root = MemoryRoot.open("/unused", CONFIG, ports=self.ports)
        self.other = MemoryRoot.open("/unused", CONFIG, ports=self.ports)
        self.kept: dict[str, set[str]] = {"user": set(), "memory": set()}
        self.serial = 0

    def _content(self, target: str, data: Any) -> str:
        self.serial += 1
        if target == "memory":
            return f"Fact {self.serial}: " + "m" * data.draw(st.integers(10, 300))
        text = f"User prefers {data.draw(st.sampled_from(THINGS))}"
        text += " always" * data.draw(st.integers(0, 6))
        return data.draw(st.sampled_from([text, text.upper(), text.lower(), text + "  "]))

    def _forget(self, target: str, removed: str) -> None:
        """A removed entry takes with it what it stood for."""
        self.kept[target] = {k for k in self.kept[target] if fold(k) not in fold(removed)}

    def _interference(self, data: Any) -> tuple[Callable[[], None], list[bool]]:
        committed: list[bool] = []
        target = data.draw(st.sampled_from(("user", "memory")))
        remove = data.draw(st.booleans())
        content = self._content(target, data)

        def act() -> None:
            entries = self.other.hot.snapshot().of(target)  # type: ignore[arg-type]
            try:
                if remove and entries:
                    gone = entries[0].content
                    self.other.hot.remove(target, gone)
                    self._forget(target, gone)
                else:
                    receipt = self.other.hot.add(target, content, maintenance=False)
                    self.kept[target].add(normalize(content, "content"))
                    if receipt.added is not None and receipt.message != "Entry added.":
                        return  # an exact duplicate: nothing was written
            except CapacityExceeded:
                return
            committed.append(True)

        return act, committed

    @rule(which=st.sampled_from(("user", "memory")), importance=levels, data=st.data())
    def add(self, which: str, importance: str, data: Any) -> None:
        target = which
        content = self._content(target, data)
        maintenance = data.draw(st.booleans())
        committed: list[bool] = []
        if maintenance and data.draw(st.booleans()):
            self.workers.armed, committed = self._interference(data)
        self.workers.fired = False
        try:
            self.root.hot.add(target, content, importance, maintenance=maintenance)
        except RevisionConflict:
            assert self.workers.fired and committed, "a conflict without another writer"
        except (CapacityExceeded, MaintenanceRejected):
            pass  # refused before the commit: the other writer's change is all that happened
        else:
            assert not committed, "a compaction overwrote another writer's commit"
            self.kept[target].add(normalize(content, "content"))
        finally:
            self.workers.armed = None

    @rule(which=st.sampled_from(("user", "memory")), data=st.data())
    def remove(self, which: str, data: Any) -> None:
        target = which
        entries = self.root.hot.snapshot().of(target)  # type: ignore[arg-type]
        if entries:
            gone = data.draw(st.sampled_from(entries)).content
            self.root.hot.remove(target, gone)
            self._forget(target, gone)

    @invariant()
    def nothing_committed_is_lost(self) -> None:
        snapshot = self.root.hot.snapshot()
        memory = {e.content for e in snapshot.of("memory")}
        stored = {c for cs in insight_contents(self.ports).values() for c in cs}
        lost = [k for k in self.kept["memory"] if k not in memory and k not in stored]
        assert not lost, (KEPT, lost)
        user = [fold(e.content) for e in snapshot.of("user")]
        lost = [k for k in self.kept["user"] if not any(fold(k) in u for u in user)]
        assert not lost, (KEPT, lost)

    @invariant()
    def no_second_copy_and_within_limits(self) -> None:
        for space, contents in insight_contents(self.ports).items():
            twice = [c for c, n in Counter(contents).items() if n > 1]
            assert not twice, (SINGLE_COPY, space, twice)
        for used, limit in self.root.hot.snapshot().usage.values():
            assert used <= limit


TestContention = Contention.TestCase
