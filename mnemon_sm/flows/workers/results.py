"""The lenient reading of a worker's result: one JSON object, even when a model sent it as text.

Theory of operation
-------------------
A ``Workers`` adapter should return the result as JSON-like data (a ``dict``). Models often
hand back text instead: the object alone, or the object in a Markdown code fence. Before the
strict validation (:func:`~mnemon_sm.convert.structure`), a result that is a ``str`` goes
through :func:`read_result_text`, which accepts exactly:

- the text of one JSON object, with whitespace around it;
- one Markdown code fence holding one JSON object: an opening line of three backticks,
  optionally tagged ``json``, then the object, then a closing line of three backticks; with
  whitespace around the fence.

Anything else is refused with the reason (:class:`NotOneObject`): text before or after the
fence, two objects, a JSON array or scalar, a fence of another language, invalid JSON. A
refused text is handed on unchanged (:func:`lenient_result`), so the strict validation refuses
it as every other non-object is refused, with the same typed error as before. Pure functions.
"""

from __future__ import annotations

import json
import re

__all__ = ["NotOneObject", "lenient_result", "read_result_text", "refusal"]

# One fence: ``` or ```json on a line of its own, the body, ``` on a line of its own.
_FENCE = re.compile(r"\A```[ \t]*(?P<tag>[^\n`]*?)[ \t]*\r?\n(?P<body>.*?)\r?\n?[ \t]*```\Z", re.S)


class NotOneObject(ValueError):
    """A text result that is not one JSON object (bare or in one code fence); the message
    says why."""


def read_result_text(text: str) -> dict[str, object]:
    """The JSON object ``text`` holds, bare or in one Markdown code fence.

    Raises:
        NotOneObject: it holds anything else.
    """
    stripped = text.strip()
    body, where = stripped, "the text"
    if stripped.startswith("```"):
        fence = _FENCE.match(stripped)
        if fence is None:
            raise NotOneObject("the text is not one whole Markdown code fence")
        if fence["tag"].lower() not in ("", "json"):
            raise NotOneObject(f"the code fence is tagged {fence['tag'][:20]!r}, not json")
        body, where = fence["body"], "the code fence"
    elif not stripped.startswith("{"):
        raise NotOneObject("the text does not start with a JSON object or a Markdown code fence")
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        extra = exc.msg == "Extra data"
        why = "more than one JSON value, or text after it" if extra else exc.msg
        raise NotOneObject(f"{where} is not one JSON object ({why})") from None
    if type(value) is not dict:
        raise NotOneObject(f"{where} holds a JSON {_json_kind(value)}, not an object")
    return value


def lenient_result(raw: object) -> object:
    """``raw`` with a text result read as the JSON object it holds (:func:`read_result_text`);
    any other value, or a text that holds no single object, unchanged (the strict validation
    refuses it)."""
    if type(raw) is not str:
        return raw
    try:
        return read_result_text(raw)
    except NotOneObject:
        return raw


def refusal(raw: object) -> str | None:
    """Why a text result was not read as an object (None when ``raw`` is no text, or was
    read)."""
    if type(raw) is not str:
        return None
    try:
        read_result_text(raw)
    except NotOneObject as exc:
        return str(exc)
    return None


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"
