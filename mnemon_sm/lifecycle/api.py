"""The per-agent lifecycle facade: ``MemoryRoot.lifecycle(agent_id)``.

A host calls the hook methods as things happen (``session_start``, ``pre_step`` on every step,
``turn_stopping``, ``turn_ended``, ``agent_idle`` / ``agent_busy``, ``dispose``) and
``tick(now)`` whenever time may have passed (or lets :class:`AsyncDriver` do it on an asyncio
loop). After every event that changed something, the agent's state is persisted, so a
restarted host resumes with the same score and a review still due.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from ..config import Config
from ..convert import StructureFailed, structure
from ..errors import MnemonError, WorkerFailed
from ..ports import Clock, Files
from ..workers.port import Workers, invoke
from ..workers.requests import build_request
from ..workers.tools import ScopedTools
from . import state as persisted
from .flow import LifecycleFlow, ReviewOutcome
from .review import READS, REVIEW_TOOLS, ReviewResult, ReviewTools
from .scoring import Score, TurnActivity

__all__ = ["AgentLifecycle", "AsyncDriver"]


class AgentLifecycle:
    """One root agent's lifecycle. Thread-safe; events are serialized."""

    def __init__(
        self,
        agent_id: str,
        files: Files,
        clock: Clock,
        config: Config,
        workers: Callable[[], Workers],
        hot: Any,
        documents: Any,
        long_term: Callable[[], Any],
    ) -> None:
        self.agent_id = persisted.check_agent_id(agent_id)
        self._files, self._clock, self._config = files, clock, config
        self._workers, self._hot, self._documents = workers, hot, documents
        self._long_term = long_term
        self._mutex = threading.RLock()
        restored, self._size = persisted.load(files, self.agent_id)
        self._flow = LifecycleFlow(self.agent_id, config, clock, self._review, restored)
        self._persist()

    # -- host events -----------------------------------------------------------------------

    def session_start(self, source: str = "startup") -> None:
        self._send("session_start", source=source)

    def pre_step(self, turn: int, step: int, messages: Sequence[Mapping[str, Any]]) -> list[Any]:
        """The messages to enter: the host's, untouched, plus at most one cue."""
        with self._mutex:
            self._send("pre_step", turn=turn, step=step, messages=messages)
            return self._flow.output

    def turn_stopping(self, turn: int, tool_events: Sequence[Mapping[str, Any]] = ()) -> None:
        """``tool_events``: the turn's session events, ``{"type": "tool/call" |
        "tool/result", "name": ..., "turn": ...}``."""
        self._send("turn_stopping", turn=turn, tool_events=tool_events)

    def turn_ended(self, turn: int) -> None:
        self._send("turn_ended", turn=turn)

    def agent_idle(self) -> None:
        self._send("agent_idle")

    def agent_busy(self) -> None:
        self._send("agent_busy")

    def tick(self, now_ms: int | None = None) -> None:
        """Fire the review deadline if it is due at ``now_ms`` (default: the clock)."""
        self._send("tick", now=self._clock.now_ms() if now_ms is None else now_ms)

    def dispose(self) -> None:
        self._send("dispose")

    # -- reads -----------------------------------------------------------------------------

    @property
    def state(self) -> str:
        return str(self._flow.state)

    @property
    def deadline_ms(self) -> int | None:
        return self._flow.deadline_ms

    @property
    def score(self) -> Score:
        return self._flow.score

    def status(self) -> dict[str, Any]:
        with self._mutex:
            f = self._flow
            last = f.last_review
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

    def _send(self, event: str, **kwargs: Any) -> None:
        with self._mutex:
            before = self._flow.state
            try:
                self._flow.send(event, **kwargs)
            finally:
                if self._flow.state != before:  # a move with no action still matters
                    self._flow.dirty = True
                self._persist()

    def _persist(self) -> None:
        if self._flow.dirty and self._flow.state != "reviewing":
            self._size = persisted.save(self._files, self._flow.snapshot(), self._size)
            self._flow.dirty = False

    def _review(self, activity: Sequence[TurnActivity], score: Score) -> ReviewOutcome:
        data = {
            "agentId": self.agent_id,
            "score": score.to_json(),
            "turns": [{"turn": a.turn, "userTexts": list(a.user_texts)} for a in activity],
        }
        tools = ReviewTools(self._reads, self._hot, self._documents)
        request = build_request("review", data, REVIEW_TOOLS)
        try:
            raw = invoke(self._workers(), request, tools)
            result = structure(raw, ReviewResult)
        except StructureFailed as exc:
            return ReviewOutcome(False, "failed", "invalid receipt: " + "; ".join(exc.problems))
        except WorkerFailed as exc:
            return ReviewOutcome(False, "failed", exc.message)
        return ReviewOutcome(
            result.action != "failed", result.action, result.summary, tuple(result.document_ids)
        )

    def _reads(self) -> ScopedTools:
        return ScopedTools(self._long_term().service, READS, readonly=True)


class AsyncDriver:
    """Fires an agent's review deadline on an asyncio loop.

    ``sleep`` is injectable (tests pass a fake that advances a fake clock): the driver never
    reads wall time itself. Call :meth:`notify` after sending events, so a new deadline is
    picked up; :meth:`run` loops until :meth:`stop`. The review runs inside ``tick`` on the
    loop's thread; a host whose worker blocks for long should give the agent its own loop.
    """

    def __init__(
        self,
        lifecycle: AgentLifecycle,
        clock: Clock,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._lifecycle, self._clock, self._sleep = lifecycle, clock, sleep
        self._changed = asyncio.Event()
        self._stopped = False

    def notify(self) -> None:
        self._changed.set()

    def stop(self) -> None:
        self._stopped = True
        self._changed.set()

    async def run(self) -> None:
        while not self._stopped:
            deadline = self._lifecycle.deadline_ms
            if deadline is None or self._lifecycle.state not in ("armed",):
                self._changed.clear()
                await self._changed.wait()
                continue
            delay = deadline - self._clock.now_ms()
            if delay > 0:
                await self._sleep(delay / 1000)
            try:
                self._lifecycle.tick()
            except MnemonError:
                self._stopped = True
                raise
