"""What one agent's lifecycle persists, and how: ``state/lifecycle/<agent id>.json``.

The file holds the statechart's resting state and every piece of data the flow needs to
resume (the kept activity and the folded earlier turns, the deadline, prime, status, ended
turns, the last review and the counters), as JSON lines: at every step that changed it (the
spec's ``persist`` actions), the whole new state is appended as one line (one ``write``); once
the file would pass :data:`LOG_MAX` bytes it is replaced by that line alone, atomically. The
last complete line is the state; a torn last line (a power loss) or an empty file is
ignored. Every part is bounded (see :mod:`.scoring` for the activity; the review summary is
cut to :data:`SUMMARY_CHARS`), so a line, the file and the cost of writing it do not grow with
the session. The root's ``durability`` applies: ``full`` and ``normal`` fsync every append, and a
replacement with its directory (rare, and without it a power loss could take the file's name
and so every append since), ``off`` nothing.

Several processes may drive one agent: the facade holds the agent's lock (:func:`lock_name`)
around every read-modify-write and re-reads the file first (:func:`load`).

Reading is strict otherwise: an unknown key, a missing one, another flow's file, another
agent's file or a state the spec cannot rest in is ``CorruptStore``.

Reset (:func:`reset`): an agent whose file cannot be read (a torn or foreign file, bad bytes,
a wrong schema) cannot be opened, so it is reset without loading it: under the agent's lock,
its file is moved aside, never deleted, to ``<agent id>.json.bad-<epoch ms>`` (or
``.reset-<epoch ms>`` when it was readable) in the same directory, through the files port (a
symlink is moved as a link, never followed); the agent then starts as a new one.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

import attrs

from mnemon_sm.convert import converter, register_camel_case
from mnemon_sm.errors import CorruptStore, InvalidInput, MnemonError
from mnemon_sm.flows.lifecycle.scoring import Conversation, Earlier, TurnActivity
from mnemon_sm.ports import TEMP_NAME, Files, Locks
from mnemon_sm.ports.storage import durable_replace, parse_versioned

__all__ = [
    "AgentState",
    "Counters",
    "LastReview",
    "ReviewLease",
    "Stored",
    "agent_ids",
    "clip_summary",
    "encode",
    "fresh",
    "load",
    "lock_name",
    "parse",
    "read",
    "remove_stale_temps",
    "reset",
    "save",
    "state_path",
]

FLOW = "agent_lifecycle"
STATE_DIR = "state/lifecycle"
RESTING = ("idle", "armed", "deferred", "disposed")
_AGENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
ENDED_KEPT = 16
LOG_MAX = 32 * 1024  # bytes of state history before the file is compacted
SUMMARY_CHARS = 1000  # characters of the last review's summary kept


@attrs.frozen
class Counters:
    primes: int = 0
    recall_cues: int = 0
    writeback_cues: int = 0
    reviews: int = 0
    failures: int = 0


@attrs.frozen
class LastReview:
    at: str
    action: str
    score: int
    summary: str
    document_ids: list[str]


@attrs.frozen
class ReviewLease:
    """A review running in some facade (``owner``) until ``until_ms`` (its timeout): no other
    facade of the agent starts one before then."""

    owner: str
    until_ms: int


@attrs.frozen
class AgentState:
    version: int
    flow: str
    agent_id: str
    state: Literal["idle", "armed", "deferred", "disposed"]
    prime_pending: bool
    start_source: str
    busy: bool
    ended_turns: list[int]
    deadline_ms: int | None
    armed_turn: int | None
    activity: list[TurnActivity]
    last_review: LastReview | None
    counters: Counters
    earlier: Earlier | None = None
    review_lease: ReviewLease | None = None
    conversation: Conversation | None = None


for _cls in (Counters, LastReview, ReviewLease, AgentState):
    register_camel_case(_cls)


def fresh(agent_id: str) -> AgentState:
    """The state of an agent seen for the first time (resting in the initial state)."""
    return AgentState(
        version=1,
        flow=FLOW,
        agent_id=agent_id,
        state="idle",
        prime_pending=True,
        start_source="startup",
        busy=False,
        ended_turns=[],
        deadline_ms=None,
        armed_turn=None,
        activity=[],
        last_review=None,
        counters=Counters(),
    )


def check_agent_id(agent_id: object) -> str:
    if not isinstance(agent_id, str) or not _AGENT_ID.match(agent_id):
        raise InvalidInput(
            "agent id must be 1-64 letters, digits, '.', '_' or '-', starting with a letter "
            "or digit"
        )
    return agent_id


def state_path(agent_id: str) -> str:
    return f"{STATE_DIR}/{check_agent_id(agent_id)}.json"


def agent_ids(files: Files) -> tuple[str, ...]:
    """The agents with a state file, sorted."""
    names = (n.removesuffix(".json") for n in files.list(STATE_DIR) if n.endswith(".json"))
    return tuple(sorted(a for a in names if _AGENT_ID.match(a)))


def remove_stale_temps(files: Files, agent_id: str) -> None:
    """Remove what a writer that crashed while replacing the agent's file left (under the
    agent's lock: no live writer of this agent can be replacing it)."""
    prefix = f".{check_agent_id(agent_id)}.json."
    for name in files.list(STATE_DIR):
        if name.startswith(prefix) and TEMP_NAME.match(name):
            files.remove(f"{STATE_DIR}/{name}")


