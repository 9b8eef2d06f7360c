"""The review worker's scoped tool box, its staged writes, and the check of its receipt.

:class:`ReviewTools` grants recall, related and the space list (read-only, through
:class:`~mnemon_sm.flows.long_term.tools.ScopedTools`, counting no access), document search
(counting no access), one hot-memory change and one document create or update. The changes are
*staged*: each is checked now exactly as the host will apply it (``HotMemory.preview``,
``Documents.preview``; a refusal goes back to the worker as the typed error) and recorded, not
written. The limits are the host's, not the persona's: once a change of a kind is staged, a
second one is refused with ``ToolRefused`` (an add equal to an existing entry stages nothing
and does not count). Hot-memory changes never trigger maintenance and document writes never
archive another document.

When the worker returns, :func:`check_receipt` compares its receipt with what it staged; the
facade applies the staged writes only when they agree (see :mod:`mnemon_sm.flows.lifecycle.agent`).
The box belongs to the review's run: once the run is over or aborted, every call is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol

import attrs

from mnemon_sm.convert import register_camel_case
from mnemon_sm.errors import InvalidInput, ToolRefused
from mnemon_sm.flows.long_term.tools import ScopedTools
from mnemon_sm.flows.workers.runner import RunScope
from mnemon_sm.ports.workers import Cancellation

__all__ = [
    "REVIEW_TOOLS",
    "ReviewResult",
    "ReviewTools",
    "StagedDocumentChange",
    "StagedHotChange",
    "check_receipt",
]

READS = ("mnemon_memory_bodies", "mnemon_recall", "mnemon_related")
HOT, DOC_SEARCH, DOC_MANAGE = (
    "mnemon_runtime_memory",
    "mnemon_document_search",
    "mnemon_document_manage",
)
REVIEW_TOOLS = (*READS, DOC_SEARCH, HOT, DOC_MANAGE)
DOC_SEARCH_MAX = 8
PENDING_DOCUMENT = "pending-document-1"  # the id a staged create is known by until applied
# The receipt action each staged hot-memory change stands for.
HOT_ACTIONS = {"add": "stored", "replace": "replaced", "remove": "removed"}


@attrs.frozen
class ReviewResult:
    summary: str
    action: Literal["stored", "replaced", "removed", "documented", "skipped", "failed"]
    document_ids: list[str]


register_camel_case(ReviewResult)


@attrs.frozen
class StagedHotChange:
    """A hot-memory change checked when staged, applied after the review."""

    action: Literal["add", "replace", "remove"]
    target: str
    content: str | None = None
    old_text: str | None = None
    importance: str | None = None


@attrs.frozen
class StagedDocumentChange:
    """A document create or update checked when staged, applied after the review. ``id`` is
    :data:`PENDING_DOCUMENT` for a create."""

    action: Literal["create", "update"]
    id: str
    title: str | None = None
    content: str | None = None
    description: str | None = None


class HotChanges(Protocol):
    """What the box needs of ``MemoryRoot.hot``."""

    def preview(
        self,
        action: str,
        target: str,
        *,
        content: str | None = None,
        old_text: str | None = None,
        importance: str | None = None,
    ) -> Any: ...


class DocumentChanges(Protocol):
    """What the box needs of ``MemoryRoot.documents``."""

    def search(
        self, query: str, *, limit: int | None = None, record_access: bool = True
    ) -> Any: ...

    def preview(self, operation: str, **request: Any) -> Any: ...


class ReviewTools:
    """One review run's tools; stages at most one change of each kind."""

    def __init__(self, reads: ScopedTools, hot: HotChanges, documents: DocumentChanges) -> None:
        """``reads`` is a read-only ``ScopedTools`` of this run (its scope is the run's)."""
        self._reads, self._hot, self._documents = reads, hot, documents
        self.scope: RunScope = reads.scope
        self.refused: list[str] = []
        self.over_limit: list[str] = []
        self.hot_change: StagedHotChange | None = None
        self.document_change: StagedDocumentChange | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return REVIEW_TOOLS

    @property
    def cancellation(self) -> Cancellation:
        return self.scope.cancellation

    def call(self, name: str, arguments: Mapping[str, Any]) -> Any:
        self.scope.check()
        if name not in REVIEW_TOOLS:
            self.refused.append(str(name))
            raise ToolRefused(f"tool {name!r} is not granted to the review worker")
        if not isinstance(arguments, Mapping):
            raise InvalidInput(f"{name}: arguments must be a JSON object")
        if name in READS:
            return self._reads.call(name, arguments)
        with self.scope.host_call():
            if name == DOC_SEARCH:
                return self._search(arguments)
            if name == HOT:
                return self._stage_hot(arguments)
            return self._stage_document(arguments)

    def _search(self, a: Mapping[str, Any]) -> Any:
        limit = a.get("limit") or DOC_SEARCH_MAX
        if type(limit) is not int:
            raise InvalidInput("mnemon_document_search: limit must be an integer")
        hits = self._documents.search(
            str(a.get("query", "")), limit=min(limit, DOC_SEARCH_MAX), record_access=False
        )
        keys = ("id", "title", "description", "status", "excerpt")
        return [{k: h.to_json()[k] for k in keys} for h in hits]

    def _stage_hot(self, a: Mapping[str, Any]) -> Any:
        if self.hot_change is not None:
            self.over_limit.append(HOT)
            raise ToolRefused("a review may make only one hot-memory change")
        action = a.get("action")
        if action not in HOT_ACTIONS:
            raise InvalidInput("action must be add, replace, or remove")
        change = StagedHotChange(
            action,
            a.get("target", ""),
            a.get("content"),
            a.get("oldText"),
            a.get("importance"),
        )
        preview = self._hot.preview(
            change.action,
            change.target,
            content=change.content,
            old_text=change.old_text,
            importance=change.importance,
        )
        if not preview.changes:  # an add equal to an existing entry: nothing to stage
            return {"status": "unchanged", **preview.receipt.to_json()}

        def stage() -> None:
            if self.hot_change is not None:  # a concurrent call of the same worker won
                raise ToolRefused("a review may make only one hot-memory change")
            self.hot_change = change

        self.scope.stage(stage)
        return {"status": "staged", "preview": preview.receipt.to_json()}

    def _stage_document(self, a: Mapping[str, Any]) -> Any:
        if self.document_change is not None:
            self.over_limit.append(DOC_MANAGE)
            raise ToolRefused("a review may create or update only one document")
        action = a.get("action")
        if action == "create":
            change = StagedDocumentChange(
                "create",
                PENDING_DOCUMENT,
                a.get("title"),
                a.get("content"),
                a.get("description"),
            )
            record = self._documents.preview(
                "create",
                title=change.title,
                content=change.content,
                description=change.description,
            )
        elif action == "update":
            change = StagedDocumentChange(
                "update", str(a.get("id", "")), a.get("title"), a.get("content")
            )
            record = self._documents.preview(
                "update", id=change.id, title=change.title, content=change.content
            )
        else:
            raise ToolRefused("a review may only create or update a document")

        def stage() -> None:
            if self.document_change is not None:
                raise ToolRefused("a review may create or update only one document")
            self.document_change = change

        self.scope.stage(stage)
        return {"status": "staged", "action": action, "id": change.id, "title": record.title}


def check_receipt(
    result: ReviewResult,
    hot: StagedHotChange | None,
    document: StagedDocumentChange | None,
) -> str | None:
    """Why the receipt disagrees with the staged writes (None: it agrees). Pure.

    A ``failed`` receipt never agrees (nothing is applied); ``skipped`` agrees only with no
    staged write; ``stored`` / ``replaced`` / ``removed`` need a staged hot-memory change of
    that kind, ``documented`` a staged document change; ``documentIds`` must name exactly
    the staged document (its pending id for a create).
    """
    if result.action == "failed":
        return f"the worker reported failure: {result.summary.strip() or 'no reason given'}"
    if result.action == "skipped":
        if hot is not None or document is not None:
            return "it says skipped but staged writes"
    elif result.action == "documented":
        if document is None:
            return "it says documented but staged no document change"
    elif hot is None or HOT_ACTIONS[hot.action] != result.action:
        staged = "no hot-memory change" if hot is None else f"a hot-memory {hot.action}"
        return f"it says {result.action} but staged {staged}"
    wanted = {document.id} if document is not None else set()
    if set(result.document_ids) != wanted:
        return (
            f"its documentIds {sorted(set(result.document_ids))} are not the staged document "
            f"changes {sorted(wanted)}"
        )
    return None
