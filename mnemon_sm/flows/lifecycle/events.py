"""What a host may pass with each lifecycle event, checked at the public boundary before the
event reaches the statechart: a wrong shape is ``InvalidInput`` and nothing is recorded,
changed or persisted.

* ``turn``, ``step``, ``now_ms``: an ``int`` (not a bool, not a string) from 0 to 2**53.
* ``source`` of ``session_start``: one of :data:`SESSION_SOURCES` (the reference's).
* ``messages``: a list (or tuple) of messages. Every message the step reads is a mapping with
  string keys and a ``role`` from :data:`ROLES` (a reference-shaped message has one too; its
  ``source.kind`` is read as its role). Each *entered* message (the ones not seen before,
  :func:`~.scoring.entered`) is read whole: its ``id``, if any, a string or an int; its
  ``content`` absent, ``None``, a string or a list of parts/blocks, each a mapping with a
  string ``type`` (a ``text`` part's ``text`` a string, a ``tool_use`` block's ``name`` a
  non-empty string); its ``tool_calls``, if any, a list of ``{"function": {"name": <non-empty
  string>, ...}, ...}``. The strings the flow keeps (a user message's id and counted text, a
  tool name) must be storable text.

  Only the messages the step reads are checked: pre_step runs on every step, often with the
  whole conversation, and its work must not grow with it. Messages already counted are not
  read again: a re-sent conversation is checked in its remembered tail (the last
  :data:`~.scoring.TAIL_KEPT` messages it had, where :func:`~.scoring.entered` finds that it
  goes on), its last :data:`~.scoring.TAIL_KEPT` messages (remembered for the next step) and
  the messages after the part already seen; a cut or summarized one also in the messages read
  to find where the part seen ends; a list none of which was seen, whole. A malformed message
  among those is ``InvalidInput`` and nothing is recorded; one in the part already counted and
  not read again is passed back to the host untouched, as every message is.
* ``tool_events`` of ``turn_stopping``: a list of mappings with a string ``type``; a
  ``tool/call`` or ``tool/result`` event has a ``turn`` (a whole number as above), and a
  ``tool/call`` a non-empty, storable ``name``. Events of other types are allowed and ignored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mnemon_sm import inputs
from mnemon_sm.errors import InvalidInput
from mnemon_sm.flows.lifecycle.scoring import (
    TAIL_KEPT,
    Conversation,
    entered,
    role_of,
    user_text,
)

__all__ = ["ROLES", "SESSION_SOURCES", "count", "messages", "session_source", "tool_events"]

COUNT_MAX = 2**53  # a turn or step number JSON keeps exactly
ROLES = ("user", "assistant", "system", "developer", "tool", "function")
SESSION_SOURCES = ("startup", "resume", "clear", "compact", "adopted")
TOOL_EVENTS = ("tool/call", "tool/result")


def count(value: object, field: str) -> int:
    """A turn or step number: an ``int`` (not a bool) from 0 to 2**53."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= COUNT_MAX:
        raise InvalidInput(f"{field} must be a whole number from 0 to {COUNT_MAX}, not {value!r}")
    return value


def mappings(value: object, field: str) -> Sequence[Mapping[str, Any]]:
    """A list (or tuple) of mappings with string keys."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise InvalidInput(f"{field} must be a list of objects")
    for index, item in enumerate(value):
        if not isinstance(item, Mapping) or not all(isinstance(k, str) for k in item):
            raise InvalidInput(f"{field}[{index}] must be an object with string keys")
    return value


def _name(value: object, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInput(f"{field} must be a non-empty string")
    return inputs.text(value, field)


def _list(value: object, field: str) -> Sequence[Any]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise InvalidInput(f"{field} must be a list")
    return value


def _check_message(message: Mapping[str, Any], field: str) -> None:
    """An entered message, read whole (see the module)."""
    ident = message.get("id")
    if ident is not None and (isinstance(ident, bool) or not isinstance(ident, str | int)):
        raise InvalidInput(f"{field}.id must be a string or a whole number")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        for index, block in enumerate(_list(content, f"{field}.content")):
            where = f"{field}.content[{index}]"
            if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
                raise InvalidInput(f"{where} must be an object with a string type")
            if block["type"] == "text" and not isinstance(block.get("text"), str):
                raise InvalidInput(f"{where}.text must be a string")
            if block["type"] == "tool_use":
                _name(block.get("name"), f"{where}.name")
    calls = message.get("tool_calls")
    for index, call in enumerate(() if calls is None else _list(calls, f"{field}.tool_calls")):
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            raise InvalidInput(f"{field}.tool_calls[{index}] must have a function object")
        _name(function.get("name"), f"{field}.tool_calls[{index}].function.name")
    text = user_text(message)
    if text is not None:
        inputs.text(str(message.get("id", "")), f"{field}.id")
        inputs.text(text, f"{field} text")


def _check_shape(message: object, field: str) -> None:
    """A message as every step that reads it needs it: a mapping with string keys and a
    ``role`` from :data:`ROLES` (a ``source``, if any, an object with a string ``kind``)."""
    if not isinstance(message, Mapping) or not all(isinstance(k, str) for k in message):
        raise InvalidInput(f"{field} must be an object with string keys")
    role = message.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise InvalidInput(f"{field}.role must be one of {', '.join(ROLES)}")
    source = message.get("source")
    if source is not None and (
        not isinstance(source, Mapping) or not isinstance(role_of(message), str)
    ):
        raise InvalidInput(f"{field}.source must be an object with a string kind")


def messages(value: object, seen: Conversation | None = None) -> Sequence[Mapping[str, Any]]:
    """Host messages (see the module); ``seen``: the conversation already seen. Only the
    messages the step reads are checked: those :func:`~.scoring.entered` reads to find where
    the new ones start, the last :data:`~.scoring.TAIL_KEPT` (remembered) and the new ones
    (read whole); the work is proportional to the new messages, not to the conversation."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise InvalidInput("messages must be a list of objects")
    checked: Sequence[Mapping[str, Any]] = value
    shaped: set[int] = set()

    def shape(index: int) -> None:
        if index not in shaped:
            _check_shape(checked[index], f"messages[{index}]")
            shaped.add(index)

    start = entered(checked, seen, shape)
    for index in range(max(len(checked) - TAIL_KEPT, 0), len(checked)):
        shape(index)
    for index in range(start, len(checked)):
        shape(index)
        _check_message(checked[index], f"messages[{index}]")
    return checked


def tool_events(value: object) -> Sequence[Mapping[str, Any]]:
    """Session events (see the module)."""
    checked = mappings(value, "tool_events")
    for index, event in enumerate(checked):
        kind = event.get("type")
        if not isinstance(kind, str):
            raise InvalidInput(f"tool_events[{index}].type must be a string")
        if kind in TOOL_EVENTS:
            count(event.get("turn"), f"tool_events[{index}].turn")
        if kind == "tool/call":
            _name(event.get("name"), f"tool_events[{index}].name")
    return checked


def session_source(value: object) -> str:
    if not isinstance(value, str) or value not in SESSION_SOURCES:
        raise InvalidInput(f"session start source must be one of {', '.join(SESSION_SOURCES)}")
    return value
