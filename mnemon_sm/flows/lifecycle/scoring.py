"""Deterministic activity scoring and what counts toward it (reference 11.1, 11.2). Pure.

score = min(floor(user_chars / 50), 3) + turns + min(floor(tool_results / 5), 2) + diversity,
diversity = 0 below 3 unique tools, 1 at 3, 2 at 4 or more; eligible at score >= 5.

What counts
-----------
Messages come in three shapes, all read the same way: OpenAI Chat Completions (``role``,
``content`` a string or a list of parts, ``tool_calls``; a ``role: "tool"`` message with
``tool_call_id`` is a tool result), Anthropic Messages (``content`` a string or a list of
blocks: ``text``, ``tool_use`` ``{id, name, input}``, ``tool_result`` ``{tool_use_id,
content}``) and the reference host's shape (an ``id`` and a ``source.kind``, which then stands
for the role). No ``id`` is needed.

* User characters: the UTF-16 code units of the text parts/blocks of a user message (a string
  content is one text part), joined by a newline and trimmed. Images, tool results and every
  other block are not text; assistant, system and tool messages, and our own cue
  (:func:`~mnemon_sm.flows.lifecycle.cues.is_own_message`), never count.
* Tool results: per turn, the larger of the ``tool/result`` session events the host passes at
  ``turn_stopping`` (set, never added: repeated notifications do not double count) and the
  tool results found in the turn's messages (``role: "tool"`` messages and ``tool_result``
  blocks). Both describe the same calls when a host passes both, so they are never summed.
* Unique tools (diversity): the union, over all turns since the last clear, of the names of
  ``tool/call`` session events and of the tool calls found in messages
  (``tool_calls[].function.name``, ``tool_use.name``), any tool, completed or not.

Which messages are new (counted once)
-------------------------------------
A host may pass only the messages entered at each step (the reference host) or the whole
conversation every step (the usual way with the OpenAI and Anthropic APIs), and may cut or
summarize its front. A message is counted once, when it is *entered*: when it comes after the
part of the conversation already seen. :class:`Conversation` remembers that part by its
length and the digests (:func:`digest`, of the role, id, content and tool fields) of its last
:data:`TAIL_KEPT` messages, whatever the conversation's length; :func:`entered` finds where
the new messages start:

1. the conversation was re-sent and grew at its end (its messages at the remembered length
   end with the remembered tail): the messages past that length;
2. else the front was cut or summarized: the messages after the latest place where the whole
   remembered tail (two messages or more) occurs, or, when the list now starts inside the
   tail, after the two or more of its last messages that open the list (or, when system or
   developer messages were put first, a summary, after the one or more that follow them);
3. else (none of it is there: a host that passes only new messages, or a new conversation):
   every message.

So re-sending the history counts nothing twice, and a message repeated word for word later
in the conversation is counted again (it is at a new place). What cannot be told apart
without ids: a host that passes only new messages and repeats, in order, what ended its
previous call (the whole previous list, or two or more of its last messages) is taken to be
re-sending them, and they are not counted again. A message with an ``id`` is, besides,
counted at most once per turn (the reference rule).

A step's work is proportional to its new messages, not to the conversation: messages already
counted are not read again. To find where the new ones start, :func:`entered` reads the
remembered tail's place (a re-sent conversation: :data:`TAIL_KEPT` messages), or, when it is
not there, the messages from the end back to its latest occurrence (a cut front), else
every message (none of the tail is there, or the list starts inside it: then the system or
developer messages a summary put first, and fewer than :data:`TAIL_KEPT` after them, are
read again; all are new but those). :func:`advance` then remembers the last
:data:`TAIL_KEPT` messages, computing each digest once. Only those messages are read (and
checked by :mod:`.events`): the part already counted is passed back to the host untouched.

Bounded however long a session runs (the reference keeps every turn in memory until a review
clears them): the newest :data:`ACTIVITY_KEPT` turns are kept whole, older ones are folded
into :class:`Earlier`, which keeps exactly what the score needs (their count, characters and
tool results, and up to :data:`TOOL_NAMES_KEPT` tool names, more than the diversity score can
use). A turn keeps at most :data:`MESSAGE_IDS_KEPT` message ids; a message with an id past
them is not counted (every partial score saturates long before), and an id longer than
:data:`ID_CHARS` is kept as a digest. The conversation is remembered in :data:`TAIL_KEPT`
short digests.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from mnemon_sm.convert import register_camel_case, string_tuple
from mnemon_sm.flows.lifecycle.cues import is_own_message
from mnemon_sm.text import strip_whitespace, utf16_len

__all__ = [
    "THRESHOLD",
    "Conversation",
    "Earlier",
    "Score",
    "TurnActivity",
    "advance",
    "digest",
    "entered",
    "fold",
    "message_key",
    "remember",
    "role_of",
    "score",
    "tool_names_in",
    "tool_results_in",
    "user_text",
]

THRESHOLD = 5
USER_TEXTS_KEPT = 4  # user messages per turn kept for the review worker
USER_TEXT_CHARS = 1000  # characters of each kept message
ACTIVITY_KEPT = 8  # newest turns kept whole; older ones are folded into Earlier
MESSAGE_IDS_KEPT = 64  # message ids a turn keeps (and user messages it counts)
TOOL_NAMES_KEPT = 16  # tool names a turn, or the folded turns, keep
ID_CHARS = 64  # a longer message id is kept as a digest
TAIL_KEPT = 8  # digests of the last messages seen, to find where new messages start
DIGEST_CHARS = 16  # hex characters of a message digest


@attrs.frozen
class TurnActivity:
    turn: int
    message_ids: tuple[str, ...] = attrs.field(default=(), converter=string_tuple)
    user_chars: int = 0
    tool_results: int = 0
    tool_names: tuple[str, ...] = attrs.field(default=(), converter=string_tuple)
    user_texts: tuple[str, ...] = attrs.field(default=(), converter=string_tuple)
    message_tool_results: int = 0  # tool results found in the turn's messages
    message_tool_names: tuple[str, ...] = attrs.field(default=(), converter=string_tuple)

    @property
    def results(self) -> int:
        """The turn's tool results: events and messages describe the same calls."""
        return max(self.tool_results, self.message_tool_results)

    @property
    def names(self) -> tuple[str, ...]:
        """The turn's tool names, from events and messages."""
        extra = [n for n in self.message_tool_names if n not in self.tool_names]
        return (*self.tool_names, *extra)


