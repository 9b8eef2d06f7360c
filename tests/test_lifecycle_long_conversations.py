"""Long conversations: a step reads its new messages and the bounded tail it matches, never the
whole list, and still counts every message exactly once; a malformed message among the ones a
step reads (the new ones, the tail) is ``InvalidInput`` with the state file byte-identical.

Three hosts of one long session count the same: one that sends the whole conversation at every
step (retrying steps), one that cuts its front now and then, and one that passes only the new
messages."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mnemon_sm import Config, InvalidInput, MemoryRoot
from mnemon_sm.flows.lifecycle.scoring import TAIL_KEPT
from mnemon_sm.flows.lifecycle.state import LOG_MAX
from mnemon_sm.ports import Ports
from mnemon_sm.testing.memory import memory_ports

STATE = "state/lifecycle/main.json"
NAMES = ["read", "grep"]


def open_agent(ports: Ports) -> Any:
    config = Config(durability="off", idle_review_ms=30_000)
    return MemoryRoot.open("/r", config, ports=ports).lifecycle("main")


def turn_steps(turn: int) -> list[list[dict[str, Any]]]:
    """What a turn enters at each step (OpenAI shape, every message unique): the user's
    question, then the assistant's calls and their results, then its answer."""
    calls = [
        {"id": f"c{turn}-{i}", "type": "function", "function": {"name": n, "arguments": "{}"}}
        for i, n in enumerate(NAMES)
    ]
    results = [{"role": "tool", "tool_call_id": c["id"], "content": "done"} for c in calls]
    asked = {"role": "assistant", "content": None, "tool_calls": calls}
    said = {"role": "user", "content": f"question number {turn}"}
    return [[said], [asked, *results], [{"role": "assistant", "content": f"answer {turn}"}]]


def expected(turns: int) -> tuple[int, int, int, int]:
    """(user characters, turns, tool results, unique tools) of ``turns`` turns."""
    chars = sum(len(f"question number {t}") for t in range(1, turns + 1))
    return chars, turns, len(NAMES) * turns, len(NAMES)


def counts(agent: Any) -> tuple[int, int, int, int]:
    s = agent.score
    return s.user_chars, s.turns, s.tool_results, s.unique_tools


Host = Callable[[Any, int, Callable[[int], None]], None]


def _nothing(turn: int) -> None:
    """A host's per-turn callback that does nothing."""


def whole_history(agent: Any, turns: int, ended: Callable[[int], None] = _nothing) -> None:
    """Sends the whole conversation at every step, retries each step, keeps the cue."""
    history: list[Any] = []
    for turn in range(1, turns + 1):
        for step, new in enumerate(turn_steps(turn), 1):
            history += new
            out = agent.pre_step(turn, step, list(history))
            agent.pre_step(turn, step, list(history))  # a retried step: nothing new
            history = out
        agent.turn_stopping(turn, [])
        agent.turn_ended(turn)
        ended(turn)


def cut_history(agent: Any, turns: int, ended: Callable[[int], None] = _nothing) -> None:
    """Sends the whole conversation, but cuts its front every 25 turns to its last 30
    messages, and summarizes it every 40 turns (a system message and the last 5)."""
    history: list[Any] = []
    for turn in range(1, turns + 1):
        if turn % 25 == 0:
            history = history[-30:]
        if turn % 40 == 0:
            history = [{"role": "system", "content": f"Summary to {turn}."}, *history[-5:]]
        for step, new in enumerate(turn_steps(turn), 1):
            history = agent.pre_step(turn, step, [*history, *new])
        agent.turn_stopping(turn, [])
        agent.turn_ended(turn)
        ended(turn)


def incremental(agent: Any, turns: int, ended: Callable[[int], None] = _nothing) -> None:
    """Passes only the messages entered at each step."""
    for turn in range(1, turns + 1):
        for step, new in enumerate(turn_steps(turn), 1):
            agent.pre_step(turn, step, new)
        agent.turn_stopping(turn, [])
        agent.turn_ended(turn)
        ended(turn)


@pytest.mark.parametrize("host", [whole_history, cut_history, incremental])
def test_long_sessions_count_every_message_once_and_persist_a_bounded_state(host: Host) -> None:
    ports, _ = memory_ports()
    agent = open_agent(ports)
    lines: dict[int, int] = {}

    def persisted(turn: int) -> None:  # the bytes the last hook persisted (one state line)
        if turn in (50, 250):
            lines[turn] = len((ports.files.read(STATE) or b"").splitlines()[-1])

    host(agent, 250, persisted)  # 1,250 messages and more
    assert counts(agent) == expected(250)
    assert lines[250] <= lines[50] + 64  # bounded: only the turn numbers' digits grow
    assert len(ports.files.read(STATE) or b"") <= LOG_MAX


def test_a_long_history_seen_at_once_counts_whole_then_only_what_is_appended() -> None:
    ports, _ = memory_ports()
    agent = open_agent(ports)
    history = [m for turn in range(1, 801) for step in turn_steps(turn) for m in step]
    agent.pre_step(1, 1, history)  # 4,000 messages, all new: counted in turn 1
    chars, _, results, unique = expected(800)
    assert counts(agent) == (chars, 1, results, unique)
    more = turn_steps(801)[0]
    agent.pre_step(2, 1, [*history, *more])
    agent.pre_step(2, 2, [*history, *more])
    assert counts(agent) == (chars + len("question number 801"), 2, results, unique)


