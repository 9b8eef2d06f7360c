"""The asyncio facade: drive a storage root from an event loop without ever blocking it.

Every call runs the synchronous operation on a thread of the default executor
(``asyncio.to_thread``), so a maintenance round, a recall or a document archive that waits for
a worker never holds up the loop. An ``async def`` worker then runs as a task on *this* loop
(the operation tells the worker runner which loop it came from), so a host's async model
client, bound to its loop, just works. Lifecycle reviews are driven by
:class:`~mnemon_sm.flows.lifecycle.api.AsyncDriver`, whose
ticks run on the loop and return at once.

::

    root = await AsyncMemoryRoot.open("~/.mnemon", workers=MyAsyncWorkers())
    receipt = await root.hot.add("user", "User prefers concise replies")
    answer = await root.long_term.recall("deploy script")
    result = await root.tools.call("mnemon_recall", {"query": "deploy script"})
    agent = root.lifecycle("main")
    messages = await agent.pre_step(turn, 1, messages)
    driver = AsyncDriver(agent.sync)               # fires reviews on this loop
    await root.close()

Cancelling an awaiting coroutine does not stop the operation already running on its thread
(it completes, and its result is dropped); operations on one root stay serialized as in the
synchronous API.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mnemon_sm.agent_tools import AgentTools
from mnemon_sm.config import Config
from mnemon_sm.flows.lifecycle.api import AgentLifecycle
from mnemon_sm.flows.workers.runner import HOST_LOOP
from mnemon_sm.ports import Ports
from mnemon_sm.ports.workers import ToolDefinition, Workers
from mnemon_sm.root import MemoryRoot

__all__ = ["AsyncAgentTools", "AsyncFacade", "AsyncMemoryRoot"]


async def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    loop = asyncio.get_running_loop()
    token = HOST_LOOP.set(loop)  # copied into the thread's context by to_thread
    try:
        return await asyncio.to_thread(fn, *args, **kwargs)
    finally:
        HOST_LOOP.reset(token)


class AsyncFacade:
    """Any facade of a root (``hot``, ``context``, ``long_term``, ``documents``, an agent's
    lifecycle) with each public method turned into a coroutine function. ``sync`` is the
    wrapped object."""

    def __init__(self, target: object) -> None:
        self.sync = target

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        value = getattr(self.sync, name)
        if not callable(value):
            return value

        @functools.wraps(value)
        async def method(*args: Any, **kwargs: Any) -> Any:
            return await _call(value, *args, **kwargs)

        return method


class AsyncAgentTools:
    """The main agent's memory tools (:class:`~mnemon_sm.agent_tools.AgentTools`) for an
    asyncio host: the definitions are plain data, read at once; :meth:`call` runs the tool on
    a thread and is awaited."""

    def __init__(self, tools: AgentTools) -> None:
        self.sync = tools

    @property
    def names(self) -> tuple[str, ...]:
        return self.sync.names

    def definitions(self) -> tuple[ToolDefinition, ...]:
        return self.sync.definitions()

    def to_openai(self) -> list[dict[str, Any]]:
        return self.sync.to_openai()

    def to_anthropic(self) -> list[dict[str, Any]]:
        return self.sync.to_anthropic()

    def to_mcp(self) -> list[dict[str, Any]]:
        return self.sync.to_mcp()

    async def call(self, name: str, arguments: Mapping[str, Any] | str) -> dict[str, Any]:
        """:meth:`AgentTools.call <mnemon_sm.agent_tools.AgentTools.call>`, off the loop."""
        result: dict[str, Any] = await _call(self.sync.call, name, arguments)
        return result


class AsyncMemoryRoot:
    """A :class:`~mnemon_sm.root.MemoryRoot` for asyncio hosts.

    ``events`` is the root's event hub as it is (subscribing is instant; hooks run on the
    thread that made the change, so an asyncio host hands events to its loop with
    ``loop.call_soon_threadsafe``)."""

    def __init__(self, root: MemoryRoot) -> None:
        self.sync = root
        self.hot = AsyncFacade(root.hot)
        self.context = AsyncFacade(root.context)
        self.documents = AsyncFacade(root.documents)
        self.tools = AsyncAgentTools(root.tools)
        self.events = root.events
        self._long_term: AsyncFacade | None = None

    @classmethod
    async def open(
        cls,
        path: str | Path,
        config: Config | None = None,
        *,
        ports: Ports | None = None,
        workers: Workers | None = None,
    ) -> AsyncMemoryRoot:
        """Open the root on a thread (opening repairs it, which may touch the disk)."""
        root = await _call(MemoryRoot.open, path, config, ports=ports, workers=workers)
        return cls(root)

    @property
    def long_term(self) -> AsyncFacade:
        if self._long_term is None:
            self._long_term = AsyncFacade(self.sync.long_term)
        return self._long_term

    def lifecycle(self, agent_id: str) -> AsyncFacade:
        """The agent's lifecycle hooks as coroutines (``.sync`` is the
        :class:`~mnemon_sm.flows.lifecycle.api.AgentLifecycle`, for :class:`AsyncDriver`)."""
        agent: AgentLifecycle = self.sync.lifecycle(agent_id)
        return AsyncFacade(agent)

    async def close(self) -> None:
        await _call(self.sync.close)
