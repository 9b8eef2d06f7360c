"""Context of ``specs/document_mutation.yaml``: create, update and archive under a capacity plan.

Theory of operation
-------------------
Planning reads the index (no lock: it is replaced atomically) and turns the request into a
:class:`~mnemon_sm.documents.rules.Draft`; the capacity plan then says commit, or archive the
least recently used active document first (a manual archive names its document). Archiving
runs the archive worker with staged long-term writes and no document lock held, checks its
result and its cold references (each names a remember the run staged, holding the planned
archived path and the body's SHA-256, or an existing insight that holds them), so a refused
reference writes nothing; then it applies the writes and confirms that every reference, in
the space it landed in, holds them (RULE-DOC-5). Only then, under the
index lock and if the document's revision did not change, is the archived copy written, the
index committed and the active file removed (see :mod:`mnemon_sm.documents.store` for the
crash windows). Committing plans again on the index read under the lock, so a concurrent
writer that used the room sends the request back to planning.

Documents archived earlier in one request stay archived if a later step fails (each was
archived completely, with its reference).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from ..config import Config
from ..engine.context import FlowContext
from ..engine.flow import Machine
from ..errors import (
    DocumentConflict,
    InvalidInput,
    MaintenanceRejected,
    MnemonError,
    ReadOnly,
)
from ..longterm.api import LongTermMemory
from ..maintenance.checks import parse_result
from ..maintenance.flow import ARCHIVE_GRANTS
from ..ports import Clock, Files, Locks
from ..text import collapse_whitespace, iso_ms
from ..workers.tools import ScopedTools
from . import rules, store
from .model import SUMMARY_MAX, DocumentRecord, body_of, render
from .values import DocumentArchiveResult, DocumentResult

__all__ = ["DocumentFlow"]

PROMPT_CONTENT_MAX = 60_000  # characters of the body shown to the archive worker
OPERATIONS = {"create", "update", "archive"}


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
    ) -> None:
        """``mutex`` serializes the index's read-modify-write steps in this process (the
        index lock does so across processes); it is never held while a worker runs."""
        self.files, self.locks, self.clock, self.config = files, locks, clock, config
        self.root_path, self.long_term = root_path.rstrip("/"), long_term
        self.new_id, self.mutex = new_id, mutex
        self._op = ""
        self._request: dict[str, Any] = {}
        self._doc_id = ""
        self._draft: rules.Draft | None = None
        self._victim: DocumentRecord | None = None
        self._victim_body = ""
        self._tools: ScopedTools | None = None
        self._raw: object = None
        self._summary = ""
        self._spaces: list[str] = []
        self._archived: list[str] = []
        self._run_id = ""
        super().__init__()

    # -- validators ------------------------------------------------------------------------

    def check_writable(self) -> None:
        if not self.config.write_enabled:
            raise ReadOnly()

    def check_request(self, request: Mapping[str, Any]) -> None:
        op = request.get("operation")
        if op not in OPERATIONS:
            raise InvalidInput("operation must be create, update or archive")
        self._op, self._request = str(op), dict(request)
        self._doc_id = self.new_id() if op == "create" else str(request.get("id") or "").strip()

    # -- steps -----------------------------------------------------------------------------

    def plan_request(self, machine: Machine) -> None:
        try:
            store.ensure_dirs(self.files)
            records = store.read_index(self.files)
            if self._op == "archive":
                victim = rules.find(records, self._doc_id)
                if victim.status != "active":
                    raise InvalidInput("only active documents can be archived")
                return self._choose(machine, victim)
            draft = self._draft_on(records)
            plan = rules.plan(records, draft, self.config.documents_active_limit)
        except MnemonError as exc:
            return self.refuse(machine, "plan_refused", exc)
        if plan.fits:
            self._draft = draft
            machine.raise_("plan_fits")
            return
        left = [c for c in plan.candidates if c.id not in self._archived]
        if not left or self._request.get("archive_if_full") is False:
            why = "archiving is off for this request" if left else "nothing is left to archive"
            return self.refuse(machine, "plan_refused", rules.capacity_exceeded(plan, why))
        self._choose(machine, left[0])

    def run_worker(self, machine: Machine) -> None:
        victim = self._victim
        assert victim is not None
        planned = f"{self.root_path}/{victim.path('archived')}"
        content = self._victim_body
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
            self._raw, tools = self.long_term().run_staged(
                "document_archive", data, ARCHIVE_GRANTS
            )
        except MnemonError as exc:
            return self.refuse(machine, "worker_failed", exc)
        self._tools = tools
        machine.raise_("worker_answered")

    def confirm_reference(self, machine: Machine) -> None:
        victim, tools = self._victim, self._tools
        assert victim is not None and tools is not None
        planned = f"{self.root_path}/{victim.path('archived')}"
        try:
            result = parse_result(self._raw, DocumentArchiveResult)
            summary = _checked(result)
            long_term = self.long_term()
            with long_term.mutex:
                _check_references(long_term, result, tools, planned, victim.content_hash)
                applied = tools.apply()
                real = {
                    w.pending_id: (a.space_id, str(a.receipt.get("id", "")))
                    for w, a in zip(tools.staged, applied, strict=True)
                    if w.pending_id is not None
                }
                confirmed = _confirm(long_term, result, real, planned, victim.content_hash)
        except MnemonError as exc:
            return self.refuse(machine, "reference_refused", exc)
        self._summary = summary
        self._spaces = list(dict.fromkeys([*self._spaces, *confirmed]))
        machine.raise_("reference_confirmed")

    def move_document(self, machine: Machine) -> None:
        victim = self._victim
        assert victim is not None
        try:
            with self._locked():
                records = store.read_index(self.files)
                current = rules.find(records, victim.id)
                if current.status != "active" or current.revision != victim.revision:
                    raise DocumentConflict(
                        "document changed while archival was running; the active copy was "
                        "preserved"
                    )
                now = iso_ms(self.clock.now_ms())
                archived = attrs.evolve(
                    current,
                    status="archived",
                    relative_path=current.path("archived"),
                    updated_at=now,
                    last_accessed_at=now,
                    archived_at=now,
                    revision=current.revision + 1,
                    archive_summary=self._summary,
                    memory_body_ids=tuple(self._spaces[:20]),
                )
                store.write_file(self.files, archived.path(), render(archived, self._victim_body))
                store.write_index(
                    self.files, tuple(archived if r.id == victim.id else r for r in records)
                )
                self.files.remove(current.path("active"))
        except MnemonError as exc:
            return self.refuse(machine, "move_refused", exc)
        self._archived.append(victim.id)
        if self._op == "archive":
            return self.settle(machine, "moved", self._receipt("archived", archived, None))
        machine.raise_("moved")

    def commit_mutation(self, machine: Machine) -> None:
        try:
            with self._locked():
                records = store.read_index(self.files)
                draft = self._draft_on(records)
                plan = rules.plan(records, draft, self.config.documents_active_limit)
                if not plan.fits:
                    machine.raise_("commit_raced")
                    return
                durability = self.config.durability
                store.write_file(self.files, draft.record.path(), draft.data, durability)
                if draft.previous is None:
                    after = (*records, draft.record)
                else:
                    after = tuple(draft.record if r.id == draft.record.id else r for r in records)
                store.write_index(self.files, after, durability)
        except MnemonError as exc:
            return self.refuse(machine, "commit_failed", exc)
        action = "created" if draft.previous is None else "updated"
        self.settle(machine, "committed", self._receipt(action, draft.record, draft.body))

    # -- guards ----------------------------------------------------------------------------

    def is_manual(self) -> bool:
        return self._op == "archive"

    # -- helpers ---------------------------------------------------------------------------

    def _choose(self, machine: Machine, victim: DocumentRecord) -> None:
        data = self.files.read(victim.path())
        if data is None:
            missing = InvalidInput(f"the file of document {victim.id} is missing")
            return self.refuse(machine, "plan_refused", missing)
        self._victim, self._victim_body = victim, body_of(data)
        if not self._run_id:
            self._run_id = f"doc-{self.clock.now_ms()}-{victim.id[:8]}"
        machine.raise_("plan_overflow")

    def _draft_on(self, records: tuple[DocumentRecord, ...]) -> rules.Draft:
        return draft_on(
            self.files, records, self._op, self._request, self._doc_id, self.clock, self.root_path
        )

    def _locked(self) -> store.IndexLock:
        return store.IndexLock(self.mutex, self.locks, self.config.lock_timeout_ms)

    def _receipt(self, action: str, record: DocumentRecord, body: str | None) -> DocumentResult:
        return DocumentResult(
            action,
            record,
            body,
            tuple(self._archived),
            self._run_id or None,
            self._summary or None,
            tuple(self._spaces),
        )

    def reset(self) -> None:
        self._op, self._request, self._doc_id, self._draft = "", {}, "", None
        self._victim, self._victim_body, self._tools, self._raw = None, "", None, None
        self._summary, self._spaces, self._archived, self._run_id = "", [], [], ""


def draft_on(
    files: Files,
    records: tuple[DocumentRecord, ...],
    op: str,
    request: Mapping[str, Any],
    doc_id: str,
    clock: Clock,
    root_path: str,
) -> rules.Draft:
    """The draft of a create or update of ``doc_id`` against ``records`` (raises the request's
    typed error)."""
    now = iso_ms(clock.now_ms())
    workspace = str(request.get("workspace") or root_path)
    if op == "create":
        return rules.draft_create(request, doc_id, now, workspace)
    current = rules.find(records, doc_id)
    body = store.read_body(files, current)
    return rules.draft_update(records, request, body, now, workspace)


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


def _check_references(
    long_term: LongTermMemory,
    result: DocumentArchiveResult,
    tools: ScopedTools,
    planned: str,
    digest: str,
) -> None:
    """RULE-DOC-5 before anything is written, so a refused reference writes nothing: a
    reference to this run's work names a remember it staged, whose content holds the planned
    path and the SHA-256; a reference to an existing insight is confirmed as :func:`_confirm`
    will confirm it (this run's writes cannot change it)."""
    staged = {
        w.pending_id: w.args.content
        for w in tools.staged
        if w.tool == "mnemon_remember" and w.pending_id is not None
    }
    for ref in result.references:
        if not ref.id.startswith("pending-"):
            _holding(long_term, ref.memory_body_id, ref.id, planned, digest)
        elif ref.id in staged:
            _require(ref.id, staged[ref.id], planned, digest)
        else:
            raise MaintenanceRejected(
                "cold-reference", f"{ref.id!r} was not returned by a remember of this run"
            )


def _confirm(
    long_term: LongTermMemory,
    result: DocumentArchiveResult,
    real: Mapping[str, tuple[str, str]],
    planned: str,
    digest: str,
) -> list[str]:
    """RULE-DOC-5 once the writes are applied: every named reference is an active insight of
    its space holding the planned path and the SHA-256. Returns the spaces holding them."""
    spaces: list[str] = []
    for ref in result.references:
        space, insight = real.get(ref.id, (ref.memory_body_id, ref.id))
        _holding(long_term, space, insight, planned, digest)
        spaces.append(space)
    return spaces


def _holding(
    long_term: LongTermMemory, space: str, insight: str, planned: str, digest: str
) -> None:
    """``insight`` is an active insight of ``space`` holding ``planned`` and ``digest``."""
    try:
        found = long_term.service.store.insights(space, [insight])
    except MnemonError:
        found = ()
    if not found:
        raise MaintenanceRejected(
            "cold-reference", f"no active insight {insight!r} in space {space!r}"
        )
    _require(insight, found[0].content, planned, digest)


def _require(insight: str, text: str, planned: str, digest: str) -> None:
    if planned not in text or digest not in text:
        raise MaintenanceRejected(
            "cold-reference",
            f"insight {insight!r} does not hold the archived path and the SHA-256",
        )
