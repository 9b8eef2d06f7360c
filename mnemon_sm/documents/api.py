"""The public facade of project Documents: ``MemoryRoot.documents``.

Create, update and archive go through the ``document_mutation`` flow (capacity plan, LRU
archiving with a confirmed cold reference). Search and get read the index and the files
directly; search also records the access time of what it returns (that is what "least
recently used" means). Opening the facade repairs the crash windows of earlier writers.
Document operations of one root are serialized in the process; the index lock serializes
them across processes.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from ..config import Config
from ..errors import InvalidInput, StorageError
from ..longterm.api import LongTermMemory
from ..ports import Clock, Files, Locks
from ..text import iso_ms
from ..workers.port import Workers
from . import rules, store
from .flow import DocumentFlow
from .model import DOCUMENTS_DIR, DocumentRecord
from .values import DocumentResult, SearchHit

__all__ = ["Documents"]

SEARCH_LIMIT_DEFAULT = 20
SEARCH_LIMIT_MAX = 50


class Documents:
    """Project Documents of one storage root."""

    def __init__(
        self,
        files: Files,
        locks: Locks,
        clock: Clock,
        config: Config,
        root_path: str,
        workers: Callable[[], Workers],
        long_term: Callable[[], LongTermMemory],
        new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self._files, self._locks, self._clock, self._config = files, locks, clock, config
        self._mutex = threading.RLock()
        self._flow = DocumentFlow(
            files, locks, clock, config, root_path, workers, long_term, new_id, self._mutex
        )
        self._op_mutex = threading.RLock()  # one mutation at a time per root in a process
        # A corrupt index is reported by every document operation instead (it is never
        # rewritten), and a busy lock only postpones the repair to the next opening: neither
        # may keep hot memory from opening.
        with contextlib.suppress(StorageError):
            if files.list(DOCUMENTS_DIR):
                with self._locked():
                    store.repair(files)

    # -- mutations -------------------------------------------------------------------------

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
            source_paths=list(source_paths),
            session_ids=list(session_ids),
            workspace=workspace,
            archive_if_full=archive_if_full,
        )

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
            source_paths=None if source_paths is None else list(source_paths),
            session_ids=list(session_ids),
            workspace=workspace,
            archive_if_full=archive_if_full,
        )

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

    def get(self, doc_id: str) -> tuple[DocumentRecord, str | None]:
        """A document's record and body (None when its file is missing)."""
        record = rules.find(store.read_index(self._files), doc_id)
        return record, store.read_body(self._files, record)

    def records(self) -> tuple[DocumentRecord, ...]:
        """Every document's record, active and archived."""
        return store.read_index(self._files)

    def search(
        self, query: str, *, limit: int | None = None, include_archived: bool = False
    ) -> list[SearchHit]:
        """Deterministic search; records the access time of every document returned.

        A document whose file is missing is skipped, never an error.
        """
        if not isinstance(query, str):
            raise InvalidInput("query must be a string")
        wanted = SEARCH_LIMIT_DEFAULT if limit is None else limit
        if type(wanted) is not int or not 1 <= wanted <= SEARCH_LIMIT_MAX:
            raise InvalidInput(f"limit must be an integer in 1..{SEARCH_LIMIT_MAX}")
        with self._locked():
            records = store.read_index(self._files)
            scored: list[tuple[int, DocumentRecord, str]] = []
            for r in records:
                if r.status != "active" and not include_archived:
                    continue
                body = store.read_body(self._files, r)
                if body is None:
                    continue
                points = rules.score(query, r, body)
                if points > 0:
                    scored.append((points, r, body))
            scored.sort(key=lambda s: (-s[0], _desc(s[1].updated_at)))
            top = scored[:wanted]
            if not top:
                return []
            now = iso_ms(self._clock.now_ms())
            seen = {r.id for _, r, _ in top}
            touched = tuple(
                attrs.evolve(r, last_accessed_at=now) if r.id in seen else r for r in records
            )
            if self._config.write_enabled:
                store.write_index(self._files, touched, self._config.durability)
            fresh = {r.id: r for r in touched}
            return [SearchHit(fresh[r.id], b, p, rules.excerpt(b)) for p, r, b in top]

    def close(self) -> None:
        self._flow.close()

    def _locked(self) -> store.IndexLock:
        return store.IndexLock(self._mutex, self._locks, self._config.lock_timeout_ms)


def _desc(stamp: str) -> tuple[int, ...]:
    """Sort key putting later ISO timestamps first."""
    return tuple(-ord(c) for c in stamp)