def lock_name(agent_id: str) -> str:
    """The lock serializing every process's events for one agent."""
    return f"{STATE_DIR}/.{check_agent_id(agent_id)}.lock"


def clip_summary(summary: str) -> str:
    """A review summary as kept: at most :data:`SUMMARY_CHARS` characters."""
    if len(summary) <= SUMMARY_CHARS:
        return summary
    return summary[: SUMMARY_CHARS - 1] + "\u2026"


@attrs.frozen
class Stored:
    """What the file holds now: its last complete line (None: never persisted, or no complete
    line survived) and the size the next :func:`save` builds on: 0 when the file ends in a
    torn line, so that save rewrites the file instead of appending to the torn bytes (which
    would tear the new line too and make the file unreadable from then on)."""

    line: bytes | None
    size: int


def read(files: Files, agent_id: str) -> Stored:
    data = files.read(state_path(agent_id))
    if data is None:
        return Stored(None, 0)
    complete, _, torn = data.rpartition(b"\n")
    if not complete:  # empty, or one line cut short: a power loss took the only state
        return Stored(None, 0)
    last = complete.rpartition(b"\n")[2]  # the last complete line; a torn tail is ignored
    return Stored(last + b"\n", 0 if torn else len(data))


def parse(stored: Stored, agent_id: str) -> AgentState | None:
    """The state ``stored`` holds (None when it holds none)."""
    if stored.line is None:
        return None
    return _parse(stored.line, agent_id, state_path(agent_id))


def load(files: Files, agent_id: str) -> tuple[AgentState | None, int]:
    """The persisted state and the size the next :func:`save` builds on (see :class:`Stored`)."""
    stored = read(files, agent_id)
    return parse(stored, agent_id), stored.size


def _parse(line: bytes, agent_id: str, path: str) -> AgentState:
    state = parse_versioned(line, AgentState, path=path, label=f"{path} is not a lifecycle state")
    if state.flow != FLOW or state.agent_id != agent_id:
        raise CorruptStore(f"{path} belongs to another flow or agent", path=path)
    if state.state not in RESTING:
        raise CorruptStore(f"{path} names a state the spec cannot rest in", path=path)
    return state


def encode(state: AgentState) -> bytes:
    """``state`` as one line of the file."""
    data: dict[str, Any] = converter.unstructure(state)
    return (json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def save(files: Files, line: bytes, agent_id: str, size: int, durability: str) -> int:
    """Persist the encoded state ``line`` into a file now ``size`` bytes long; returns its
    new size.

    Appends the line, or, for a new file or one that would pass :data:`LOG_MAX`, replaces the
    file with that line atomically; synced as ``durability`` asks.
    """
    path = state_path(agent_id)
    if size == 0 or size + len(line) > LOG_MAX:
        files.ensure_dir(STATE_DIR)
        durable_replace(files, path, line, "off" if durability == "off" else "full")
        return len(line)
    files.append(path, line)
    if durability != "off":
        files.fsync(path)
    return size + len(line)


@attrs.frozen
class LifecycleReset:
    """What a reset did: ``reset`` false when the agent had no state file; ``moved_to``, the
    file's new name under the root; ``problem``, why it could not be read (None when it
    could)."""

    agent_id: str
    reset: bool
    moved_to: str | None = None
    problem: str | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"agentId", "reset", "movedTo", "problem"}``."""
        return {
            "agentId": self.agent_id,
            "reset": self.reset,
            "movedTo": self.moved_to,
            "problem": self.problem,
        }


def reset(
    files: Files, locks: Locks, agent_id: str, lock_timeout_ms: int, now_ms: int
) -> LifecycleReset:
    """Move the agent's state file aside (see the module), under the agent's lock."""
    name = f"{check_agent_id(agent_id)}.json"
    lock = lock_name(agent_id)
    locks.acquire(lock, lock_timeout_ms)
    try:
        remove_stale_temps(files, agent_id)
        present = files.list(STATE_DIR)
        if name not in present:
            return LifecycleReset(agent_id, reset=False)
        problem: str | None = None
        try:
            parse(read(files, agent_id), agent_id)
        except MnemonError as exc:
            problem = exc.message
        stem = f"{name}.{'reset' if problem is None else 'bad'}-{now_ms}"
        target, serial = stem, 1
        while target in present:
            target, serial = f"{stem}-{serial}", serial + 1
        files.rename(f"{STATE_DIR}/{name}", f"{STATE_DIR}/{target}")
        files.fsync(STATE_DIR)
    finally:
        locks.release(lock)
    return LifecycleReset(agent_id, True, f"{STATE_DIR}/{target}", problem)
