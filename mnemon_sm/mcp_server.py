"""A Model Context Protocol server over one storage root (``mnemon-sm mcp``).

Theory of operation
-------------------
An MCP client (a desktop assistant, an IDE agent) starts ``mnemon-sm mcp`` and talks to it
over standard input and output, or connects to it over streamable HTTP. The server is built
with the official ``mcp`` SDK (the ``[mcp]`` extra) on its low-level :class:`Server`, which
publishes JSON schemas as they are: nothing here declares a tool of its own.

* **Tools** are exactly ``root.tools`` (:class:`~mnemon_sm.agent_tools.AgentTools`): each
  listing asks :meth:`~AgentTools.definitions` (so a read-only root lists no mutating tool)
  and publishes name, description and input schema unchanged, with a ``readOnlyHint``
  annotation. A call goes to :meth:`~AgentTools.call` on a worker thread (an operation may
  wait on a lock or an LLM worker; the event loop keeps serving), and its JSON answer comes
  back as the text of the tool result and as its structured content. An answer of the shape
  ``{"error": {...}}`` (a typed ``MnemonError``: invalid arguments, ``ReadOnly``,
  ``NoMatch``, ...) is a tool result with ``isError`` set, which the model reads and acts on,
  as the protocol asks; only an unexpected exception (a bug) becomes a protocol error.
* **Resources** (``text/markdown``): ``mnemon://hot/USER.md`` and ``mnemon://hot/MEMORY.md``,
  the committed entries exactly as their projection files hold them; ``mnemon://context``,
  the per-turn context (routing guidance, then both files with their usage headers, as
  ``mnemon-sm context`` prints it); and every project Document as
  ``mnemon://documents/<id>`` (listed, archived ones included and marked; also a resource
  template). Reading a resource changes nothing: no access time, no write.
* **Prompt** ``mnemon_context``: the per-turn context as one user message, for clients that
  inject prompts rather than resources.
* The server's ``instructions`` are the root's routing guidance (none when it is off).

Transports: stdio (:func:`serve_stdio`; while it serves, the SDK points file descriptor 1 at
standard error, so nothing but protocol messages reaches the client) and streamable HTTP
(:func:`serve_http`, path ``/mcp``). HTTP listens on a loopback address unless the caller
allows another one (:func:`check_host`): the server has no authentication, and anyone who can
reach it can read and change the memory. On loopback the SDK's DNS-rebinding protection
checks the ``Host`` and ``Origin`` headers. The socket is bound before serving starts, so a
busy port is a typed error and port 0 picks a free one; the URL actually served is reported
to ``announce`` (the command line prints it on standard error).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import ipaddress
import json
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import anyio.to_thread
import uvicorn
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError

from mnemon_sm.agent_tools import MUTATING_TOOLS
from mnemon_sm.errors import InvalidInput, MnemonError, RequestRejected
from mnemon_sm.flows.hot.model import DELIMITER
from mnemon_sm.root import MemoryRoot

__all__ = [
    "CONTEXT_PROMPT",
    "CONTEXT_URI",
    "DOCUMENT_URI",
    "HOT_URIS",
    "build_server",
    "check_host",
    "context_text",
    "run_stdio",
    "serve_http",
    "serve_stdio",
]

SERVER_NAME = "mnemon"
CONTEXT_URI = "mnemon://context"
HOT_URIS = {"user": "mnemon://hot/USER.md", "memory": "mnemon://hot/MEMORY.md"}
DOCUMENT_URI = "mnemon://documents/"  # + a document id
CONTEXT_PROMPT = "mnemon_context"
MARKDOWN = "text/markdown"
HTTP_PATH = "/mcp"

_Ctx = ServerRequestContext[Any]


def context_text(root: MemoryRoot) -> str:
    """The per-turn context as ``mnemon-sm context`` prints it: the routing guidance (when on),
    a blank line, then both hot-memory files with their usage headers."""
    guidance, memory = root.context.routing_guidance(), root.context.runtime_memory()
    return f"{guidance}\n\n{memory}" if guidance else memory


def _hot_text(root: MemoryRoot, target: str) -> str:
    """The committed entries of ``target``, byte for byte what its projection file holds."""
    joined = DELIMITER.join(e.content for e in root.hot.snapshot().of(target))
    return joined + "\n" if joined else ""


def _protocol_error(exc: MnemonError) -> MCPError:
    """A typed error as a protocol error: a rejected request is the caller's (invalid
    params), anything else the server's; the error's JSON rides along as data."""
    code = types.INVALID_PARAMS if isinstance(exc, RequestRejected) else types.INTERNAL_ERROR
    return MCPError(code, exc.message, {"error": exc.to_json()})


def _installed_version() -> str:
    try:
        return importlib.metadata.version("mnemon-sm")
    except importlib.metadata.PackageNotFoundError:
        return ""  # a source checkout: the protocol allows an empty version


def build_server(root: MemoryRoot, *, version: str | None = None) -> Server[Any]:
    """An MCP server (not yet running) over ``root``'s tools, hot memory, context and
    Documents, announcing ``version`` (default: the installed distribution's). The root stays
    the caller's to close."""
    tools = root.tools

    async def list_tools(
        _: _Ctx, __: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=d.name,
                    description=d.description,
                    input_schema=dict(d.input_schema),
                    annotations=types.ToolAnnotations(read_only_hint=d.name not in MUTATING_TOOLS),
                )
                for d in tools.definitions()
            ]
        )

    async def call_tool(_: _Ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = params.arguments if params.arguments is not None else {}
        result = await anyio.to_thread.run_sync(tools.call, params.name, arguments)
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(result, ensure_ascii=False))],
            structured_content=result,
            is_error=set(result) == {"error"},  # AgentTools.call's shape of a typed error
        )

    def resources() -> list[types.Resource]:
        found = [
            types.Resource(
                uri=CONTEXT_URI,
                name="context",
                title="Per-turn memory context",
                description="Routing guidance and both hot-memory files, as added to every turn",
                mime_type=MARKDOWN,
            ),
            types.Resource(
                uri=HOT_URIS["user"],
                name="USER.md",
                description="Hot memory: who the user is",
                mime_type=MARKDOWN,
            ),
            types.Resource(
                uri=HOT_URIS["memory"],
                name="MEMORY.md",
                description="Hot memory: project and environment facts",
                mime_type=MARKDOWN,
            ),
        ]
        for record in root.documents.records():
            archived = " (archived)" if record.status != "active" else ""
            found.append(
                types.Resource(
                    uri=DOCUMENT_URI + record.id,
                    name=record.title,
                    description=(record.description or "Project Document") + archived,
                    mime_type=MARKDOWN,
                )
            )
        return found

    async def list_resources(
        _: _Ctx, __: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=await anyio.to_thread.run_sync(resources))

    async def list_templates(
        _: _Ctx, __: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        template = types.ResourceTemplate(
            uri_template=DOCUMENT_URI + "{id}",
            name="document",
            description="A project Document by id (from mnemon_document_search)",
            mime_type=MARKDOWN,
        )
        return types.ListResourceTemplatesResult(resource_templates=[template])

    def read(uri: str) -> str:
        if uri == CONTEXT_URI:
            return context_text(root)
        for target, hot_uri in HOT_URIS.items():
            if uri == hot_uri:
                return _hot_text(root, target)
        if uri.startswith(DOCUMENT_URI) and len(uri) > len(DOCUMENT_URI):
            record, body = root.documents.get(uri.removeprefix(DOCUMENT_URI))
            if body is None:
                raise InvalidInput(f"the file of document {record.id} is missing")
            return body
        raise InvalidInput(f"unknown resource {uri!r}")

    async def read_resource(
        _: _Ctx, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        try:
            text = await anyio.to_thread.run_sync(read, params.uri)
        except MnemonError as exc:
            raise _protocol_error(exc) from None
        contents = types.TextResourceContents(uri=params.uri, mime_type=MARKDOWN, text=text)
        return types.ReadResourceResult(contents=[contents])

    prompt = types.Prompt(
        name=CONTEXT_PROMPT,
        title="Memory context",
        description="The per-turn memory context: routing guidance and both hot-memory files",
    )

    async def list_prompts(
        _: _Ctx, __: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[prompt])

    async def get_prompt(_: _Ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        if params.name != CONTEXT_PROMPT:
            raise _protocol_error(InvalidInput(f"unknown prompt {params.name!r}"))
        try:
            text = await anyio.to_thread.run_sync(context_text, root)
        except MnemonError as exc:
            raise _protocol_error(exc) from None
        message = types.PromptMessage(role="user", content=types.TextContent(text=text))
        return types.GetPromptResult(description=prompt.description, messages=[message])

    return Server(
        SERVER_NAME,
        version=_installed_version() if version is None else version,
        title="mnemon memory",
        instructions=root.context.routing_guidance() or None,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


async def serve_stdio(root: MemoryRoot, *, version: str | None = None) -> None:
    """Serve ``root`` over standard input and output until the client closes its end."""
    server = build_server(root, version=version)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def run_stdio(root: MemoryRoot, *, version: str | None = None) -> None:
    """:func:`serve_stdio` on an event loop of its own (blocks until the client leaves)."""
    anyio.run(functools.partial(serve_stdio, root, version=version))


def check_host(host: str, *, allow_remote: bool = False) -> None:
    """Refuse to listen on ``host`` unless it is loopback (``localhost`` or a loopback
    address) or ``allow_remote`` is set.

    Raises:
        InvalidInput: a non-loopback host without ``allow_remote``.
    """
    if allow_remote or _is_loopback(host):
        return
    raise InvalidInput(
        f"refusing to listen on {host!r}: the MCP server has no authentication, so anyone who"
        " can reach it can read and change the memory; use a loopback address such as"
        " 127.0.0.1, or pass --allow-remote"
    )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def _security(host: str) -> TransportSecuritySettings | None:
    """DNS-rebinding protection for a loopback listener (``Host`` and ``Origin`` checked);
    none for a remote one, whose clients name it in ways this process cannot know."""
    if not _is_loopback(host):
        return None
    bare = host.strip("[]")
    named = f"[{bare}]" if ":" in bare else bare
    hosts = sorted({"127.0.0.1", "localhost", "[::1]", named})
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{h}:*" for h in hosts],
        allowed_origins=[f"http://{h}:*" for h in hosts],
    )


def _listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (0: a free port), or ``InvalidInput``."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise InvalidInput(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise InvalidInput(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def serve_http(
    root: MemoryRoot,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    allow_remote: bool = False,
    announce: Callable[[str], None] | None = None,
    version: str | None = None,
) -> None:
    """Serve ``root`` over streamable HTTP at ``http://host:port/mcp`` until SIGINT or
    SIGTERM, which stop it gracefully and make this return. ``announce`` is told the URL once
    listening.

    Raises:
        InvalidInput: a non-loopback host without ``allow_remote`` (:func:`check_host`), or
            the address cannot be bound (in use, unknown host).
    """
    check_host(host, allow_remote=allow_remote)
    server = build_server(root, version=version)
    app = server.streamable_http_app(
        streamable_http_path=HTTP_PATH, host=host, transport_security=_security(host)
    )
    sock = _listen(host, port)
    with sock:
        bound = sock.getsockname()[1]
        shown = f"[{host.strip('[]')}]" if ":" in host else host
        if announce is not None:
            announce(f"http://{shown}:{bound}{HTTP_PATH}")
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        with _graceful_stop():
            uvicorn.Server(config).run(sockets=[sock])


@contextlib.contextmanager
def _graceful_stop() -> Iterator[None]:
    """SIGINT and SIGTERM end serving and return normally (the caller then closes the root).

    uvicorn shuts down gracefully on either signal, restores the handlers it found and raises
    the signal again; the handlers found are these, which take note and return. Signals are
    only handled on the main thread: elsewhere nothing is installed.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stops = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, lambda *_: None) for sig in stops}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
