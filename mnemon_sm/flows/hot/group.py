"""Group commit: threads of one process writing one root share one commit.

Theory of operation
-------------------
Every ``add``, ``replace`` and ``remove`` of a root goes through :class:`GroupCommit` (flat
combining). A caller puts its request in a queue, then takes the root's mutex. Whoever holds
the mutex takes every request queued so far, its own included, and settles them all:

- alone in the queue, the request is sent as its own event, exactly as without grouping;
- with others, each request is first checked by the pure rules it would meet in the machine's
  validators (a read-only root, RULE-HOT-1/2); one that fails gets its own typed error and
  stays out. The rest are sent as one ``batch`` event: under one lock, in queue order, each is
  decided on what the ones before it left, and the ones that apply are written in one commit:
  one write of each changed file, one fsync round. Each caller gets its own receipt or error,
  the one it would have got had it taken the lock right after the request before it.

A caller that finds the queue empty, no leader and the mutex free sends its request at once,
without queueing. Otherwise one caller at a time leads: it takes the mutex (which capacity
maintenance and context rendering hold too) and settles the queue; the others wait until it is
done and are woken together, each returning at once with its answer if it was settled, or
leading next. A caller that holds the mutex already (a re-entrant call) leads at once. Queue
order is lock order (INV-HOT-7): concurrent callers never had an order to keep, and one
caller's requests are in its own order, since it waits for each.

When an exception other than a typed error escapes a batch (``KeyboardInterrupt`` in the
settling thread, say), the settling thread gets it unchanged. The others are not left
hanging: if the batch had not begun its commit, nothing was written and their requests go
back to the queue, to be settled by the next holder of the mutex; if it had, whether the
commit point was passed is unknown, and each gets a ``StorageError`` that says so (read hot
memory before trying again).
"""

from __future__ import annotations

import threading
from typing import Any

import attrs

from mnemon_sm.config import Config
from mnemon_sm.errors import MnemonError, ReadOnly, StorageError
from mnemon_sm.flows.hot.mutation import HotMutationFlow, mutation_of
from mnemon_sm.flows.hot.rules import Mutation, Receipt

__all__ = ["GroupCommit"]

# Requests settled in one batch at most: bounds the work one caller does for others.
BATCH_LIMIT = 64


@attrs.define(eq=False)
class _Slot:
    """One caller's request and, once settled, its answer."""

    action: str
    fields: dict[str, Any]
    done: bool = False
    receipt: Receipt | None = None
    error: MnemonError | None = None

    def settle(self, answer: Receipt | MnemonError) -> None:
        if isinstance(answer, MnemonError):
            self.error = answer
        else:
            self.receipt = answer
        self.done = True

    def answer(self) -> Receipt:
        if self.error is not None:
            raise self.error
        assert self.receipt is not None
        return self.receipt


class GroupCommit:
    """Serializes one root's hot-memory mutations in this process and commits the requests
    that queue up together (see the module)."""

    def __init__(self, flow: HotMutationFlow, config: Config, mutex: threading.RLock) -> None:
        self._flow, self._config, self._mutex = flow, config, mutex
        self._queue: list[_Slot] = []
        self._guard = threading.Lock()
        self._woken = threading.Condition(self._guard)  # a leader is done
        self._leading = False  # a caller is settling the queue (or waiting for the mutex)
        self.batches = 0  # batch events that answered (figures for benchmarks and tests)
        self.batched = 0  # requests those answered

    def run(self, action: str, **fields: Any) -> Receipt:
        """Settle one request (see :meth:`HotMutationFlow.run` for ``fields``)."""
        # Alone: nothing queued, nobody leading and the mutex free. Sent as its own event at
        # once, as a lone slot would be; a caller that queues meanwhile leads after it.
        if not self._queue and not self._leading and self._mutex.acquire(blocking=False):
            try:
                if not self._queue and not self._leading:
                    return self._flow.run(action, **fields)
            finally:
                self._mutex.release()
        slot = _Slot(action, fields)
        with self._guard:
            self._queue.append(slot)
        if self._mutex._is_owned():  # type: ignore[attr-defined]  # re-entered: lead at once
            self._lead(slot)
            return slot.answer()
        while not slot.done:
            with self._guard:
                if self._leading:  # a leader settles the queue and wakes everyone after
                    self._woken.wait()
                    continue
                self._leading = True
            try:
                self._lead(slot)
            finally:
                with self._guard:
                    self._leading = False
                    self._woken.notify_all()
        return slot.answer()

    def _lead(self, slot: _Slot) -> None:
        with self._mutex:
            while not slot.done:  # a batch that was interrupted before writing puts it back
                with self._guard:
                    taken = self._queue[: BATCH_LIMIT - 1]
                    if slot not in taken:  # far back in a long queue: its own goes too
                        taken.append(slot)
                    self._queue = [s for s in self._queue if s not in taken]
                self._settle(taken, slot)

    def _settle(self, taken: list[_Slot], own: _Slot) -> None:
        if len(taken) == 1:
            own.done = True  # whatever happens, the answer is this caller's own
            own.receipt = self._flow.run(own.action, **own.fields)
            return
        joined: list[tuple[_Slot, Mutation]] = []
        for slot in taken:
            try:
                if not self._config.write_enabled:
                    raise ReadOnly()
                mutation = mutation_of({"action": slot.action, **slot.fields})
            except MnemonError as exc:
                slot.settle(exc)
                continue
            assert isinstance(mutation, Mutation)
            joined.append((slot, mutation))
        if len(joined) == 1:
            self._settle_alone(*joined[0], own)
        elif joined:
            self._settle_batch(joined, own)

    def _settle_alone(self, slot: _Slot, _: Mutation, own: _Slot) -> None:
        try:
            slot.settle(self._flow.run(slot.action, **slot.fields))
        except MnemonError as exc:
            slot.settle(exc)
        except BaseException:
            own.done = True  # this caller gets the exception itself
            if slot is not own:
                self._interrupted([slot])
            raise

    def _settle_batch(self, joined: list[tuple[_Slot, Mutation]], own: _Slot) -> None:
        slots = [slot for slot, _ in joined]
        try:
            answers = self._flow.run_batch(tuple(m for _, m in joined))
        except MnemonError as exc:  # a storage failure: nothing committed
            for slot in slots:
                slot.settle(exc)
        except BaseException:
            own.done = True  # this caller gets the exception itself
            self._interrupted([s for s in slots if s is not own])
            raise
        else:
            self.batches += 1
            self.batched += len(slots)
            for slot, answer in zip(slots, answers, strict=True):
                slot.settle(answer)

    def _interrupted(self, slots: list[_Slot]) -> None:
        """An exception escaped while settling ``slots`` for their callers (see the module)."""
        if self._flow.writes_started:
            error = StorageError(
                "a commit this change was grouped with was interrupted; it may or may not "
                "have taken effect (read hot memory before trying again)"
            )
            for slot in slots:
                slot.settle(error)
            return
        with self._guard:  # nothing written: back to the front of the queue, in order
            self._queue[:0] = [s for s in slots if not s.done]