@attrs.frozen
class Conversation:
    """Where the conversation already seen ends: its length and the digests of its last
    :data:`TAIL_KEPT` messages, oldest first (see the module)."""

    length: int
    tail: tuple[str, ...] = attrs.field(default=(), converter=string_tuple)


@attrs.frozen
class Earlier:
    """Turns folded out of the kept activity, up to ``through_turn``: their sums."""

    through_turn: int
    turns: int = 0
    user_chars: int = 0
    tool_results: int = 0
    tool_names: tuple[str, ...] = attrs.field(default=(), converter=string_tuple)


for _cls in (TurnActivity, Conversation, Earlier):
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
        tools.update(t.names)
    return score_of(
        base.user_chars + sum(t.user_chars for t in turns),
        base.turns + len(turns),
        base.tool_results + sum(t.results for t in turns),
        len(tools),
    )


def fold(activity: dict[int, TurnActivity], earlier: Earlier | None) -> Earlier | None:
    """Fold the oldest turns of ``activity`` (in place) into ``earlier`` until at most
    :data:`ACTIVITY_KEPT` remain; returns the new ``earlier``. The score is unchanged."""
    while len(activity) > ACTIVITY_KEPT:
        old = activity.pop(min(activity))
        base = earlier or Earlier(old.turn)
        names = list(base.tool_names)
        names += [n for n in old.names if n not in names]
        earlier = Earlier(
            max(base.through_turn, old.turn),
            base.turns + 1,
            base.user_chars + old.user_chars,
            base.tool_results + old.results,
            names[:TOOL_NAMES_KEPT],
        )
    return earlier


