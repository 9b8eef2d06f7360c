"""The worker port: how the library asks an LLM worker for a result, and checks it.

Theory of operation
-------------------
A flow builds a :class:`WorkerRequest` (the worker kind, its persona and prompt -- package
texts in our words, with every piece of request data rendered as untrusted -- the names of the
tools it may call, the JSON schema of its result and a token cap) and calls :func:`delegate`.
The host's ``Workers`` adapter runs the worker however it likes (an LLM with function calling,
or the built-in deterministic workers) and may call only the tools of the :class:`ToolBox` it
is handed; the box refuses anything not granted and routes the rest to the deterministic
services, never back through a worker.

:func:`delegate` then validates the raw result strictly (cattrs, unknown keys refused) into the
flow's result class. A worker that raises, returns nothing, returns something invalid, or called
a tool it was not granted, raises ``WorkerFailed``; the flow then changes nothing (writes made
through tools are staged by the box and dropped, see :mod:`mnemon_sm.workers.tools`).

Host integrators plug in their LLM by implementing ``Workers.run``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeVar, runtime_checkable

import attrs

from ..convert import StructureFailed, structure
from ..errors import WorkerFailed

__all__ = ["ToolBox", "WorkerRequest", "Workers", "delegate", "invoke"]

T = TypeVar("T")


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


@runtime_checkable
class ToolBox(Protocol):
    """The tools a worker may call during one run."""

    @property
    def names(self) -> tuple[str, ...]:
        """The granted tool names."""
        ...

    def call(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """Call a granted tool with JSON arguments; returns its JSON result.

        Raises:
            ToolRefused: ``name`` was not granted (the run will fail).
            MnemonError: the tool refused the arguments or the store failed; the worker may
                report it or try again.
        """
        ...


@runtime_checkable
class Workers(Protocol):
    """Runs LLM workers. Implement this to plug in a model."""

    def run(self, request: WorkerRequest, tools: ToolBox) -> object:
        """Run one worker to completion and return its result as JSON-like data.

        Raise any exception for a failure or a timeout; the library reports it as
        ``WorkerFailed``.
        """
        ...


def delegate(workers: Workers, request: WorkerRequest, tools: Any, result: type[T]) -> T:
    """Run a worker and return its result validated as ``result``, or raise WorkerFailed.

    ``tools`` is the run's tool box; a refusal it recorded fails the run even if the worker
    swallowed the error.
    """
    raw = invoke(workers, request, tools)
    try:
        return structure(raw, result)
    except StructureFailed as exc:
        raise WorkerFailed(
            f"{request.kind} worker returned an invalid result: {'; '.join(exc.problems)}"
        ) from None


def invoke(workers: Workers, request: WorkerRequest, tools: Any) -> object:
    """Run a worker and return its raw result (not validated), or raise WorkerFailed when it
    raised, called a tool it was not granted or returned nothing."""
    try:
        raw = workers.run(request, tools)
    except Exception as exc:  # the adapter's failure, whatever its type
        raise WorkerFailed(f"{request.kind} worker failed: {exc}") from exc
    refused = getattr(tools, "refused", ())
    if refused:
        raise WorkerFailed(
            f"{request.kind} worker called tools it was not granted: {', '.join(refused)}"
        )
    if raw is None:
        raise WorkerFailed(f"{request.kind} worker completed without recording its result")
    return raw
