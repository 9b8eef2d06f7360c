"""The worker port: how the library asks an LLM worker for a result.

Theory of operation
-------------------
A flow builds a :class:`WorkerRequest` (the worker kind, its persona and prompt -- package
texts in our words, with every piece of request data rendered as untrusted data that cannot
close or open a block of the prompt -- the names of the tools it may call, the JSON schema of
its result and a token cap) and hands it, with a :class:`ToolBox`, to the root's
:class:`~mnemon_sm.flows.workers.runner.Delegate`, which runs the worker on its own thread with a
timeout (see :mod:`mnemon_sm.flows.workers.runner`).

The host's ``Workers`` adapter runs the worker however it likes (an LLM with function calling,
or the built-in deterministic workers) and may call only the tools of the box it is handed;
the box refuses anything not granted, stages every write, and dies when the run ends. The
result is then validated strictly (cattrs, unknown keys refused) and checked for *content* by
the flow: staged writes are applied only when the result agrees with them.

Host integrators plug in their LLM by implementing ``Workers.run`` (plain or ``async def``).
What a model needs to call the tools is on the box: :attr:`ToolBox.definitions` gives, for
each granted tool, a :class:`ToolDefinition` (its description, the JSON schema of its
arguments, camelCase keys as the model writes them, and the shape of its JSON result), ready
to hand to a function-calling API.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Awaitable, Mapping
from typing import Any, Protocol, runtime_checkable

import attrs

__all__ = ["Cancellation", "ToolBox", "ToolDefinition", "WorkerRequest", "Workers"]


class Cancellation:
    """A run's cancellation as a ``Workers`` adapter sees it (``tools.cancellation``).

    Poll :attr:`is_set` or block on :meth:`wait` (for example between model calls); once it
    is set the tool box refuses every call with ``WorkerCancelled`` and nothing the worker
    staged will be written.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason = ""

    @property
    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the run is cancelled or ``timeout`` seconds pass; True if cancelled."""
        return self._event.wait(timeout)

    def _set(self, reason: str) -> None:
        self.reason = reason
        self._event.set()


@attrs.frozen
class WorkerRequest:
    """Everything a worker needs.

    Attributes:
        kind: ``recall``, ``write`` or ``answer`` (later flows add more).
        persona: the worker's standing instructions.
        prompt: the task; request data appears in it as untrusted, indented data.
        tools: the only tool names the worker may call.
        result_schema: JSON schema of the result the worker must return.
        max_tokens: the output token cap the host should give the model.
        data: the request data, structured (what the prompt renders as text).
    """

    kind: str
    persona: str
    prompt: str
    tools: tuple[str, ...]
    result_schema: Mapping[str, Any]
    max_tokens: int
    data: Mapping[str, Any] = attrs.Factory(dict)


@attrs.frozen
class ToolDefinition:
    """One granted tool as a function-calling model sees it.

    Attributes:
        name: the tool's name (what ``ToolBox.call`` takes).
        description: what the tool does, ending with what it returns (for the model).
        input_schema: JSON schema of its arguments: an object with camelCase keys, the
            required ones listed, no other key allowed.
        result: the shape of the JSON result ``ToolBox.call`` returns (also the last sentence
            of ``description``; empty where the description says it).

    The same class describes the main agent's tools (``MemoryRoot.tools``).
    """

    name: str
    description: str
    input_schema: Mapping[str, Any]
    result: str = ""

    def to_json(self) -> dict[str, Any]:
        """``{"name", "description", "input_schema"}`` (a copy: the caller may change it)."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": copy.deepcopy(dict(self.input_schema)),
        }


@runtime_checkable
class ToolBox(Protocol):
    """The tools a worker may call during one run."""

    @property
    def names(self) -> tuple[str, ...]:
        """The granted tool names."""
        ...

    @property
    def definitions(self) -> tuple[ToolDefinition, ...]:
        """Each granted tool's description, argument schema and result shape, in the order
        of :attr:`names` (a fresh copy each time: the host may change it freely)."""
        ...

    @property
    def cancellation(self) -> Cancellation:
        """The run's cancellation: poll ``is_set`` or block on ``wait(seconds)``; once set,
        stop (nothing staged will be written)."""
        ...

    def call(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """Call a granted tool with JSON arguments; returns its JSON result. Safe to call
        from any thread of the worker.

        Raises:
            ToolRefused: ``name`` was not granted (the run will fail), or the run has ended.
            WorkerCancelled: the run was cancelled (a timeout, a new turn); stop.
            MnemonError: the tool refused the arguments or the store failed; the worker may
                report it or try again.
        """
        ...


@runtime_checkable
class Workers(Protocol):
    """Runs LLM workers. Implement this to plug in a model."""

    def run(self, request: WorkerRequest, tools: ToolBox) -> object | Awaitable[object]:
        """Run one worker to completion and return its result as JSON-like data (or be an
        ``async def`` returning it).

        Called on a thread of its own (an ``async def`` runs on the host's event loop when the
        host uses the async facade). Raise any ``Exception`` for a failure: the library
        reports it as ``WorkerFailed`` with its text redacted. Watch ``tools.cancellation``
        (an async worker's task is cancelled instead): a timed-out or aborted run's result is
        thrown away.
        """
        ...