def message_key(message: Mapping[str, Any]) -> str:
    """How a message's id is kept in its turn ("" when it has none)."""
    ident = str(message.get("id", ""))
    if len(ident) <= ID_CHARS:
        return ident
    return "sha256:" + hashlib.sha256(ident.encode("utf-8", "surrogatepass")).hexdigest()


def role_of(message: Mapping[str, Any]) -> object:
    """Who a message is from: its ``source.kind`` when it has one (the reference host's
    shape), else its ``role``."""
    source = message.get("source")
    return source.get("kind") if isinstance(source, Mapping) else message.get("role")


def _blocks(message: Mapping[str, Any]) -> Sequence[Any]:
    """A message's content as a list of parts/blocks (a string content is one text part)."""
    content = message.get("content")
    if isinstance(content, str):
        return ({"type": "text", "text": content},)
    return content if isinstance(content, Sequence) else ()


def user_text(message: Mapping[str, Any]) -> str | None:
    """The counted text of a host message: its text parts/blocks joined by a newline and
    trimmed, when it is a user message (None otherwise)."""
    if role_of(message) != "user":
        return None
    texts = [
        str(b.get("text", ""))
        for b in _blocks(message)
        if isinstance(b, Mapping) and b.get("type") == "text"
    ]
    return strip_whitespace("\n".join(texts))


def tool_names_in(message: Mapping[str, Any]) -> list[str]:
    """The names of the tool calls a message makes: OpenAI ``tool_calls[].function.name``,
    Anthropic ``tool_use`` blocks' ``name``."""
    names: list[str] = []
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, Sequence) and not isinstance(calls, str) else ():
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping) and function.get("name"):
            names.append(str(function["name"]))
    for block in _blocks(message):
        if isinstance(block, Mapping) and block.get("type") == "tool_use" and block.get("name"):
            names.append(str(block["name"]))
    return names


def tool_results_in(message: Mapping[str, Any]) -> int:
    """The tool results a message carries: an OpenAI ``role: "tool"`` message is one, an
    Anthropic ``tool_result`` block is one each."""
    if message.get("role") == "tool":
        return 1
    return sum(
        1 for b in _blocks(message) if isinstance(b, Mapping) and b.get("type") == "tool_result"
    )


def digest(message: Mapping[str, Any]) -> str:
    """A short, stable digest of what a message says: its role (or source kind), id,
    content and tool fields (other keys a host may add or drop are left out)."""
    fields = [
        role_of(message),
        message.get("id"),
        message.get("content"),
        message.get("tool_calls"),
        message.get("tool_call_id"),
    ]
    try:
        text = json.dumps(fields, sort_keys=True, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):  # keys that do not sort, a cycle: still a stable text
        text = repr(fields)
    data = text.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:DIGEST_CHARS]


class _Reader:
    """Reads ``messages`` for :func:`entered` and :func:`advance`: each message's digest is
    computed once, when first needed, and ``check(i)`` (when given) runs before every read of
    message ``i``, so a caller can validate exactly the messages a step reads."""

    def __init__(
        self, messages: Sequence[Mapping[str, Any]], check: Callable[[int], object] | None
    ) -> None:
        self.messages, self.check = messages, check
        self.digests: dict[int, str] = {}

    def message(self, i: int) -> Mapping[str, Any]:
        if self.check is not None:
            self.check(i)
        return self.messages[i]

    def digest(self, i: int) -> str:
        if i not in self.digests:
            self.digests[i] = digest(self.message(i))
        return self.digests[i]

    def tail(self) -> tuple[str, ...]:
        """The digests of the last :data:`TAIL_KEPT` messages, oldest first."""
        n = len(self.messages)
        return tuple(self.digest(i) for i in range(max(n - TAIL_KEPT, 0), n))


