"""The public facade of project Documents: ``MemoryRoot.documents``.

Create, update and archive go through the ``document_mutation`` flow (capacity plan, LRU
archiving with a confirmed cold reference); search goes through ``document_search`` and
records the access time of what it returns (that is what "least recently used" means); get
and records read the index and the files directly. Opening the facade repairs the crash
windows of earlier writers: that is the ``opening`` state of ``document_mutation`` (a
read-only root is not repaired: nothing is written, no lock file either). Document operations
of one root are serialized in the process; the index lock serializes them across processes.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from mnemon_sm.config import Config
from mnemon_sm.errors import InvalidInput, ReadOnly
from mnemon_sm.flows.documents import rules, store
from mnemon_sm.flows.documents.cache import IndexCache
from mnemon_sm.flows.documents.model import DocumentRecord
from mnemon_sm.flows.documents.mutation import DocumentFlow, draft_on
from mnemon_sm.flows.documents.search import DocumentSearchFlow
from mnemon_sm.flows.documents.values import DocumentResult, SearchHit
from mnemon_sm.flows.long_term.api import LongTermMemory
from mnemon_sm.flows.workers.runner import Delegate, host_only
from mnemon_sm.observe import observed
from mnemon_sm.ports import Clock, Files, Locks

__all__ = ["Documents"]

PREVIEW_ID = "00000000-0000-4000-8000-000000000000"  # stands for the id a create would get


class Documents:
    """Project Documents of one storage root."""

    def __init__(
        self,
        files: Files,
        locks: Locks,
        clock: Clock,
        config: Config,
        root_path: str,
        long_term: Callable[[], LongTermMemory],
        delegate: Delegate,
        new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        """``delegate`` is the root's (it marks its worker runs, see ``host_only``)."""
        self._delegate = delegate
        self._files, self._locks, self._clock, self._config = files, locks, clock, config
        self._root_path = root_path.rstrip("/")
        self._mutex = threading.RLock()
        # The index, parsed once per change and committed as the root's mode says.
        self._cache = IndexCache(config.documents_index)
        # The flow's opening repairs the crash windows of earlier writers.
        self._flow = DocumentFlow(
            files, locks, clock, config, root_path, long_term, new_id, self._mutex, self._cache
        )
        self._op_mutex = threading.RLock()  # one mutation at a time per root in a process
        self._search = DocumentSearchFlow(files, locks, clock, config, self._mutex, self._cache)

    # -- mutations -------------------------------------------------------------------------

    @host_only
    @observed("documents.create")
    def create(
        self,
        title: str,
        content: str,
        *,
        description: str | None = None,
        source_paths: Sequence[str] = (),
        session_ids: Sequence[str] = (),
        workspace: str | None = None,
        archive_if_full: bool = True,
    ) -> DocumentResult:
        """Create an active document; archives least recently used ones if it does not fit
        (``archive_if_full=False``: fail with ``DocumentCapacityExceeded`` instead, as worker
        writes do).

        ``source_paths`` are resolved against ``workspace`` (default: the storage root) and
        must stay inside it.
        """
        return self._run(
            "create",
            title=title,
            content=content,
            description=description,
            source_paths=_items(source_paths),
            session_ids=_items(session_ids),
            workspace=workspace,
            archive_if_full=archive_if_full,
        )

    @host_only
    @observed("documents.update")
    def update(
        self,
        doc_id: str,
        *,
        content: str | None = None,
        title: str | None = None,
        description: str | None = None,
        source_paths: Sequence[str] | None = None,
        session_ids: Sequence[str] = (),
        workspace: str | None = None,
        archive_if_full: bool = True,
    ) -> DocumentResult:
        """Update an active document (revision + 1, new hash); the others stay as they are."""
        return self._run(
            "update",
            id=doc_id,
            content=content,
            title=title,
            description=description,
            source_paths=None if source_paths is None else _items(source_paths),
            session_ids=_items(session_ids),
            workspace=workspace,
            archive_if_full=archive_if_full,
        )

    @host_only
    @observed("documents.archive")
    def archive(self, doc_id: str) -> DocumentResult:
        """Archive an active document by hand (cold reference first, then the move)."""
        return self._run("archive", id=doc_id)

    def _run(self, operation: str, **request: Any) -> DocumentResult:
        with self._op_mutex:
            result: DocumentResult = self._flow.perform(
                operation, request={"operation": operation, **request}
            )
            return result

    # -- reads -----------------------------------------------------------------------------

    @host_only
    def get(self, doc_id: str) -> tuple[DocumentRecord, str | None]:
        """A document's record and body (None when its file is missing)."""
        record = self._cache.view(self._files).find(doc_id)
        return record, store.read_body(self._files, record)

    @host_only
    def records(self) -> tuple[DocumentRecord, ...]:
        """Every document's record, active and archived."""
        return store.read_index(self._files, self._cache)

    @host_only
    def search(
        self,
        query: str,
        *,
        limit: int | None = None,
        include_archived: bool = False,
        record_access: bool = True,
    ) -> list[SearchHit]:
        """Deterministic search (``document_search`` flow); records the access time of every
        document returned (unless ``record_access`` is false). A document whose file is
        missing is skipped, never an error."""
        hits: list[SearchHit] = self._search.perform(
            "search",
            request={
                "query": query,
                "limit": limit,
                "include_archived": include_archived,
                "record_access": record_access,
            },
        )
        return hits

    @host_only
    def preview(self, operation: str, **request: Any) -> DocumentRecord:
        """The record a ``create`` or ``update`` (same keyword arguments, ``id`` for an update)
        would commit now, checked as the commit checks it; nothing is written and nothing is
        archived to make room.

        Raises:
            the typed error the operation would raise: ``InvalidInput``, ``ReadOnly``,
            ``DocumentNotFound``, ``DocumentArchived``, ``DocumentCapacityExceeded``, ...
        """
        if not self._config.write_enabled:
            raise ReadOnly()
        if operation not in ("create", "update"):
            raise InvalidInput("a preview is of a create or an update")
        view = self._cache.view(self._files)
        doc_id = PREVIEW_ID if operation == "create" else str(request.get("id") or "").strip()
        draft = draft_on(
            self._files, view, operation, request, doc_id, self._clock, self._root_path
        )
        plan = rules.plan(view, draft, self._config.documents_active_limit)
        if not plan.fits:
            raise rules.capacity_exceeded(plan, "archiving is off for this request")
        return draft.record

    def close(self) -> None:
        """Close the flows; a journal-mode root folds its journal into ``index.json`` first
        (readers of the file alone, the reference implementation among them, then see every
        document)."""
        self._flow.close()
        self._search.close()


def _items(values: object) -> object:
    """The caller's paths or ids as a list; a lone string (which would iterate into letters)
    or anything not iterable is passed on as it is, for the request's checks to refuse."""
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        return values
    return list(values)
