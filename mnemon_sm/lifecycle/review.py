"""The review worker's scoped tool facade and result.

:class:`ReviewTools` grants recall, related and the space list (read-only, through
:class:`~mnemon_sm.workers.tools.ScopedTools`), document search, one hot-memory mutation and
one document create or update. The limits are the host's, not the persona's: once a
hot-memory change succeeded, a second one is refused with ``ToolRefused``, and likewise for
documents (archiving is never granted). Hot-memory changes go through the mutation flow
without maintenance, so an overflow is a plain ``CapacityExceeded``; document writes never
archive another document to make room (``DocumentCapacityExceeded`` instead).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs

from ..convert import register_camel_case
from ..errors import InvalidInput, ToolRefused
from ..workers.tools import ScopedTools

__all__ = ["REVIEW_TOOLS", "ReviewResult", "ReviewTools"]

READS = ("mnemon_memory_bodies", "mnemon_recall", "mnemon_related")
HOT, DOC_SEARCH, DOC_MANAGE = (
    "mnemon_runtime_memory",
    "mnemon_document_search",
    "mnemon_document_manage",
)
REVIEW_TOOLS = (*READS, DOC_SEARCH, HOT, DOC_MANAGE)
DOC_SEARCH_MAX = 8


@attrs.frozen
class ReviewResult:
    summary: str
    action: Literal["stored", "replaced", "removed", "documented", "skipped", "failed"]
    document_ids: list[str]


register_camel_case(ReviewResult)


class ReviewTools:
    """One review run's tools; counts the changes it let through."""

    def __init__(
        self,
        reads: Callable[[], ScopedTools],
        hot: Any,
        documents: Any,
    ) -> None:
        """``hot`` is the root's HotMemory facade, ``documents`` its Documents facade."""
        self._reads, self._hot, self._documents = reads, hot, documents
        self.refused: list[str] = []
        self.hot_changes = 0
        self.document_changes = 0
        self.over_limit: list[str] = []

    @property
    def names(self) -> tuple[str, ...]:
        return REVIEW_TOOLS

    def call(self, name: str, arguments: Mapping[str, Any]) -> Any:
        if name not in REVIEW_TOOLS:
            self.refused.append(name)
            raise ToolRefused(f"tool {name!r} is not granted to the review worker")
        if not isinstance(arguments, Mapping):
            raise InvalidInput(f"{name}: arguments must be a JSON object")
        if name in READS:
            return self._reads().call(name, arguments)
        if name == DOC_SEARCH:
            limit = arguments.get("limit") or DOC_SEARCH_MAX
            hits = self._documents.search(
                str(arguments.get("query", "")), limit=min(int(limit), DOC_SEARCH_MAX)
            )
            return [
                {k: h.to_json()[k] for k in ("id", "title", "description", "status", "excerpt")}
                for h in hits
            ]
        if name == HOT:
            return self._hot_change(arguments)
        return self._document_change(arguments)

    def _hot_change(self, a: Mapping[str, Any]) -> Any:
        if self.hot_changes >= 1:
            self.over_limit.append(HOT)
            raise ToolRefused("a review may make only one hot-memory change")
        action = a.get("action")
        target, importance = a.get("target"), a.get("importance")
        if action == "add":
            receipt = self._hot.add(target, a.get("content"), importance, maintenance=False)
        elif action == "replace":
            receipt = self._hot.replace(target, a.get("oldText"), a.get("content"), importance)
        elif action == "remove":
            receipt = self._hot.remove(target, a.get("oldText"))
        else:
            raise InvalidInput("action must be add, replace, or remove")
        if receipt.message != "Entry already exists (no duplicate added).":
            self.hot_changes += 1
        return receipt.to_json()

    def _document_change(self, a: Mapping[str, Any]) -> Any:
        if self.document_changes >= 1:
            self.over_limit.append(DOC_MANAGE)
            raise ToolRefused("a review may create or update only one document")
        action = a.get("action")
        if action == "create":
            result = self._documents.create(
                a.get("title"),
                a.get("content"),
                description=a.get("description"),
                archive_if_full=False,  # a worker's write never archives another document
            )
        elif action == "update":
            result = self._documents.update(
                str(a.get("id", "")),
                content=a.get("content"),
                title=a.get("title"),
                archive_if_full=False,
            )
        else:
            raise ToolRefused("a review may only create or update a document")
        self.document_changes += 1
        return result.to_json()
