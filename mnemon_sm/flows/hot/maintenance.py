"""Context of ``specs/hot_memory_maintenance.yaml``: capacity maintenance of a public add.

Theory of operation
-------------------
The spec orders the work; each entry action below does one step and raises the outcome event.
The add itself goes through the hot-memory flow exactly as a plain add does, at no extra
cost. Only when that flow rejects it with ``CapacityExceeded`` does the facade send this
flow's ``overflow`` event (with the request and the error), which starts maintenance: a
snapshot of the target (read without the lock), a worker run (on its own thread, with a
timeout; no lock is ever held while a worker runs), pure checks of its result
(:mod:`mnemon_sm.flows.hot.maintenance_checks`), for MEMORY.md the archive's long-term writes
(:meth:`MaintenanceFlow.apply_archive`, which first confirms that every existing insight the
archive names holds its entry's text), and finally one ``compact`` event of the hot-memory
flow, which compares the revision, packs the candidates, preserves every entry that leaves
hot memory in the fsynced history (:mod:`mnemon_sm.flows.hot.history`) and retries the pending add,
in one commit under one lock. So whatever a worker returns, an entry leaves hot memory only
after its exact text is in the history (and, for MEMORY.md, verbatim in long-term memory).

USER.md's compactor gets :class:`~mnemon_sm.flows.long_term.tools.NoTools`: the user profile never
reaches long-term memory, and a worker that tries fails the run. MEMORY.md's archiver gets the
catalog, recall, remember and space creation; its writes are staged by the tool box and
applied only after its result passed every check, so a refused result writes nothing at all.
Applied remembers are journaled (:mod:`mnemon_sm.flows.hot.journal`, one durable update per
archive, written even when a later remember failed) and reused by later attempts.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from mnemon_sm.config import Config
from mnemon_sm.engine.context import FlowContext
from mnemon_sm.engine.flow import Machine
from mnemon_sm.engine.registry import flow_context
from mnemon_sm.errors import (
    CapacityExceeded,
    InvalidInput,
    MaintenanceRejected,
    MnemonError,
    StorageError,
)
from mnemon_sm.flows.hot.compaction import Compaction
from mnemon_sm.flows.hot.journal import Journal, JournalWrite, content_key
from mnemon_sm.flows.hot.maintenance_checks import (
    check_archive,
    check_compaction,
    holds_text,
    parse_result,
)
from mnemon_sm.flows.hot.maintenance_prompts import render_body
from mnemon_sm.flows.hot.maintenance_values import (
    ArchivedEntry,
    ArchiveResult,
    Candidate,
    CompactionResult,
    MaintenanceBlock,
)
from mnemon_sm.flows.hot.maintenance_values import Snapshot as Snap
from mnemon_sm.flows.hot.model import HotStore
from mnemon_sm.flows.hot.mutation import HotMutationFlow
from mnemon_sm.flows.hot.packing import budget
from mnemon_sm.flows.hot.rules import Mutation, check_request
from mnemon_sm.flows.long_term.api import LongTermMemory
from mnemon_sm.flows.long_term.service import LongTermService
from mnemon_sm.flows.long_term.tools import NoTools, RememberArgs, ScopedTools
from mnemon_sm.flows.workers.requests import build_request
from mnemon_sm.flows.workers.runner import Delegate
from mnemon_sm.ports import Clock
from mnemon_sm.redact import redact
from mnemon_sm.text import iso_ms

__all__ = ["ARCHIVE_GRANTS", "MaintenanceFlow"]

ARCHIVE_GRANTS = (
    "mnemon_memory_bodies",
    "mnemon_recall",
    "mnemon_remember",
    "mnemon_memory_body_create",
)


@flow_context("MaintenanceFlow")
class MaintenanceFlow(FlowContext):
    FLOW = "hot_memory_maintenance"

    def __init__(
        self,
        hot: HotMutationFlow,
        hot_mutex: threading.RLock,
        current: Callable[[], HotStore],
        config: Config,
        clock: Clock,
        delegate: Delegate,
        long_term: Callable[[], LongTermMemory],
        journal: Journal,
    ) -> None:
        """``hot`` is the root's hot-memory flow and ``hot_mutex`` the mutex that serializes
        its use in this process: it is held for each hot-memory step, never while a worker
        runs, so other operations on the root proceed meanwhile (and make a stale compaction
        fail its revision check). ``long_term`` opens the root's long-term tier on demand;
        an archive holds its mutex while its worker runs and while its writes are applied.
        """
        self.hot, self.hot_mutex, self.current = hot, hot_mutex, current
        self.config, self.clock = config, clock
        self.delegate, self.long_term, self.journal = delegate, long_term, journal
        self._request: dict[str, Any] = {}
        self._overflow: CapacityExceeded | None = None
        self._pending: Mutation | None = None
        self._snapshot: Snap | None = None
        self._run_id = ""
        self._raw: object = None
        self._tools: NoTools | ScopedTools | None = None
        self._summary = ""
        self._candidates: tuple[Candidate, ...] = ()
        self._rows: tuple[ArchivedEntry, ...] = ()
        self._written: tuple[str, ...] = ()
        self._used: set[str] = set()
        self._records: list[JournalWrite] = []
        super().__init__()

    # -- validators ------------------------------------------------------------------------

    def check_request(self, request: Mapping[str, Any], overflow: CapacityExceeded) -> None:
        if overflow.target != request.get("target"):
            raise InvalidInput("the overflow does not belong to this add's target")
        self._request, self._overflow = dict(request), overflow

    # -- steps -----------------------------------------------------------------------------

    def take_snapshot(self, machine: Machine) -> None:
        overflow = self._overflow
        assert overflow is not None
        try:
            with self.hot_mutex:
                store = self.current()
        except StorageError as exc:
            return self.refuse(machine, "snapshot_refused", exc)
        pending: Mutation = check_request("add", **self._request)
        assert pending.content is not None
        target, limit = pending.target, self.config.limit(pending.target)
        entries = store.of(target)
        size = len(pending.content.encode("utf-8"))
        if not entries or size > limit:
            why = (
                "no committed entries to compact" if not entries else "the entry alone exceeds it"
            )
            error = CapacityExceeded(
                f"{overflow.message} Maintenance cannot help: {why}.",
                target=overflow.target,
                used=overflow.used,
                projected=overflow.projected,
                limit=overflow.limit,
            )
            return self.refuse(machine, "snapshot_refused", error)
        self._pending = pending
        self._snapshot = Snap(
            target,
            store.revision(),
            entries,
            pending.content,
            pending.importance or "normal",
            budget(limit, size),
        )
        self._run_id = f"mnt-{self.clock.now_ms()}-{self._snapshot.revision[:8]}"
        machine.raise_("snapshot_taken")

    def run_worker(self, machine: Machine) -> None:
        snap = self._snapshot
        assert snap is not None
        data = {
            "target": snap.target,
            "pending": {"content": snap.pending_content, "importance": snap.pending_importance},
            "snapshot": [
                {"index": i, "content": e.content, "importance": e.importance}
                for i, e in enumerate(snap.entries, 1)
            ],
            "budgetBytes": snap.budget,
        }
        tools: NoTools | ScopedTools
        try:
            if snap.target == "user":
                tools = NoTools()
                request = build_request(
                    "compact", data, (), CompactionResult, body=render_body(snap)
                )
                self._raw = self.delegate.run(request, tools)
            else:
                body = render_body(snap)
                self._raw, tools = self.long_term().run_staged(
                    "archive", data, ARCHIVE_GRANTS, ArchiveResult, body=body
                )
        except MnemonError as exc:
            return self.refuse(machine, "worker_failed", exc)
        self._tools = tools
        machine.raise_("worker_answered")

    def validate_result(self, machine: Machine) -> None:
        snap = self._snapshot
        assert snap is not None
        sources = [(e.content, e.importance) for e in snap.entries]
        try:
            if isinstance(self._tools, ScopedTools):
                archive = parse_result(self._raw, ArchiveResult)
                self._summary = redact(archive.summary)
                staged, created = _staged(self._tools)
                self._candidates, self._rows = check_archive(archive, sources, staged, created)
            else:
                compaction = parse_result(self._raw, CompactionResult)
                self._summary = redact(compaction.summary)
                self._candidates = check_compaction(compaction, sources, snap.budget)
        except MaintenanceRejected as exc:
            return self.refuse(machine, "result_rejected", exc)
        machine.raise_("result_accepted")

    def apply_archive(self, machine: Machine) -> None:
        tools, snap = self._tools, self._snapshot
        assert isinstance(tools, ScopedTools) and snap is not None
        service = tools.service
        existing = [r for r in self._rows if not r.id.startswith("pending-")]
        try:
            with self.long_term().mutex:
                _confirm(service, existing, [e.content for e in snap.entries])
                try:
                    applied = tools.apply(reuse=self._reuse, record=self._record)
                finally:  # the writes made so far, even when a later one failed
                    self.journal.record(self._records)
        except MnemonError as exc:
            return self.refuse(machine, "archive_failed", exc)
        self._written = tuple(dict.fromkeys(a.space_id for a in applied))
        machine.raise_("archive_written")

    def commit_compaction(self, machine: Machine) -> None:
        snap, pending = self._snapshot, self._pending
        assert snap is not None and pending is not None
        compaction = Compaction(
            snap.target,
            snap.revision,
            snap.entries,
            self._candidates,
            snap.budget,
            pending,
            self._run_id,
        )
        try:
            with self.hot_mutex:
                receipt = self.hot.run("compact", compaction=compaction)
                kept = self.hot.kept
        except MnemonError as exc:
            return self.refuse(machine, "commit_refused", exc)
        # The add is acknowledged now; records the journal fails to drop stay harmless (they
        # only let a later archive reuse an insight that exists).
        with contextlib.suppress(StorageError):
            self.journal.settle(self._used)
        block = MaintenanceBlock(
            snap.kind,
            self._run_id,
            self._summary,
            self._written,
            snap.size,
            kept,
        )
        self.settle(machine, "compacted", attrs.evolve(receipt, maintenance=block))

    # -- guards ----------------------------------------------------------------------------

    def is_archive(self) -> bool:
        return isinstance(self._tools, ScopedTools)

    # -- journal hooks (called while applying staged remembers) ----------------------------

    def _reuse(self, args: RememberArgs, space_id: str | None) -> dict[str, Any] | None:
        found = self.journal.find(args.content)
        if found is None or space_id not in (None, found.memory_body_id):
            return None
        tools = self._tools
        assert isinstance(tools, ScopedTools)
        service = tools.service
        try:
            space = service.catalog.get(found.memory_body_id)
            alive = space.active and service.store.insights(space.id, [found.id])
        except MnemonError:
            return None
        if not alive:
            return None
        self._used.add(found.content_sha256)
        return {
            "id": found.id,
            "memoryBodyId": space.id,
            "memoryBodyName": space.name,
            "action": "reused",
        }

    def _record(self, args: RememberArgs, receipt: dict[str, Any]) -> None:
        key = content_key(args.content)
        self._records.append(
            JournalWrite(
                key,
                str(receipt["memoryBodyId"]),
                str(receipt["id"]),
                self._run_id,
                iso_ms(self.clock.now_ms()),
            )
        )
        self._used.add(key)

    # -- per-operation data ----------------------------------------------------------------

    def reset(self) -> None:
        self._request, self._overflow, self._pending, self._snapshot = {}, None, None, None
        self._run_id, self._raw, self._tools, self._summary = "", None, None, ""
        self._candidates, self._rows, self._written, self._used = (), (), (), set()
        self._records = []


def _staged(
    tools: ScopedTools,
) -> tuple[dict[str, tuple[str | None, str]], tuple[str, ...]]:
    """Provisional insight ids of this run's staged remembers with the space each names and
    the content it stages, and the provisional ids of the spaces the run creates."""
    remembers = {
        w.pending_id: (w.args.memory_body_id, w.args.content)
        for w in tools.staged
        if w.tool == "mnemon_remember" and w.pending_id is not None
    }
    created = tuple(
        w.pending_id
        for w in tools.staged
        if w.tool == "mnemon_memory_body_create" and w.pending_id is not None
    )
    return remembers, created


def _confirm(service: LongTermService, rows: list[ArchivedEntry], entries: list[str]) -> None:
    """RULE-MNT-10 and 13 for ids that are not this run's: each is an active insight of its
    named, active space and holds its entry's text (``entries`` by one-based index)."""
    by_space: dict[str, list[ArchivedEntry]] = {}
    for row in rows:
        by_space.setdefault(row.memory_body_id, []).append(row)
    for space_id, group in by_space.items():
        try:
            space = service.catalog.get(space_id)
        except MnemonError:
            space = None
        if space is None or not space.active:
            raise MaintenanceRejected(
                "archive-unknown",
                f"source index {group[0].source_index} names space {space_id!r}, which is "
                "not an active space",
            )
        found = {i.id: i for i in service.store.insights(space.id, [r.id for r in group])}
        for row in group:
            insight = found.get(row.id)
            if insight is None:
                raise MaintenanceRejected(
                    "archive-unknown",
                    f"source index {row.source_index} names {row.id!r}, which is not an "
                    f"active insight of {space_id!r}",
                )
            if not holds_text(insight.content, entries[row.source_index - 1]):
                raise MaintenanceRejected(
                    "archive-content",
                    f"source index {row.source_index} is mapped to insight {row.id!r}, which "
                    "does not hold the entry's text",
                )
