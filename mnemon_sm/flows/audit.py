"""The audit log: every flow's transitions and outcomes, append-only and bounded, in the root.

Theory of operation
-------------------
:class:`AuditLog` is the engine's sink (:mod:`mnemon_sm.engine.audit`) for every flow context
of a root. Each transition and each caller event's outcome becomes one JSON line::

    {"at": 1733300000123, "run": "5f0c2a-17", "flow": "hot_memory_mutation",
     "from": "ready", "event": "add", "to": "deciding"}
    {"at": 1733300000125, "run": "5f0c2a-17", "flow": "hot_memory_mutation",
     "event": "add", "outcome": "DuplicateEntry", "state": "ready"}

Names and states only: no user content. With ``Config.audit = "content"`` an outcome that is
an error also carries the error's message (which may quote what the caller sent). The clock
is the root's (time is an input).

Lines are buffered in memory and appended in one ``Files.append`` per flush: when
:data:`FLUSH_LINES` wait, when the oldest waiting line is :data:`FLUSH_MS` old at the end of an
operation, and when the root closes (:meth:`AuditLog.flush`). So an operation costs a few
list appends; a crash loses at most the lines of the last second, and a power loss may leave a
torn last line, which readers skip (:func:`read_audit`); every flush starts with a line break,
so a torn line never swallows the next one. A failed append is logged and its
lines kept for the next flush, up to :data:`BUFFER_MAX` lines (older ones are dropped and
counted): the audit never fails an operation.

Bounded: the log is segments ``audit/transitions.<n>.jsonl``; a process appends to the highest
``n`` it saw. After every :data:`SEGMENT_BYTES` / 4 bytes it appended, it checks under the lock
``audit/.rotate.lock`` whether the newest segment reached :data:`SEGMENT_BYTES`; if so it starts
segment ``n + 1`` and removes all but the newest :data:`SEGMENTS_KEPT`. Several processes
append to one segment at once (each append is whole); each checks after its own quarter, so a
segment overshoots by at most a quarter per process writing.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import re
import secrets
import threading
from collections.abc import Iterator
from typing import Any

import attrs

from mnemon_sm.errors import InvalidInput, MnemonError
from mnemon_sm.ports import Clock, Files, Locks

__all__ = [
    "AUDIT_DIR",
    "BUFFER_MAX",
    "FLUSH_LINES",
    "FLUSH_MS",
    "SEGMENTS_KEPT",
    "SEGMENT_BYTES",
    "AuditLog",
    "AuditRecord",
    "read_audit",
]

AUDIT_DIR = "audit"
ROTATE_LOCK = f"{AUDIT_DIR}/.rotate.lock"
SEGMENT_BYTES = 64 * 1024
SEGMENTS_KEPT = 16  # about 1 MiB in all
FLUSH_LINES = 64
FLUSH_MS = 1000
BUFFER_MAX = 4096
_SEGMENT = re.compile(r"^transitions\.([0-9]{1,12})\.jsonl$")
_LOG = logging.getLogger("mnemon_sm.audit")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _segment(n: int) -> str:
    return f"{AUDIT_DIR}/transitions.{n}.jsonl"


def _segments(files: Files) -> list[int]:
    found = (_SEGMENT.match(name) for name in files.list(AUDIT_DIR))
    return sorted(int(m.group(1)) for m in found if m)


@attrs.frozen
class AuditRecord:
    """One line of the audit log: a transition (``source``, ``event``, ``target``) or an
    outcome (``event``, ``outcome``, ``state``, and ``detail`` when content is kept)."""

    at: int
    run: str
    flow: str
    event: str
    source: str | None = None
    target: str | None = None
    outcome: str | None = None
    state: str | None = None
    detail: str | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"at": self.at, "run": self.run, "flow": self.flow}
        if self.outcome is None:
            data.update({"from": self.source, "event": self.event, "to": self.target})
        else:
            data.update({"event": self.event, "outcome": self.outcome, "state": self.state})
            if self.detail is not None:
                data["detail"] = self.detail
        return data


def _record(line: bytes) -> AuditRecord | None:
    """A line decoded, or None for one that is torn or not ours."""
    try:
        data = json.loads(line)
        if not isinstance(data, dict):
            return None
        at, run, flow, event = data["at"], data["run"], data["flow"], data["event"]
        if not (isinstance(at, int) and all(isinstance(v, str) for v in (run, flow, event))):
            return None
        fields = ("from", "to", "outcome", "state", "detail")
        values = {key: data.get(key) for key in fields}
        if not all(v is None or isinstance(v, str) for v in values.values()):
            return None
        return AuditRecord(
            at,
            run,
            flow,
            event,
            source=values["from"],
            target=values["to"],
            outcome=values["outcome"],
            state=values["state"],
            detail=values["detail"],
        )
    except (ValueError, KeyError, TypeError):
        return None


class AuditLog:
    """The audit sink of one root (see the module). ``content``: keep errors' messages."""

    def __init__(self, files: Files, locks: Locks, clock: Clock, *, content: bool = False):
        self._files, self._locks, self._clock = files, locks, clock
        self._content = content
        self._lines: list[str] = []
        self._oldest = 0  # clock reading of the oldest buffered line
        self._at = 0  # the last clock reading
        self._guard = threading.Lock()
        self._flushing = threading.Lock()
        self._prefix = f"{os.getpid():x}{secrets.token_hex(2)}"
        self._runs = itertools.count(1)
        self._current: int | None = None  # the segment this process appends to
        self._written = 0  # bytes appended to it since the last check
        self.dropped = 0  # lines dropped because appends kept failing
        self._tails: dict[tuple[tuple[str, str], ...], str] = {}  # encoded fields

    # -- the engine's sink -----------------------------------------------------------------

    def new_run(self) -> str:
        return f"{self._prefix}-{next(self._runs)}"

    def transition(self, run: str, flow: str, source: str, event: str, target: str) -> None:
        tail = self._encoded({"flow": flow, "from": source, "event": event, "to": target})
        at = self._now()
        self._add(at, f'{{"at":{at},"run":"{run}",{tail}')  # run ids are ours: hex, "-"

    def outcome(
        self, run: str, flow: str, event: str, outcome: str, state: str, detail: str | None
    ) -> None:
        fields = {"flow": flow, "event": event, "outcome": outcome, "state": state}
        if self._content and detail is not None:
            tail = _json({**fields, "detail": detail})[1:]
        else:
            tail = self._encoded(fields)
        at = self._now()
        self._add(at, f'{{"at":{at},"run":"{run}",{tail}')
        with self._guard:
            due = len(self._lines) >= FLUSH_LINES or at - self._oldest >= FLUSH_MS
        if due:
            self.flush()

    def _now(self) -> int:
        """The clock's reading; when the clock fails, the last one (a sink never raises)."""
        try:
            self._at = self._clock.now_ms()
        except (MnemonError, OSError) as exc:
            _LOG.warning("audit clock not read: %s", exc)
        return self._at

    def _encoded(self, fields: dict[str, str]) -> str:
        """``fields`` as the end of a JSON object (no opening brace); names repeat, so each
        combination is encoded once (up to 4096 of them)."""
        key = tuple(fields.items())  # names too: a transition and an outcome may share values
        found = self._tails.get(key)
        if found is None:
            found = _json(fields)[1:]
            if len(self._tails) < 4096:
                self._tails[key] = found
        return found

    def _add(self, at: int, line: str) -> None:
        with self._guard:
            if not self._lines:
                self._oldest = at
            self._lines.append(line)

    # -- writing ---------------------------------------------------------------------------

    def flush(self) -> None:
        """Append what is buffered (one call); never raises (a failure is logged, the lines
        kept for the next flush)."""
        with self._flushing:
            with self._guard:
                lines, self._lines = self._lines, []
            if not lines:
                return
            # Each flush starts a line: a torn tail a crash left stays a line of its own.
            data = ("\n" + "\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
            try:
                self._append(data)
            except (MnemonError, OSError) as exc:
                _LOG.warning("audit log not written: %s", exc)
                with self._guard:
                    self._lines = lines + self._lines
                    excess = len(self._lines) - BUFFER_MAX
                    if excess > 0:
                        del self._lines[:excess]
                        self.dropped += excess

    def _append(self, data: bytes) -> None:
        if self._current is None:
            self._files.ensure_dir(AUDIT_DIR)
            found = _segments(self._files)
            self._current = found[-1] if found else 1
        self._files.append(_segment(self._current), data)
        self._written += len(data)
        if self._written >= SEGMENT_BYTES // 4:
            self._rotate()

    def _rotate(self) -> None:
        """Under the lock: start a new segment when the newest is full; keep the newest
        :data:`SEGMENTS_KEPT`."""
        self._locks.acquire(ROTATE_LOCK, 10_000)
        try:
            found = _segments(self._files) or [1]
            newest = found[-1]
            size = len(self._files.read(_segment(newest)) or b"")
            if size >= SEGMENT_BYTES:
                newest += 1
                found.append(newest)
            for n in found[:-SEGMENTS_KEPT]:
                self._files.remove(_segment(n))
            self._current, self._written = newest, 0
        finally:
            self._locks.release(ROTATE_LOCK)


def read_audit(files: Files, limit: int = 100, flow: str | None = None) -> list[AuditRecord]:
    """The newest ``limit`` records (of ``flow`` only, when given), oldest first; torn or
    foreign lines are skipped."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInput("limit must be a positive integer")
    out: list[AuditRecord] = []
    for n in reversed(_segments(files)):
        found = [r for r in _records(files.read(_segment(n)) or b"") if flow in (None, r.flow)]
        out = found + out
        if len(out) >= limit:
            break
    return out[-limit:]


def _records(data: bytes) -> Iterator[AuditRecord]:
    for line in data.split(b"\n"):
        if line.strip():
            record = _record(line)
            if record is not None:
                yield record