def remember(messages: Sequence[Mapping[str, Any]]) -> Conversation:
    """The conversation ``messages`` as :func:`entered` will next look for it."""
    return Conversation(len(messages), _Reader(messages, None).tail())


def entered(
    messages: Sequence[Mapping[str, Any]],
    seen: Conversation | None,
    check: Callable[[int], object] | None = None,
) -> int:
    """The index of the first message of ``messages`` not already seen (see the module):
    0 when none of what was seen is there. ``check(i)``, when given, runs before message
    ``i`` is read; only the messages the module names are read (a re-sent conversation: the
    remembered tail's place), never the part already seen otherwise."""
    return _entered(_Reader(messages, check), seen)


def advance(
    messages: Sequence[Mapping[str, Any]], seen: Conversation | None
) -> tuple[int, Conversation]:
    """:func:`entered` and :func:`remember` of ``messages`` at once: each message's digest
    is computed once (the remembered tail is mostly the one just matched)."""
    reader = _Reader(messages, None)
    start = _entered(reader, seen)
    return start, Conversation(len(messages), reader.tail())


def _entered(reader: _Reader, seen: Conversation | None) -> int:
    if seen is None or not seen.tail:
        return 0
    tail, at, total = seen.tail, reader.digest, len(reader.messages)
    k = len(tail)

    def ends_at(p: int, j: int) -> bool:  # messages[p-j+1 .. p] == the tail's last j
        return all(at(p - i) == tail[k - 1 - i] for i in range(j))

    n = seen.length
    if k <= n <= total and ends_at(n - 1, k):
        return n  # re-sent, grown at its end
    for p in range(total - 1, k - 2, -1) if k >= 2 else ():
        if ends_at(p, k):
            return p + 1  # the front was cut: after the latest whole tail
    lead = 0  # a summary the host put first: system or developer messages
    while lead < total and role_of(reader.message(lead)) in ("system", "developer"):
        lead += 1
    least = 1 if lead else 2  # after a summary, one message of the tail is enough
    for j in range(min(k - 1, total - lead), least - 1, -1):
        if ends_at(lead + j - 1, j):
            return lead + j  # the list starts inside the tail (after a summary)
    return 0


def record_messages(current: TurnActivity, messages: Sequence[Mapping[str, Any]]) -> TurnActivity:
    """Count the entered ``messages`` (see the module) in the turn: user text, tool calls and
    tool results; our own cue is skipped, and so is a message whose id this turn has seen."""
    ids, chars, texts = list(current.message_ids), current.user_chars, list(current.user_texts)
    results, names = current.message_tool_results, list(current.message_tool_names)
    known = set(ids)  # looked up by id; ``ids`` keeps their order
    for m in messages:
        if is_own_message(m):
            continue
        ident = message_key(m)
        if ident:
            if ident in known or len(ids) >= MESSAGE_IDS_KEPT:
                continue
            ids.append(ident)
            known.add(ident)
        text = user_text(m)
        if text is not None:
            chars += utf16_len(text)
            if text and len(texts) < USER_TEXTS_KEPT:
                texts.append(text[:USER_TEXT_CHARS])
        results += tool_results_in(m)
        for name in tool_names_in(m):
            if name not in names and len(names) < TOOL_NAMES_KEPT:
                names.append(name)
    return attrs.evolve(
        current,
        message_ids=ids,
        user_chars=chars,
        user_texts=texts,
        message_tool_results=results,
        message_tool_names=names,
    )


def record_tools(current: TurnActivity, events: Sequence[Mapping[str, Any]]) -> TurnActivity:
    """Set (not add) the turn's tool results and names from its session events."""
    mine = [e for e in events if e.get("turn") == current.turn]
    results = sum(1 for e in mine if e.get("type") == "tool/result")
    names = {str(e.get("name")) for e in mine if e.get("type") == "tool/call" and e.get("name")}
    return attrs.evolve(current, tool_results=results, tool_names=sorted(names)[:TOOL_NAMES_KEPT])
