"""Helpers for capacity-maintenance tests: seeded roots, whole-world snapshots, worker scripts.

- :func:`seed` writes ``memories.json`` directly (fast, any entries), so a test can start from
  a full target without going through hundreds of adds.
- :func:`world` captures every file of an in-memory root (its audit log apart) and the whole
  content of its in-memory long-term store: "nothing changed" means equal worlds.
- :func:`archive_script` is an archiver a test can corrupt: it remembers every entry through
  the tool box (staged) and maps each index to the id the remember returned.
- :func:`takeover_script` is a hostile compactor of a valid shape: it replaces every entry
  with one entry of its own.
- :func:`held_run_data` finds what an object (a root) still holds of maintenance runs: a run
  value or a worker's tool box reachable from it means a run outlived its end.
"""

from __future__ import annotations

import gc
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mnemon_sm.flows.hot.maintenance import Run
from mnemon_sm.flows.hot.model import SOURCE_PATH, HotEntry, HotStore, Target
from mnemon_sm.flows.long_term.tools import NoTools, ScopedTools
from mnemon_sm.ports import Ports
from mnemon_sm.ports.workers import ToolBox, WorkerRequest
from mnemon_sm.testing.longterm import MemoryLongTermStore
from mnemon_sm.testing.memory import MemoryFiles
from mnemon_sm.testing.snapshot import files_state
from mnemon_sm.text import iso_ms

__all__ = [
    "archive_script",
    "held_run_data",
    "insight_contents",
    "seed",
    "takeover_script",
    "world",
]

T0 = iso_ms(1_786_000_000_000)


def seed(ports: Ports, entries: Sequence[tuple[Target, str, str]]) -> HotStore:
    """Write ``memories.json`` holding ``(target, content, importance)`` entries."""
    store = HotStore(tuple(HotEntry(c, T0, T0, t, i) for t, c, i in entries))  # type: ignore[arg-type]
    files = ports.files
    assert isinstance(files, MemoryFiles)
    files.put(SOURCE_PATH, store.encode())
    return store


def world(ports: Ports) -> tuple[dict[str, bytes], dict[str, Any]]:
    """Every file (the audit log's apart, see :mod:`~mnemon_sm.testing.snapshot`) and every
    long-term record (active and forgotten insights, edges)."""
    files, store = ports.files, ports.long_term
    assert isinstance(files, MemoryFiles) and isinstance(store, MemoryLongTermStore)
    long_term = {
        space: (dict(s.insights), dict(s.deleted), dict(s.edges))
        for space, s in store.data.items()
    }
    return files_state(files.files), long_term


def insight_contents(ports: Ports) -> dict[str, list[str]]:
    """Active insight contents per space (duplicates would appear twice)."""
    store = ports.long_term
    assert isinstance(store, MemoryLongTermStore)
    return {space: [i.content for i in s.insights.values()] for space, s in store.data.items()}


Corrupt = Callable[[dict[str, Any]], dict[str, Any]]


def archive_script(
    space: str,
    *,
    keep: Callable[[Sequence[Mapping[str, Any]]], list[dict[str, Any]]] | None = None,
    corrupt: Corrupt | None = None,
    during: Callable[[], None] | None = None,
    extra: Callable[[ToolBox], None] | None = None,
    skip: Sequence[int] = (),
) -> Callable[[WorkerRequest, ToolBox], object]:
    """An archiver: remember every snapshot entry into ``space`` (but the indexes in ``skip``,
    mapped to an empty id for ``corrupt`` to fill), map each index to the returned id, keep
    what ``keep`` proposes (default: every entry verbatim), then let ``corrupt`` edit the
    result, ``extra`` make more tool calls and ``during`` act (another writer) before
    returning."""

    def run(request: WorkerRequest, tools: ToolBox) -> object:
        entries: Sequence[Mapping[str, Any]] = request.data["snapshot"]
        tools.call("mnemon_memory_bodies", {})
        archived = []
        for e in entries:
            ident = ""
            if e["index"] not in skip:
                receipt = tools.call(
                    "mnemon_remember", {"content": e["content"], "memoryBodyId": space}
                )
                ident = receipt["id"]
            archived.append({"sourceIndex": e["index"], "memoryBodyId": space, "id": ident})
        compacted = (
            keep(entries)
            if keep is not None
            else [
                {
                    "content": e["content"],
                    "importance": e["importance"],
                    "sourceIndexes": [e["index"]],
                }
                for e in entries
            ]
        )
        result: dict[str, Any] = {
            "summary": "archived",
            "action": "archived",
            "memoryBodyIds": [space],
            "archived": archived,
            "compactedEntries": compacted,
        }
        if corrupt is not None:
            result = corrupt(result)
        if extra is not None:
            extra(tools)
        if during is not None:
            during()
        return result

    return run


def takeover_script(
    content: str, *, summary: str = "merged"
) -> Callable[[WorkerRequest, ToolBox], object]:
    """A compactor that replaces every snapshot entry with one critical entry ``content``,
    covering every source index once: a result every shape rule accepts."""

    def run(request: WorkerRequest, tools: ToolBox) -> object:
        n = len(request.data["snapshot"])
        entry = {"content": content, "importance": "critical", "sourceIndexes": [*range(1, n + 1)]}
        return {"summary": summary, "action": "compacted", "compactedEntries": [entry]}

    return run


# Followed by nothing: what every object shares (code, classes, modules and their globals).
_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.CodeType)


def held_run_data(obj: object, kinds: tuple[type, ...] = ()) -> list[object]:
    """Every maintenance :class:`~mnemon_sm.flows.hot.maintenance.Run` and worker tool box
    reachable from ``obj`` through its own objects (instance attributes, containers, bound
    methods' instances, the engine's queues and caches); modules, classes and functions,
    which every object shares, are not followed. Between two operations the answer for a
    root must be empty: nothing of a finished or interrupted run is kept. ``kinds`` adds the
    run values of other flows to look for."""
    wanted = (Run, ScopedTools, NoTools, *kinds)
    found: list[object] = []
    seen = {id(obj)}
    todo = [obj]
    while todo:
        current = todo.pop()
        if isinstance(current, wanted):
            found.append(current)
        for ref in gc.get_referents(current):
            if id(ref) not in seen and not isinstance(ref, _OPAQUE):
                seen.add(id(ref))
                todo.append(ref)
    return found
