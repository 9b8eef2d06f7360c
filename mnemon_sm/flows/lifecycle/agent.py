"""Context of ``specs/agent_lifecycle.yaml``: one agent's prime, cues, activity and review.

Theory of operation
-------------------
The spec decides which callbacks run for each event in each state; this class holds the
agent's data and implements them. Deadlines are data (``deadline_ms``) and ``tick(now)`` fires
them, so the flow never sleeps and tests drive time by hand. Guards are pure: they read the
data and the event's arguments and decide; the guards of one event's transitions out of a
state exclude each other, so the spec states the whole condition of each edge.

Persistence is an action of the spec. Entering a resting state changes the persisted record
(its state, and what the transition's actions did), so each resting state's entry actions end
with ``persist``, which writes the state through the saver the facade supplies (the only
place the state file is written); a new agent's machine enters its initial state, which writes
its first state. An internal transition whose actions may change data ends with
``persist_if_changed``: each action that changed something sets :attr:`LifecycleFlow.unsaved`,
and the state is written only then. Transitions that change nothing persist nothing. A write
that failed leaves ``unsaved`` set, so the next step that persists writes it.

Threading model: the ``tick`` that fires the deadline only *starts* the review
(``start_review``, through the facade's starter, which runs the worker on a thread of its own
or as a task on the host's event loop) and returns; the machine then rests in ``reviewing``
and every host event is served at once. A new turn (``pre_step``), a busy agent, a session
start, a stopping turn or dispose aborts the review (``abort_review``: its run is cancelled,
its tool box closed, nothing it staged is written, the activity and the last review are left
as they were); a ``tick`` past the run's timeout times it out (``time_out_review``, a
failure). When the worker returns, the facade checks its receipt against its staged writes on
the run's thread and sends ``review_finished`` with the outcome. The spec's guards decide what
becomes of it: a run that is no longer current is ignored (``is_current_review``); an outcome
that staged more than one change of a kind is refused (``is_within_change_limit``, on the
typed :class:`~mnemon_sm.flows.lifecycle.review.StagedChanges`) and one whose receipt disagrees
fails (``is_receipt_agreed``), both writing nothing; otherwise ``apply_review`` applies the
staged writes through the applier the facade supplies and reports ``review_completed`` or, when
a staged write was refused as it was applied, ``review_failed``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import attrs

from mnemon_sm.config import Config
from mnemon_sm.engine.context import FlowContext
from mnemon_sm.engine.flow import Machine
from mnemon_sm.engine.registry import flow_context
from mnemon_sm.errors import MnemonError
from mnemon_sm.flows.lifecycle import cues
from mnemon_sm.flows.lifecycle.review import StagedChanges
from mnemon_sm.flows.lifecycle.scoring import (
    Conversation,
    Earlier,
    Score,
    TurnActivity,
    advance,
    fold,
    record_messages,
    record_tools,
    role_of,
    score,
)
from mnemon_sm.flows.lifecycle.state import (
    ENDED_KEPT,
    FLOW,
    AgentState,
    LastReview,
    ReviewLease,
    clip_summary,
    fresh,
)
from mnemon_sm.ports import Clock
from mnemon_sm.redact import redact
from mnemon_sm.text import iso_ms

__all__ = ["ActiveReview", "Applied", "LifecycleFlow", "ReviewOutcome"]


@attrs.frozen
class ReviewOutcome:
    """A finished review as the facade checked it: ``agreed`` when the receipt is valid and
    agrees with the staged writes (``action`` and ``summary`` are then the receipt's; the
    writes are still to be applied), else ``summary`` says why it failed. ``changes`` is
    what the run staged (the change limit is the host's guard on it)."""

    agreed: bool
    action: str
    summary: str
    changes: StagedChanges


@attrs.frozen
class Applied:
    """What applying a review's staged writes did: the real ids of the documents written,
    and why a later write was refused after an earlier one was applied (else None)."""

    document_ids: tuple[str, ...]
    refused: str | None = None


class ReviewRun(Protocol):
    """A started review run, as the flow needs it."""

    def cancel(self, reason: str) -> None: ...


@attrs.frozen
class ActiveReview:
    """The review in flight: its run, the score that triggered it and its timeout."""

    id: str
    run: ReviewRun
    score: int
    deadline_ms: int


StartReview = Callable[[str, Sequence[TurnActivity], Score], ReviewRun]
ApplyReview = Callable[[ReviewOutcome], Applied]
SaveState = Callable[[AgentState], None]
_review_ids = itertools.count(1)


@flow_context("LifecycleFlow")
class LifecycleFlow(FlowContext):
    """One agent's lifecycle machine and data. Not thread-safe: the facade serializes.

    Unlike the other flows' contexts, its data outlives an event: it is the agent's persisted
    record. What one event produces for its caller (the messages of a ``pre_step``) is the
    event's result.
    """

    FLOW = FLOW

    def __init__(
        self,
        agent_id: str,
        config: Config,
        clock: Clock,
        starter: StartReview,
        applier: ApplyReview,
        saver: SaveState,
        restored: AgentState | None = None,
        owner: str = "",
        unsaved: bool = False,
    ) -> None:
        """``restored``: the persisted state to resume in (None: a new agent, whose machine
        enters the initial state and so writes its first state). ``unsaved``: the restored
        data is not what the file holds (the next step that persists writes it)."""
        self.agent_id, self.config, self.clock = agent_id, config, clock
        self.owner = owner
        self.starter, self.applier, self.saver = starter, applier, saver
        self.review: ActiveReview | None = None
        r = restored or fresh(agent_id)
        self.prime_pending, self.start_source, self.busy = r.prime_pending, r.start_source, r.busy
        self.ended: list[int] = list(r.ended_turns)
        self.deadline_ms, self.armed_turn = r.deadline_ms, r.armed_turn
        self.activity: dict[int, TurnActivity] = {a.turn: a for a in r.activity}
        self.earlier: Earlier | None = r.earlier
        self.conversation: Conversation | None = r.conversation
        self.lease: ReviewLease | None = r.review_lease
        self.last_review, self.counters = r.last_review, r.counters
        self.unsaved = unsaved
        super().__init__(None if restored is None else r.state)

    # -- driving ---------------------------------------------------------------------------

    @property
    def score(self) -> Score:
        return score(self.activity.values(), self.earlier)

    @property
    def next_tick_ms(self) -> int | None:
        """When a ``tick`` can next change something: the armed deadline, or the running
        review's timeout."""
        if self.review is not None:
            return self.review.deadline_ms
        if self.state != "armed" or self.deadline_ms is None:
            return None
        lease = self._foreign_lease(self.clock.now_ms())
        return self.deadline_ms if lease is None else max(self.deadline_ms, lease.until_ms)

    def _foreign_lease(self, now: int) -> ReviewLease | None:
        """The lease of a review another facade of this agent runs, while it holds."""
        lease = self.lease
        if lease is None or lease.owner == self.owner or now >= lease.until_ms:
            return None
        return lease

    def _lease_kept(self) -> ReviewLease | None:
        """The lease to persist: this facade's while its review runs; another's while the
        review it covers is still due (an event that cleared the deadline aborted it)."""
        if self.review is not None:
            return ReviewLease(self.owner, self.review.deadline_ms)
        if self.deadline_ms is None:
            return None
        return self._foreign_lease(self.clock.now_ms())

    def snapshot(self) -> AgentState:
        """The persisted state; a review in flight is persisted as armed and due, with this
        facade's lease (its timeout): another facade (another process, or this host
        restarted) runs it again once the lease has run out, never while it may still run."""
        state = "armed" if self.state in ("reviewing", "applying") else self.state
        assert state in ("idle", "armed", "deferred", "disposed"), state
        return AgentState(
            version=1,
            flow=FLOW,
            agent_id=self.agent_id,
            state=state,  # type: ignore[arg-type]
            prime_pending=self.prime_pending,
            start_source=self.start_source,
            busy=self.busy,
            ended_turns=self.ended[-ENDED_KEPT:],
            deadline_ms=self.deadline_ms,
            armed_turn=self.armed_turn,
            activity=[self.activity[t] for t in sorted(self.activity)],
            last_review=self.last_review,
            counters=self.counters,
            earlier=self.earlier,
            review_lease=self._lease_kept(),
            conversation=self.conversation,
        )

    # -- persistence (actions) -------------------------------------------------------------

    def persist(self) -> None:
        """Write the state: entering a resting state changed the persisted record."""
        self.unsaved = True
        self.persist_if_changed()

    def persist_if_changed(self) -> None:
        """Write the state if an action of this step changed it (or an earlier write failed)."""
        if self.unsaved:
            self.saver(self.snapshot())
            self.unsaved = False

    # -- switches --------------------------------------------------------------------------

    def _recording(self) -> bool:
        c = self.config
        return c.lifecycle_enabled and c.write_enabled and c.writeback_mode == "guided"

    def _count(self, **more: int) -> None:
        self.counters = attrs.evolve(
            self.counters, **{k: getattr(self.counters, k) + v for k, v in more.items()}
        )

    # -- actions ---------------------------------------------------------------------------

    def start_session(self, session_source: str = "startup") -> None:
        self.deadline_ms, self.armed_turn = None, None
        self.activity.clear()
        self.earlier = None
        self.prime_pending, self.start_source = True, session_source
        self.unsaved = True

    def clear_deadline(self) -> None:
        if self.deadline_ms is not None:
            self.deadline_ms, self.armed_turn, self.unsaved = None, None, True

    def handle_pre_step(self, turn: int, step: int, messages: Sequence[Mapping[str, Any]]) -> None:
        """Record the entered messages (those after the conversation already seen, see
        :mod:`.scoring`) and, on a turn's first step, prime and append the cue unless the step
        was opened by our own message (the entered messages after the last assistant one)."""
        output = list(messages)
        self.answer(output)  # the messages to enter, a cue appended below
        c = self.config
        if not c.lifecycle_enabled:
            return
        start, seen = advance(messages, self.conversation)
        new = messages[start:]
        if seen != self.conversation:
            self.conversation, self.unsaved = seen, True
        if self._recording() and not self._folded(turn):
            current = self.activity.get(turn) or TurnActivity(turn)
            updated = record_messages(current, new)
            if turn not in self.activity or updated != current:
                self.activity[turn], self.unsaved = updated, True
                self.earlier = fold(self.activity, self.earlier)
        if step != 1 or not messages or _opened_by_us(new):
            return
        if self.prime_pending:
            self.prime_pending = False
            self._count(primes=1)
            self.unsaved = True
        recall = c.recall_mode == "guided"
        write = c.writeback_mode == "guided" and c.write_enabled
        text = cues.cue_text(recall, write)
        if text is None:
            return
        self._count(recall_cues=int(recall), writeback_cues=int(write))
        output.append(cues.cue_message(text))
        self.unsaved = True

    def record_stop(self, turn: int, tool_events: Sequence[Mapping[str, Any]] = ()) -> None:
        """Set the turn's tools; arm the deadline when the activity is eligible, else cancel
        it (the guards already chose the target state from the same computation)."""
        if not self._folded(turn):
            self.activity[turn] = self._stopped(turn, tool_events)
            self.earlier = fold(self.activity, self.earlier)
        self.deadline_ms, self.armed_turn, self.unsaved = None, None, True
        if self.score.eligible:
            self.deadline_ms = self.clock.now_ms() + self.config.idle_review_ms
            self.armed_turn = turn

    def _stopped(self, turn: int, tool_events: Sequence[Mapping[str, Any]]) -> TurnActivity:
        return record_tools(self.activity.get(turn) or TurnActivity(turn), tool_events)

    def _folded(self, turn: int) -> bool:
        """Whether ``turn`` was folded into the earlier turns (counted; it records no more)."""
        return self.earlier is not None and turn <= self.earlier.through_turn

    def record_turn_end(self, turn: int) -> None:
        if turn not in self.ended:
            self.ended = [*self.ended, turn][-ENDED_KEPT:]
            self.unsaved = True

    def record_idle(self) -> None:
        if self.busy:
            self.busy, self.unsaved = False, True

    def record_busy(self) -> None:
        if not self.busy:
            self.busy, self.unsaved = True, True

    def rearm_now(self) -> None:
        self.deadline_ms, self.unsaved = self.clock.now_ms(), True

    def start_review(self, now: int) -> None:
        triggered = self.score
        ident = f"rev-{now}-{next(_review_ids)}"
        activity = [self.activity[t] for t in sorted(self.activity)]
        run = self.starter(ident, activity, triggered)
        timeout = self.config.worker_timeout("review")
        self.review = ActiveReview(ident, run, triggered.total, now + timeout)

    def persist_review(self) -> None:
        """Entry of ``reviewing``, after :meth:`start_review`: write the state. Should the
        write fail (or anything escape it), the review just started is cancelled before the
        error goes on: the engine leaves the agent where the tick found it, armed and due, so
        no worker runs for a review the agent is not in, and the next tick starts one again."""
        try:
            self.persist()
        except BaseException:
            review, self.review = self.review, None
            if review is not None:
                review.run.cancel("the agent's state could not be written")
            raise

    def abort_review(self) -> None:
        """Cancel the review in flight: nothing it staged is written; activity and last review
        stay as they were; no failure is counted."""
        if self.review is not None:
            self.review.run.cancel("the host aborted the review (a new turn or a busy agent)")
            self.review = None
        self.deadline_ms, self.armed_turn, self.unsaved = None, None, True

    def time_out_review(self, now: int) -> None:
        review = self.review
        assert review is not None
        timeout = self.config.worker_timeout("review")
        review.run.cancel(f"timed out after {timeout} ms")
        self._finish(review, "failed", f"review worker timed out after {timeout} ms")

    def fail_review(self, outcome: ReviewOutcome) -> None:
        """The receipt was invalid or disagreed with the staged writes (or the worker failed):
        nothing is written; a failure is recorded with the outcome's (redacted) reason."""
        review = self.review
        assert review is not None
        self._finish(review, "failed", outcome.summary)

    def refuse_over_limit(self, outcome: ReviewOutcome) -> None:
        """The run staged more than the limit allows: nothing is written, whatever its receipt
        says; a failure is recorded."""
        review = self.review
        assert review is not None
        self._finish(review, "failed", f"receipt refused: {outcome.changes.refusal()}")

    def apply_review(self, machine: Machine, outcome: ReviewOutcome) -> None:
        """Apply an agreeing outcome within the limit (the guards saw to both)."""
        review = self.review
        assert review is not None
        try:
            applied = self.applier(outcome)
        except MnemonError as exc:
            why = f"a staged write was refused when applied: {redact(exc.message)}"
            self._finish(review, "failed", why)
            machine.raise_("review_failed")
            return
        summary = outcome.summary
        if applied.refused is not None:
            summary = redact(f"{summary} (then refused when applied: {applied.refused})")
        self._finish(review, outcome.action, summary, applied.document_ids)
        machine.raise_("review_completed")

    def _finish(
        self, review: ActiveReview, action: str, summary: str, document_ids: Sequence[str] = ()
    ) -> None:
        """Record the end of ``review``: completed (clears the activity) unless ``failed``.
        ``summary`` is redacted already (worker text never reaches here raw)."""
        self.review = None
        self.deadline_ms, self.armed_turn, self.unsaved = None, None, True
        self.last_review = LastReview(
            iso_ms(self.clock.now_ms()),
            action,
            review.score,
            clip_summary(summary),
            list(document_ids),
        )
        if action == "failed":
            self._count(failures=1)
        else:
            self.activity.clear()
            self.earlier = None
            self._count(reviews=1)

    # -- guards ----------------------------------------------------------------------------

    def is_recording(self) -> bool:
        return self._recording()

    def is_eligible_after(self, turn: int, tool_events: Sequence[Mapping[str, Any]] = ()) -> bool:
        """Whether the activity is eligible once this stopping turn's tools are set (pure)."""
        if self._folded(turn):
            return self.score.eligible
        after = {**self.activity, turn: self._stopped(turn, tool_events)}
        earlier = fold(after, self.earlier)
        return score(after.values(), earlier).eligible

    def is_first_step(self, step: int) -> bool:
        return step == 1

    def is_due(self, now: int) -> bool:
        """The deadline has passed and no other facade of the agent runs its review."""
        return (
            self.deadline_ms is not None
            and now >= self.deadline_ms
            and self._foreign_lease(now) is None
        )

    def is_busy(self) -> bool:
        return self.busy

    def is_current_review(self, run_id: str) -> bool:
        return self.review is not None and self.review.id == run_id

    def is_within_change_limit(self, outcome: ReviewOutcome) -> bool:
        """The run staged at most one change of each kind (the host's own check of the limit
        its tool box enforces)."""
        return outcome.changes.within_limit

    def is_receipt_agreed(self, outcome: ReviewOutcome) -> bool:
        """The receipt was valid and agrees with the staged writes."""
        return outcome.agreed

    def is_review_overdue(self, now: int) -> bool:
        return self.review is not None and now >= self.review.deadline_ms

    def has_reviewable_activity(self) -> bool:
        """The armed turn has ended and the activity is still eligible."""
        turn = self.armed_turn if self.armed_turn is not None else max(self.activity, default=-1)
        return turn in self.ended and self.score.eligible


def _opened_by_us(new: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the step was opened by our own message: one of the entered messages after the
    last assistant message among them is ours (our cue sent back, or our own request)."""
    opening = list(new)
    for index in range(len(opening) - 1, -1, -1):
        if role_of(opening[index]) == "assistant":
            opening = opening[index + 1 :]
            break
    return any(cues.is_own_message(m) for m in opening)
