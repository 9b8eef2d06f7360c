"""What every SDK-backed adapter shares: its settings, and the SDK client it builds.

An adapter names its SDK once (:class:`Sdk`: the package, the extra that installs it, the
sync and async client classes and the SDK's error class); :class:`Settings` checks the
arguments every adapter takes and builds the client, importing the SDK only then, so
``mnemon_sm`` imports without it and an adapter built without it raises ``InvalidConfig``
naming the extra to install.
"""

from __future__ import annotations

import asyncio
import importlib
import threading
import weakref
from typing import Any, ClassVar, Generic, TypeVar

import attrs

from mnemon_sm.adapters.llm.loop import DEFAULT_MAX_ROUNDS
from mnemon_sm.errors import InvalidConfig

__all__ = ["Sdk", "Settings"]

C = TypeVar("C")


@attrs.frozen
class Sdk:
    """An SDK as an adapter uses it."""

    package: str  # the module to import, e.g. "openai"
    sync_client: str  # its client classes, e.g. "OpenAI" / "AsyncOpenAI"
    async_client: str
    error: str  # the SDK's base error class (raised for settings it refuses)

    def client(
        self,
        name: str,
        use_async: bool,
        base_url: str | None,
        api_key: str | None,
        timeout: float,
        retries: int,
    ) -> Any:
        """A new client of the SDK, with its own retries (429, 5xx) and timeout."""
        try:
            # optional: the SDK (the extra named after it) is imported only when a client is
            # built
            module = importlib.import_module(self.package)
        except ImportError as exc:
            raise InvalidConfig(
                f"{name} needs the {self.package} package: pip install 'mnemon-sm[{self.package}]'"
            ) from exc
        factory = getattr(module, self.async_client if use_async else self.sync_client)
        try:
            return factory(
                base_url=base_url, api_key=api_key, timeout=timeout, max_retries=retries
            )
        except getattr(module, self.error) as exc:
            raise InvalidConfig(f"{name}: {exc}") from None


class Settings(Generic[C]):
    """The settings and the client of an adapter (sync or async: :attr:`_async`)."""

    _async: ClassVar[bool] = False
    _sdk: ClassVar[Sdk]

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
    ) -> None:
        name = type(self).__name__
        if max_rounds < 1:
            raise InvalidConfig(f"{name}: max_rounds must be at least 1")
        self._built = client is None  # a client made here (not the host's)
        if client is None:
            client = self._sdk.client(name, self._async, base_url, api_key, timeout, max_retries)
        elif base_url is not None or api_key is not None:
            raise InvalidConfig(f"{name}: give either client or base_url/api_key")
        self.client: C = client
        self._client_settings = (name, base_url, api_key, timeout, max_retries)
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, C] = (
            weakref.WeakKeyDictionary()
        )
        self._by_loop_guard = threading.Lock()
        self._served = False  # the client above went to a loop already
        self.model = model
        self.max_rounds = max_rounds

    def loop_client(self) -> C:
        """The client for a run on the running event loop. An async client keeps its
        connections on the loop that used them: runs without a host loop each have a loop (and
        a thread) of their own, and one client shared by two of them at once can fail with a
        connection error. So a client this adapter built serves the first loop that asks, and
        every other loop gets one of its own, dropped with the loop. A client the host passed
        in is the host's to share: always that one."""
        if not self._built:
            return self.client
        loop = asyncio.get_running_loop()
        with self._by_loop_guard:
            found = self._by_loop.get(loop)
            if found is None:
                found = self._new_client() if self._served else self.client
                self._served = True
                self._by_loop[loop] = found
            return found

    def _new_client(self) -> C:
        name, base_url, api_key, timeout, max_retries = self._client_settings
        made: C = self._sdk.client(name, self._async, base_url, api_key, timeout, max_retries)
        return made
