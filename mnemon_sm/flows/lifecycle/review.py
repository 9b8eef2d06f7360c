"""The review worker's scoped tool box, its staged writes, and the check of its receipt.

:class:`ReviewTools` grants recall, related and the space list (read-only, through
:class:`~mnemon_sm.flows.long_term.tools.ScopedTools`, counting no access), document search
(counting no access), one hot-memory change and one document create or update. The changes are
*staged*: each is checked now exactly as the host will apply it (``HotMemory.preview``,
``Documents.preview``; a refusal goes back to the worker as the typed error) and recorded, not
written. Hot-memory changes never trigger maintenance and document writes never archive another
document.

The limits are the host's, not the persona's, and one typed value carries them:
:class:`StagedChanges` holds what a run staged, kind by kind (:data:`CHANGE_LIMIT` of each
:data:`ChangeKind`). The box asks it before staging (:meth:`StagedChanges.allows`): once a change
of a kind is staged, a second one is refused with ``ToolRefused`` (an add equal to an existing
entry stages nothing and does not count). The host asks it again when the run's outcome arrives
(:attr:`StagedChanges.within_limit`, a guard of the ``review_finished`` transitions in
``specs/agent_lifecycle.yaml``): an outcome over the limit is refused whatever its receipt says,
so the limit holds even if a box let a second change through.

The box describes its tools (:attr:`ReviewTools.definitions`): the reads as the long-term box
does, its own three from :data:`REVIEW_TOOL_TEXTS` and the attrs classes :class:`HotChangeArgs`,
:class:`DocumentSearchArgs` and :class:`DocumentChangeArgs`, which name exactly the keys the
box reads.

When the worker returns, :func:`check_receipt` compares its receipt with what it staged; the
host applies the staged writes only when they agree (see :mod:`mnemon_sm.flows.lifecycle.agent`).
The box belongs to the review's run: once the run is over or aborted, every call is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol

import attrs

from mnemon_sm.convert import register_camel_case
from mnemon_sm.errors import InvalidInput, ToolRefused
from mnemon_sm.flows.long_term.tools import ScopedTools, tool_definition
from mnemon_sm.flows.workers.runner import RunScope
from mnemon_sm.ports.workers import Cancellation, ToolDefinition

__all__ = [
    "CHANGE_LIMIT",
    "REVIEW_TOOLS",
    "REVIEW_TOOL_TEXTS",
    "ChangeKind",
    "ReviewResult",
    "ReviewTools",
    "StagedChanges",
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
ChangeKind = Literal["hot", "document"]
CHANGE_LIMIT = 1  # changes of each kind one review may stage
# What the worker is told when the box refuses a change over the limit.
OVER_LIMIT: dict[ChangeKind, str] = {
    "hot": "a review may make only one hot-memory change",
    "document": "a review may create or update only one document",
}
_NAMES: dict[ChangeKind, str] = {"hot": "hot-memory change", "document": "document change"}


@attrs.frozen
class HotChangeArgs:
    """The arguments of ``mnemon_runtime_memory`` (what the box reads; for its schema)."""

    action: Literal["add", "replace", "remove"]
    target: Literal["user", "memory"]
    content: str | None = None
    old_text: str | None = None
    importance: Literal["critical", "normal", "low"] | None = None


@attrs.frozen
class DocumentSearchArgs:
    """The arguments of ``mnemon_document_search``."""

    query: str
    limit: int | None = None


@attrs.frozen
class DocumentChangeArgs:
    """The arguments of ``mnemon_document_manage``: ``id`` for an update; ``title`` and
    ``content`` for a create (``description`` too, optional)."""

    action: Literal["create", "update"]
    id: str | None = None
    title: str | None = None
    content: str | None = None
    description: str | None = None


_REVIEW_ARGS: dict[str, type] = {
    HOT: HotChangeArgs,
    DOC_SEARCH: DocumentSearchArgs,
    DOC_MANAGE: DocumentChangeArgs,
}
_ONCE = "Staged, not written: applied only if the review's receipt agrees; one per review. "
REVIEW_TOOL_TEXTS: dict[str, tuple[str, str]] = {
    HOT: (
        f"{_ONCE}Add, replace or remove one hot-memory entry of USER.md (target user) or "
        "MEMORY.md (target memory); replace and remove find the entry by oldText.",
        '{"status": "staged", "preview": <the receipt the change will give>}, or '
        '{"status": "unchanged", ...} for an add of an entry already there.',
    ),
    DOC_SEARCH: (
        f"Search the project documents (at most {DOC_SEARCH_MAX} hits).",
        "an array of {id, title, description, status, excerpt}.",
    ),
    DOC_MANAGE: (
        f"{_ONCE}Create a document (title, content, description) or update one (id, title "
        "and/or content).",
        '{status: "staged", action, id, title}; id is "pending-document-1" for a '
        "create, else the document's id.",
    ),
}


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


@attrs.frozen
class StagedChanges:
    """What one review run staged, in order, kind by kind: the value the change limit is
    checked on, by the tool box before staging and by the host on the run's outcome."""

    hot: tuple[StagedHotChange, ...] = ()
    documents: tuple[StagedDocumentChange, ...] = ()

    def count(self, kind: ChangeKind) -> int:
        return len(self.hot) if kind == "hot" else len(self.documents)

    def allows(self, kind: ChangeKind) -> bool:
        """Whether one more change of ``kind`` stays within the limit."""
        return self.count(kind) < CHANGE_LIMIT

    @property
    def over_limit(self) -> tuple[ChangeKind, ...]:
        """The kinds staged more than :data:`CHANGE_LIMIT` times."""
        kinds: tuple[ChangeKind, ...] = ("hot", "document")
        return tuple(k for k in kinds if self.count(k) > CHANGE_LIMIT)

    @property
    def within_limit(self) -> bool:
        return not self.over_limit

    @property
    def empty(self) -> bool:
        return not self.hot and not self.documents

    @property
    def hot_change(self) -> StagedHotChange | None:
        """The staged hot-memory change (the first, were there more)."""
        return self.hot[0] if self.hot else None

    @property
    def document_change(self) -> StagedDocumentChange | None:
        """The staged document change (the first, were there more)."""
        return self.documents[0] if self.documents else None

    def refusal(self) -> str:
        """Why an outcome over the limit is refused (for the review's summary)."""
        parts = [f"{self.count(k)} {_NAMES[k]}s" for k in self.over_limit]
        return (
            f"the review staged {' and '.join(parts)}; at most {CHANGE_LIMIT} of each is allowed"
        )


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
        self.changes = StagedChanges()

    @property
    def names(self) -> tuple[str, ...]:
        return REVIEW_TOOLS

    @property
    def definitions(self) -> tuple[ToolDefinition, ...]:
        reads = {d.name: d for d in self._reads.definitions}
        return tuple(
            reads[name]
            if name in reads
            else tool_definition(name, _REVIEW_ARGS[name], REVIEW_TOOL_TEXTS)
            for name in REVIEW_TOOLS
        )

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

    def _refuse_over_limit(self, kind: ChangeKind) -> None:
        if not self.changes.allows(kind):
            raise ToolRefused(OVER_LIMIT[kind])

    def _stage_hot(self, a: Mapping[str, Any]) -> Any:
        self._refuse_over_limit("hot")
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
            self._refuse_over_limit("hot")  # a concurrent call of the same worker won
            self.changes = attrs.evolve(self.changes, hot=(*self.changes.hot, change))

        self.scope.stage(stage)
        return {"status": "staged", "preview": preview.receipt.to_json()}

    def _stage_document(self, a: Mapping[str, Any]) -> Any:
        self._refuse_over_limit("document")
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
            self._refuse_over_limit("document")
            documents = (*self.changes.documents, change)
            self.changes = attrs.evolve(self.changes, documents=documents)

        self.scope.stage(stage)
        return {"status": "staged", "action": action, "id": change.id, "title": record.title}


