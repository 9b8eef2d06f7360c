"""A loopback HTTP server that speaks the OpenAI and Anthropic wire protocols, scripted.

Theory of operation
-------------------
:class:`LoopbackModel` is an HTTP server on ``127.0.0.1`` (a free port, stdlib ``http.server``
on a thread of its own) that answers

- ``POST /v1/chat/completions`` as OpenAI's Chat Completions API does, and
- ``POST /v1/messages`` as Anthropic's Messages API does,

so the real SDKs (and the adapters built on them) run against it unchanged: point an OpenAI
client at :attr:`LoopbackModel.openai_url` and an Anthropic client at
:attr:`LoopbackModel.anthropic_url`. It is a context manager; leaving it releases any hanging
request and stops the server.

What the "model" does is scripted by the host of the test: a callable that receives each
request (:class:`LoopbackRequest`: the protocol and the parsed body, with neutral views of
the system text, the prompt, the tools offered, the token cap and the tool results sent back)
and returns one of

- :class:`Reply`: text and/or :class:`ToolCall` s, rendered in the protocol's shape (OpenAI:
  ``choices[0].message`` with ``tool_calls[].function.arguments`` as a JSON *text* and
  ``finish_reason`` ``tool_calls`` or ``stop``; Anthropic: ``content`` blocks ``text`` and
  ``tool_use`` and ``stop_reason`` ``tool_use`` or ``end_turn``; ids, model and usage in both);
- :class:`Fault`: an HTTP error status with a body (by default the protocol's error object)
  and headers (``retry-after-ms`` keeps an SDK's retry fast);
- :class:`Hang`: no answer: the request blocks until :meth:`LoopbackModel.release` or the
  server closes, then the connection is dropped (for client timeouts).

Instead of a callable, a sequence of these can be given: each request takes the next one, and
a request past the end gets a 400 saying so. Every request is recorded, in order, in
:attr:`LoopbackModel.requests` before the model sees it, faults and hangs included.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

import attrs

__all__ = [
    "Fault",
    "Hang",
    "LoopbackModel",
    "LoopbackRequest",
    "Reply",
    "SeenToolResult",
    "ToolCall",
]

Protocol = Literal["openai", "anthropic"]

_PATHS: dict[str, Protocol] = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}


@attrs.frozen
class ToolCall:
    """A tool call the scripted model makes.

    Attributes:
        name: the tool's name.
        arguments: a JSON-like value (sent as JSON: as a text for OpenAI, as the ``input``
            object for Anthropic), or a ``str`` sent as is for OpenAI (to send malformed JSON)
            and decoded for Anthropic when it is JSON.
        id: the call's id; None: one is generated (``call_N`` / ``toolu_N``).
    """

    name: str
    arguments: object = attrs.Factory(dict)
    id: str | None = None


@attrs.frozen
class Reply:
    """The model's answer: ``text`` and/or ``tool_calls``. ``stop`` overrides the finish
    reason (OpenAI ``finish_reason``, Anthropic ``stop_reason``), e.g. ``length`` /
    ``max_tokens``; by default it follows from whether tools are called."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    stop: str | None = None


@attrs.frozen
class Fault:
    """An HTTP error: ``status``, ``body`` (None: the protocol's error object with
    ``message``) and extra response ``headers``."""

    status: int
    message: str = "scripted fault"
    body: object = None
    headers: Mapping[str, str] = attrs.Factory(dict)


@attrs.frozen
class Hang:
    """No answer until the server is released or closed; then the connection is dropped."""


@attrs.frozen
class SeenToolResult:
    """A tool result the client sent back: the call's id, the content text, the error mark
    (Anthropic's ``is_error``; always False for OpenAI)."""

    call_id: str
    content: str
    is_error: bool = False

    def json(self) -> Any:
        """The content decoded as JSON."""
        return json.loads(self.content)


