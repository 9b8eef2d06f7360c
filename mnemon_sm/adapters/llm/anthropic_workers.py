"""``AnthropicWorkers``: LLM workers over the Anthropic Messages API (the ``[anthropic]`` extra).

Theory of operation
-------------------
One run is one conversation (:class:`_MessagesConversation`) driven by the shared tool-call
loop (:func:`~mnemon_sm.adapters.llm.loop.run_tool_loop`): ``system`` is the request's persona
with the result's JSON schema (:func:`~mnemon_sm.adapters.llm.loop.system_text`), the first
user message is its prompt, every granted tool (``tools.definitions``) is offered with its
``input_schema``, and ``max_tokens`` is ``request.max_tokens``. Each ``tool_use`` block of the
model's answer goes to ``tools.call``; the results go back in one user message of
``tool_result`` blocks (``is_error`` set on an ``{"error": ...}`` result); the text blocks of
the answer without a ``tool_use`` are returned for the host's lenient parse.

The official ``anthropic`` SDK makes every call (``base_url`` reaches a proxy or a compatible
server). The SDK's own machinery does the retries (``max_retries``: exponential backoff on
connection errors, 408, 409, 429 and 5xx, honouring ``retry-after-ms`` / ``retry-after``) and
the per-request ``timeout``. A failure the SDK gives up on is raised; the host reports it as
``WorkerFailed`` (redacted).

:class:`AsyncAnthropicWorkers` is the same adapter over ``anthropic.AsyncAnthropic`` with an
``async def run`` (the host runs it as a task on its event loop and cancels it when it stops
waiting).

The SDK is imported when an adapter is built without a client, so ``mnemon_sm`` imports
without it; building one without the SDK raises ``InvalidConfig`` naming the extra.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from mnemon_sm.adapters.llm.loop import (
    ModelTurn,
    ToolCall,
    ToolResult,
    run_tool_loop,
    run_tool_loop_async,
    system_text,
)
from mnemon_sm.adapters.llm.settings import Sdk, Settings
from mnemon_sm.ports.workers import ToolBox, WorkerRequest

if TYPE_CHECKING:
    from anthropic import Anthropic, AsyncAnthropic
    from anthropic.types import Message

__all__ = ["AnthropicWorkers", "AsyncAnthropicWorkers"]

C = TypeVar("C", "Anthropic", "AsyncAnthropic")


class _Settings(Settings[C]):
    _sdk = Sdk("anthropic", "Anthropic", "AsyncAnthropic", "AnthropicError")


class AnthropicWorkers(_Settings["Anthropic"]):
    """Workers backed by a Claude model with tool use.

    Args:
        model: the model name.
        base_url: the API's base URL; None: the SDK's default (``ANTHROPIC_BASE_URL`` or
            Anthropic's API).
        api_key: None: the SDK reads ``ANTHROPIC_API_KEY``.
        timeout: seconds the SDK waits for one HTTP request.
        max_retries: retries of one model call the SDK makes (429, 5xx, connection errors).
        client: an ``anthropic.Anthropic`` the host already has (then ``base_url`` and
            ``api_key`` must not be given; its own timeout and retries apply).
        max_rounds: model calls one run may make.

    Raises:
        InvalidConfig: the ``anthropic`` package is missing, a bad ``max_rounds``, or a
            client given with client settings.
    """

    def run(self, request: WorkerRequest, tools: ToolBox) -> str:
        """Run the worker's conversation to its final text (see the module)."""
        conversation = _SyncMessages(self, request, tools)
        return run_tool_loop(conversation, tools, max_rounds=self.max_rounds)


class AsyncAnthropicWorkers(_Settings["AsyncAnthropic"]):
    """:class:`AnthropicWorkers` over ``anthropic.AsyncAnthropic``: the same arguments
    (``client``: an ``AsyncAnthropic``), an ``async def run``."""

    _async = True

    async def run(self, request: WorkerRequest, tools: ToolBox) -> str:
        """Run the worker's conversation to its final text (see the module)."""
        conversation = _AsyncMessages(self, request, tools)
        return await run_tool_loop_async(conversation, tools, max_rounds=self.max_rounds)


class _MessagesConversation:
    """One run's Messages API conversation (the model call itself is the subclass's)."""

    def __init__(self, owner: _Settings[Any], request: WorkerRequest, tools: ToolBox) -> None:
        self._owner = owner
        self._messages: list[Any] = [  # the SDK's message TypedDicts, built as dicts
            {"role": "user", "content": request.prompt}
        ]
        self._params: dict[str, Any] = {
            "system": system_text(request),
            "max_tokens": request.max_tokens,
        }
        definitions = tools.definitions
        if definitions:
            self._params["tools"] = [
                {
                    "name": d.name,
                    "description": d.description,
                    "input_schema": dict(d.input_schema),
                }
                for d in definitions
            ]

    @staticmethod
    def _read(response: Message) -> ModelTurn:
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in response.content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use":
                calls.append(ToolCall(block.id, block.name, block.input))
        return ModelTurn("".join(texts), tuple(calls))

    def answer(self, turn: ModelTurn, results: Sequence[ToolResult]) -> None:
        content: list[dict[str, Any]] = [{"type": "text", "text": turn.text}] if turn.text else []
        content += [
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
            for call in turn.tool_calls
        ]
        self._messages.append({"role": "assistant", "content": content})
        self._messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": result.call.id,
                        "content": result.content,
                        "is_error": result.is_error,
                    }
                    for result in results
                ],
            }
        )


class _SyncMessages(_MessagesConversation):
    def __init__(self, owner: AnthropicWorkers, request: WorkerRequest, tools: ToolBox) -> None:
        super().__init__(owner, request, tools)
        self._client = owner.client

    def ask(self) -> ModelTurn:
        response = self._client.messages.create(
            model=self._owner.model, messages=self._messages, **self._params
        )
        return self._read(response)


class _AsyncMessages(_MessagesConversation):
    def __init__(
        self, owner: AsyncAnthropicWorkers, request: WorkerRequest, tools: ToolBox
    ) -> None:
        super().__init__(owner, request, tools)
        self._client = owner.loop_client()

    async def ask(self) -> ModelTurn:
        response = await self._client.messages.create(
            model=self._owner.model, messages=self._messages, **self._params
        )
        return self._read(response)