def check_receipt(result: ReviewResult, changes: StagedChanges) -> str | None:
    """Why the receipt disagrees with the staged writes (None: it agrees). Pure.

    A ``failed`` receipt never agrees (nothing is applied); ``skipped`` agrees only with no
    staged write; ``stored`` / ``replaced`` / ``removed`` need a staged hot-memory change of
    that kind, ``documented`` a staged document change; ``documentIds`` must name exactly
    the staged documents (a create by its pending id). The change limit is checked apart
    (:attr:`StagedChanges.within_limit`).
    """
    if result.action == "failed":
        return f"the worker reported failure: {result.summary.strip() or 'no reason given'}"
    if result.action == "skipped":
        if not changes.empty:
            return "it says skipped but staged writes"
    elif result.action == "documented":
        if not changes.documents:
            return "it says documented but staged no document change"
    elif all(HOT_ACTIONS[h.action] != result.action for h in changes.hot):
        hot = changes.hot_change
        staged = "no hot-memory change" if hot is None else f"a hot-memory {hot.action}"
        return f"it says {result.action} but staged {staged}"
    wanted = {d.id for d in changes.documents}
    if set(result.document_ids) != wanted:
        return (
            f"its documentIds {sorted(set(result.document_ids))} are not the staged document "
            f"changes {sorted(wanted)}"
        )
    return None
