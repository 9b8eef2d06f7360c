"""The inspector's ASGI app (Starlette); :mod:`.serve` runs it with uvicorn.

Read-only by construction: it is given a root opened with ``write_enabled = false`` (so a
search counts no access, the audit log is not written and no lifecycle is saved), it answers
``GET`` and ``HEAD`` only, and its pages call reads of the public API.

Access: bound to the loopback address unless a token is given; with a token every request
must carry it (``Authorization: Bearer <token>``, or the ``mnemon_inspect`` cookie, which
``?token=<token>`` sets once and strips from the address). The ``Host`` header must name the
address served (a page of another site cannot reach the app through DNS rebinding), and
every answer forbids framing, sniffing and scripts from elsewhere.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mnemon_sm.errors import InvalidInput, MnemonError
from mnemon_sm.inspector.html import page, tag
from mnemon_sm.inspector.pages import Page, agents, documents, flows, hot, recall, spaces
from mnemon_sm.root import MemoryRoot

__all__ = [
    "COOKIE",
    "LOOPBACK",
    "check_bind",
    "create_app",
    "host_name",
    "is_loopback",
    "shown_location",
]

COOKIE = "mnemon_inspect"
LOOPBACK = ("127.0.0.1", "::1", "localhost")
STATIC = Path(__file__).parent / "static"
HEADERS = {
    "content-security-policy": "default-src 'none'; script-src 'self'; "
    "style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}

#: A page: what it shows for the request's query and path parameters; None: no such page.
View = Callable[[MemoryRoot, Mapping[str, str]], Page | None]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to serve another address than the loopback one without a token."""
    if not is_loopback(host) and not token:
        raise InvalidInput(
            f"the inspector serves {host!r}, not a loopback address, only with --token "
            "(every request must then carry it)"
        )
    if token is not None and len(token) < 16:
        raise InvalidInput("a token is at least 16 characters")


def host_name(header: str) -> str:
    """The name in a ``Host`` header, without its port (``[::1]:8000`` is ``::1``)."""
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if header.count(":") == 1 else header


class _Guard:
    """Security headers on every answer; a ``Host`` header naming one of ``hosts`` (any when
    ``hosts`` holds ``*``); the token on every request when one is set."""

    def __init__(self, app: ASGIApp, token: str | None, hosts: Sequence[str]) -> None:
        self.app, self.token, self.hosts = app, token, frozenset(hosts)

    def _host_ok(self, scope: Scope) -> bool:
        if "*" in self.hosts:
            return True
        for key, value in scope["headers"]:
            if key.lower() == b"host":
                return host_name(value.decode("latin-1").lower()) in self.hosts
        return False

    def _carried(self, scope: Scope) -> tuple[bool, bool]:
        """(carried, in the query string) for this request."""
        assert self.token is not None
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        candidates = []
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            candidates.append(auth[7:].strip())
        for part in headers.get("cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE:
                candidates.append(value)
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        in_query = "token" in query
        if in_query:
            candidates.append(query["token"])
        ok = any(hmac.compare_digest(c.encode(), self.token.encode()) for c in candidates)
        return ok, in_query

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] += [(k.encode(), v.encode()) for k, v in HEADERS.items()]
            await send(message)

        response: Response | None = None
        if not self._host_ok(scope):
            response = PlainTextResponse("400: this Host is not served here", 400)
        elif self.token is not None:
            ok, in_query = self._carried(scope)
            if not ok:
                response = PlainTextResponse("401: this inspector needs its token", 401)
            elif in_query:  # set the cookie, then take the token out of the address
                rest = [
                    (k, v)
                    for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1"))
                    if k != "token"
                ]
                target = scope["path"] + (f"?{urlencode(rest)}" if rest else "")
                response = RedirectResponse(target, 303)
                response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict")
        if response is not None:
            await response(scope, receive, secured)
            return
        await self.app(scope, receive, secured)


def shown_location(location: str, home: str | None = None) -> str:
    """Where the root lives, as the header shows it: the home directory as ``~``."""
    home = (home if home is not None else str(Path.home())).rstrip("/")
    if home and (location == home or location.startswith(home + "/")):
        return "~" + location[len(home) :]
    return location


def _error(root: MemoryRoot, path: str, status: int, text: str) -> HTMLResponse:
    body = tag("p", text, class_="error")
    return HTMLResponse(
        page("Not available", path, body, location=shown_location(root.location)), status
    )


def create_app(
    root: MemoryRoot,
    *,
    token: str | None = None,
    hosts: Sequence[str] = LOOPBACK,
) -> Starlette:
    """The inspector of ``root``, which must be opened read-only (``write_enabled = false``).
    ``hosts``: the names a request's ``Host`` header may give (``*`` for any, only with a
    token)."""
    if root.config.write_enabled:
        raise InvalidInput("the inspector reads a root opened with write_enabled = false")
    if "*" in hosts and not token:
        raise InvalidInput("any Host header is accepted only with a token")

    def handler(view: View, nav: str) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            params = {**request.query_params, **request.path_params}
            try:
                found = await run_in_threadpool(view, root, params)  # reads: locks, I/O
            except MnemonError as exc:
                return _error(root, nav, 400, f"{type(exc).__name__}: {exc}")
            if found is None:
                return _error(root, nav, 404, "There is no such page.")
            return HTMLResponse(
                page(
                    found.title,
                    nav,
                    found.body,
                    location=shown_location(root.location),
                    refresh=found.refresh,
                    diagrams=found.diagrams,
                )
            )

        return endpoint

    routes = [
        Route("/", handler(hot.view, "/")),
        Route("/recall", handler(recall.view, "/recall")),
        Route("/spaces", handler(spaces.view, "/spaces")),
        Route("/spaces/{space}/related/{insight}", handler(spaces.related_view, "/spaces")),
        Route("/documents", handler(documents.view, "/documents")),
        Route("/agents", handler(agents.view, "/agents")),
        Route("/flows", handler(flows.view, "/flows")),
        Route("/flows/{flow}", handler(flows.flow_view, "/flows")),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    middleware = [Middleware(_Guard, token=token, hosts=hosts)]
    return Starlette(routes=routes, middleware=middleware)
