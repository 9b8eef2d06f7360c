"""An independent oracle of the activity score, written from reference-behaviour 11.1 (never
from ``mnemon_sm.flows.lifecycle.scoring``): four partial scores from four counts, their sum, and
eligibility at 5.
"""

from __future__ import annotations

THRESHOLD = 5


def reference_score(chars: int, turns: int, results: int, unique: int) -> dict[str, int | bool]:
    text = min(chars // 50, 3)
    turn = turns * 1
    tools = min(results // 5, 2)
    diversity = 0 if unique < 3 else min(unique - 3 + 1, 2)
    total = text + turn + tools + diversity
    return {
        "text_score": text,
        "turn_score": turn,
        "tool_score": tools,
        "diversity_score": diversity,
        "total": total,
        "eligible": total >= THRESHOLD,
    }


def as_reference(score: object) -> dict[str, int | bool]:
    """The library's score in the oracle's terms."""
    return {
        name: getattr(score, name)
        for name in (
            "text_score",
            "turn_score",
            "tool_score",
            "diversity_score",
            "total",
            "eligible",
        )
    }


# -- what a conversation counts (README "Agent lifecycle", reference 11.2) -----------------------
#
# Written from the rules, not from the library: the test host knows which messages it enters
# for the first time (it builds the conversation), and every message is counted exactly once,
# when it is first entered, whether the host re-sends the whole conversation, cuts its front or
# passes only the new messages. What one message counts:
#
# - user text: a user message's text parts (a string content is one), joined by a newline and
#   trimmed, in UTF-16 code units; our own cue is not user text;
# - tool results: a ``role: "tool"`` message is one, an Anthropic ``tool_result`` block one each;
# - tool names: OpenAI ``tool_calls[].function.name`` and Anthropic ``tool_use`` names.
#
# Per turn, the results are the larger of those found in messages and the ``tool/result`` events
# of its ``turn_stopping``; the names are the union of both.


def utf16_units(text: str) -> int:
    return sum(2 if ord(c) > 0xFFFF else 1 for c in text)


def counted_text(message: dict[str, object]) -> int:
    if message.get("role") != "user":
        return 0
    content = message.get("content")
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
    texts = [
        str(p["text"])
        for p in parts or []  # type: ignore[union-attr]
        if isinstance(p, dict) and p.get("type") == "text"
    ]
    return utf16_units("\n".join(texts).strip())


def counted_results(message: dict[str, object]) -> int:
    if message.get("role") == "tool":
        return 1
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    return sum(1 for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result")


def counted_names(message: dict[str, object]) -> set[str]:
    names = set()
    for call in message.get("tool_calls") or []:  # type: ignore[attr-defined]
        names.add(call["function"]["name"])
    content = message.get("content")
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_use":
            names.add(block["name"])
    return names


class TurnTally:
    """One turn's expected counts, from the messages entered in it for the first time."""

    def __init__(self) -> None:
        self.chars = 0
        self.message_results = 0
        self.event_results = 0
        self.names: set[str] = set()

    def enter(self, message: dict[str, object]) -> None:
        self.chars += counted_text(message)
        self.message_results += counted_results(message)
        self.names |= counted_names(message)

    @property
    def results(self) -> int:
        return max(self.message_results, self.event_results)


def expected_counts(turns: list[TurnTally]) -> tuple[int, int, int, int]:
    """(user chars, turns, tool results, unique tools) over ``turns``."""
    names: set[str] = set()
    for t in turns:
        names |= t.names
    return (
        sum(t.chars for t in turns),
        len(turns),
        sum(t.results for t in turns),
        len(names),
    )
