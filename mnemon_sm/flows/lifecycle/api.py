"""The per-agent lifecycle facade: ``MemoryRoot.lifecycle(agent_id)``.

A host calls the hook methods as things happen (``session_start``, ``pre_step`` on every step,
``turn_stopping``, ``turn_ended``, ``agent_idle`` / ``agent_busy``, ``dispose``) and
``tick(now)`` whenever time may have passed (or lets :class:`AsyncDriver` do it on an asyncio
loop). Every step that changes the agent's persisted data writes its state (the spec's
``persist`` actions, through :meth:`AgentLifecycle._save`), so a restarted host resumes with
the same score and a review still due.

Several processes may drive one agent: every event runs under the agent's cross-process lock
(``state/lifecycle/.<agent id>.lock``), re-reads the state file first and adopts what another
process wrote (a review this process has in flight is then aborted: its basis changed), so no
acknowledged event is lost to a concurrent writer. Reads (``state``, ``status()``...) re-read
the file too, unless a review is in flight here. With ``writeEnabled = false`` nothing is
written or locked: the agent runs from the state read at its first use.

Threading model: every hook takes the agent's mutex for a few hundred microseconds and never
waits for a worker. The review runs on a thread of its own (an ``async def`` worker as a task
on the loop that called ``tick``, or on the async facade's loop); the host's next turn aborts
it. When the worker returns, its thread checks the receipt against the staged writes and
hands the outcome to the machine under the mutex, which applies the writes (the only moment
a hook may wait, for as long as one hot-memory commit and one document commit take).
:meth:`AgentLifecycle.join` waits for a review in flight (tests, scripts, shutdown).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any

from mnemon_sm.config import Config
from mnemon_sm.convert import StructureFailed, structure
from mnemon_sm.engine.audit import AuditSink
from mnemon_sm.errors import MnemonError, ReadOnly, WorkerFailed
from mnemon_sm.flows.documents.api import Documents
from mnemon_sm.flows.hot.api import HotMemory
from mnemon_sm.flows.lifecycle import events
from mnemon_sm.flows.lifecycle import state as persisted
from mnemon_sm.flows.lifecycle.agent import Applied, LifecycleFlow, ReviewOutcome
from mnemon_sm.flows.lifecycle.review import (
    READS,
    REVIEW_TOOLS,
    ReviewResult,
    ReviewTools,
    check_receipt,
)
from mnemon_sm.flows.lifecycle.scoring import Score, TurnActivity
from mnemon_sm.flows.long_term.api import LongTermMemory
from mnemon_sm.flows.long_term.tools import ScopedTools
from mnemon_sm.flows.workers.requests import build_request
from mnemon_sm.flows.workers.runner import Delegate, WorkerRun, host_only, running_loop
from mnemon_sm.ports import Clock, Files, Locks
from mnemon_sm.redact import redact

__all__ = ["AgentLifecycle", "AsyncDriver"]


class AgentLifecycle:
    """One root agent's lifecycle. Thread-safe; events are serialized."""

    def __init__(
        self,
        agent_id: str,
        files: Files,
        locks: Locks,
        clock: Clock,
        config: Config,
        delegate: Delegate,
        hot: HotMemory,
        documents: Documents,
        long_term: Callable[[], LongTermMemory],
        audit: AuditSink | None = None,
    ) -> None:
        self.agent_id = persisted.check_agent_id(agent_id)
        self._audit = audit
        self._files, self._locks, self._clock, self._config = files, locks, clock, config
        self._writes = config.write_enabled
        self._lock = persisted.lock_name(self.agent_id)
        self._owner = uuid.uuid4().hex  # this facade, in a review's lease
        self._delegate, self._hot, self._documents = delegate, hot, documents
        self._long_term = long_term
        self._mutex = threading.RLock()
        self._settled = threading.Condition(self._mutex)
        self._listeners: list[Callable[[], None]] = []
        with self._held():
            if self._writes:
                persisted.remove_stale_temps(files, self.agent_id)
            self._known = persisted.read(files, self.agent_id)
            # A new agent's machine enters its initial state, which writes its first state.
            self._flow = self._new_flow(persisted.parse(self._known, self.agent_id))

    @classmethod
    def reset(
        cls, agent_id: str, files: Files, locks: Locks, clock: Clock, config: Config
    ) -> persisted.LifecycleReset:
        """Reset agent ``agent_id`` without loading it (its file may be unreadable): its state
        file is moved aside under the agent's lock (see :func:`.state.reset`), so the agent
        starts anew; a facade already open on it adopts that at its next event.

        Raises:
            InvalidInput: a bad agent id. ReadOnly: ``writeEnabled = false``.
        """
        agent_id = persisted.check_agent_id(agent_id)
        if not config.write_enabled:
            raise ReadOnly()
        return persisted.reset(files, locks, agent_id, config.lock_timeout_ms, clock.now_ms())

    # -- host events -----------------------------------------------------------------------

    @host_only
    def session_start(self, source: str = "startup") -> None:
        self._send("session_start", session_source=events.session_source(source))

    @host_only
    def pre_step(self, turn: int, step: int, messages: Sequence[Mapping[str, Any]]) -> list[Any]:
        """The messages to enter: the host's, untouched, plus at most one cue. A review in
        flight is aborted (this never waits for it)."""
        turn, step = events.count(turn, "turn"), events.count(step, "step")
        with self._mutex, self._held():
            self._refresh()
            messages = events.messages(messages, self._flow.conversation)
            output: list[Any] = self._dispatch("pre_step", turn=turn, step=step, messages=messages)
        self._notify()
        return output

    @host_only
    def turn_stopping(self, turn: int, tool_events: Sequence[Mapping[str, Any]] = ()) -> None:
        """``tool_events``: the turn's session events, ``{"type": "tool/call" |
        "tool/result", "name": ..., "turn": ...}`` (other types are ignored). The turn's tool
        results are the larger of its ``tool/result`` events and the tool results found in
        its messages; its tools (for diversity) are the names of its ``tool/call`` events and
        of the tool calls found in its messages (see :mod:`.scoring`)."""
        turn, tool_events = events.count(turn, "turn"), events.tool_events(tool_events)
        self._send("turn_stopping", turn=turn, tool_events=tool_events)

    @host_only
    def turn_ended(self, turn: int) -> None:
        self._send("turn_ended", turn=events.count(turn, "turn"))

    @host_only
    def agent_idle(self) -> None:
        self._send("agent_idle")

    @host_only
    def agent_busy(self) -> None:
        self._send("agent_busy")

    @host_only
    def tick(self, now_ms: int | None = None) -> None:
        """Start the review if its deadline is due at ``now_ms`` (default: the clock), or time
        out a review past its ``workerTimeoutMs``. Never waits for the review."""
        now = self._clock.now_ms() if now_ms is None else events.count(now_ms, "now_ms")
        self._send("tick", now=now)

    @host_only
    def dispose(self) -> None:
        self._send("dispose")

    def join(self, timeout_s: float | None = None) -> bool:
        """Wait until no review is in flight (at most ``timeout_s``); True when none is."""
        with self._settled:
            return self._settled.wait_for(lambda: self._flow.review is None, timeout_s)

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after every event, from the thread that sent it (a review's
        end arrives on the review's thread)."""
        self._listeners.append(listener)

    # -- reads -----------------------------------------------------------------------------

    @property
    def state(self) -> str:
        return str(self._view().state)

    @property
    def deadline_ms(self) -> int | None:
        return self._view().deadline_ms

    @property
    def next_tick_ms(self) -> int | None:
        """When a ``tick`` can next change something (a deadline or a review's timeout)."""
        return self._view().next_tick_ms

    @property
    def score(self) -> Score:
        return self._view().score

    def status(self) -> dict[str, Any]:
        with self._mutex:
            f = self._view()
            last, review = f.last_review, f.review
            return {
                "agentId": self.agent_id,
                "state": f.state,
                "deadlineMs": f.deadline_ms,
                "primePending": f.prime_pending,
                "activity": f.score.to_json(),
                "counters": {
                    "primes": f.counters.primes,
                    "recallCues": f.counters.recall_cues,
                    "writebackCues": f.counters.writeback_cues,
                    "reviews": f.counters.reviews,
                    "failures": f.counters.failures,
                },
                "review": None
                if review is None
                else {"runId": review.id, "timeoutAtMs": review.deadline_ms},
                "lastReview": None
                if last is None
                else {
                    "at": last.at,
                    "action": last.action,
                    "score": last.score,
                    "summary": last.summary,
                    "documentIds": list(last.document_ids),
                },
            }

    # -- internals -------------------------------------------------------------------------

    def _new_flow(
        self, restored: persisted.AgentState | None, *, unsaved: bool = False
    ) -> LifecycleFlow:
        flow = LifecycleFlow(
            self.agent_id,
            self._config,
            self._clock,
            self._start_review,
            self._apply,
            self._save,
            restored,
            owner=self._owner,
            unsaved=unsaved,
        )
        flow.audit = self._audit
        return flow

    @contextlib.contextmanager
    def _held(self) -> Iterator[None]:
        """Hold the agent's cross-process lock (nothing when writes are off)."""
        if not self._writes:
            yield
            return
        self._locks.acquire(self._lock, self._config.lock_timeout_ms)
        try:
            yield
        finally:
            self._locks.release(self._lock)

    def _refresh(self) -> None:
        """Adopt the state another process persisted since this one last read or wrote it
        (under the mutex; under the agent's lock before an event)."""
        if not self._writes:
            return
        stored = persisted.read(self._files, self.agent_id)
        if stored == self._known:
            return
        restored = persisted.parse(stored, self.agent_id)
        review = self._flow.review
        if review is not None:
            review.run.cancel("another process changed the agent's state")
        # A file that lost its state is read as a new agent's, written by the next step that
        # persists (a read may refresh without the agent's lock, so not here).
        fresh = restored or persisted.fresh(self.agent_id)
        self._flow, self._known = self._new_flow(fresh, unsaved=restored is None), stored
        self._settled.notify_all()

    def _view(self) -> LifecycleFlow:
        """The flow, refreshed from the file unless a review is in flight here."""
        with self._mutex:
            if self._flow.review is None:
                self._refresh()
            return self._flow

    def _send(self, event: str, **kwargs: Any) -> None:
        with self._mutex, self._held():
            self._refresh()
            self._dispatch(event, **kwargs)
        self._notify()

    def _dispatch(self, event: str, **kwargs: Any) -> Any:
        """Send ``event`` (under the mutex and the agent's lock, refreshed) and return its
        result; the spec's ``persist`` actions write what it changed."""
        try:
            return self._flow.perform(event, **kwargs)
        finally:
            self._settled.notify_all()

    def _notify(self) -> None:
        for listener in self._listeners:
            listener()

    def _save(self, state: persisted.AgentState) -> None:
        """The flow's saver (its ``persist`` actions call it, under the mutex and the agent's
        lock): append ``state`` to the file, or replace the file with it (nothing when writes
        are off)."""
        if not self._writes:
            return
        line = persisted.encode(state)
        size = persisted.save(
            self._files, line, self.agent_id, self._known.size, self._config.durability
        )
        self._known = persisted.Stored(line, size)

    def _start_review(
        self, run_id: str, activity: Sequence[TurnActivity], score: Score
    ) -> WorkerRun:
        """Start the review worker on its own thread (called by the flow under the mutex)."""
        data = {
            "agentId": self.agent_id,
            "score": score.to_json(),
            "turns": [{"turn": a.turn, "userTexts": list(a.user_texts)} for a in activity],
        }
        reads = ScopedTools(self._long_term().service, READS, readonly=True)
        tools = ReviewTools(reads, self._hot, self._documents)
        request = build_request("review", data, REVIEW_TOOLS, ReviewResult)

        events = self._delegate.events
        events.emit("review.started", {"agentId": self.agent_id, "runId": run_id})

        def finished(run: WorkerRun) -> None:
            outcome = _outcome(run, tools)
            summary: dict[str, Any] = {"agentId": self.agent_id, "runId": run_id}
            if not events.active:
                pass
            elif outcome.agreed:
                events.emit("review.finished", {**summary, "action": outcome.action})
            else:  # the reason is host text (redacted), never the model's summary
                error = {"type": "ReviewRefused", "message": outcome.summary}
                events.emit("review.finished", {**summary, "error": error}, ok=False)
            with self._mutex:
                if self._flow.state == "disposed":
                    return
                # On the worker's thread, nobody to raise to: when the outcome cannot be
                # delivered (the agent's lock timed out, the state file is unreadable), the
                # review stays in flight until the host's next event aborts it or a tick
                # times it out; nothing it staged is written.
                with contextlib.suppress(MnemonError):
                    self._send("review_finished", run_id=run_id, outcome=outcome)

        return self._delegate.start(request, tools, finished, loop=running_loop())

    def _apply(self, outcome: ReviewOutcome) -> Applied:
        """Apply an agreeing review's staged writes through the normal paths: hot memory
        first, then the document. Raises the first refusal when nothing was applied."""
        hot, document = outcome.changes.hot_change, outcome.changes.document_change
        if hot is not None:
            if hot.action == "add":
                self._hot.add(hot.target, hot.content or "", hot.importance, maintenance=False)
            elif hot.action == "replace":
                self._hot.replace(
                    hot.target, hot.old_text or "", hot.content or "", hot.importance
                )
            else:
                self._hot.remove(hot.target, hot.old_text or "")
        if document is None:
            return Applied(())
        try:
            if document.action == "create":
                result = self._documents.create(
                    document.title or "",
                    document.content or "",
                    description=document.description,
                    archive_if_full=False,
                )
            else:
                result = self._documents.update(
                    document.id,
                    content=document.content,
                    title=document.title,
                    archive_if_full=False,
                )
        except MnemonError as exc:
            if hot is None:  # nothing was applied: the review failed
                raise
            return Applied((), f"the document change: {exc.message}")
        return Applied((result.document.id,))


def _outcome(run: WorkerRun, tools: ReviewTools) -> ReviewOutcome:
    """Check a finished review on its own thread: the worker's failure, its receipt's shape,
    and whether the receipt agrees with what it staged (the run is over: ``tools.changes``
    is final). The change limit is the machine's guard on the outcome."""
    changes = tools.changes
    try:
        raw = run.outcome()
    except WorkerFailed as exc:
        return ReviewOutcome(False, "failed", exc.message, changes)
    except BaseException as exc:  # on the worker's thread: the host is not there to take it
        why = f"review worker raised {type(exc).__name__}"
        return ReviewOutcome(False, "failed", why, changes)
    try:
        result = structure(raw, ReviewResult)
    except StructureFailed as exc:
        why = "invalid receipt: " + redact("; ".join(exc.problems))
        return ReviewOutcome(False, "failed", why, changes)
    problem = check_receipt(result, changes)
    if problem is not None:
        return ReviewOutcome(False, "failed", redact(f"receipt refused: {problem}"), changes)
    return ReviewOutcome(True, result.action, redact(result.summary), changes)


class AsyncDriver:
    """Fires an agent's review deadline, and its review's timeout, on an asyncio loop.

    ``sleep`` is injectable (tests pass a fake that advances a fake clock): the driver never
    reads wall time itself. It wakes whenever the agent's state changes (it listens to the
    agent), so :meth:`notify` is needed only for changes it cannot see. ``tick`` runs on the
    loop's thread and returns at once: the review runs on a thread of its own, and an
    ``async def`` worker as a task on this loop. :meth:`run` loops until :meth:`stop`.
    """

    def __init__(
        self,
        lifecycle: AgentLifecycle,
        clock: Clock | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """``clock`` defaults to the lifecycle's own (its root's clock)."""
        self._lifecycle, self._sleep = lifecycle, sleep
        self._clock: Clock = clock or lifecycle._clock
        self._changed = asyncio.Event()
        self._stopped = False
        self._loop: asyncio.AbstractEventLoop | None = None
        lifecycle.add_listener(self._wake)

    def notify(self) -> None:
        self._changed.set()

    def stop(self) -> None:
        self._stopped = True
        self._changed.set()

    def _wake(self) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        if running_loop() is loop:
            self._changed.set()
        else:
            loop.call_soon_threadsafe(self._changed.set)

    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        while not self._stopped:
            self._changed.clear()
            due = self._lifecycle.next_tick_ms
            if due is None:
                await self._changed.wait()
                continue
            delay = due - self._clock.now_ms()
            if delay > 0 and not await self._sleep_unless_changed(delay / 1000):
                continue
            try:
                self._lifecycle.tick()
            except MnemonError:
                self._stopped = True
                raise

    async def _sleep_unless_changed(self, seconds: float) -> bool:
        """Sleep ``seconds``; False when the agent changed first (look again)."""
        sleeper = asyncio.ensure_future(self._sleep(seconds))
        changed = asyncio.ensure_future(self._changed.wait())
        try:
            done, _ = await asyncio.wait({sleeper, changed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, changed):
                task.cancel()
        return sleeper in done
