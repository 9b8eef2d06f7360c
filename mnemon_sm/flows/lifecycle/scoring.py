"""Deterministic activity scoring and what counts toward it (reference 11.1, 11.2). Pure.

score = min(floor(user_chars / 50), 3) + turns + min(floor(tool_results / 5), 2) + diversity,
diversity = 0 below 3 unique tools, 1 at 3, 2 at 4 or more; eligible at score >= 5.

User characters are UTF-16 code units of the text blocks of user messages (joined by a
newline, trimmed), each message id counted once per turn; tool results of a turn are *set*
at its stopping notification, never added, so repeated notifications do not double count.

Bounded however long a session runs (the reference keeps every turn in memory until a review
clears them): the newest :data:`ACTIVITY_KEPT` turns are kept whole, older ones are folded
into :class:`Earlier`, which keeps exactly what the score needs (their count, characters and
tool results, and up to :data:`TOOL_NAMES_KEPT` tool names, more than the diversity score can
use). A turn keeps at most :data:`MESSAGE_IDS_KEPT` message ids; a user message past them is
not counted (the text score saturates at 150 characters long before), and an id longer than
:data:`ID_CHARS` is kept as a digest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from mnemon_sm.convert import register_camel_case, string_tuple
from mnemon_sm.text import strip_whitespace, utf16_len

__all__ = [
    "THRESHOLD",
    "Earlier",
    "Score",
    "TurnActivity",
    "fold",
    "message_key",
    "score",
    "user_text",
]

THRESHOLD = 5
USER_TEXTS_KEPT = 4  # user messages per turn kept for the review worker
USER_TEXT_CHARS = 1000  # characters of each kept message
ACTIVITY_KEPT = 8  # newest turns kept whole; older ones are folded into Earlier
MESSAGE_IDS_KEPT = 64  # message ids a turn keeps (and user messages it counts)
TOOL_NAMES_KEPT = 16  # tool names a turn, or the folded turns, keep
ID_CHARS = 64  # a longer message id is kept as a digest


@attrs.frozen
class TurnActivity:
    turn: int
    message_ids: tuple[str, ...] = attrs.field(default=(), converter=string_tuple)
    user_chars: int = 0
    tool_results: int = 0
    tool_names: tuple[str, ...] = attrs.field(default=(), converter=string_tuple)
    user_texts: tuple[str, ...] = attrs.field(default=(), converter=string_tuple)


@attrs.frozen
class Earlier:
    """Turns folded out of the kept activity, up to ``through_turn``: their sums."""

    through_turn: int
    turns: int = 0
    user_chars: int = 0
    tool_results: int = 0
    tool_names: tuple[str, ...] = attrs.field(default=(), converter=string_tuple)


for _cls in (TurnActivity, Earlier):
    register_camel_case(_cls)


@attrs.frozen
class Score:
    user_chars: int
    turns: int
    tool_results: int
    unique_tools: int
    text_score: int
    turn_score: int
    tool_score: int
    diversity_score: int

    @property
    def total(self) -> int:
        return self.text_score + self.turn_score + self.tool_score + self.diversity_score

    @property
    def eligible(self) -> bool:
        return self.total >= THRESHOLD

    def to_json(self) -> dict[str, Any]:
        return {
            "userChars": self.user_chars,
            "turns": self.turns,
            "toolResults": self.tool_results,
            "uniqueTools": self.unique_tools,
            "textScore": self.text_score,
            "turnScore": self.turn_score,
            "toolScore": self.tool_score,
            "diversityScore": self.diversity_score,
            "score": self.total,
            "threshold": THRESHOLD,
            "eligible": self.eligible,
        }


def score_of(user_chars: int, turns: int, tool_results: int, unique_tools: int) -> Score:
    diversity = 0 if unique_tools < 3 else min(unique_tools - 2, 2)
    return Score(
        user_chars,
        turns,
        tool_results,
        unique_tools,
        min(user_chars // 50, 3),
        turns,
        min(tool_results // 5, 2),
        diversity,
    )


def score(activity: Iterable[TurnActivity], earlier: Earlier | None = None) -> Score:
    turns = list(activity)
    base = earlier or Earlier(-1)
    tools: set[str] = set(base.tool_names)
    for t in turns:
        tools.update(t.tool_names)
    return score_of(
        base.user_chars + sum(t.user_chars for t in turns),
        base.turns + len(turns),
        base.tool_results + sum(t.tool_results for t in turns),
        len(tools),
    )


def fold(activity: dict[int, TurnActivity], earlier: Earlier | None) -> Earlier | None:
    """Fold the oldest turns of ``activity`` (in place) into ``earlier`` until at most
    :data:`ACTIVITY_KEPT` remain; returns the new ``earlier``. The score is unchanged."""
    while len(activity) > ACTIVITY_KEPT:
        old = activity.pop(min(activity))
        base = earlier or Earlier(old.turn)
        names = list(base.tool_names)
        names += [n for n in old.tool_names if n not in names]
        earlier = Earlier(
            max(base.through_turn, old.turn),
            base.turns + 1,
            base.user_chars + old.user_chars,
            base.tool_results + old.tool_results,
            names[:TOOL_NAMES_KEPT],
        )
    return earlier


def message_key(message: Mapping[str, Any]) -> str:
    """How a message's id is kept in its turn ("" when it has none)."""
    ident = str(message.get("id", ""))
    if len(ident) <= ID_CHARS:
        return ident
    return "sha256:" + hashlib.sha256(ident.encode("utf-8", "surrogatepass")).hexdigest()


def user_text(message: Mapping[str, Any]) -> str | None:
    """The counted text of a host message: its text blocks joined by a newline and trimmed,
    when it is a user message (None otherwise)."""
    source = message.get("source")
    kind = source.get("kind") if isinstance(source, Mapping) else message.get("role")
    if kind != "user":
        return None
    content = message.get("content")
    if isinstance(content, str):
        return strip_whitespace(content)
    blocks = content if isinstance(content, Sequence) else ()
    texts = [
        str(b.get("text", ""))
        for b in blocks
        if isinstance(b, Mapping) and b.get("type") == "text"
    ]
    return strip_whitespace("\n".join(texts))


def record_messages(current: TurnActivity, messages: Sequence[Mapping[str, Any]]) -> TurnActivity:
    """Count the user messages of ``messages`` not yet seen in this turn."""
    ids, chars, texts = list(current.message_ids), current.user_chars, list(current.user_texts)
    for m in messages:
        if len(ids) >= MESSAGE_IDS_KEPT:
            break
        text = user_text(m)
        ident = message_key(m)
        if text is None or not ident or ident in ids:
            continue
        ids.append(ident)
        chars += utf16_len(text)
        if text and len(texts) < USER_TEXTS_KEPT:
            texts.append(text[:USER_TEXT_CHARS])
    return attrs.evolve(current, message_ids=ids, user_chars=chars, user_texts=texts)


def record_tools(current: TurnActivity, events: Sequence[Mapping[str, Any]]) -> TurnActivity:
    """Set (not add) the turn's tool results and names from its session events."""
    mine = [e for e in events if e.get("turn") == current.turn]
    results = sum(1 for e in mine if e.get("type") == "tool/result")
    names = {str(e.get("name")) for e in mine if e.get("type") == "tool/call" and e.get("name")}
    return attrs.evolve(current, tool_results=results, tool_names=sorted(names)[:TOOL_NAMES_KEPT])
