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

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from mnemon_sm.ports.long_term.checks import Prepared
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
    SpaceDigest,
    SpaceStatus,
)

if TYPE_CHECKING:
    from mnemon_sm.ports.embedder import Embedder

__all__ = ["ROW_TABLES", "DenseBackfill", "LongTermStore", "Rows", "SideIndex", "SpaceRows"]

#: The tables of a Mnemon store a migration copies, in this order (edges reference insights).
ROW_TABLES = ("insights", "edges", "oplog")

Rows = Sequence[tuple[Any, ...]]  # rows of one table: the rowid, then the table's columns


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
        content: str | Prepared,
        *,
        category: str = "general",
        importance: int = 3,
        tags: tuple[str, ...] = (),
        entities: tuple[str, ...] = (),
        source: str = "user",
    ) -> RememberReceipt:
        """Store an insight with automatic temporal and entity edges; byte-identical content
        of an active insight is skipped and reported with the existing id.

        ``content`` is the text, checked here with the keyword fields
        (:func:`~mnemon_sm.ports.long_term.checks.prepare`), or an insight a caller checked
        already (the :class:`~mnemon_sm.ports.long_term.checks.Prepared` that function
        returned), stored as it is with the keyword fields left at their defaults
        (:func:`~mnemon_sm.ports.long_term.checks.remembered`)."""
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


@runtime_checkable
class DenseBackfill(Protocol):
    """An optional capability of a store: it computes the vectors of dense recall (the
    embedded store; the Mnemon CLI does not)."""

    @property
    def embedder(self) -> Embedder | None:
        """The embedder of dense retrieval, if one is configured."""
        ...

    def embed_missing(
        self, space: str, *, progress: Callable[[int, int], None] | None = None
    ) -> int:
        """Embed every insight of ``space`` that has no vector yet; returns how many."""
        ...


@runtime_checkable
class SideIndex(Protocol):
    """An optional capability of a store: it keeps a side index it can rebuild from its
    database (the embedded store; the Mnemon CLI does not)."""

    def rebuild_index(self, space: str) -> None:
        """Rebuild the side index of ``space`` from its database."""
        ...


@runtime_checkable
class SpaceRows(Protocol):
    """An optional capability of a store: a space's rows as they are, out and in, and their
    digest (what a migration between backends copies and checks; the embedded store and
    Memory Spaces on PostgreSQL have it, the Mnemon CLI does not).

    Rows are Mnemon's: per table of :data:`ROW_TABLES`, the rowid and then the columns of
    :data:`mnemon_sm.ports.long_term.digest.COLUMNS`, in rowid order."""

    def export_rows(self, space: str, batch: int = 2000) -> Iterator[tuple[str, Rows]]:
        """Every row of ``space``, table by table, ``batch`` rows at a time (read-only)."""
        ...

    def import_rows(self, space: str, batches: Iterable[tuple[str, Rows]]) -> None:
        """Create ``space`` holding exactly these rows, in one transaction (``InvalidInput``
        when it exists already)."""
        ...

    def space_digest(self, space: str) -> SpaceDigest:
        """Row counts and the SHA-256 of every row of ``space`` (read-only)."""
        ...
