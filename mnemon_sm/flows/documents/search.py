"""Context of ``specs/document_search.yaml``: the deterministic document search.

The request is checked first by a pure validator (a string query, a limit in 1..50) and
travels with the ``search`` event to the entry action of ``searching``; there, under the
index lock, the index is read and the candidates are scored by the rules of
:func:`~mnemon_sm.flows.documents.rules.score`, ordered by score and then by the latest
update, cut to the limit, and the access time of every document returned is recorded (that
is what "least recently used" means for archiving) unless the request says
``record_access: False`` (a worker's search counts no access). The bodies come from the
root's :class:`~mnemon_sm.flows.documents.search_index.SearchIndex`, which reads a file
once per change of its document and verifies the file of every document it returns; a
document whose file is missing or unreadable is skipped, never an error. A read-only root
records nothing and takes no lock (which would create its file): it reads the committed index
and files, each replaced atomically.

As in every flow, a run's data travels with its events: the checked request exists only as the
``search`` event's argument and in the one step it reaches; the context keeps no per-search
attribute (only the root's collaborators and, for :meth:`FlowContext.perform`, the hits or the
error), so nothing of a search, finished or interrupted, is left to reset.

Recording the access is bookkeeping, never a reason to fail a search: when the lock file
cannot be created (a read-only or full ``documents/``) the index is read without the lock (it
is replaced atomically) and nothing is recorded; when the index write fails, the results are
returned with the access times as stored (what the failed commit wrote is put back). A busy
lock (``LockTimeout``) and a corrupt index still fail the search.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from typing import Any

import attrs

from mnemon_sm.config import Config
from mnemon_sm.engine.context import FlowContext
from mnemon_sm.engine.flow import Machine
from mnemon_sm.engine.registry import flow_context
from mnemon_sm.errors import InvalidInput, LockTimeout, MnemonError, StorageError
from mnemon_sm.flows.documents import rules, store
from mnemon_sm.flows.documents.cache import IndexCache
from mnemon_sm.flows.documents.search_index import SearchIndex
from mnemon_sm.flows.documents.values import SearchHit
from mnemon_sm.ports import Clock, Files, Locks
from mnemon_sm.text import iso_ms

__all__ = ["DocumentSearchFlow"]

SEARCH_LIMIT_DEFAULT = 20
SEARCH_LIMIT_MAX = 50


@flow_context("DocumentSearchFlow")
class DocumentSearchFlow(FlowContext):
    FLOW = "document_search"

    def __init__(
        self,
        files: Files,
        locks: Locks,
        clock: Clock,
        config: Config,
        mutex: threading.RLock,
        cache: IndexCache,
    ) -> None:
        """``cache`` is the root's index cache; the search index is this flow's own (both
        are used under ``mutex``)."""
        self.files, self.locks, self.clock, self.config, self.mutex = (
            files,
            locks,
            clock,
            config,
            mutex,
        )
        self.cache, self.index = cache, SearchIndex()
        super().__init__()

    def check_request(self, request: Mapping[str, Any]) -> None:
        _checked(request)

    def run_search(self, machine: Machine, request: Mapping[str, Any]) -> None:
        """Entry of ``searching`` (entered only by ``search``, whose request it gets)."""
        wanted = _checked(request)
        record = self.config.write_enabled and wanted.record
        try:
            with contextlib.ExitStack() as held:
                if self.config.write_enabled:
                    try:
                        held.enter_context(
                            store.IndexLock(self.mutex, self.locks, self.config.lock_timeout_ms)
                        )
                    except LockTimeout:
                        raise
                    except StorageError:
                        record = False  # no lock file can be made here: read, record nothing
                        held.enter_context(self.mutex)
                else:
                    held.enter_context(self.mutex)
                hits = self._search(wanted, record)
        except MnemonError as exc:
            return self.refuse(machine, "search_failed", exc)
        self.settle(machine, "results_found" if hits else "nothing_found", hits)

    def _search(self, wanted: _Request, record: bool) -> list[SearchHit]:
        records = self.cache.view(self.files).records
        top = self.index.search(self.files, records, wanted.query, wanted.limit, wanted.archived)
        if not top:
            return []
        now = iso_ms(self.clock.now_ms())
        fresh = {r.id: attrs.evolve(r, last_accessed_at=now) for _, r, _ in top}
        if record:
            undo = store.Undo(self.files, self.config.durability)
            try:
                changed = list(fresh.values())
                touched = self.cache.commit(self.files, undo, changed)
            except StorageError:
                undo.rollback()
                fresh = {r.id: r for _, r, _ in top}  # bookkeeping only: the results as stored
            else:
                self.index.follow(records, touched.records, fresh)
                self.cache.fold_if_due(self.files, self.config.durability)
        return [SearchHit(fresh[r.id], b, p, rules.excerpt(b)) for p, r, b in top]


@attrs.frozen
class _Request:
    """A checked search request."""

    query: str
    limit: int
    archived: bool  # archived documents are candidates too
    record: bool  # record the access time of the results


def _checked(request: Mapping[str, Any]) -> _Request:
    """The request, checked (pure: the validator and the search both call it)."""
    query, limit = request.get("query"), request.get("limit")
    if not isinstance(query, str):
        raise InvalidInput("query must be a string")
    wanted = SEARCH_LIMIT_DEFAULT if limit is None else limit
    if type(wanted) is not int or not 1 <= wanted <= SEARCH_LIMIT_MAX:
        raise InvalidInput(f"limit must be an integer in 1..{SEARCH_LIMIT_MAX}")
    archived = bool(request.get("include_archived"))
    return _Request(query, wanted, archived, request.get("record_access", True) is not False)