@attrs.frozen
class LoopbackRequest:
    """One request the server received: its protocol, path, parsed JSON body and headers."""

    protocol: Protocol
    path: str
    body: Mapping[str, Any]
    headers: Mapping[str, str]

    @property
    def system(self) -> str:
        """The system text (OpenAI: the system messages; Anthropic: ``system``)."""
        if self.protocol == "anthropic":
            return _text_of(self.body.get("system", ""))
        return "".join(
            _text_of(m.get("content")) for m in self._messages if m.get("role") == "system"
        )

    @property
    def prompt(self) -> str:
        """The text of the first user message."""
        first = next((m for m in self._messages if m.get("role") == "user"), {})
        return _text_of(first.get("content", ""))

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The names of the tools offered."""
        tools = self.body.get("tools") or []
        if self.protocol == "openai":
            return tuple(t["function"]["name"] for t in tools)
        return tuple(t["name"] for t in tools)

    @property
    def tool_schemas(self) -> dict[str, Any]:
        """Each offered tool's argument schema, by name."""
        tools = self.body.get("tools") or []
        if self.protocol == "openai":
            return {t["function"]["name"]: t["function"].get("parameters") for t in tools}
        return {t["name"]: t.get("input_schema") for t in tools}

    @property
    def max_tokens(self) -> int | None:
        """The output cap sent (``max_tokens`` or ``max_completion_tokens``)."""
        value = self.body.get("max_tokens", self.body.get("max_completion_tokens"))
        return value if isinstance(value, int) else None

    @property
    def rounds(self) -> int:
        """How many assistant turns the conversation already holds."""
        return sum(1 for m in self._messages if m.get("role") == "assistant")

    def tool_results(self, round: int | None = None) -> list[SeenToolResult]:
        """The tool results sent back after the model's turn number ``round`` (0 is its
        first turn); None: after its last turn (the results this call answers)."""
        messages = self._messages
        turns = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
        if round is None:
            round = len(turns) - 1
        if not 0 <= round < len(turns):
            return []
        end = turns[round + 1] if round + 1 < len(turns) else len(messages)
        found: list[SeenToolResult] = []
        for message in messages[turns[round] + 1 : end]:
            if self.protocol == "openai" and message.get("role") == "tool":
                found.append(
                    SeenToolResult(message["tool_call_id"], _text_of(message.get("content")))
                )
            elif self.protocol == "anthropic" and isinstance(message.get("content"), list):
                for block in message["content"]:
                    if block.get("type") == "tool_result":
                        found.append(
                            SeenToolResult(
                                block["tool_use_id"],
                                _text_of(block.get("content", "")),
                                bool(block.get("is_error", False)),
                            )
                        )
        return found

    @property
    def _messages(self) -> list[dict[str, Any]]:
        messages = self.body.get("messages")
        return list(messages) if isinstance(messages, list) else []


Step = Reply | Fault | Hang
Model = Callable[[LoopbackRequest], Step]


