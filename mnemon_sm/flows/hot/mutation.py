"""Context of ``specs/hot_memory_mutation.yaml``: the callbacks the spec names, and its data.

Theory of operation
-------------------
The spec decides the order of work; this class only supplies the steps. Opening a root enters
``opening``, whose entry actions create the directories, take the lock, remove stale temporary
files, reload the source and repair the projections. Each mutation is one event (``add``,
``replace`` or ``remove``): its validators check the request before anything touches disk, then
the pipeline of ``committed`` runs (lock, reload, apply the rules, commit, release, report) --
as the entry actions when coming from ``ready``, as an internal transition when already there.
A commit leaves the machine in ``committed``; any other outcome is reported as an internal
event (``duplicate_found``, ``request_rejected``, ``storage_failed``) whose edge leads to
``ready``. So the common path is one engine step. A read-only root's opening only reads the
source: it creates, locks, clears and repairs nothing (every mutation is refused by
``check_writable`` before the pipeline runs). A compaction commit first preserves the
entries it takes out (``preserve_entries``: one line appended to the hot-memory history, under
the same lock, fsynced with the source before the commit point); a history that cannot be
written fails the commit.

Every pipeline step after the first decided outcome is skipped, and ``release_lock`` always
runs, so the lock is never left held by an expected failure. Expected failures (a typed
``RequestRejected`` from the rules, a ``StorageError`` from a port) become the outcome; any
other exception propagates with the state unchanged, and :meth:`run` releases the lock on the
way out. One machine instance serves every operation of the root.
"""

from __future__ import annotations

import contextlib
from typing import Any

from mnemon_sm.config import Config
from mnemon_sm.engine.flow import Machine, send, start
from mnemon_sm.engine.registry import flow_context
from mnemon_sm.errors import CorruptStore, MnemonError, ReadOnly, StorageError
from mnemon_sm.flows.hot.compaction import Compaction, plan_compaction
from mnemon_sm.flows.hot.history import HistoryRound, HotHistory
from mnemon_sm.flows.hot.model import LOCK_NAME, RUNTIME_DIR, SOURCE_PATH, HotStore
from mnemon_sm.flows.hot.rules import (
    Commit,
    Mutation,
    Receipt,
    Rejected,
    Unchanged,
    check_request,
    plan_mutation,
)
from mnemon_sm.flows.hot.store import (
    SourceCache,
    clear_stale_temps,
    commit,
    repair_projections,
)
from mnemon_sm.ports import Ports
from mnemon_sm.text import iso_ms

__all__ = ["HotMutationFlow"]

FLOW = "hot_memory_mutation"


