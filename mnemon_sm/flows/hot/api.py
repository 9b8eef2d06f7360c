"""The public facade of hot memory: ``MemoryRoot.hot`` and the per-turn ``MemoryRoot.context``.

Operations on one root are serialized inside the process by a mutex and across processes by the
root's file lock; every failure is a typed ``MnemonError``. A public ``add`` that overflows its
target is handed to capacity maintenance (``specs/hot_memory_maintenance.yaml``) as that
flow's ``overflowed`` event, carrying the rejected add and the caller's ``maintenance``
choice; the maintenance spec decides whether to compact (the caller's opt-out and a
read-only root are guards there) or to report the overflow unchanged.
"""

from __future__ import annotations

import threading
from typing import Any

import attrs

from mnemon_sm.config import Config
from mnemon_sm.errors import CapacityExceeded, InvalidInput, ReadOnly
from mnemon_sm.flows.hot.context_text import ROUTING_GUIDANCE, render_runtime_memory
from mnemon_sm.flows.hot.group import GroupCommit
from mnemon_sm.flows.hot.history import HistoryItem, HotHistory
from mnemon_sm.flows.hot.maintenance import MaintenanceFlow
from mnemon_sm.flows.hot.model import (
    SOURCE_PATH,
    TARGETS,
    HotEntry,
    HotStore,
    projection_path,
)
from mnemon_sm.flows.hot.mutation import HotMutationFlow
from mnemon_sm.flows.hot.rules import Commit, Receipt, Rejected, check_request, plan_mutation
from mnemon_sm.flows.hot.store import SourceCache
from mnemon_sm.flows.workers.runner import Delegate, host_only
from mnemon_sm.observe import observed
from mnemon_sm.ports import Ports
from mnemon_sm.text import iso_ms

__all__ = ["Context", "HotMemory", "HotSnapshot", "Preview"]


@attrs.frozen
class HotSnapshot:
    """A read of hot memory: the revision and, per target, entries and usage."""

    revision: str
    entries: tuple[HotEntry, ...]
    usage: dict[str, tuple[int, int]]  # target -> (used, limit)

    def of(self, target: str) -> tuple[HotEntry, ...]:
        return tuple(e for e in self.entries if e.target == target)

    def to_json(self, target: str | None = None) -> dict[str, Any]:
        """``{"revision": ..., "<target>": {"entries": [...], "usage": {...}}, ...}``."""
        out: dict[str, Any] = {"revision": self.revision}
        for t in TARGETS:
            if target is None or t == target:
                used, limit = self.usage[t]
                out[t] = {
                    "entries": [
                        {
                            "content": e.content,
                            "importance": e.importance,
                            "createdAt": e.created_at,
                            "updatedAt": e.updated_at,
                        }
                        for e in self.of(t)
                    ],
                    "usage": {"used": used, "limit": limit},
                }
        return out


@attrs.frozen
class Preview:
    """What a hot-memory change would do now (:meth:`HotMemory.preview`)."""

    receipt: Receipt
    changes: bool  # False: it is in effect already (an add equal to an entry)

    def to_json(self) -> dict[str, Any]:
        """``{"changes", "receipt"}``."""
        return {"changes": self.changes, "receipt": self.receipt.to_json()}


class _Shared:
    """What the facades of one root share: ports, config, the source cache and a mutex."""

    def __init__(self, ports: Ports, config: Config, delegate: Delegate) -> None:
        self.ports, self.config, self.delegate = ports, config, delegate
        self.cache = SourceCache()
        self.mutex = threading.RLock()

    def current(self) -> HotStore:
        """The source as it is on disk now; parses only when its bytes changed."""
        stamp, data = self.ports.files.read_if_changed(SOURCE_PATH, self.cache.stamp)
        if stamp is None:
            store = self.cache.load(None)
        elif data is None:
            return self.cache.store
        else:
            store = self.cache.load(data)
            self.cache.stamp = stamp
        return store

    def bring_projections_up_to_date(self, flow: HotMutationFlow) -> HotStore:
        """Repair a projection that no longer matches the source (see ``stale_projections``;
        the repair is the flow's ``repair`` event, postponed by a busy lock); returns the
        source. Call with the mutex held."""
        store = self.current()
        if self.stale_projections(store):
            flow.repair()
        return store

    def stale_projections(self, store: HotStore) -> bool:
        """Whether a projection may no longer match ``store``.

        A projection verified before is only stat'ed; one that changed (a hand edit, a writer
        that crashed between its projection and its commit) is compared; one that matches is
        remembered as verified.
        """
        files, stamps = self.ports.files, self.cache.projection_stamps
        stale = False
        for target in TARGETS:
            stamp, data = files.read_if_changed(projection_path(target), stamps.get(target))
            if stamp is None:
                stale = True
            elif data is None:
                continue  # unchanged since it was verified
            elif data == store.projection(target):
                stamps[target] = stamp
            else:
                stale = True
        return stale


