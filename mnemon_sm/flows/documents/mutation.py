"""Context of ``specs/document_mutation.yaml``: create, update and archive under a capacity plan.

Theory of operation
-------------------
The machine starts in ``opening``, whose entry action repairs the crash windows of earlier
writers under the index lock (:func:`~mnemon_sm.flows.documents.store.repair`), then rests in
``idle``. A request is checked by pure validators and enters ``planning``, whose step makes it
a run (see below) and draws a create's id from the id source (``new_id``) the first time it
plans it, so a request keeps one id however often it is planned again.

Planning reads the index and, when a document must be archived, its file, under the index lock
(so the snapshot is consistent), and turns the request into a
:class:`~mnemon_sm.flows.documents.rules.Draft`; the capacity plan then says commit, or archive the
least recently used active document first (a manual archive names its document). Archiving
runs the archive worker with staged long-term writes and no document lock held, then checks
its result and that the cold reference, as staged (or an existing insight it names), holds the
planned archived path and the body's SHA-256 (RULE-DOC-5): nothing is written yet. Under the
index lock, and only if the document's revision did not change, the staged writes are applied
and the reference confirmed in the space it names, the archived copy is written, the index
commits the move and the active file is removed (best effort: opening removes a leftover).

A rejected or failed request writes nothing:

- everything that can refuse a request (the checks, the revision, the index's encoding) runs
  before the first write;
- a revision race is found before any long-term write: a manual archive fails with
  ``DocumentConflict``; an archive made to free room goes back to planning (another writer
  archived or used that document; the request itself is still good), so concurrent creates
  do not fail on each other;
- a ``StorageError`` during a commit puts the files back (``store.Undo``); one after the
  long-term writes were applied also withdraws them (:func:`_withdraw`): each insight a
  remember added is forgotten (Mnemon's forget, a soft delete) and each space the run created
  is deleted. A crash (no answer) is different: opening repairs it (see
  :mod:`mnemon_sm.flows.documents.store`).

Documents archived earlier in one request stay archived if a later step fails (each was
archived completely, with its reference).

A request's data travels with its events
----------------------------------------
Everything one request knows is one frozen :class:`DocumentRun`: the checked request, its
document id, the document chosen for archiving with its body, the worker's answer and tool
box (its staged writes), the summary, the documents archived so far with the spaces holding
their references, and the races lost to other writers. The caller's event carries the
request into ``planning``, whose step creates the run from it (:meth:`DocumentRun.of`); every
outcome event that leads to another step carries the run as its ``run`` keyword argument
(python-statemachine passes event arguments to callbacks by name, guards included), and each
step raises its outcome with an evolved copy (``attrs.evolve``). When an archive sends the
request back to planning (``moved``, ``move_raced``, ``commit_raced``), the run comes back
with what it learned: its id (drawn once), the documents already archived (never chosen
again), the run id and the count of lost races (at most ``RACES_MAX``). The guard
``is_manual`` reads the run's operation from the same argument.

The context keeps no per-run attribute: between two steps the run exists only in the engine's
queue of internal events, and when the request ends, by an outcome, a refusal or an exception
(which drops the queue and fires ``abort``), nothing of it is left to reset or to leak into
the next request. The only values the context holds are the root's collaborators and, for
:meth:`FlowContext.perform`, the request's receipt or error.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from mnemon_sm.config import Config
from mnemon_sm.engine.context import FlowContext
from mnemon_sm.engine.flow import Machine
from mnemon_sm.engine.registry import flow_context
from mnemon_sm.errors import (
    DocumentConflict,
    InvalidInput,
    MaintenanceRejected,
    MnemonError,
    ReadOnly,
    StorageError,
)
from mnemon_sm.flows.documents import model, rules, store
from mnemon_sm.flows.documents.cache import IndexCache
from mnemon_sm.flows.documents.journal import JOURNAL_PATH
from mnemon_sm.flows.documents.model import (
    DOCUMENTS_DIR,
    MEMORY_BODY_IDS_MAX,
    SUMMARY_MAX,
    DocumentRecord,
    body_of,
    render,
)
from mnemon_sm.flows.documents.values import DocumentArchiveResult, DocumentResult
from mnemon_sm.flows.documents.view import IndexView
from mnemon_sm.flows.hot.maintenance import ARCHIVE_GRANTS
from mnemon_sm.flows.hot.maintenance_checks import parse_result
from mnemon_sm.flows.long_term.api import LongTermMemory
from mnemon_sm.flows.long_term.service import LongTermService
from mnemon_sm.flows.long_term.tools import AppliedWrite, ScopedTools
from mnemon_sm.ports import Clock, Files, Locks
from mnemon_sm.text import collapse_whitespace, iso_ms

__all__ = ["DocumentFlow", "DocumentRun"]

PROMPT_CONTENT_MAX = 60_000  # characters of the body shown to the archive worker
OPERATIONS = {"create", "update", "archive"}
RACES_MAX = 64  # archives lost to other writers before one request gives up (DocumentConflict)


@attrs.frozen(eq=False)
class DocumentRun:
    """One create, update or archive, carried by the events between its steps (see the module).

    ``plan_request`` creates it from the checked request (:meth:`of`), draws a create's id the
    first time it plans, and adds the document to archive, its body and the run id when the plan
    overflows; ``run_worker`` adds the worker's raw result and its tool box (the staged writes
    live there), ``confirm_reference`` the checked result and its summary, ``move_document``
    the document it archived and the spaces holding its reference, or one more lost race.
    """

    op: str  # create | update | archive
    request: Mapping[str, Any]  # the checked request, as the caller's event carried it
    doc_id: str = ""  # a create's is drawn when it is first planned
    victim: DocumentRecord | None = None  # the document to archive, as planned
    victim_body: str = ""
    run_id: str = ""  # named by the request's first archive
    raw: object = None  # the worker's result, not yet checked
    tools: ScopedTools | None = None
    answer: DocumentArchiveResult | None = None  # the worker's result, checked
    summary: str = ""  # the last archive's summary
    spaces: tuple[str, ...] = ()  # spaces holding the references of the archives so far
    archived: tuple[str, ...] = ()  # documents archived so far (for room, or by hand)
    races: int = 0  # archives lost to other writers

    @classmethod
    def of(cls, request: Mapping[str, Any]) -> DocumentRun:
        """The run of a checked request (a create's id is drawn later, in planning)."""
        op = str(request["operation"])
        doc_id = "" if op == "create" else str(request.get("id") or "").strip()
        return cls(op, dict(request), doc_id)


@flow_context("DocumentFlow")
class DocumentFlow(FlowContext):
    FLOW = "document_mutation"

    def __init__(
        self,
        files: Files,
        locks: Locks,
        clock: Clock,
        config: Config,
        root_path: str,
        long_term: Callable[[], LongTermMemory],
        new_id: Callable[[], str],
        mutex: threading.RLock,
        cache: IndexCache,
    ) -> None:
        """``new_id`` is the id port (it gives a create its id, in planning); ``mutex``
        serializes the index's read-modify-write steps in this process (the index lock does
        so across processes); it is never held while a worker runs. ``cache`` is the root's
        index cache (every commit seeds it with what it wrote). Constructing the flow enters
        ``opening``, which repairs the crash windows of earlier writers."""
        self.files, self.locks, self.clock, self.config = files, locks, clock, config
        self.root_path, self.long_term = root_path.rstrip("/"), long_term
        self.new_id, self.mutex, self.cache = new_id, mutex, cache
        super().__init__()

    # -- validators ------------------------------------------------------------------------

    def check_writable(self) -> None:
        if not self.config.write_enabled:
            raise ReadOnly()

    def check_request(self, request: Mapping[str, Any]) -> None:
        if request.get("operation") not in OPERATIONS:
            raise InvalidInput("operation must be create, update or archive")

    # -- steps (entry actions; each receives the run from the event that led here) ---------

    def repair_crashes(self) -> None:
        """Entry of ``opening``: repair the crash windows of earlier writers (see
        :func:`~mnemon_sm.flows.documents.store.repair`) under the index lock. A read-only
        root is never repaired and an empty ``documents/`` needs nothing. A corrupt index is
        reported by every document operation instead (it is never rewritten), and a busy lock
        only postpones the repair to the next opening: neither may keep the root from
        opening."""
        if not self.config.write_enabled:
            return
        with contextlib.suppress(StorageError):
            if self.files.list(DOCUMENTS_DIR):
                with self._locked():
                    store.repair(self.files, self.cache)

    def fold_journal(self, machine: Machine) -> None:
        """Entry of ``closing``: a journal-mode root folds its journal into ``index.json``
        under the index lock. Nothing here may keep the root from closing: a busy lock, a
        failing disk or a corrupt journal leave the journal as it is (still valid)."""
        if self.config.write_enabled and self.cache.mode == "journal":
            with contextlib.suppress(MnemonError):
                if self.files.read_if_changed(JOURNAL_PATH, None)[0] is not None:
                    with self._locked():  # only when there is a journal to fold
                        self.cache.view(self.files)
                        self.cache.compact(self.files, self.config.durability, due_only=False)
        machine.raise_("folded")

    def plan_request(
        self,
        machine: Machine,
        run: DocumentRun | None = None,
        request: Mapping[str, Any] | None = None,
    ) -> None:
        """Entry of ``planning``. The caller's event carries the checked ``request``, which
        starts the run; an event that sends the run back to planning carries the ``run``."""
        if run is None:
            assert request is not None  # the caller's create, update or archive
            run = DocumentRun.of(request)
        if run.op == "create" and not run.doc_id:  # planned for the first time
            run = attrs.evolve(run, doc_id=self.new_id())  # the id port
        try:
            store.ensure_dirs(self.files)
            with self._locked():  # the index and the chosen document's file, consistently
                event, planned = self._plan(run)
        except MnemonError as exc:
            return self.refuse(machine, "plan_refused", exc)
        machine.raise_(event, run=planned)

    def _plan(self, run: DocumentRun) -> tuple[str, DocumentRun]:
        """``plan_fits`` with the run as it is, or ``plan_overflow`` with the document to
        archive and its body; raises the request's typed error."""
        view = self.cache.view(self.files)
        if run.op == "archive":
            victim = view.find(run.doc_id)
            if victim.status != "active":
                raise InvalidInput("only active documents can be archived")
            return self._choose(run, victim)
        draft = self._draft_on(run, view)
        plan = rules.plan(view, draft, self.config.documents_active_limit)
        if plan.fits:
            return "plan_fits", run
        left = [c for c in plan.candidates if c.id not in run.archived]
        if not left or run.request.get("archive_if_full") is False:
            why = "archiving is off for this request" if left else "nothing is left to archive"
            raise rules.capacity_exceeded(plan, why)
        return self._choose(run, left[0])

    def run_worker(self, machine: Machine, run: DocumentRun) -> None:
        victim = run.victim
        assert victim is not None
        planned = f"{self.root_path}/{victim.path('archived')}"
        content = run.victim_body
        if len(content) > PROMPT_CONTENT_MAX:
            content = (
                content[:PROMPT_CONTENT_MAX] + "\n[truncated here; the exact original stays at "
                f"{planned}]"
            )
        data = {
            "id": victim.id,
            "title": victim.title,
            "description": victim.description,
            "activePath": f"{self.root_path}/{victim.path('active')}",
            "plannedPath": planned,
            "sourcePaths": list(victim.source_paths),
            "contentSha256": victim.content_hash,
            "content": content,
        }
        try:
            raw, tools = self.long_term().run_staged(
                "document_archive", data, ARCHIVE_GRANTS, DocumentArchiveResult
            )
        except MnemonError as exc:
            return self.refuse(machine, "worker_failed", exc)
        machine.raise_("worker_answered", run=attrs.evolve(run, raw=raw, tools=tools))

    def confirm_reference(self, machine: Machine, run: DocumentRun) -> None:
        victim, tools = run.victim, run.tools
        assert victim is not None and tools is not None
        planned = f"{self.root_path}/{victim.path('archived')}"
        try:
            result = parse_result(run.raw, DocumentArchiveResult)
            summary = _checked(result)
            long_term = self.long_term()
            with long_term.mutex:
                _check_staged(long_term, result, tools, planned, victim.content_hash)
        except MnemonError as exc:
            return self.refuse(machine, "reference_refused", exc)
        checked = attrs.evolve(run, answer=result, summary=summary)
        machine.raise_("reference_confirmed", run=checked)

    def move_document(self, machine: Machine, run: DocumentRun) -> None:
        victim = run.victim
        assert victim is not None
        try:
            store.ensure_dirs(self.files)  # a directory swapped for a symlink meanwhile
            with self._locked():
                current = self.cache.view(self.files).find(victim.id)
                if current.status != "active" or current.revision != victim.revision:
                    races = run.races + 1
                    if run.op == "archive" or races > RACES_MAX:
                        raise DocumentConflict(
                            "document changed while archival was running; the active copy "
                            "was preserved"
                        )
                    # Room was made or used meanwhile: plan again.
                    machine.raise_("move_raced", run=attrs.evolve(run, races=races))
                    return
                archived, spaces = self._commit_move(run, current)
                # Committed: an active copy left by a failure here is removed by opening.
                with contextlib.suppress(StorageError):
                    self.files.remove(current.path("active"))
                self.cache.fold_if_due(self.files, self.config.durability)
        except MnemonError as exc:
            return self.refuse(machine, "move_refused", exc)
        moved = attrs.evolve(run, spaces=spaces, archived=(*run.archived, victim.id))
        if run.op == "archive":  # the guard ``is_manual`` ends the request here
            receipt = self._receipt(moved, "archived", archived, None)
            return self.settle(machine, "moved", receipt, run=moved)
        machine.raise_("moved", run=moved)

    def _commit_move(
        self,
        run: DocumentRun,
        current: DocumentRecord,
    ) -> tuple[DocumentRecord, tuple[str, ...]]:
        """Apply the staged writes and confirm the reference, write the archived copy, commit
        the index (call under the lock, revision checked); returns the archived record and the
        run's spaces, this archive's included. On any failure the files are put back and the
        long-term writes withdrawn before the error goes on."""
        tools, result = run.tools, run.answer
        assert tools is not None and result is not None
        planned = f"{self.root_path}/{current.path('archived')}"
        long_term = self.long_term()
        with long_term.mutex:
            applied = _apply(tools)
            undo = store.Undo(self.files)
            try:
                confirmed = _confirm(long_term, result, tools, applied, planned, current)
                spaces = tuple(dict.fromkeys([*run.spaces, *confirmed]))
                now = iso_ms(self.clock.now_ms())
                archived = attrs.evolve(
                    current,
                    status="archived",
                    relative_path=current.path("archived"),
                    updated_at=now,
                    last_accessed_at=now,
                    archived_at=now,
                    revision=current.revision + 1,
                    archive_summary=run.summary,
                    memory_body_ids=spaces[:MEMORY_BODY_IDS_MAX],
                )
                undo.write(archived.path(), render(archived, run.victim_body))
                self.cache.commit(self.files, undo, [archived])
            except MnemonError:
                undo.rollback()
                _withdraw(tools.service, applied)
                raise
        return archived, spaces

    def commit_mutation(self, machine: Machine, run: DocumentRun) -> None:
        try:
            store.ensure_dirs(self.files)  # a directory swapped for a symlink meanwhile
            with self._locked():
                view = self.cache.view(self.files)
                draft = self._draft_on(run, view)
                plan = rules.plan(view, draft, self.config.documents_active_limit)
                if not plan.fits:
                    machine.raise_("commit_raced", run=run)
                    return
                model.check_index([draft.record], unique=False)  # refuse before any write
                undo = store.Undo(self.files, self.config.durability)
                try:
                    undo.write(draft.record.path(), draft.data)
                    self.cache.commit(self.files, undo, [draft.record])
                except StorageError:
                    undo.rollback()  # a failed request leaves nothing to see or roll forward
                    raise
                self.cache.fold_if_due(self.files, self.config.durability)
        except MnemonError as exc:
            return self.refuse(machine, "commit_failed", exc)
        action = "created" if draft.previous is None else "updated"
        self.settle(machine, "committed", self._receipt(run, action, draft.record, draft.body))

    # -- guards (pure: the run in, the verdict out) ----------------------------------------

    def is_manual(self, run: DocumentRun) -> bool:
        return run.op == "archive"

    # -- helpers ---------------------------------------------------------------------------

    def _choose(self, run: DocumentRun, victim: DocumentRecord) -> tuple[str, DocumentRun]:
        """``plan_overflow`` with ``victim`` and its body snapshotted for archiving (call under
        the lock, where a missing file is really missing, not moved by another writer)."""
        data = self.files.read(victim.path())
        if data is None:
            raise InvalidInput(f"the file of document {victim.id} is missing")
        run_id = run.run_id or f"doc-{self.clock.now_ms()}-{victim.id[:8]}"
        chosen = attrs.evolve(run, victim=victim, victim_body=body_of(data), run_id=run_id)
        return "plan_overflow", chosen

    def _draft_on(self, run: DocumentRun, view: IndexView) -> rules.Draft:
        return draft_on(
            self.files, view, run.op, run.request, run.doc_id, self.clock, self.root_path
        )

    def _locked(self) -> store.IndexLock:
        return store.IndexLock(self.mutex, self.locks, self.config.lock_timeout_ms)

    def _receipt(
        self, run: DocumentRun, action: str, record: DocumentRecord, body: str | None
    ) -> DocumentResult:
        return DocumentResult(
            action,
            record,
            body,
            run.archived,
            run.run_id or None,
            run.summary or None,
            run.spaces,
        )


def draft_on(
    files: Files,
    view: IndexView,
    op: str,
    request: Mapping[str, Any],
    doc_id: str,
    clock: Clock,
    root_path: str,
) -> rules.Draft:
    """The draft of a create or update of ``doc_id`` against the index ``view`` (raises the
    request's typed error)."""
    now = iso_ms(clock.now_ms())
    workspace = str(request.get("workspace") or root_path)
    if op == "create":
        if doc_id in view.positions:  # an id port that repeats itself
            raise DocumentConflict(f"the id drawn for the new document is already used: {doc_id}")
        return rules.draft_create(request, doc_id, now, workspace)
    current = view.find(doc_id)
    body = store.read_body(files, current)
    return rules.draft_update(current, request, body, now, workspace)


def _checked(result: DocumentArchiveResult) -> str:
    if result.action != "archived":
        reason = result.summary.strip() or "the worker gave no reason"
        raise MaintenanceRejected("declined", f"the worker returned {result.action!r}: {reason}")
    summary = collapse_whitespace(result.summary)
    if not summary or len(summary) > SUMMARY_MAX:
        raise MaintenanceRejected(
            "summary", f"the archive summary must be 1 to {SUMMARY_MAX} characters"
        )
    if not result.references:
        raise MaintenanceRejected("cold-reference", "the result names no cold reference")
    return summary


def _check_staged(
    long_term: LongTermMemory,
    result: DocumentArchiveResult,
    tools: ScopedTools,
    planned: str,
    digest: str,
) -> None:
    """RULE-DOC-5 before anything is written: every named reference is a remember staged by
    this run, or an active insight of its space, holding the planned path and the SHA-256."""
    staged = {
        w.pending_id: w.args.content
        for w in tools.staged
        if w.tool == "mnemon_remember" and w.pending_id is not None
    }
    for ref in result.references:
        if ref.id.startswith("pending-"):
            if ref.id not in staged:
                raise MaintenanceRejected(
                    "cold-reference", f"{ref.id!r} was not returned by a remember of this run"
                )
            _holds(ref.id, staged[ref.id], planned, digest)
        else:
            _holds(ref.id, _insight_text(long_term, ref.memory_body_id, ref.id), planned, digest)


def _confirm(
    long_term: LongTermMemory,
    result: DocumentArchiveResult,
    tools: ScopedTools,
    applied: Sequence[AppliedWrite],
    planned: str,
    document: DocumentRecord,
) -> list[str]:
    """RULE-DOC-5 once the writes are applied: every named reference is an active insight of
    its space holding the planned path and the SHA-256. Returns the spaces holding them."""
    real = {
        w.pending_id: (a.space_id, str(a.receipt.get("id", "")))
        for w, a in zip(tools.staged, applied, strict=True)
        if w.pending_id is not None
    }
    spaces: list[str] = []
    for ref in result.references:
        space, insight = real.get(ref.id, (ref.memory_body_id, ref.id))
        _holds(insight, _insight_text(long_term, space, insight), planned, document.content_hash)
        spaces.append(space)
    return spaces


def _insight_text(long_term: LongTermMemory, space: str, insight: str) -> str:
    try:
        found = long_term.service.insights(space, [insight])
    except MnemonError:
        found = ()
    if not found:
        raise MaintenanceRejected(
            "cold-reference", f"no active insight {insight!r} in space {space!r}"
        )
    return found[0].content


def _holds(insight: str, text: str, planned: str, digest: str) -> None:
    if planned not in text or digest not in text:
        raise MaintenanceRejected(
            "cold-reference",
            f"insight {insight!r} does not hold the archived path and the SHA-256",
        )


def _apply(tools: ScopedTools) -> list[AppliedWrite]:
    """Apply the staged writes; when one fails, those before it are withdrawn first."""
    try:
        return tools.apply()
    except MnemonError as exc:
        _withdraw(tools.service, getattr(exc, "applied", ()))
        raise


def _withdraw(service: LongTermService, applied: Sequence[AppliedWrite]) -> None:
    """Take back the applied writes of an archive that did not happen, last first: forget each
    insight a remember added (a skipped duplicate existed before and stays) and delete each
    space the run created (not one it adopted: another writer's). Best effort, like every
    compensation: Mnemon's forget is a soft delete, so the forgotten rows stay, inactive, and
    the last space of a root is kept."""
    for write in reversed(applied):
        with contextlib.suppress(MnemonError):
            if write.tool == "mnemon_remember" and write.receipt.get("action") == "added":
                service.forget(write.space_id, str(write.receipt["id"]))
            elif write.tool == "mnemon_memory_body_create" and write.created:
                service.delete_space(write.space_id)
