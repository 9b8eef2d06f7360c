"""The tool-call loop every LLM adapter runs, free of any provider's SDK.

Theory of operation
-------------------
A function-calling model works in rounds: the host sends the conversation so far, the model
answers with text and, possibly, tool calls; the host runs each tool call and sends the
results back; the model's round without a tool call is its final answer. The provider
adapters (:mod:`~mnemon_sm.adapters.llm.openai`, :mod:`~mnemon_sm.adapters.llm.anthropic`)
speak their wire protocol through a :class:`Conversation` (one model call per :meth:`ask`,
the round's results appended by :meth:`answer`); :func:`run_tool_loop` owns everything else,
the same for every provider:

- **At most ``max_rounds`` model calls.** A model that keeps calling tools past the cap
  fails the run (``WorkerFailed``) instead of spending tokens forever.
- **Cancellation is checked before every model call**: once ``tools.cancellation`` is set
  (the host timed out or stopped waiting) no new model call is started and the run ends
  with ``WorkerCancelled``; the host has already thrown the run away.
- **Each tool call goes to ``tools.call``.** Arguments must be one JSON object (a JSON text
  of one, as OpenAI sends them, or the object itself, as Anthropic does). Arguments that are
  not (invalid JSON, an array, a scalar) are not a crash: the model is told, as that call's
  result, ``{"error": {"type": "InvalidArguments", "message": ...}}`` and may try again.
  A ``MnemonError`` from the tool (it refused the arguments, the store failed) is answered
  the same way with the error's class name and message. ``ToolRefused`` (a tool not granted,
  the run over) and its subclass ``WorkerCancelled`` are not the model's to handle: they end
  the run.
- **The final text is returned as is**: the host reads it leniently (bare JSON or one
  Markdown code fence, :mod:`mnemon_sm.flows.workers.results`) and validates it strictly.

:func:`run_tool_loop_async` is the same loop for async clients (an ``async def run``, which
the host runs as a task it cancels when it stops waiting).

Every tool result is sent to the model as JSON text. The request's texts say what to return
in words; :func:`system_text` adds the exact JSON schema of the result to the persona, since
the prompt itself carries only the task and its data.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import attrs

from mnemon_sm.errors import MnemonError, ToolRefused, WorkerCancelled, WorkerFailed
from mnemon_sm.ports.workers import ToolBox, WorkerRequest

__all__ = [
    "DEFAULT_MAX_ROUNDS",
    "AsyncConversation",
    "Conversation",
    "ModelTurn",
    "ToolCall",
    "ToolResult",
    "call_tool",
    "run_tool_loop",
    "run_tool_loop_async",
    "system_text",
]

#: Model calls one run may make by default (each round of tool calls is one).
DEFAULT_MAX_ROUNDS = 16


@attrs.frozen
class ToolCall:
    """One tool call the model asked for.

    Attributes:
        id: the provider's id of the call (its result is sent back under it).
        name: the tool's name.
        arguments: as the model sent them: a JSON text (OpenAI) or a decoded value
            (Anthropic); :func:`call_tool` checks that it is one JSON object.
    """

    id: str
    name: str
    arguments: object


@attrs.frozen
class ModelTurn:
    """What one model call returned: its text (may be empty) and its tool calls (none when
    the model is done)."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()


@attrs.frozen
class ToolResult:
    """The answer to one tool call: ``content`` is JSON text; ``is_error`` when it is an
    ``{"error": ...}`` object (Anthropic marks such results)."""

    call: ToolCall
    content: str
    is_error: bool = False


class Conversation(Protocol):
    """One run's conversation in a provider's wire format."""

    def ask(self) -> ModelTurn:
        """Make one model call with the conversation so far."""
        ...

    def answer(self, turn: ModelTurn, results: Sequence[ToolResult]) -> None:
        """Append the model's turn and the results of its tool calls."""
        ...


class AsyncConversation(Protocol):
    """:class:`Conversation` for an async client: :meth:`ask` is a coroutine."""

    async def ask(self) -> ModelTurn: ...

    def answer(self, turn: ModelTurn, results: Sequence[ToolResult]) -> None: ...


