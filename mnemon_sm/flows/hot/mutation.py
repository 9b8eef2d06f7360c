"""Context of ``specs/hot_memory_mutation.yaml``: the callbacks the spec names, and its data.

Theory of operation
-------------------
The spec decides the order of work; this class only supplies the steps. Opening a root enters
``opening``, whose entry actions create the directories, take the lock, remove stale temporary
files, reload the source and repair the projections. A read-only root's opening only reads the
source: it creates, locks, clears and repairs nothing (every mutation is refused by
``check_writable`` before anything else runs).

Each mutation is one event (``add``, ``replace``, ``remove``, or ``compact`` from capacity
maintenance). Its validators check the request before anything touches disk; then
``deciding`` takes the lock, reloads the source and applies the rules, which are pure
(:func:`~mnemon_sm.flows.hot.rules.plan_mutation`,
:func:`~mnemon_sm.flows.hot.compaction.plan_compaction`; the time comes from the clock port).
Their plan, or a storage failure of the lock or the source, is the request's verdict
(:func:`~mnemon_sm.flows.hot.rules.verdict`), and one guarded eventless edge per verdict leaves
``deciding``: ``can_commit`` enters ``committed``; ``is_duplicate``, ``is_rejected`` and
``has_failed`` release the lock on their way back to ``ready``, having written nothing. Leaving
``deciding`` clears the verdict (its exit action), so its guards never hold again once it is
left -- even when an exception escaping ``committed``'s writes makes the engine fall back to
``deciding`` to fire ``abort``.

``committed`` is the only state that writes: a compaction commit first preserves the entries it
takes out (``preserve_entries``: one line appended to the hot-memory history, fsynced with the
source before the commit point), then the commit protocol runs and the lock is released. A
write that fails (a history that cannot be written fails the commit) records the failure, and
``has_failed`` takes the machine from ``committed`` to ``ready``. A request that commits rests
in ``committed``.

Within one state a step after a recorded storage failure does nothing (the failure is the
state's outcome, taken by its ``has_failed`` edge), and ``release_lock`` always runs, so the
lock is never left held by an expected failure. Expected failures (a typed ``RequestRejected``
from the rules, a ``StorageError`` from a port) become the outcome; any other exception
propagates, and the lock is released on the way out (by ``abort`` when the engine stops in
``deciding``, by :meth:`run` in any case). One machine instance serves every operation of the
root.

A render of context that finds a projection out of date (a hand edit, a writer that crashed
between its projection and its commit) sends ``repair``: ``repairing`` takes the lock (waiting
at most 100 ms), reloads the source and rewrites the projections, then raises ``repaired``,
whose edge leads back to ``ready``.
A lock or a write that fails there only postpones the repair to the next render, and a
read-only root repairs nothing.

Data of a request travels with it: the event carries the request, and what the steps of one
request produce (the reloaded store, the rules' outcome, the entries a compaction takes out, a
storage failure, the verdict) is one frozen :class:`HotRun`, replaced step by step and dropped
when the request ends. The only data kept between requests is whether the lock is held (a
failed release is retried) and the source cache.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from mnemon_sm.config import Config
from mnemon_sm.engine.context import FlowContext
from mnemon_sm.engine.flow import Machine
from mnemon_sm.engine.registry import flow_context
from mnemon_sm.errors import CorruptStore, InvalidInput, MnemonError, ReadOnly, StorageError
from mnemon_sm.flows.hot.compaction import Compaction, plan_compaction
from mnemon_sm.flows.hot.history import HistoryRound, HotHistory
from mnemon_sm.flows.hot.model import LOCK_NAME, RUNTIME_DIR, SOURCE_PATH, TARGETS, HotStore
from mnemon_sm.flows.hot.rules import (
    Commit,
    Mutation,
    Outcome,
    Receipt,
    Rejected,
    Verdict,
    check_request,
    plan_batch,
    plan_mutation,
    verdict,
)
from mnemon_sm.flows.hot.store import (
    SourceCache,
    clear_stale_temps,
    commit,
    repair_projections,
)
from mnemon_sm.ports import Ports
from mnemon_sm.text import iso_ms

__all__ = ["HotMutationFlow", "HotRun", "members_of", "mutation_of"]

FLOW = "hot_memory_mutation"

# A repair waits at most this long for the lock; a busy lock only postpones the repair to the
# next render (the text itself comes from the source).
REPAIR_WAIT_MS = 100


@attrs.frozen
class HotRun:
    """What the steps of one request have produced so far (empty between requests)."""

    store: HotStore | None = None  # the source reloaded under the lock
    outcome: Outcome | None = None  # the rules' plan
    preserved: HistoryRound | None = None  # what a committing compaction takes out
    sync_first: tuple[str, ...] = ()  # files to fsync before the commit point
    failure: MnemonError | None = None  # the first storage failure
    verdict: Verdict | None = None  # which edge leaves deciding; None once it is left
    answers: tuple[Outcome, ...] | None = None  # a batch: each member's own outcome

    def but(self, **changes: Any) -> HotRun:
        """A copy with ``changes`` (``attrs.evolve``, without its generic cost: one request
        makes several steps)."""
        fields: dict[str, Any] = {
            "store": self.store,
            "outcome": self.outcome,
            "preserved": self.preserved,
            "sync_first": self.sync_first,
            "failure": self.failure,
            "verdict": self.verdict,
            "answers": self.answers,
        }
        fields.update(changes)
        return HotRun(**fields)


_IDLE = HotRun()


def mutation_of(request: Mapping[str, object]) -> Mutation | Compaction:
    """The checked request an event carries: a compaction is checked by capacity maintenance
    before it is sent; any other request by RULE-HOT-1/2. Pure; raises ``InvalidInput``."""
    compaction = request.get("compaction")
    if request.get("action") == "compact" and isinstance(compaction, Compaction):
        return compaction
    return check_request(**request)


def members_of(request: Mapping[str, object]) -> tuple[Mutation, ...]:
    """The members of a ``batch`` request: two or more mutations, each checked by RULE-HOT-1/2
    before it joined (:mod:`~mnemon_sm.flows.hot.group`). Pure; raises ``InvalidInput``."""
    members = request.get("members")
    if (
        not isinstance(members, tuple)
        or len(members) < 2
        or not all(isinstance(m, Mutation) for m in members)
    ):
        raise InvalidInput("a batch holds two or more checked mutations")
    return members


@flow_context("HotMutationFlow")
class HotMutationFlow(FlowContext):
    """Drives one storage root's hot-memory machine. Not thread-safe: callers serialize."""

    FLOW = FLOW

    def __init__(
        self, ports: Ports, config: Config, cache: SourceCache, history: HotHistory
    ) -> None:
        self.ports, self.config, self.cache, self.history = ports, config, cache, history
        self._run = _IDLE
        self._locked = False  # held across steps; a failed release keeps it set
        self.writes_started = False  # the last request reached the commit protocol
        # The request the validators checked and what they made of it, so that deciding it
        # does not check it again (the very object the event carries; dropped with the run).
        self._checked: tuple[object, Mutation | Compaction] | None = None
        try:
            super().__init__()
        finally:
            if self._locked:  # an unexpected error or a failed release inside opening
                self.release_lock()
        failure = self._run.failure
        self._run = _IDLE
        if failure is not None and self.state == "closed":
            raise failure

    # -- driving ---------------------------------------------------------------------------

    def run(self, action: str, **fields: object) -> Receipt:
        """Send one mutation event and return its receipt or raise its typed error.

        ``fields`` are the request's ``target``, ``content``, ``old_text`` and ``importance``
        (for ``compact``: ``compaction``, a checked :class:`Compaction`); they travel as one
        ``request`` mapping (the engine reserves names like ``target``).
        """
        self.writes_started = False
        try:
            receipt: Receipt = self.perform(action, request={"action": action, **fields})
            return receipt
        finally:
            if self._locked:  # an unexpected exception escaped with the lock held
                self.release_lock()
                self._run = _IDLE

    def run_batch(self, members: tuple[Mutation, ...]) -> tuple[Receipt | MnemonError, ...]:
        """Send one ``batch`` event: the members are decided in order under one lock and the
        ones that apply commit together. Returns each member's receipt or typed error; a
        storage failure (nothing committed) is raised for all. After an exception,
        :attr:`writes_started` tells whether the commit protocol had begun."""
        self.writes_started = False
        try:
            answers: tuple[Receipt | MnemonError, ...] = self.perform(
                "batch", request={"action": "batch", "members": members}
            )
            return answers
        finally:
            if self._locked:
                self.release_lock()
                self._run = _IDLE

    def repair(self) -> None:
        """Rewrite the projections from the source under the lock (see the module); never
        raises for a busy lock or a failed write: the next render tries again."""
        with contextlib.suppress(StorageError):
            self.perform("repair")

    def conclude(self) -> None:
        """Turn the request's run into its receipt or typed error."""
        if self._locked:  # a release failed: try it once more before answering
            self.release_lock()
        run = self._run
        if run.failure is not None:
            self.cache.forget()  # a failed commit may have replaced a projection
            self.answer(error=run.failure)
        elif run.answers is not None:
            self.answer(
                tuple(a.error if isinstance(a, Rejected) else a.receipt for a in run.answers)
            )
        elif isinstance(run.outcome, Rejected):
            self.answer(error=run.outcome.error)
        elif run.outcome is not None:
            self.answer(run.outcome.receipt)

    def reset(self) -> None:
        self._run = _IDLE
        self._checked = None

    # -- validators ------------------------------------------------------------------------

    def check_writable(self) -> None:
        if not self.config.write_enabled:
            raise ReadOnly()

    def check_request(self, request: dict[str, object]) -> None:
        if request.get("action") == "batch":
            members_of(request)
        else:
            self._checked = (request, mutation_of(request))

    # -- steps (entry, exit and transition actions) ----------------------------------------

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
        self._lock(self.config.lock_timeout_ms)

    def acquire_lock_briefly(self) -> None:
        """The lock for a repair: waits at most ``REPAIR_WAIT_MS``."""
        self._lock(min(self.config.lock_timeout_ms, REPAIR_WAIT_MS))

    def clear_stale_temps(self) -> None:
        if self._run.failure is None and self.config.write_enabled:
            self._attempt(clear_stale_temps, self.ports.files)

    def reload_source(self) -> None:
        if self._run.failure is None:
            store = self._attempt(self._reload)
            if store is not None:
                self._run = self._run.but(store=store)

    def repair_projections(self) -> None:
        store = self._run.store
        if self._run.failure is None and store is not None and self.config.write_enabled:
            self._attempt(repair_projections, self.ports.files, store)

    def apply_rules(self, request: dict[str, object]) -> None:
        """Decide the request from the reloaded source, purely, with the clock's time; a
        storage failure of the lock or the source is the decision instead."""
        run, store = self._run, self._run.store
        if run.failure is None and request.get("action") == "batch":
            assert store is not None
            now = iso_ms(self.ports.clock.now_ms())
            outcome, answers = plan_batch(store, members_of(request), now, self.config.limit)
            run = run.but(outcome=outcome, answers=answers)
        elif run.failure is None:
            assert store is not None
            checked = self._checked
            mutation = checked[1] if checked and checked[0] is request else mutation_of(request)
            now = iso_ms(self.ports.clock.now_ms())
            limit = self.config.limit(mutation.target)
            if isinstance(mutation, Compaction):
                outcome, done = plan_compaction(store, mutation, now, limit)
                run = run.but(outcome=outcome, preserved=done.preserved)
            else:
                run = run.but(outcome=plan_mutation(store, mutation, now, limit))
        self._run = run.but(verdict=verdict(run.outcome, run.failure))

    def report_repaired(self, machine: Machine) -> None:
        """Raise ``repaired``: an event, not an eventless edge, so an exception that escapes a
        repair step leaves the machine in ``repairing``, from where ``abort`` releases the
        lock (an unconditional eventless edge would be taken before ``abort`` could fire)."""
        machine.raise_("repaired")

    def clear_verdict(self) -> None:
        """Leaving ``deciding`` takes its verdict: none of its guards holds afterwards."""
        self._run = self._run.but(verdict=None)

    def preserve_entries(self) -> None:
        """Append what a committing compaction takes out to the history (its fsync is left
        to the commit, which syncs it with the source before the commit point)."""
        round_ = self._run.preserved
        if round_ is not None:
            synced = self._attempt(self.history.append, round_, durability=self.config.durability)
            self._run = self._run.but(sync_first=synced or ())

    def commit(self) -> None:
        """The commit protocol for the decided plan, unless preserving the entries failed."""
        run = self._run
        if run.failure is None:
            outcome = run.outcome
            assert run.store is not None and isinstance(outcome, Commit)
            # A batch may change both targets; a single request only its own.
            targets = TARGETS if run.answers is not None else (outcome.target,)
            self.writes_started = True
            data = self._attempt(
                commit,
                self.ports.files,
                run.store,
                outcome.store,
                self.config.durability,
                targets if self.config.projections == "eager" else (),
                run.sync_first,
            )
            if data is not None:
                self.cache.remember(data, outcome.store, *targets)

    def release_lock(self) -> None:
        """Release the lock; a failed release keeps it marked held, so it is retried on the
        way out of the operation and before the next acquire."""
        if self._locked:
            try:
                self.ports.locks.release(LOCK_NAME)
            except StorageError as exc:
                self._fail(exc)
                return
            self._locked = False

    # -- guards ----------------------------------------------------------------------------

    def is_unavailable(self) -> bool:
        """Opening could not take the lock or use the directory (a corrupt source is not
        unavailability: the root opens and every operation reports it)."""
        failure = self._run.failure
        return failure is not None and not isinstance(failure, CorruptStore)

    def can_commit(self) -> bool:
        """The rules' plan commits: only this edge leads to the writes."""
        return self._run.verdict == "commit"

    def is_duplicate(self) -> bool:
        """The add equals an entry of the target: its receipt is the answer, nothing changes."""
        return self._run.verdict == "duplicate"

    def is_rejected(self) -> bool:
        """The request broke a rule: its typed error is the answer, nothing changes."""
        return self._run.verdict == "rejected"

    def has_failed(self) -> bool:
        """The lock, the source (``deciding``) or a write (``committed``) failed."""
        return self._run.failure is not None

    # -- helpers ---------------------------------------------------------------------------

    def _lock(self, timeout_ms: int) -> None:
        if self._locked:  # a release failed earlier: try it again first
            self.release_lock()
        if self._run.failure is None and self.config.write_enabled:
            self._attempt(self.ports.locks.acquire, LOCK_NAME, timeout_ms)
            self._locked = self._run.failure is None

    def _reload(self) -> HotStore:
        return self.cache.load(self.ports.files.read(SOURCE_PATH))

    def _fail(self, exc: MnemonError) -> None:
        if self._run.failure is None:  # the first failure is the one reported
            self._run = self._run.but(failure=exc)

    def _attempt(self, step: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return step(*args, **kwargs)
        except StorageError as exc:
            self._fail(exc)
            return None