def test_an_id_is_counted_once_per_turn_within_one_step_and_across_steps() -> None:
    ports, _ = memory_ports()
    agent = open_agent(ports)
    said = [{"id": f"m{i}", "role": "user", "content": "x" * 10} for i in range(40)]
    again = [{**m, "content": "y" * 7} for m in said[::-1]]  # the same ids, said otherwise
    agent.pre_step(1, 1, [*said, *again])
    agent.pre_step(1, 2, [{**m, "content": "w" * 5} for m in said])  # new, known ids
    assert agent.score.user_chars == 40 * 10
    agent.pre_step(2, 1, [{**m, "content": "z" * 3} for m in said])  # another turn
    assert agent.score.user_chars == 40 * 10 + 40 * 3


class Recorded(list[Any]):
    """A message list that records the messages read from it by index (copying the list
    whole, as the step does to hand it back, reads none)."""

    def __init__(self, items: list[Any]) -> None:
        super().__init__(items)
        self.read: set[int] = set()

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            self.read.update(range(*index.indices(len(self))))
        else:
            self.read.add(index % len(self))
        return super().__getitem__(index)


def test_a_step_reads_its_new_messages_and_the_tail_not_the_whole_conversation() -> None:
    ports, _ = memory_ports()
    agent = open_agent(ports)
    history = [m for turn in range(1, 401) for step in turn_steps(turn) for m in step]
    agent.pre_step(1, 1, history)
    grown = Recorded([*history, *turn_steps(401)[0]])
    agent.pre_step(2, 1, grown)
    n = len(history)
    assert grown.read and grown.read <= set(range(n - TAIL_KEPT, n + 1))
    again = Recorded(list(grown))
    agent.pre_step(2, 2, again)  # nothing new: the tail only
    assert again.read and again.read <= set(range(n + 1 - TAIL_KEPT, n + 1))
    cut = Recorded(list(grown)[-100:] + turn_steps(401)[1])
    agent.pre_step(2, 3, cut)  # a cut front: from the end back to the tail, no further
    assert cut.read and min(cut.read) >= 100 - TAIL_KEPT


# -- malformed messages among those a step reads ------------------------------------------------

BAD: dict[str, Any] = {
    "not a mapping": "hello",
    "a non-string key": {1: "x", "role": "user"},
    "an unknown role": {"role": "robot", "content": "hi"},
    "a source not an object": {"role": "user", "source": "user"},
    "content a number": {"role": "user", "content": 5},
    "a text block's text a number": {"role": "user", "content": [{"type": "text", "text": 5}]},
    "a tool_use without a name": {"role": "assistant", "content": [{"type": "tool_use"}]},
    "a tool call without a function": {"role": "assistant", "tool_calls": [{"id": "c"}]},
    "an id that is a list": {"role": "user", "id": ["x"], "content": "hi"},
    "a lone surrogate in user text": {"role": "user", "content": "bad \ud800"},
}


def seen_long(ports: Ports) -> tuple[Any, list[Any]]:
    """An agent that has seen (and persisted) a 2,000-message conversation."""
    agent = open_agent(ports)
    history = [m for turn in range(1, 401) for step in turn_steps(turn) for m in step]
    history = agent.pre_step(1, 1, history)
    agent.turn_stopping(1, [])
    return agent, history


def refused(ports: Ports, agent: Any, turn: int, messages: list[Any]) -> None:
    before = (ports.files.read(STATE), agent.status())
    with pytest.raises(InvalidInput):
        agent.pre_step(turn, 1, messages)
    assert (ports.files.read(STATE), agent.status()) == before
    assert open_agent(ports).status() == before[1]  # nothing persisted


@pytest.mark.parametrize("bad", BAD.values(), ids=BAD.keys())
def test_a_bad_new_message_after_a_long_history_is_refused_and_nothing_changes(bad: Any) -> None:
    ports, _ = memory_ports()
    agent, history = seen_long(ports)
    good = turn_steps(401)
    refused(ports, agent, 2, [*history, *good[0], bad, *good[1]])  # among the new ones
    refused(ports, agent, 2, [*history[:-1], bad, *good[0]])  # the first new one (no cue)
    refused(ports, agent, 2, [*history[-50:], *good[0], bad])  # after a cut front
    refused(ports, agent, 2, [bad, *good[0]])  # a list none of which was seen
    # the good messages alone are then counted, once
    agent.pre_step(2, 1, [*history, *good[0]])
    assert agent.score.user_chars == expected(400)[0] + len("question number 401")


@pytest.mark.parametrize(
    "bad", [BAD["not a mapping"], BAD["an unknown role"], BAD["a source not an object"]]
)
def test_a_bad_message_in_the_tail_a_step_matches_is_refused(bad: Any) -> None:
    ports, _ = memory_ports()
    agent, history = seen_long(ports)
    last = len(history) - 2  # the last message the host sent (our cue follows it)
    for place in (last, last - TAIL_KEPT + 1):  # the remembered tail's newest and oldest
        changed = list(history)
        changed[place] = bad
        refused(ports, agent, 2, [*changed, *turn_steps(401)[0]])
