"""What a host may pass with each lifecycle event, checked at the public boundary before the
event reaches the statechart: a wrong shape is ``InvalidInput`` and nothing is recorded or
persisted (a string turn, a message that is not a mapping, ``None`` for a list), and the
strings the flow would keep (a user message's id and counted text, a tool call's name) must
be storable text. Nothing else in a message is walked: pre_step runs on every step with the
whole conversation, so messages already counted in the turn are skipped.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from mnemon_sm import inputs
from mnemon_sm.errors import InvalidInput
from mnemon_sm.flows.lifecycle.scoring import message_key, user_text

__all__ = ["count", "messages", "session_source", "tool_events"]

COUNT_MAX = 2**53  # a turn or step number JSON keeps exactly


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


def messages(value: object, seen: Collection[str] = ()) -> Sequence[Mapping[str, Any]]:
    """Host messages: :func:`mappings` whose kept strings (see the module) are storable;
    messages whose id is in ``seen`` (already counted this turn) are not read again."""
    checked = mappings(value, "messages")
    for index, message in enumerate(checked):
        if message_key(message) in seen:
            continue
        text = user_text(message)
        if text is not None:
            inputs.text(str(message.get("id", "")), f"messages[{index}].id")
            inputs.text(text, f"messages[{index}] text")
    return checked


def tool_events(value: object) -> Sequence[Mapping[str, Any]]:
    """Session events: :func:`mappings` whose tool names are storable."""
    checked = mappings(value, "tool_events")
    for index, event in enumerate(checked):
        if event.get("type") == "tool/call" and event.get("name"):
            inputs.text(str(event.get("name")), f"tool_events[{index}].name")
    return checked


def session_source(value: object) -> str:
    return inputs.text(value, "session start source")
