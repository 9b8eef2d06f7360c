"""Context of ``specs/hot_memory_maintenance.yaml``: capacity maintenance of a public add.

Theory of operation
-------------------
The spec orders the work; each entry action below does one step and raises the outcome event.
The add itself goes through the hot-memory flow exactly as a plain add does, at no extra
cost. When that flow rejects it with ``CapacityExceeded``, the facade hands this typed outcome
to this flow as its ``overflowed`` event, carrying the rejected add (``request``: target,
content, importance), the error (``overflow``) and the caller's choice (``maintenance``). The
spec decides what follows: maintenance runs only when the caller asked for it and the root
is writable (the guards ``is_maintenance_requested`` and ``is_writable``); otherwise the flow stays
idle and the overflow is reported unchanged (``report_overflow``). Maintenance is a snapshot
of the target (read without the lock), a worker run (on its own thread, with a timeout; no
lock is ever held while a worker runs), pure checks of its result
(:mod:`mnemon_sm.flows.hot.maintenance_checks`), for MEMORY.md the archive's long-term writes
(:meth:`MaintenanceFlow.apply_archive`, which first confirms that every existing insight the
archive names holds its entry's text), and finally one ``compact`` event of the hot-memory
flow, which compares the revision, packs the candidates, preserves every entry that leaves
hot memory in the fsynced history (:mod:`mnemon_sm.flows.hot.history`) and retries the
pending add, in one commit under one lock. So whatever a worker returns, an entry leaves hot
memory only after its exact text is in the history (and, for MEMORY.md, verbatim in long-term
memory).

A run's data travels with its events
------------------------------------
Everything one run knows is one frozen :class:`Run`. ``take_snapshot`` creates it and raises
``snapshot_taken(run=...)``; every later step receives it as the keyword argument of the
event that led into its state (python-statemachine passes event arguments to callbacks by
name, guards included) and raises its own outcome event with an evolved copy
(``attrs.evolve``). The context keeps no per-run attribute: between two steps the run exists
only in the engine's queue of internal events, and when the run ends, by an outcome or by an
exception (which drops the queue and fires ``abort``), nothing of it is left to reset or to
leak into the next run. Event arguments were chosen over a ``run`` attribute replaced at
each step because there is then nothing to clear on any path: an interrupted step cannot
leave a half-updated run behind. The only values the context holds are the root's
collaborators and, for :meth:`FlowContext.perform`, the operation's result or error.

USER.md's compactor gets :class:`~mnemon_sm.flows.long_term.tools.NoTools`: the user profile
never reaches long-term memory, and a worker that tries fails the run. MEMORY.md's archiver
gets the catalog, recall, remember and space creation; its writes are staged by the tool box
(held by the run) and applied only after its result passed every check, so a refused result
writes nothing at all. Applied remembers are journaled (:mod:`mnemon_sm.flows.hot.journal`,
one durable update per archive, written even when a later remember failed) and reused by
later attempts.
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
from mnemon_sm.flows.hot.packing import budget, pack
from mnemon_sm.flows.hot.rules import Mutation, check_request
from mnemon_sm.flows.long_term.api import LongTermMemory
from mnemon_sm.flows.long_term.service import LongTermService
from mnemon_sm.flows.long_term.tools import NoTools, RememberArgs, ScopedTools
from mnemon_sm.flows.workers.requests import build_request
from mnemon_sm.flows.workers.runner import Delegate
from mnemon_sm.ports import Clock
from mnemon_sm.redact import redact
from mnemon_sm.text import iso_ms

__all__ = ["ARCHIVE_GRANTS", "MaintenanceFlow", "Run"]

ARCHIVE_GRANTS = (
    "mnemon_memory_bodies",
    "mnemon_recall",
    "mnemon_remember",
    "mnemon_memory_body_create",
)


@attrs.frozen(eq=False)
class Run:
    """One maintenance run, carried by the events between its steps (see the module).

    ``take_snapshot`` fills the first three fields; ``run_worker`` adds the worker's raw
    result and its tool box (an archiver's staged writes live there), ``validate_result``
    the checked outcome, ``apply_archive`` what it wrote and the journal records it used.
    """

    pending: Mutation  # the rejected add, checked, retried on top of the compaction
    snapshot: Snap
    run_id: str
    raw: object = None  # the worker's result, not yet checked
    tools: NoTools | ScopedTools | None = None
    summary: str = ""  # the worker's summary, redacted
    candidates: tuple[Candidate, ...] = ()
    rows: tuple[ArchivedEntry, ...] = ()  # an archive's mapping, by source index
    written: tuple[str, ...] = ()  # spaces the archive's writes went to
    used: frozenset[str] = frozenset()  # journal keys of the remembers it wrote or reused


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
        super().__init__()

    # -- opening -----------------------------------------------------------------------------

    def recover_journal(self) -> None:
        """Entry of ``opening``: recover the archive journal (see :meth:`Journal.recover`); a
        read-only root changes nothing, not even by recovering, and a failure is left to the
        next opening (a bad journal is reported when an archive reads it)."""
        if self.config.write_enabled:
            with contextlib.suppress(StorageError):
                self.journal.recover()

    # -- validators and guards of ``overflowed`` (pure) ------------------------------------

    def check_request(self, request: Mapping[str, Any], overflow: CapacityExceeded) -> None:
        if overflow.target != request.get("target"):
            raise InvalidInput("the overflow does not belong to this add's target")

    def is_maintenance_requested(self, maintenance: object) -> bool:
        """The caller did not opt out (``add(..., maintenance=False)``)."""
        return bool(maintenance)

    def is_writable(self) -> bool:
        """A read-only root changes nothing, so it never compacts."""
        return self.config.write_enabled

    # -- the overflow reported as it is ----------------------------------------------------

    def report_overflow(self, overflow: CapacityExceeded) -> None:
        """Action of the ``overflowed`` edge that runs no maintenance: the add's own error
        is the operation's outcome, unchanged."""
        self.answer(error=overflow)

    # -- steps (entry actions; each receives the run from the event that led here) ---------

    def take_snapshot(
        self, machine: Machine, request: Mapping[str, Any], overflow: CapacityExceeded
    ) -> None:
        try:
            with self.hot_mutex:
                store = self.current()
        except StorageError as exc:
            return self.refuse(machine, "snapshot_refused", exc)
        pending: Mutation = check_request("add", **request)
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
        snap = Snap(
            target,
            store.revision(),
            entries,
            pending.content,
            pending.importance or "normal",
            budget(limit, size),
        )
        run_id = f"mnt-{self.clock.now_ms()}-{snap.revision[:8]}"
        machine.raise_("snapshot_taken", run=Run(pending, snap, run_id))

    def run_worker(self, machine: Machine, run: Run) -> None:
        snap = run.snapshot
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
                raw = self.delegate.run(request, tools)
            else:
                body = render_body(snap)
                raw, tools = self.long_term().run_staged(
                    "archive", data, ARCHIVE_GRANTS, ArchiveResult, body=body
                )
        except MnemonError as exc:
            return self.refuse(machine, "worker_failed", exc)
        machine.raise_("worker_answered", run=attrs.evolve(run, raw=raw, tools=tools))

    def validate_result(self, machine: Machine, run: Run) -> None:
        snap = run.snapshot
        sources = [(e.content, e.importance) for e in snap.entries]
        rows: tuple[ArchivedEntry, ...] = ()
        try:
            if isinstance(run.tools, ScopedTools):
                archive = parse_result(run.raw, ArchiveResult)
                summary = redact(archive.summary)
                staged, created = _staged(run.tools)
                candidates, rows = check_archive(archive, sources, staged, created)
            else:
                compaction = parse_result(run.raw, CompactionResult)
                summary = redact(compaction.summary)
                candidates = check_compaction(compaction, sources, snap.budget)
        except MaintenanceRejected as exc:
            return self.refuse(machine, "result_rejected", exc)
        checked = attrs.evolve(run, summary=summary, candidates=candidates, rows=rows)
        machine.raise_("result_accepted", run=checked)

    def apply_archive(self, machine: Machine, run: Run) -> None:
        tools, snap = run.tools, run.snapshot
        assert isinstance(tools, ScopedTools)
        existing = [r for r in run.rows if not r.id.startswith("pending-")]
        used: set[str] = set()
        records: list[JournalWrite] = []

        def reuse(args: RememberArgs, space_id: str | None) -> dict[str, Any] | None:
            return self._reuse(tools.service, used, args, space_id)

        def record(args: RememberArgs, receipt: dict[str, Any]) -> None:
            key = content_key(args.content)
            at = iso_ms(self.clock.now_ms())
            space, ident = str(receipt["memoryBodyId"]), str(receipt["id"])
            records.append(JournalWrite(key, space, ident, run.run_id, at))
            used.add(key)

        try:
            with self.long_term().mutex:
                _confirm(tools.service, existing, [e.content for e in snap.entries])
                try:
                    applied = tools.apply(reuse=reuse, record=record)
                finally:  # the writes made so far, even when a later one failed
                    self.journal.record(records)
        except MnemonError as exc:
            return self.refuse(machine, "archive_failed", exc)
        written = tuple(dict.fromkeys(a.space_id for a in applied))
        archived = attrs.evolve(run, written=written, used=frozenset(used))
        machine.raise_("archive_written", run=archived)

    def commit_compaction(self, machine: Machine, run: Run) -> None:
        snap = run.snapshot
        compaction = Compaction(
            snap.target,
            snap.revision,
            snap.entries,
            run.candidates,
            snap.budget,
            run.pending,
            run.run_id,
        )
        try:
            with self.hot_mutex:
                receipt = self.hot.run("compact", compaction=compaction)
        except MnemonError as exc:
            return self.refuse(machine, "commit_refused", exc)
        # The add is acknowledged now; records the journal fails to drop stay harmless (they
        # only let a later archive reuse an insight that exists).
        with contextlib.suppress(StorageError):
            self.journal.settle(run.used)
        # What the commit kept: the same packing, of the same candidates into the same
        # budget, as the hot-memory flow's compaction rules (RULE-CMP-3) applied.
        kept = pack([(c.content, c.importance) for c in run.candidates], snap.budget)
        block = MaintenanceBlock(
            snap.kind, run.run_id, run.summary, run.written, snap.size, len(kept)
        )
        self.settle(machine, "compacted", attrs.evolve(receipt, maintenance=block))

    # -- guards ----------------------------------------------------------------------------

    def is_archive(self, run: Run) -> bool:
        return isinstance(run.tools, ScopedTools)

    # -- journal hook (called while applying staged remembers) -----------------------------

    def _reuse(
        self, service: LongTermService, used: set[str], args: RememberArgs, space_id: str | None
    ) -> dict[str, Any] | None:
        """The receipt of the journaled insight holding ``args``' content, if it is still
        active in the same space (its key then joins ``used``); None: write it."""
        found = self.journal.find(args.content)
        if found is None or space_id not in (None, found.memory_body_id):
            return None
        try:
            space = service.space(found.memory_body_id)
            alive = space.active and service.insights(space.id, [found.id])
        except MnemonError:
            return None
        if not alive:
            return None
        used.add(found.content_sha256)
        return {
            "id": found.id,
            "memoryBodyId": space.id,
            "memoryBodyName": space.name,
            "action": "reused",
        }


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
            space = service.space(space_id)
        except MnemonError:
            space = None
        if space is None or not space.active:
            raise MaintenanceRejected(
                "archive-unknown",
                f"source index {group[0].source_index} names space {space_id!r}, which is "
                "not an active space",
            )
        found = {i.id: i for i in service.insights(space.id, [r.id for r in group])}
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
