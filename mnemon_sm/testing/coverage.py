"""Which spec transitions a test run exercised.

:class:`TransitionRecorder` attaches itself to every machine the engine starts (through
``engine.flow.add_observer``) and records each transition taken as ``(flow, source, index)``,
``index`` being the transition's position in its source state (document order, as in the
spec and the rendered tables). :meth:`TransitionRecorder.missing` lists what was never taken.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from mnemon_sm.engine.flow import add_observer, remove_observer
from mnemon_sm.engine.spec import TransitionDoc, flow_names, load_flow

__all__ = ["TransitionRecorder"]

Key = tuple[str, str, int]


class TransitionRecorder:
    """Records transitions of every machine started while it is installed."""

    def __init__(self) -> None:
        self.seen: set[Key] = set()
        self._index: dict[str, dict[int, tuple[str, int]]] = {}

    def install(self) -> None:
        add_observer(self._listener)

    def uninstall(self) -> None:
        remove_observer(self._listener)

    def _listener(self, flow: str) -> object:
        if flow not in self._index:
            cls = load_flow(flow).machine_class
            self._index[flow] = {
                id(t): (state.id, i)
                for state in cls.states
                for i, t in enumerate(state.transitions)
            }
        return _Listener(self, flow, self._index[flow])

    def all(self) -> list[tuple[str, TransitionDoc]]:
        """Every transition of every spec."""
        return [(f, t) for f in flow_names() for t in load_flow(f).spec.transitions]

    def missing(self) -> list[tuple[str, TransitionDoc]]:
        """Transitions of every spec that were never taken."""
        return [(f, t) for f, t in self.all() if (f, t.source, t.index) not in self.seen]


class _Listener:
    def __init__(self, recorder: TransitionRecorder, flow: str, index: dict[int, Any]) -> None:
        self._recorder, self._flow, self._index = recorder, flow, index

    def after_transition(self, transition: Any) -> None:
        found = self._index.get(id(transition))
        if found is not None:  # None: the engine's initial pseudo-transition
            self._recorder.seen.add((self._flow, *found))


def whole_suite(collected: Collection[str], root: Path, test_paths: Collection[str]) -> bool:
    """Whether the collected test files (``collected``, paths) are every ``test_*.py`` file of
    the test paths (relative to ``root``): the transition coverage means something only then."""
    expected = {str(path) for name in test_paths for path in (root / name).glob("test_*.py")}
    return bool(expected) and expected <= set(collected)
