"""The flow contexts of a root, by flow name: for tests that drive or inspect every flow (the
illegal-event table, the abort table, port probes).

Each entry is a callable so that asking for one flow builds nothing else: the lifecycle's
context exists only once an agent is asked for (``agent`` names it). The migration flow runs on
two roots rather than inside one: :func:`migration_flow` gives the one of a root's ports, its
files the source's (with a space in an embedded store beside them), and :func:`retarget`
points it at a new empty target before each run.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Callable
from pathlib import Path

from mnemon_sm.adapters.sqlite import EmbeddedStore
from mnemon_sm.engine.context import FlowContext
from mnemon_sm.flows.migration import MigrationEnd, MigrationFlow
from mnemon_sm.root import MemoryRoot
from mnemon_sm.testing.memory import FakeClock, MemoryFiles

__all__ = ["flow_contexts", "migration_flow", "retarget"]

_MIGRATIONS: weakref.WeakKeyDictionary[object, MigrationFlow] = weakref.WeakKeyDictionary()


def migration_flow(root: MemoryRoot) -> MigrationFlow:
    """The migration context of ``root``'s ports (one per ``Files`` object): the source is the
    root's files and an embedded store holding one space with one insight."""
    files = root._ports.files
    found = _MIGRATIONS.get(files)
    if found is None:
        base = Path(tempfile.mkdtemp(prefix="mnemon-migration-flow-"))
        store = EmbeddedStore(base / "source", FakeClock())
        store.create_space("notes")
        store.remember("notes", "The deploy script lives in tools/deploy.sh")
        found = MigrationFlow(MigrationEnd(files, store, "source"), _target(base))
        weakref.finalize(found, shutil.rmtree, base, True)
        _MIGRATIONS[files] = found
    return found


def _target(base: Path) -> MigrationEnd:
    where = Path(tempfile.mkdtemp(prefix="target-", dir=base))
    return MigrationEnd(MemoryFiles(), EmbeddedStore(where, FakeClock()), "target")


def retarget(flow: MigrationFlow) -> MigrationFlow:
    """Point ``flow`` at a new empty target (beside its source's store); returns it."""
    source = flow.source.store
    assert isinstance(source, EmbeddedStore)
    flow.target = _target(source.root.parent)
    return flow


def flow_contexts(root: MemoryRoot, agent: str = "agent") -> dict[str, Callable[[], FlowContext]]:
    """``{flow name: a callable returning its context in root}``, for every flow."""
    lt = root.long_term
    return {
        "hot_memory_mutation": lambda: root._flow,
        "hot_memory_maintenance": lambda: root._maintenance,
        "document_mutation": lambda: root.documents._flow,
        "document_search": lambda: root.documents._search,
        "agent_lifecycle": lambda: root.lifecycle(agent)._flow,
        "recall": lambda: lt._recall,
        "direct_search": lambda: lt._direct,
        "agent_search": lambda: lt._agent,
        "long_term_write": lambda: lt._write,
        "merge_spaces": lambda: lt._merge,
        "memory_spaces": lambda: lt._spaces,
        "store_upkeep": lambda: lt._upkeep,
        "root_migration": lambda: migration_flow(root),
    }
