"""The lifecycle counts standard conversations as the oracle (``scoring_model``) says: every
message once, when it is first entered, whether the host re-sends the whole conversation each
step (keeping the cue it was handed), cuts or summarizes its front, or passes only the new
messages; with OpenAI Chat Completions or Anthropic Messages shapes, tool calls and results
in the messages, and with or without the ``tool/*`` session events at ``turn_stopping``."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from scoring_model import TurnTally, expected_counts

from mnemon_sm import Config, MemoryRoot
from mnemon_sm.testing.memory import memory_ports

TEXTS = ["yes", "ok", "  please fix the build  ", "😀 é", "x" * 60, "Same again."]
TOOLS = ["read", "write", "search", "grep", "run", "edit"]

turn_plans = st.lists(
    st.tuples(
        st.lists(st.sampled_from(TEXTS), min_size=1, max_size=2),  # the user's messages
        st.lists(st.lists(st.sampled_from(TOOLS), max_size=3), min_size=1, max_size=3),
        st.booleans(),  # the host passes the tool events at turn_stopping
        st.booleans(),  # the host re-sends a step
    ),
    min_size=1,
    max_size=10,
)


class Host:
    """Builds messages in one API's shape; every assistant message and call id is unique."""

    def __init__(self, api: str) -> None:
        self.api, self.serial = api, itertools.count(1)

    def user(self, text: str, blocks: bool) -> dict[str, Any]:
        content: Any = [{"type": "text", "text": text}] if blocks else text
        return {"role": "user", "content": content}

    def calls(self, names: list[str]) -> list[dict[str, Any]]:
        """The assistant's message making ``names``' calls, then their results."""
        n = next(self.serial)
        ids = [f"call_{n}_{i}" for i in range(len(names))]
        if self.api == "openai":
            calls = [
                {"id": i, "type": "function", "function": {"name": name, "arguments": "{}"}}
                for i, name in zip(ids, names, strict=True)
            ]
            asked: dict[str, Any] = {"role": "assistant", "content": f"step {n}"}
            if calls:
                asked["tool_calls"] = calls
            results = [{"role": "tool", "tool_call_id": i, "content": "done"} for i in ids]
            return [asked, *results]
        blocks = [
            {"type": "tool_use", "id": i, "name": name, "input": {}}
            for i, name in zip(ids, names, strict=True)
        ]
        asked = {"role": "assistant", "content": [{"type": "text", "text": f"step {n}"}, *blocks]}
        if not ids:
            return [asked]
        results = [{"type": "tool_result", "tool_use_id": i, "content": "done"} for i in ids]
        return [asked, {"role": "user", "content": results}]

    def reply(self) -> dict[str, Any]:
        return {"role": "assistant", "content": f"answer {next(self.serial)}"}


@given(
    st.sampled_from(["openai", "anthropic"]),
    st.sampled_from(["whole", "cut", "incremental"]),
    turn_plans,
    st.randoms(use_true_random=False),
)
def test_conversations_count_every_message_once(
    api: str, mode: str, turns: list[Any], rnd: Any
) -> None:
    ports, _ = memory_ports()
    root = MemoryRoot.open("/r", Config(durability="off"), ports=ports)
    agent = root.lifecycle("main")
    host, history, tallies = Host(api), [], []
    sent_before = 0  # the messages of the history the lifecycle was last sent
    for number, (texts, steps, with_events, resend) in enumerate(turns, 1):
        tally = TurnTally()
        tallies.append(tally)
        batches = [[], *steps]  # step 1 enters the user's messages, later ones tool calls
        for step, names in enumerate(batches, 1):
            if step == 1:
                new = [host.user(t, rnd.random() < 0.5) for t in texts]
            else:
                new = host.calls(names)
            for m in new:
                tally.enter(m)
            if mode == "incremental":
                sent = new
            else:
                history += new
                unsent = len(history) - sent_before  # the cue kept and the new messages
                if mode == "cut" and len(history) >= unsent + 2 and rnd.random() < 0.5:
                    # the documented limit: two or more of the messages last sent stay
                    kept = history[-rnd.randint(unsent + 2, len(history)) :]
                    summary = {"role": "system", "content": f"summary {next(host.serial)}"}
                    history = [summary, *kept] if rnd.random() < 0.5 else kept
                sent = list(history)
                sent_before = len(history)
            out = agent.pre_step(number, step, sent)
            assert out[: len(sent)] == sent
            if resend:
                agent.pre_step(number, step, sent)  # the same step again: nothing new
            if len(out) > len(sent) and mode != "incremental":
                history.append(out[-1])  # the host keeps the cue it was handed
        if mode != "incremental":
            history.append(host.reply())
        events = []
        if with_events:
            for names in steps:
                events += [{"type": "tool/call", "name": n, "turn": number} for n in names]
                events += [{"type": "tool/result", "turn": number}] * len(names)
                tally.event_results += len(names)
        agent.turn_stopping(number, events)
        agent.turn_ended(number)
        s = agent.score
        got = (s.user_chars, s.turns, s.tool_results, s.unique_tools)
        assert got == expected_counts(tallies), (mode, api, number)
    recall = agent.status()["counters"]["recallCues"]
    assert recall >= len(turns)  # every user turn was cued (a re-send may cue again)