@flow_context("HotMutationFlow")
class HotMutationFlow:
    """Drives one storage root's hot-memory machine. Not thread-safe: callers serialize."""

    def __init__(
        self, ports: Ports, config: Config, cache: SourceCache, history: HotHistory
    ) -> None:
        self.ports, self.config, self.cache, self.history = ports, config, cache, history
        self.state: str | None = None  # the machine writes its state value here
        self._mutation: Mutation | Compaction | None = None
        self.kept = 0  # entries the last compaction kept
        self._store: HotStore | None = None
        self._outcome: Commit | Unchanged | Rejected | None = None
        self._failure: MnemonError | None = None
        self._preserved: HistoryRound | None = None  # what a compaction takes out
        self._sync_first: tuple[str, ...] = ()  # to fsync before the commit point
        self._locked = False
        try:
            self._machine: Machine = start(FLOW, self)
        finally:
            if self._locked:  # an unexpected error or a failed release inside opening
                self.release_lock()
        if self._failure is not None and self.state == "closed":
            raise self._failure

    # -- driving ---------------------------------------------------------------------------

    def run(self, action: str, **fields: object) -> Receipt:
        """Send one mutation event and return its receipt or raise its typed error.

        ``fields`` are the request's ``target``, ``content``, ``old_text`` and ``importance``
        (for ``compact``: ``compaction``, a checked :class:`Compaction`); they travel as one
        ``request`` mapping (the engine reserves names like ``target``).
        """
        self._mutation = self._store = self._outcome = self._failure = None
        self._preserved, self._sync_first = None, ()
        try:
            send(self._machine, FLOW, action, request={"action": action, **fields})
        finally:
            if self._locked:  # after a failed release or an unexpected exception
                self.release_lock()
        outcome, failure = self._outcome, self._failure
        self._mutation = self._store = self._outcome = self._failure = None
        if failure is not None:
            self.cache.forget()  # a failed commit may have replaced a projection
            raise failure
        if isinstance(outcome, Rejected):
            raise outcome.error
        assert outcome is not None, f"{FLOW}: no outcome in state {self.state}"
        return outcome.receipt

    def close(self) -> None:
        """Enter the final state; every later event raises ``IllegalEvent``."""
        send(self._machine, FLOW, "close")

    # -- validators ------------------------------------------------------------------------

    def check_writable(self) -> None:
        if not self.config.write_enabled:
            raise ReadOnly()

    def check_request(self, request: dict[str, object]) -> None:
        compaction = request.get("compaction")
        if request.get("action") == "compact" and isinstance(compaction, Compaction):
            self._mutation = compaction
        else:
            self._mutation = check_request(**request)

    # -- pipeline steps (entry actions) ----------------------------------------------------

    def create_directories(self) -> None:
        """``runtime/``, ``state/`` and the hot-memory history file, empty (where a compaction
        commit preserves what it takes out: no commit pays for creating it)."""
        if not self.config.write_enabled:
            return
        self._attempt(self.ports.files.ensure_dir, RUNTIME_DIR)
        # Best effort: on a root that cannot be written (a read-only file system) the first
        # compaction's append creates the file, or reports why it cannot.
        with contextlib.suppress(StorageError):
            self.history.create(durability=self.config.durability)

    def acquire_lock(self) -> None:
        if self._locked:  # a release failed earlier: try it again first
            self.release_lock()
        if self._undecided() and self.config.write_enabled:
            self._attempt(self.ports.locks.acquire, LOCK_NAME, self.config.lock_timeout_ms)
            self._locked = self._failure is None

    def clear_stale_temps(self) -> None:
        if self._undecided() and self.config.write_enabled:
            self._attempt(clear_stale_temps, self.ports.files)

    def reload_source(self) -> None:
        if self._undecided():
            self._attempt(self._reload)

    def repair_projections(self) -> None:
        if self._undecided() and self._store is not None and self.config.write_enabled:
            self._attempt(repair_projections, self.ports.files, self._store)

    def apply_rules(self) -> None:
        if self._undecided():
            assert self._store is not None and self._mutation is not None
            now = iso_ms(self.ports.clock.now_ms())
            limit = self.config.limit(self._mutation.target)
            if isinstance(self._mutation, Compaction):
                self._outcome, done = plan_compaction(self._store, self._mutation, now, limit)
                self.kept, self._preserved = done.kept, done.preserved
            else:
                self._outcome = plan_mutation(self._store, self._mutation, now, limit)

    def preserve_entries(self) -> None:
        """Append what a committing compaction takes out to the history (its fsync is left
        to the commit, which syncs it with the source before the commit point)."""
        round_ = self._preserved
        if self._failure is None and isinstance(self._outcome, Commit) and round_ is not None:
            synced = self._attempt(self.history.append, round_, durability=self.config.durability)
            self._sync_first = synced or ()

    def commit(self) -> None:
        outcome = self._outcome
        if self._failure is None and isinstance(outcome, Commit):
            assert self._store is not None
            data = self._attempt(
                commit,
                self.ports.files,
                self._store,
                outcome.store,
                self.config.durability,
                (outcome.target,),
                self._sync_first,
            )
            if data is not None:
                self.cache.remember(data, outcome.store, outcome.target)

    def release_lock(self) -> None:
        """Release the lock; a failed release keeps it marked held, so it is retried on the
        way out of the operation and before the next acquire."""
        if self._locked:
            try:
                self.ports.locks.release(LOCK_NAME)
            except StorageError as exc:
                self._failure = self._failure or exc
                return
            self._locked = False

    def report_outcome(self, machine: Machine) -> None:
        """Raise the internal event of a non-commit outcome (a commit raises nothing)."""
        if self._failure is not None:
            machine.raise_("storage_failed")
        elif isinstance(self._outcome, Unchanged):
            machine.raise_("duplicate_found")
        elif isinstance(self._outcome, Rejected):
            machine.raise_("request_rejected")

    # -- guards ----------------------------------------------------------------------------

    def is_unavailable(self) -> bool:
        """Opening could not take the lock or use the directory (a corrupt source is not
        unavailability: the root opens and every operation reports it)."""
        return self._failure is not None and not isinstance(self._failure, CorruptStore)

    # -- helpers ---------------------------------------------------------------------------

    def _undecided(self) -> bool:
        return self._failure is None and self._outcome is None

    def _reload(self) -> None:
        self._store = self.cache.load(self.ports.files.read(SOURCE_PATH))

    def _attempt(self, step: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return step(*args, **kwargs)
        except StorageError as exc:
            if self._failure is None:
                self._failure = exc
            return None
