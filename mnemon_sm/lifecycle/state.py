"""What one agent's lifecycle persists, and how: ``state/lifecycle/<agent id>.json``.

The file holds the statechart's resting state and every piece of data the flow needs to
resume (activity per turn, the deadline, prime, status, ended turns, the last review and the
counters), as JSON lines: after every event that changed something, the whole new state is
appended as one line (one ``write``, cheap enough for every step of every turn); once the
file passes :data:`LOG_MAX` bytes it is compacted to its last state by an atomic replace. The
last complete line is the state. Nothing is fsynced, so the state survives any process crash
or restart; a power loss can at worst lose the latest changes or leave a torn last line,
which is ignored. Reading is strict otherwise: an unknown key, a missing one, another flow's
file, another agent's file or a state the spec cannot rest in is ``CorruptStore``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

import attrs

from ..convert import converter, register_camel_case
from ..errors import CorruptStore, InvalidInput
from ..ports import Files
from ..storage import parse_versioned, replace_file
from .scoring import TurnActivity

__all__ = ["AgentState", "Counters", "LastReview", "fresh", "load", "save", "state_path"]

FLOW = "agent_lifecycle"
STATE_DIR = "state/lifecycle"
RESTING = ("idle", "armed", "deferred", "disposed")
_AGENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
ENDED_KEPT = 16
LOG_MAX = 64 * 1024  # bytes of state history before the file is compacted


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


for _cls in (Counters, LastReview, AgentState):
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


def load(files: Files, agent_id: str) -> tuple[AgentState | None, int]:
    """The persisted state (None: never persisted, or no complete line survived) and the size
    the next :func:`save` builds on: 0 when the file ends in a torn line, so that save
    rewrites the file instead of appending to the torn bytes (which would tear the new line
    too and make the file unreadable from then on)."""
    path = state_path(agent_id)
    data = files.read(path)
    if data is None:
        return None, 0
    complete, _, torn = data.rpartition(b"\n")
    if not complete:  # empty, or one line cut short: a power loss took the only state
        return None, 0
    last = complete.rpartition(b"\n")[2]  # the last complete line; a torn tail is ignored
    return _parse(last, agent_id, path), 0 if torn else len(data)


def _parse(line: bytes, agent_id: str, path: str) -> AgentState:
    state = parse_versioned(line, AgentState, path=path, label=f"{path} is not a lifecycle state")
    if state.flow != FLOW or state.agent_id != agent_id:
        raise CorruptStore(f"{path} belongs to another flow or agent", path=path)
    if state.state not in RESTING:
        raise CorruptStore(f"{path} names a state the spec cannot rest in", path=path)
    return state


def save(files: Files, state: AgentState, size: int) -> int:
    """Persist ``state`` into a file now ``size`` bytes long; returns its new size.

    Appends one line, or, for a new file or one past :data:`LOG_MAX`, replaces the file with
    that line atomically.
    """
    data: dict[str, Any] = converter.unstructure(state)
    line = (json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
    path = state_path(state.agent_id)
    if size == 0 or size + len(line) > LOG_MAX:
        files.ensure_dir(STATE_DIR)
        replace_file(files, path, line, sync=False)
        return len(line)
    files.append(path, line)
    return size + len(line)
