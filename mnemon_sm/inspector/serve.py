"""Serving the inspector: open a root read-only and run the app with uvicorn, in the
foreground (``mnemon-sm inspect``) or on a thread (:class:`Running`, for tests and hosts that
embed it)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import attrs
import uvicorn

from mnemon_sm.config import Config
from mnemon_sm.errors import StorageError
from mnemon_sm.inspector.app import LOOPBACK, check_bind, create_app, is_loopback
from mnemon_sm.root import MemoryRoot

__all__ = ["Running", "open_read_only", "serve"]


def open_read_only(root: str | Path, config: Config | None = None) -> MemoryRoot:
    """``root`` opened with ``write_enabled = false`` (``config``'s other settings kept)."""
    return MemoryRoot.open(root, attrs.evolve(config or Config(), write_enabled=False))


def _hosts(host: str) -> tuple[str, ...]:
    """The names a request's ``Host`` header may give for a server bound to ``host``."""
    if is_loopback(host):
        return LOOPBACK
    return ("*",) if host in ("0.0.0.0", "::") else (host,)


class _Server(uvicorn.Server):
    """uvicorn's server, telling when it listens (or gave up)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()
        self.on_ready: Callable[[], object] | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets)
        finally:
            self.ready.set()
        if self.started and self.on_ready is not None:
            self.on_ready()


def serve(
    root: MemoryRoot,
    *,
    host: str = "127.0.0.1",
    port: int = 8377,
    token: str | None = None,
    announce: Callable[[str], object] | None = None,
) -> None:
    """Serve ``root``'s inspector until interrupted; ``announce`` is told the URL once the
    server listens."""
    check_bind(host, token)
    app = create_app(root, token=token, hosts=_hosts(host))
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
    server = _Server(config)
    if announce is not None:
        shown = f"[{host}]" if ":" in host else host
        server.on_ready = lambda: announce(f"http://{shown}:{port}/")
    server.run()


class Running:
    """The inspector of ``root`` served on a thread, on a free loopback port: ``url`` once
    entered; leaving stops the server."""

    def __init__(self, root: MemoryRoot, *, token: str | None = None) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        app = create_app(root, token=token)
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
        self._server = _Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    def __enter__(self) -> Running:
        self._thread.start()
        if not self._server.ready.wait(10) or not self._server.started:
            self.__exit__(None, None, None)
            raise StorageError("the inspector did not start")
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.should_exit = True
        self._thread.join(10)
        self._sock.close()
