"""The public facade of the long-term tier: ``MemoryRoot.long_term``.

Operations are steps of flows: recall, agent search and writes run a worker; direct search,
related and status are the deterministic reads (``direct_search``); listing, creating, updating
and deleting spaces are ``memory_spaces``; merge is ``merge_spaces``; bulk import and the store's
own maintenance (vector backfill, side-index rebuild) are ``store_upkeep``, a step per batch or
per space. Deterministic
operations of one root are serialized by the service's mutex, held per operation and per tool
call of a worker, never while a worker thinks; each flow that runs a worker is serialized by a
lock of its own (one machine per flow). So a slow recall worker delays the next recall, never a
search, a space listing or hot memory. Every public method refuses to run inside a worker run
(``Busy``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mnemon_sm.flows.long_term.catalog import Catalog, Space
from mnemon_sm.flows.long_term.recall import (
    AgentAnswer,
    AgentSearchFlow,
    DirectSearchFlow,
    RecallAnswer,
    RecallFlow,
)
from mnemon_sm.flows.long_term.service import (
    LongTermService,
    MergeReceipt,
    RelatedItem,
    SearchResult,
)
from mnemon_sm.flows.long_term.spaces import SpacesFlow
from mnemon_sm.flows.long_term.tools import ScopedTools
from mnemon_sm.flows.long_term.upkeep import ImportReceipt, UpkeepFlow
from mnemon_sm.flows.long_term.write import MergeFlow, WriteFlow, WriteReceipt
from mnemon_sm.flows.workers.requests import build_request
from mnemon_sm.flows.workers.runner import Delegate, host_only
from mnemon_sm.observe import observed
from mnemon_sm.ports.long_term.port import LongTermStore
from mnemon_sm.ports.long_term.values import SpaceStatus

__all__ = ["LongTermMemory"]


class LongTermMemory:
    """Memory Spaces: recall, search, remember, link, forget, related, and space management."""

    def __init__(
        self,
        catalog: Catalog,
        store: LongTermStore,
        delegate: Delegate,
        *,
        write_enabled: bool,
        default_limit: int,
    ) -> None:
        self.service = LongTermService(
            catalog, store, write_enabled=write_enabled, default_limit=default_limit
        )
        self._mutex = self.service.mutex
        self._delegate = delegate
        self._recall = RecallFlow(self.service, delegate)
        self._direct = DirectSearchFlow(self.service)
        self._agent = AgentSearchFlow(self.service, delegate)
        self._write = WriteFlow(self.service, delegate)
        self._merge = MergeFlow(self.service)
        self._spaces = SpacesFlow(self.service)
        self._upkeep = UpkeepFlow(self.service)
        self._recall_lock, self._agent_lock, self._write_lock, self._upkeep_lock = (
            threading.RLock(),
            threading.RLock(),
            threading.RLock(),
            threading.RLock(),
        )

    @property
    def mutex(self) -> threading.RLock:
        """Serializes this tier's deterministic operations in the process (flows that apply
        long-term writes outside this facade hold it too)."""
        return self._mutex

    def run_staged(
        self,
        kind: str,
        data: Mapping[str, Any],
        grants: tuple[str, ...],
        result: type,
        *,
        body: str | None = None,
    ) -> tuple[object, ScopedTools]:
        """Run a worker of ``kind`` whose result must validate as ``result`` and whose long-term
        writes are staged (reads count no access); returns its raw result and the tool box
        holding the staged writes. No lock is held while the worker runs.
        Raises like :meth:`~mnemon_sm.flows.workers.runner.Delegate.run`."""
        tools = ScopedTools(self.service, grants, readonly=True)
        request = build_request(kind, data, tools.names, result, body=body)
        return self._delegate.run(request, tools), tools

    # -- spaces ----------------------------------------------------------------------------

    @host_only
    def spaces(self) -> tuple[Space, ...]:
        """Every Memory Space (stores found on disk are registered on the way)."""
        with self._mutex:
            spaces: tuple[Space, ...] = self._spaces.perform("list")
            return spaces

    @host_only
    @observed("long_term.create_space")
    def create_space(self, name: str, description: str, *, active: bool = False) -> Space:
        """Create a space; its id is chosen by the library (``default`` first)."""
        request = {"name": name, "description": description, "active": active}
        with self._mutex:
            space: Space = self._spaces.perform("create", request=request)
            return space

    @host_only
    @observed("long_term.update_space")
    def update_space(
        self,
        space: str,
        *,
        name: str | None = None,
        description: str | None = None,
        active: bool | None = None,
    ) -> Space:
        request = {"space": space, "name": name, "description": description, "active": active}
        with self._mutex:
            updated: Space = self._spaces.perform("update", request=request)
            return updated

    @host_only
    @observed("long_term.delete_space")
    def delete_space(self, space: str) -> None:
        """Delete a space and its store (never the last one)."""
        with self._mutex:
            self._spaces.perform("delete", request={"space": space})

    @host_only
    @observed("long_term.merge")
    def merge(
        self, target: str, sources: Sequence[str], *, deactivate_sources: bool = True
    ) -> MergeReceipt:
        """Copy ``sources`` into ``target``; sources are only read (and then deactivated)."""
        with self._mutex:
            result: MergeReceipt = self._merge.perform(
                "merge",
                request={
                    "target": target,
                    "sources": list(sources),
                    "deactivate_sources": deactivate_sources,
                },
            )
            return result

    @host_only
    def status(self, space: str) -> SpaceStatus:
        with self._mutex:
            status: SpaceStatus = self._direct.perform("status", request={"space": space})
            return status

    # -- reads -----------------------------------------------------------------------------

    @host_only
    def recall(
        self, query: str, *, spaces: Sequence[str] | None = None, **options: Any
    ) -> RecallAnswer:
        """Evidence for ``query`` through the recall worker (``limit`` items at most: 12 by
        default, 50 at most)."""
        with self._recall_lock:
            answer: RecallAnswer = self._recall.perform(
                "recall", request={"query": query, "space_ids": spaces, **options}
            )
            return answer

    @host_only
    def search(
        self, query: str, *, spaces: Sequence[str] | None = None, **options: Any
    ) -> SearchResult:
        """The deterministic search, no model involved."""
        with self._mutex:
            result: SearchResult = self._direct.perform(
                "search", request={"query": query, "space_ids": spaces, **options}
            )
            return result

    @host_only
    def ask(
        self, question: str, *, spaces: Sequence[str] | None = None, **options: Any
    ) -> AgentAnswer:
        """Answer ``question`` from stored evidence; citations are checked by the host."""
        with self._agent_lock:
            answer: AgentAnswer = self._agent.perform(
                "ask", request={"query": question, "space_ids": spaces, **options}
            )
            return answer

    @host_only
    def related(
        self, insight_id: str, *, space: str, depth: int = 2, edge: str | None = None
    ) -> tuple[RelatedItem, ...]:
        """The insights reached from ``insight_id`` by following links, breadth-first, up to
        ``depth`` hops (only edges of type ``edge`` when given)."""
        request = {"space": space, "insight_id": insight_id, "depth": depth, "edge": edge}
        with self._mutex:
            items: tuple[RelatedItem, ...] = self._direct.perform("related", request=request)
            return items

    @host_only
    @observed("long_term.remember_many")
    def remember_many(
        self,
        items: Sequence[object],
        *,
        space: str | None = None,
        batch: int = 500,
        progress: Callable[[int, int], None] | None = None,
    ) -> ImportReceipt:
        """Bulk import (migrations): store many memories without a worker, ``batch`` per
        transaction, calling ``progress(done, total)`` after each batch.

        Each item is a content string or a mapping with ``content`` and optionally
        ``category``, ``importance``, ``tags``, ``entities``, ``source`` and ``createdAt``.
        Every item is checked before anything is written; byte-identical content is stored
        once. Imported memories get entity and causal edges and a temporal backbone per
        source, but no proximity edges (the import path of :meth:`merge` too).

        Raises:
            InvalidInput: a malformed item (nothing written). ReadOnly, UnknownSpace,
            InactiveSpace: as for ``remember``. StorageError: a batch failed; the batches
            before it are stored.
        """
        request = {"items": items, "space": space, "batch": batch, "progress": progress}
        with self._upkeep_lock:
            report: ImportReceipt = self._upkeep.perform("import_items", request=request)
        return report

    @host_only
    def embed_missing(self, *, progress: Callable[[str, int, int], None] | None = None) -> int:
        """Compute the vectors dense recall still lacks, in every space (a backfill after
        configuring an embedder); ``progress(space, done, total)`` after each batch. Returns
        how many memories were embedded. Recall also embeds a few missing ones per call.

        Raises:
            InvalidInput: no embedder is configured, or the store ranks with its own engine
            (the Mnemon CLI). EmbeddingFailed: the embedder failed (vectors stored stay).
        """
        with self._upkeep_lock:
            total: int = self._upkeep.perform("embed_missing", request={"progress": progress})
        return total

    @host_only
    def rebuild_index(self, space: str | None = None) -> list[str]:
        """Rebuild the side index of ``space``, or of every space, from ``mnemon.db`` (never
        needed for correctness; see the side index's staleness rules). Returns the spaces
        rebuilt. Raises ``InvalidInput`` when the store keeps no side index (the Mnemon CLI)."""
        with self._upkeep_lock:
            ids: list[str] = self._upkeep.perform("rebuild_index", request={"space": space})
        return ids

    # -- writes (through the write worker) -------------------------------------------------

    @host_only
    @observed("long_term.remember")
    def remember(
        self, content: str, *, space: str | None = None, source: str = "user", **fields: Any
    ) -> WriteReceipt:
        """Store a memory; the worker picks the space unless ``space`` names one.

        ``fields`` may be ``category``, ``importance``, ``tags`` and ``entities``.
        """
        return self._write_op(
            "remember", content=content, memoryBodyId=space, source=source, **fields
        )

    @host_only
    @observed("long_term.link")
    def link(
        self,
        source_id: str,
        target_id: str,
        *,
        space: str | None = None,
        type: str = "semantic",
        weight: float = 0.5,
        reason: str | None = None,
    ) -> WriteReceipt:
        return self._write_op(
            "link",
            sourceId=source_id,
            targetId=target_id,
            memoryBodyId=space,
            type=type,
            weight=weight,
            reason=reason,
        )

    @host_only
    @observed("long_term.forget")
    def forget(self, insight_id: str, *, space: str | None = None) -> WriteReceipt:
        return self._write_op("forget", id=insight_id, memoryBodyId=space)

    def _write_op(self, operation: str, **fields: Any) -> WriteReceipt:
        with self._write_lock:
            receipt: WriteReceipt = self._write.perform(
                "write", request={"operation": operation, **fields}
            )
            return receipt

    def close(self) -> None:
        with self._recall_lock, self._agent_lock, self._write_lock, self._upkeep_lock, self._mutex:
            for flow in (
                self._recall,
                self._direct,
                self._agent,
                self._write,
                self._merge,
                self._spaces,
                self._upkeep,
            ):
                flow.close()
