"""``OpenAIWorkers``: LLM workers over the OpenAI Chat Completions API (the ``[openai]`` extra).

Theory of operation
-------------------
One run is one conversation (:class:`_ChatConversation`) driven by the shared tool-call loop
(:func:`~mnemon_sm.adapters.llm.loop.run_tool_loop`): the system message is the request's
persona with the result's JSON schema (:func:`~mnemon_sm.adapters.llm.loop.system_text`), the
user message is its prompt, and every granted tool (``tools.definitions``) is offered as a
function tool whose ``parameters`` are the definition's ``input_schema``. The model's tool
calls (``message.tool_calls[].function.arguments``, a JSON text) go to ``tools.call``; each
result goes back as a ``tool`` message; the final message's text is returned for the host's
lenient parse.

The official ``openai`` SDK makes every call, so any server that speaks the protocol works
through ``base_url`` (vLLM, llama.cpp, Ollama, LiteLLM, ...). The SDK's own machinery does the
retries (``max_retries``: exponential backoff on connection errors, 408, 409, 429 and 5xx,
honouring ``retry-after-ms`` / ``retry-after``) and the per-request ``timeout``. A failure
the SDK gives up on is raised; the host reports it as ``WorkerFailed`` (redacted).

The output cap (``request.max_tokens``) is sent as ``max_tokens`` by default, the field every
compatible server accepts; OpenAI's own API deprecates it in favour of
``max_completion_tokens`` (which its reasoning models require), so ``token_field="auto"``
sends ``max_completion_tokens`` when the client's base URL is ``api.openai.com`` and
``max_tokens`` elsewhere. Pass ``token_field`` to choose.

:class:`AsyncOpenAIWorkers` is the same adapter over ``openai.AsyncOpenAI`` with an ``async
def run`` (the host runs it as a task on its event loop and cancels it when it stops
waiting).

The SDK is imported when an adapter is built without a client, so ``mnemon_sm`` imports
without it; building one without the SDK raises ``InvalidConfig`` naming the extra.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from mnemon_sm.adapters.llm.loop import (
    DEFAULT_MAX_ROUNDS,
    ModelTurn,
    ToolCall,
    ToolResult,
    run_tool_loop,
    run_tool_loop_async,
    system_text,
)
from mnemon_sm.adapters.llm.settings import Sdk, Settings
from mnemon_sm.errors import InvalidConfig, WorkerFailed
from mnemon_sm.ports.workers import ToolBox, WorkerRequest

if TYPE_CHECKING:
    from openai import AsyncOpenAI, OpenAI
    from openai.types.chat import ChatCompletion

__all__ = ["AsyncOpenAIWorkers", "OpenAIWorkers"]

TokenField = Literal["auto", "max_tokens", "max_completion_tokens"]
C = TypeVar("C", "OpenAI", "AsyncOpenAI")


class _Settings(Settings[C]):
    _sdk = Sdk("openai", "OpenAI", "AsyncOpenAI", "OpenAIError")

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
        client: C | None = None,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
        token_field: TokenField = "auto",
    ) -> None:
        if token_field not in ("auto", "max_tokens", "max_completion_tokens"):
            raise InvalidConfig(f"{type(self).__name__}: unknown token_field {token_field!r}")
        super().__init__(
            model=model,
            base_url=base_url,
            api_key=api_key,
            timeout=timeout,
            max_retries=max_retries,
            client=cast(Any, client),  # mypy does not carry a constrained C through super()
            max_rounds=max_rounds,
        )
        if token_field == "auto":
            host = str(getattr(self.client.base_url, "host", "") or "")
            token_field = "max_completion_tokens" if host == "api.openai.com" else "max_tokens"
        self.token_field: str = token_field


class OpenAIWorkers(_Settings["OpenAI"]):
    """Workers backed by a Chat Completions model with tool calling.

    Args:
        model: the model name the server knows.
        base_url: the API's base URL (``.../v1``); None: the SDK's default
            (``OPENAI_BASE_URL`` or OpenAI's API).
        api_key: None: the SDK reads ``OPENAI_API_KEY``. A local server that wants no key
            still needs some text here.
        timeout: seconds the SDK waits for one HTTP request.
        max_retries: retries of one model call the SDK makes (429, 5xx, connection errors).
        client: an ``openai.OpenAI`` the host already has (then ``base_url`` and ``api_key``
            must not be given; its own timeout and retries apply).
        max_rounds: model calls one run may make.
        token_field: which request field carries ``request.max_tokens`` (see the module).

    Raises:
        InvalidConfig: the ``openai`` package is missing, the SDK refused the settings
            (no API key), a bad ``token_field`` or ``max_rounds``, or a client given with
            client settings.
    """

    def run(self, request: WorkerRequest, tools: ToolBox) -> str:
        """Run the worker's conversation to its final text (see the module)."""
        conversation = _SyncChat(self, request, tools)
        return run_tool_loop(conversation, tools, max_rounds=self.max_rounds)


class AsyncOpenAIWorkers(_Settings["AsyncOpenAI"]):
    """:class:`OpenAIWorkers` over ``openai.AsyncOpenAI``: the same arguments (``client``:
    an ``AsyncOpenAI``), an ``async def run``."""

    _async = True

    async def run(self, request: WorkerRequest, tools: ToolBox) -> str:
        """Run the worker's conversation to its final text (see the module)."""
        conversation = _AsyncChat(self, request, tools)
        return await run_tool_loop_async(conversation, tools, max_rounds=self.max_rounds)


class _ChatConversation:
    """One run's Chat Completions messages (the model call itself is the subclass's)."""

    def __init__(self, owner: _Settings[Any], request: WorkerRequest, tools: ToolBox) -> None:
        self._owner = owner
        self._messages: list[Any] = [  # the SDK's message TypedDicts, built as dicts
            {"role": "system", "content": system_text(request)},
            {"role": "user", "content": request.prompt},
        ]
        self._params: dict[str, Any] = {owner.token_field: request.max_tokens}
        definitions = tools.definitions
        if definitions:  # some compatible servers refuse an empty tool list
            self._params["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": d.name,
                        "description": d.description,
                        "parameters": dict(d.input_schema),
                    },
                }
                for d in definitions
            ]

    @staticmethod
    def _read(response: ChatCompletion) -> ModelTurn:
        if not response.choices:
            raise WorkerFailed("the model's response held no choice")
        message = response.choices[0].message
        calls = tuple(
            ToolCall(call.id, call.function.name, call.function.arguments)
            for call in message.tool_calls or ()
            if call.type == "function"
        )
        return ModelTurn(message.content or "", calls)

    def answer(self, turn: ModelTurn, results: Sequence[ToolResult]) -> None:
        self._messages.append(
            {
                "role": "assistant",
                "content": turn.text or None,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": _json_text(call.arguments)},
                    }
                    for call in turn.tool_calls
                ],
            }
        )
        self._messages.extend(
            {"role": "tool", "tool_call_id": result.call.id, "content": result.content}
            for result in results
        )


class _SyncChat(_ChatConversation):
    def __init__(self, owner: OpenAIWorkers, request: WorkerRequest, tools: ToolBox) -> None:
        super().__init__(owner, request, tools)
        self._client = owner.client

    def ask(self) -> ModelTurn:
        response = self._client.chat.completions.create(
            model=self._owner.model, messages=self._messages, **self._params
        )
        return self._read(response)


class _AsyncChat(_ChatConversation):
    def __init__(self, owner: AsyncOpenAIWorkers, request: WorkerRequest, tools: ToolBox) -> None:
        super().__init__(owner, request, tools)
        self._client = owner.loop_client()

    async def ask(self) -> ModelTurn:
        response = await self._client.chat.completions.create(
            model=self._owner.model, messages=self._messages, **self._params
        )
        return self._read(response)


def _json_text(arguments: object) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)