class LoopbackModel:
    """The scripted server (see the module). Use it as a context manager.

    Args:
        model: a callable ``(LoopbackRequest) -> Reply | Fault | Hang``, or a sequence of
            those answers taken in order.
        model_name: the ``model`` reported in replies when the request names none.
    """

    def __init__(self, model: Model | Sequence[Step], *, model_name: str = "loopback") -> None:
        if callable(model):
            self._model: Model = model
        else:
            script = iter(list(model))
            lock = threading.Lock()

            def scripted(request: LoopbackRequest) -> Step:
                with lock:
                    step = next(script, None)
                return step or Fault(400, "the loopback script has no more replies")

            self._model = scripted
        self.model_name = model_name
        #: Every request received, in order.
        self.requests: list[LoopbackRequest] = []
        self._lock = threading.Lock()
        self._released = threading.Event()
        self._ids = itertools.count(1)
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},  # so closing takes no more than that
            name="loopback-model",
            daemon=True,
        )
        self._thread.start()

    # -- addresses ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_url(self) -> str:
        """The ``base_url`` for an OpenAI client (``.../v1``)."""
        return f"{self.url}/v1"

    @property
    def anthropic_url(self) -> str:
        """The ``base_url`` for an Anthropic client (the server's root)."""
        return self.url

    # -- control --------------------------------------------------------------------------

    def bodies(self, protocol: Protocol | None = None) -> list[Mapping[str, Any]]:
        """The bodies of the recorded requests (of one protocol)."""
        with self._lock:
            return [r.body for r in self.requests if protocol in (None, r.protocol)]

    def release(self) -> None:
        """Let every hanging request (and any later :class:`Hang`) end at once."""
        self._released.set()

    def close(self) -> None:
        """Release hangs and stop the server."""
        self._released.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> LoopbackModel:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the handler's side ---------------------------------------------------------------

    def _record(self, request: LoopbackRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _answer(self, request: LoopbackRequest) -> Step:
        try:
            return self._model(request)
        except Exception as exc:  # a broken script answers 500, the test sees it fail
            return Fault(500, f"the scripted model raised {type(exc).__name__}: {exc}")

    def _wait_released(self) -> None:
        self._released.wait()

    def _next_id(self) -> int:
        return next(self._ids)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    owner: LoopbackModel


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def do_POST(self) -> None:
        owner = self.server.owner
        path = self.path.split("?", 1)[0]
        protocol = _PATHS.get(path)
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        if protocol is None:
            self._send(404, {"error": {"message": f"no route {path}", "type": "not_found"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send(400, _error_body(protocol, 400, "the body is not JSON"))
            return
        request = LoopbackRequest(
            protocol, path, body, {k.lower(): v for k, v in self.headers.items()}
        )
        owner._record(request)
        step = owner._answer(request)
        if isinstance(step, Hang):
            owner._wait_released()
            self.close_connection = True
            return
        if isinstance(step, Fault):
            payload = (
                step.body
                if step.body is not None
                else _error_body(protocol, step.status, step.message)
            )
            self._send(step.status, payload, step.headers)
            return
        self._send(200, _render(protocol, step, body, owner))

    def _send(self, status: int, payload: object, headers: Mapping[str, str] = {}) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


def _render(
    protocol: Protocol, reply: Reply, body: Mapping[str, Any], owner: LoopbackModel
) -> Any:
    n = owner._next_id()
    model = body.get("model") or owner.model_name
    usage_in = max(1, len(json.dumps(body.get("messages", ""))) // 4)
    usage_out = max(1, len(reply.text) // 4 + 8 * len(reply.tool_calls))
    if protocol == "openai":
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        message["refusal"] = None
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id or f"call_{n}_{i}",
                    "type": "function",
                    "function": {"name": call.name, "arguments": _arguments_text(call.arguments)},
                }
                for i, call in enumerate(reply.tool_calls)
            ]
        finish = reply.stop or ("tool_calls" if reply.tool_calls else "stop")
        return {
            "id": f"chatcmpl-loopback-{n}",
            "object": "chat.completion",
            "created": 1_700_000_000 + n,
            "model": model,
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            ],
            "usage": {
                "prompt_tokens": usage_in,
                "completion_tokens": usage_out,
                "total_tokens": usage_in + usage_out,
            },
        }
    content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    content += [
        {
            "type": "tool_use",
            "id": call.id or f"toolu_{n}_{i}",
            "name": call.name,
            "input": _arguments_value(call.arguments),
        }
        for i, call in enumerate(reply.tool_calls)
    ]
    return {
        "id": f"msg_loopback_{n}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": reply.stop or ("tool_use" if reply.tool_calls else "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": usage_in, "output_tokens": usage_out},
    }


def _arguments_text(arguments: object) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _arguments_value(arguments: object) -> object:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except json.JSONDecodeError:
            return arguments
    return arguments


def _error_body(protocol: Protocol, status: int, message: str) -> dict[str, Any]:
    if protocol == "openai":
        kind = {429: "rate_limit_exceeded"}.get(
            status, "server_error" if status >= 500 else "invalid_request_error"
        )
        return {"error": {"message": message, "type": kind, "param": None, "code": None}}
    kind = {429: "rate_limit_error", 529: "overloaded_error"}.get(
        status, "api_error" if status >= 500 else "invalid_request_error"
    )
    return {"type": "error", "error": {"type": kind, "message": message}}


def _text_of(content: object) -> str:
    """A message content as text: a string, or the text of its text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""
