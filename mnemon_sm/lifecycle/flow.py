"""Context of ``specs/agent_lifecycle.yaml``: one agent's prime, cues, activity and review.

Theory of operation
-------------------
The spec decides which callbacks run for each event in each state; this class holds the
agent's data and implements them. Deadlines are data (``deadline_ms``) and ``tick(now)`` fires
them, so the flow never sleeps and tests drive time by hand. Every callback that changes data
sets :attr:`LifecycleFlow.dirty`; the facade persists the state after such an event.

The review runs synchronously inside the ``tick`` that fires it (state ``reviewing`` is left
before the event returns), through ``run_review``, which the facade supplies: it delegates to
the review worker with the scoped tool facade and reports ``completed`` (any valid receipt but
``failed``) or ``failed`` (a failed receipt, a worker error). A new turn cannot start while the
review runs in this driver; a host that runs reviews elsewhere cancels them by sending
``pre_step`` first.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from ..config import Config
from ..engine.flow import Machine, send, start
from ..errors import MnemonError
from ..ports import Clock
from ..text import iso_ms
from . import cues
from .scoring import Score, TurnActivity, record_messages, record_tools, score
from .state import ENDED_KEPT, FLOW, AgentState, LastReview, fresh

__all__ = ["LifecycleFlow", "ReviewOutcome"]


@attrs.frozen
class ReviewOutcome:
    completed: bool
    action: str
    summary: str
    document_ids: tuple[str, ...] = ()


RunReview = Callable[[Sequence[TurnActivity], Score], ReviewOutcome]
_cue_ids = itertools.count(1)


class LifecycleFlow:
    """One agent's lifecycle machine and data. Not thread-safe: the facade serializes."""

    def __init__(
        self,
        agent_id: str,
        config: Config,
        clock: Clock,
        run_review: RunReview,
        restored: AgentState | None = None,
    ) -> None:
        self.agent_id, self.config, self.clock = agent_id, config, clock
        self.reviewer = run_review
        r = restored or fresh(agent_id)
        self.state: str | None = r.state
        self.prime_pending, self.start_source, self.busy = r.prime_pending, r.start_source, r.busy
        self.ended: list[int] = list(r.ended_turns)
        self.deadline_ms, self.armed_turn = r.deadline_ms, r.armed_turn
        self.activity: dict[int, TurnActivity] = {a.turn: a for a in r.activity}
        self.last_review, self.counters = r.last_review, r.counters
        self.output: list[Any] = []
        self.dirty = restored is None
        self._machine: Machine = start(FLOW, self)

    # -- driving ---------------------------------------------------------------------------

    def send(self, event: str, **kwargs: Any) -> None:
        send(self._machine, FLOW, event, **kwargs)

    @property
    def score(self) -> Score:
        return score(self.activity.values())

    def snapshot(self) -> AgentState:
        assert self.state in ("idle", "armed", "deferred", "disposed"), self.state
        return AgentState(
            version=1,
            flow=FLOW,
            agent_id=self.agent_id,
            state=self.state,  # type: ignore[arg-type]
            prime_pending=self.prime_pending,
            start_source=self.start_source,
            busy=self.busy,
            ended_turns=self.ended[-ENDED_KEPT:],
            deadline_ms=self.deadline_ms,
            armed_turn=self.armed_turn,
            activity=[self.activity[t] for t in sorted(self.activity)],
            last_review=self.last_review,
            counters=self.counters,
        )

    # -- switches --------------------------------------------------------------------------

    def _recording(self) -> bool:
        c = self.config
        return c.lifecycle_enabled and c.write_enabled and c.writeback_mode == "guided"

    def _count(self, **more: int) -> None:
        self.counters = attrs.evolve(
            self.counters, **{k: getattr(self.counters, k) + v for k, v in more.items()}
        )

    # -- actions ---------------------------------------------------------------------------

    def start_session(self, source: str = "startup") -> None:
        self.deadline_ms, self.armed_turn = None, None
        self.activity.clear()
        self.prime_pending, self.start_source = True, str(source)
        self.dirty = True

    def clear_deadline(self) -> None:
        if self.deadline_ms is not None:
            self.deadline_ms, self.armed_turn, self.dirty = None, None, True

    def handle_pre_step(self, turn: int, step: int, messages: Sequence[Mapping[str, Any]]) -> None:
        self.output = list(messages)
        c = self.config
        if not c.lifecycle_enabled:
            return
        if self._recording():
            current = self.activity.get(turn) or TurnActivity(turn)
            updated = record_messages(current, messages)
            if turn not in self.activity or updated != current:
                self.activity[turn], self.dirty = updated, True
        if step != 1 or not messages or any(cues.is_own_message(m) for m in messages):
            return
        if self.prime_pending:
            self.prime_pending = False
            self._count(primes=1)
            self.dirty = True
        recall = c.recall_mode == "guided"
        write = c.writeback_mode == "guided" and c.write_enabled
        text = cues.cue_text(recall, write)
        if text is None:
            return
        self._count(recall_cues=int(recall), writeback_cues=int(write))
        self.output.append(cues.cue_message(text, f"mnemon-cue-{turn}-{next(_cue_ids)}"))
        self.dirty = True

    def record_stop(self, turn: int, tool_events: Sequence[Mapping[str, Any]] = ()) -> None:
        """Set the turn's tools; arm the deadline when the activity is eligible, else cancel
        it (the guards already chose the target state from the same computation)."""
        self.activity[turn] = self._stopped(turn, tool_events)
        self.deadline_ms, self.armed_turn, self.dirty = None, None, True
        if self.score.eligible:
            self.deadline_ms = self.clock.now_ms() + self.config.idle_review_ms
            self.armed_turn = turn

    def _stopped(self, turn: int, tool_events: Sequence[Mapping[str, Any]]) -> TurnActivity:
        return record_tools(self.activity.get(turn) or TurnActivity(turn), tool_events)

    def record_turn_end(self, turn: int) -> None:
        if turn not in self.ended:
            self.ended = [*self.ended, turn][-ENDED_KEPT:]
            self.dirty = True

    def record_idle(self) -> None:
        if self.busy:
            self.busy, self.dirty = False, True

    def record_busy(self) -> None:
        if not self.busy:
            self.busy, self.dirty = True, True

    def rearm_now(self) -> None:
        self.deadline_ms, self.dirty = self.clock.now_ms(), True

    def run_review(self, machine: Machine) -> None:
        triggered = self.score
        try:
            outcome = self.reviewer([self.activity[t] for t in sorted(self.activity)], triggered)
        except MnemonError as exc:
            outcome = ReviewOutcome(False, "failed", exc.message)
        self.deadline_ms, self.armed_turn, self.dirty = None, None, True
        self.last_review = LastReview(
            iso_ms(self.clock.now_ms()),
            outcome.action,
            triggered.total,
            outcome.summary,
            list(outcome.document_ids),
        )
        if outcome.completed:
            self.activity.clear()
            self._count(reviews=1)
            machine.raise_("review_completed")
        else:
            self._count(failures=1)
            machine.raise_("review_failed")

    # -- guards ----------------------------------------------------------------------------

    def is_recording(self) -> bool:
        return self._recording()

    def is_eligible_after(self, turn: int, tool_events: Sequence[Mapping[str, Any]] = ()) -> bool:
        """Whether the activity is eligible once this stopping turn's tools are set (pure)."""
        after = {**self.activity, turn: self._stopped(turn, tool_events)}
        return score(after.values()).eligible

    def is_first_step(self, step: int) -> bool:
        return step == 1

    def is_due(self, now: int) -> bool:
        return self.deadline_ms is not None and now >= self.deadline_ms

    def is_busy(self) -> bool:
        return self.busy

    def can_review(self) -> bool:
        turn = self.armed_turn if self.armed_turn is not None else max(self.activity, default=-1)
        return not self.busy and turn in self.ended and self.score.eligible
