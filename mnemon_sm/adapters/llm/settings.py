"""What every SDK-backed adapter shares: its settings, and the SDK client it builds.

An adapter names its SDK once (:class:`Sdk`: the package, the extra that installs it, the
sync and async client classes and the SDK's error class); :class:`Settings` checks the
arguments every adapter takes and builds the client, importing the SDK only then, so
``mnemon_sm`` imports without it and an adapter built without it raises ``InvalidConfig``
naming the extra to install.
"""

from __future__ import annotations

import importlib
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
        if client is None:
            client = self._sdk.client(name, self._async, base_url, api_key, timeout, max_retries)
        elif base_url is not None or api_key is not None:
            raise InvalidConfig(f"{name}: give either client or base_url/api_key")
        self.client: C = client
        self.model = model
        self.max_rounds = max_rounds