class HotMemory:
    """USER.md and MEMORY.md: add, replace, remove and read."""

    def __init__(
        self,
        shared: _Shared,
        flow: HotMutationFlow,
        maintenance: MaintenanceFlow,
        history: HotHistory,
    ) -> None:
        self._shared, self._flow, self._maintenance = shared, flow, maintenance
        self._history, self._delegate = history, shared.delegate
        self._maintenance_mutex = threading.RLock()
        self._group = GroupCommit(flow, shared.config, shared.mutex)

    @host_only
    @observed("hot.add")
    def add(
        self,
        target: str,
        content: str,
        importance: str | None = None,
        *,
        maintenance: bool = True,
    ) -> Receipt:
        """Append ``content`` to ``target``; an exact duplicate changes nothing.

        When the add would overflow its target and ``maintenance`` is on, capacity maintenance
        makes room first: USER.md is compacted locally, MEMORY.md is archived into long-term
        memory and compacted, each by a worker whose result the host checks; the compaction
        and the add then commit together and the receipt's ``maintenance`` says what was done.
        Anything refused leaves hot memory as it was.

        Raises:
            InvalidInput, CapacityExceeded, ReadOnly: the request was rejected; nothing changed.
            MaintenanceRejected, WorkerFailed: the worker's result was refused or the worker
                failed; hot memory is unchanged.
            RevisionConflict: another writer changed the target while the worker ran; nothing
                was compacted (run the add again).
            LockTimeout, CorruptStore, StorageError: the root could not be used.
        """
        request = {"target": target, "content": content, "importance": importance}
        try:
            return self._group.run("add", **request)
        except CapacityExceeded as overflow:
            # An opted-out add never reaches the maintenance machine: one machine serves the
            # root, so sending it would make the add wait for a maintenance in flight in this
            # process (a review's add would wait for a worker). The spec's else edge states
            # the same rule for an opted-out overflowed event; every other overflow is handed
            # on, and the spec decides (a read-only root reports the overflow unchanged).
            if not maintenance:
                raise
            with self._maintenance_mutex:
                try:
                    receipt: Receipt = self._maintenance.perform(
                        "overflowed", request=request, overflow=overflow, maintenance=maintenance
                    )
                except (CapacityExceeded, ReadOnly, InvalidInput):
                    raise  # no round ran: the overflow (or the request) reported as it is
                except Exception as exc:
                    self._delegate.events.failed("maintenance.failed", exc, target=target)
                    raise
            block = receipt.maintenance
            if block is not None and self._delegate.events.active:
                self._delegate.events.emit(
                    "maintenance.finished",
                    {
                        "target": receipt.target,
                        "maintenanceKind": block.kind,
                        "runId": block.run_id,
                        "sourceEntries": block.source_entries,
                        "keptEntries": block.kept_entries,
                        "memoryBodyIds": list(block.memory_body_ids),
                    },
                    result=block,
                )
            return receipt

    @host_only
    @observed("hot.replace")
    def replace(
        self, target: str, old_text: str, content: str, importance: str | None = None
    ) -> Receipt:
        """Replace the one entry of ``target`` containing ``old_text`` with ``content``.

        Raises:
            NoMatch, AmbiguousMatch, DuplicateEntry: plus everything :meth:`add` raises.
        """
        return self._group.run(
            "replace", target=target, old_text=old_text, content=content, importance=importance
        )

    @host_only
    @observed("hot.remove")
    def remove(self, target: str, old_text: str) -> Receipt:
        """Remove the one entry of ``target`` containing ``old_text``.

        Raises:
            NoMatch, AmbiguousMatch: plus the storage errors :meth:`add` raises.
        """
        return self._group.run("remove", target=target, old_text=old_text)

    @host_only
    def preview(
        self,
        action: str,
        target: str,
        *,
        content: str | None = None,
        old_text: str | None = None,
        importance: str | None = None,
    ) -> Preview:
        """What ``add``, ``replace`` or ``remove`` would do on the committed entries now, by
        the same rules, without writing anything (no lock; no maintenance): the receipt, and
        whether it would change anything (an add equal to an entry would not).

        Raises:
            the typed error the change would raise (``NoMatch``, ``CapacityExceeded``, ...).
        """
        shared = self._shared
        if not shared.config.write_enabled:
            raise ReadOnly()
        mutation = check_request(action, target, content, old_text, importance)
        with shared.mutex:
            store = shared.current()
        now = iso_ms(shared.ports.clock.now_ms())
        outcome = plan_mutation(store, mutation, now, shared.config.limit(mutation.target))
        if isinstance(outcome, Rejected):
            raise outcome.error
        return Preview(outcome.receipt, isinstance(outcome, Commit))

    @host_only
    def history(self, target: str | None = None) -> tuple[HistoryItem, ...]:
        """Entries capacity maintenance took out of hot memory (removed, or rewritten into a
        merged entry), newest round first: the exact text each had, kept in
        ``state/hot-history.jsonl`` (the newest 64 rounds are never dropped).

        Raises:
            InvalidInput: a bad target. CorruptStore: the history file is invalid.
        """
        return tuple(HistoryItem.of(r, e) for r, e in self._history.entries(target))

    @host_only
    @observed("hot.restore")
    def restore(self, history_id: str, *, maintenance: bool = False) -> Receipt:
        """Add a preserved entry back to its target through the normal add path (its
        capacity rules included; with ``maintenance`` an overflow compacts as any add does).
        An entry that is back already changes nothing.

        Raises:
            UnknownHistoryEntry: no entry has this id. Everything :meth:`add` raises.
        """
        if not isinstance(history_id, str):
            raise InvalidInput("a history id is a string")
        round_, entry = self._history.find(history_id)
        return self.add(round_.target, entry.content, entry.importance, maintenance=maintenance)

    @host_only
    def write_projections(self) -> bool:
        """Bring USER.md and MEMORY.md up to date with ``memories.json`` now. With
        ``projections = "lazy"`` commits leave them for the next render of context (or this
        call, or closing the root); with ``eager`` this only repairs a hand edit or a crashed
        writer's leftovers. Returns whether both files match the committed entries afterwards
        (False: the lock was busy or a write failed; the next render tries again).
        """
        shared = self._shared
        with shared.mutex:
            store = shared.bring_projections_up_to_date(self._flow)
            return not shared.stale_projections(store)

    @host_only
    def snapshot(self) -> HotSnapshot:
        """The committed entries, their usage and the source revision (takes no lock)."""
        shared = self._shared
        with shared.mutex:
            store = shared.current()
            usage: dict[str, tuple[int, int]] = {
                t: (store.used(t), shared.config.limit(t)) for t in TARGETS
            }
            return HotSnapshot(store.revision(), store.entries, usage)


class Context:
    """The texts a host adds to model input on every turn."""

    def __init__(self, shared: _Shared, flow: HotMutationFlow) -> None:
        self._shared, self._delegate, self._flow = shared, shared.delegate, flow

    @host_only
    def runtime_memory(self) -> str:
        """Both hot-memory files with the usage protocol.

        An unchanged store is answered from memory: no lock, no re-read of what is cached.
        A projection found out of date is repaired by the hot-memory flow's ``repair`` event
        (a busy lock postpones it; the text itself comes from the source).
        """
        shared = self._shared
        with shared.mutex:
            store = shared.bring_projections_up_to_date(self._flow)
            cfg = shared.config
            return render_runtime_memory(store, cfg.user_limit, cfg.memory_limit)

    def routing_guidance(self) -> str:
        """The short routing paragraph, or ``""`` when ``routingGuidance`` is off."""
        return ROUTING_GUIDANCE if self._shared.config.routing_guidance else ""
