"""The ``LongTermStore`` port: Memory Spaces of one storage root, each a Mnemon store.

Two adapters implement it: the embedded SQLite store (``longterm.sqlite``; the default, no
service to run) and the real Mnemon CLI (``longterm.mnemon``). Flows see only this protocol and
the values of :mod:`mnemon_sm.ports.long_term.values`.

Contract, for every method taking ``space``: the space is a store id matching
``[a-zA-Z0-9][a-zA-Z0-9_-]*``; a missing space raises ``UnknownSpace`` except in
:meth:`LongTermStore.create_space`. Reads marked read-only never change access counts or the
oplog. Bad arguments raise ``InvalidInput``; a missing or deleted insight raises
``UnknownInsight``; a failure of the store itself raises ``StorageError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from mnemon_sm.ports.long_term.values import (
    Capabilities,
    ForgetReceipt,
    GraphSnapshot,
    ImportDraft,
    ImportReport,
    Insight,
    LinkReceipt,
    RecallResult,
    RelatedHit,
    RememberReceipt,
    SpaceStatus,
)

__all__ = ["LongTermStore"]


@runtime_checkable
class LongTermStore(Protocol):
    """Memory Spaces of one root."""

    @property
    def capabilities(self) -> Capabilities:
        """What this adapter supports."""
        ...

    def spaces(self) -> tuple[str, ...]:
        """Ids of the stores that exist (``data/<id>/mnemon.db``), sorted."""
        ...

    def create_space(self, space: str) -> None:
        """Create an empty store; raises ``InvalidInput`` when it already exists."""
        ...

    def delete_space(self, space: str) -> None:
        """Delete a store and its files."""
        ...

    def status(self, space: str) -> SpaceStatus:
        """Counts and sizes (read-only)."""
        ...

    def recall(
        self,
        space: str,
        query: str,
        *,
        mode: str = "relevance",
        limit: int = 10,
        category: str | None = None,
        source: str | None = None,
        intent: str | None = None,
        readonly: bool = False,
    ) -> RecallResult:
        """Relevance (the default: words weighted by rarity, optionally meaning, then bounded
        re-ranking; scores 0..1), smart (Mnemon's own graph recall, scores 0..1; the Mnemon
        CLI adapter answers relevance recall with it too), keyword (overlap ratio) or basic
        (substring, no score) recall. Counts access on every returned insight unless
        ``readonly``."""
        ...

    def remember(
        self,
        space: str,
        content: str,
        *,
        category: str = "general",
        importance: int = 3,
        tags: tuple[str, ...] = (),
        entities: tuple[str, ...] = (),
        source: str = "user",
    ) -> RememberReceipt:
        """Store an insight with automatic temporal and entity edges; byte-identical content
        of an active insight is skipped and reported with the existing id."""
        ...

    def related(
        self, space: str, insight_id: str, *, depth: int = 2, edge_type: str | None = None
    ) -> tuple[RelatedHit, ...]:
        """Breadth-first neighbours over undirected edges, start excluded (read-only)."""
        ...

    def link(
        self,
        space: str,
        source_id: str,
        target_id: str,
        *,
        edge_type: str = "semantic",
        weight: float = 0.5,
        reason: str | None = None,
    ) -> LinkReceipt:
        """Link two active insights in both directions (replacing an existing link)."""
        ...

    def forget(self, space: str, insight_id: str) -> ForgetReceipt:
        """Soft-delete an active insight and drop every edge touching it."""
        ...

    def list(
        self,
        space: str,
        *,
        query: str | None = None,
        category: str | None = None,
        limit: int = 100_000,
    ) -> tuple[Insight, ...]:
        """Active insights, importance then creation time descending (read-only)."""
        ...

    def insights(self, space: str, ids: Sequence[str]) -> tuple[Insight, ...]:
        """The active insights among ``ids``, in the order given; unknown, forgotten and
        repeated ids are left out (read-only)."""
        ...

    def graph(self, space: str) -> GraphSnapshot:
        """Active insights and their edges (read-only)."""
        ...

    def import_draft(self, space: str, draft: ImportDraft) -> ImportReport:
        """Import a draft (used by merge): new ids, exact duplicates skipped and mapped,
        explicit edges single-direction with their weight and reason."""
        ...