def run_tool_loop(
    conversation: Conversation, tools: ToolBox, *, max_rounds: int = DEFAULT_MAX_ROUNDS
) -> str:
    """Drive ``conversation`` until the model answers without a tool call; its final text.

    Raises:
        WorkerCancelled: the run was cancelled (checked before every model call), or a tool
            call found it cancelled.
        ToolRefused: the model called a tool it was not granted, or the run has ended.
        WorkerFailed: more than ``max_rounds`` model calls would be needed.
        Exception: whatever the provider's client raised (the host reports it as
            ``WorkerFailed``).
    """
    for _ in range(max_rounds):
        _check_cancelled(tools)
        turn = conversation.ask()
        if not turn.tool_calls:
            return turn.text
        results = [call_tool(tools, call) for call in turn.tool_calls]
        conversation.answer(turn, results)
    raise _too_many_rounds(max_rounds)


async def run_tool_loop_async(
    conversation: AsyncConversation, tools: ToolBox, *, max_rounds: int = DEFAULT_MAX_ROUNDS
) -> str:
    """:func:`run_tool_loop` for an async client (the same rules; the run's task may also
    be cancelled, which cancels the model call in flight). Tool calls run inline: the tool
    box is synchronous and answers from local stores."""
    for _ in range(max_rounds):
        _check_cancelled(tools)
        turn = await conversation.ask()
        if not turn.tool_calls:
            return turn.text
        results = [call_tool(tools, call) for call in turn.tool_calls]
        conversation.answer(turn, results)
    raise _too_many_rounds(max_rounds)


def call_tool(tools: ToolBox, call: ToolCall) -> ToolResult:
    """Run one tool call; a problem the model can fix is answered as an error result.

    Raises:
        ToolRefused: the tool was not granted or the run has ended (``WorkerCancelled``:
            the run was cancelled).
    """
    arguments = _arguments(call.arguments)
    if isinstance(arguments, str):
        return _error(call, "InvalidArguments", arguments)
    try:
        result = tools.call(call.name, arguments)
    except (ToolRefused, WorkerCancelled):
        raise
    except MnemonError as exc:
        return _error(call, type(exc).__name__, str(exc))
    return ToolResult(call, json.dumps(result, ensure_ascii=False))


def system_text(request: WorkerRequest) -> str:
    """The system text for a run: the persona, then how to finish (one JSON object valid
    under ``request.result_schema``; the request's texts describe the result in words, the
    schema gives its exact shape)."""
    schema = json.dumps(request.result_schema, ensure_ascii=False, sort_keys=True)
    return (
        f"{request.persona.rstrip()}\n\n"
        "When you are done, answer with exactly one JSON object and no other text, valid "
        f"under this JSON schema:\n{schema}\n"
    )


def _too_many_rounds(max_rounds: int) -> WorkerFailed:
    return WorkerFailed(
        f"the model still called tools after {max_rounds} rounds without a final answer"
    )


def _check_cancelled(tools: ToolBox) -> None:
    cancellation = tools.cancellation
    if cancellation.is_set:
        raise WorkerCancelled(
            f"the run was cancelled ({cancellation.reason}); no further model call was made"
        )


def _arguments(raw: object) -> Mapping[str, Any] | str:
    """The arguments as one JSON object, or why they are not one."""
    value = raw
    if isinstance(raw, str | bytes):
        try:
            value = json.loads(raw or "{}")
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return f"the arguments are not valid JSON ({exc}); send one JSON object"
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        kind = type(value).__name__
        return f"the arguments must be one JSON object, not {_json_kind(value, kind)}"
    return value


def _json_kind(value: object, kind: str) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    for cls, name in names.items():
        if isinstance(value, cls):
            return name
    return "a number" if isinstance(value, int | float) else kind


def _error(call: ToolCall, kind: str, message: str) -> ToolResult:
    payload = {"error": {"type": kind, "message": message}}
    return ToolResult(call, json.dumps(payload, ensure_ascii=False), is_error=True)
