"""Per-kind fallback: a host's workers for the kinds they handle, other workers for the rest.

A ``Workers`` adapter must answer every kind the library runs (``config.WORKER_KINDS``). A host
that plugs in a model for a few kinds wraps it:

    FallbackWorkers(MyModelWorkers(), kinds=("recall", "answer"))

runs ``MyModelWorkers`` for recall and answer and the built-in deterministic workers
(:class:`~mnemon_sm.adapters.workers.builtin.BuiltinWorkers`) for every other kind. The kinds
of the primary are, in order: ``kinds`` when given; else the primary's own ``kinds`` attribute
when it has one; else every kind. Each is checked when the wrapper is built: an unknown kind
name, a bare string instead of a collection of names, or workers without a callable ``run``
raise ``InvalidConfig``.

The choice is made per run, on the request's kind only: a run of the primary that fails is not
retried with the fallback (its failure is the operation's). ``run`` returns what the chosen
workers' ``run`` returns, a result or an awaitable (``async def``), which the runner awaits as
it awaits any worker's. The wrapper runs on a thread of its own like any host worker (it does
not claim ``trusted_inline``, since the primary may be a model).
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable

from mnemon_sm.adapters.workers.builtin import BuiltinWorkers
from mnemon_sm.config import WORKER_KINDS
from mnemon_sm.errors import InvalidConfig
from mnemon_sm.ports.workers import ToolBox, WorkerRequest, Workers

__all__ = ["FallbackWorkers"]


class FallbackWorkers:
    """Runs ``primary`` for the kinds it handles and ``fallback`` (default
    ``BuiltinWorkers()``) for every other kind.

    Raises:
        InvalidConfig: an unknown kind name, ``kinds`` given as one string, or a ``primary``
            or ``fallback`` without a callable ``run``.
    """

    def __init__(
        self,
        primary: Workers,
        fallback: Workers | None = None,
        *,
        kinds: Iterable[str] | None = None,
    ) -> None:
        _check_workers(primary, "primary")
        if fallback is not None:
            _check_workers(fallback, "fallback")
        if kinds is None:
            kinds = getattr(primary, "kinds", None)
            source = "the primary's kinds attribute"
        else:
            source = "kinds"
        self.primary: Workers = primary
        self.fallback: Workers = fallback if fallback is not None else BuiltinWorkers()
        #: The kinds ``primary`` runs; every other kind goes to ``fallback``.
        self.primary_kinds: frozenset[str] = (
            frozenset(WORKER_KINDS) if kinds is None else _check_kinds(kinds, source)
        )

    def workers_for(self, kind: str) -> Workers:
        """The workers that run ``kind``."""
        return self.primary if kind in self.primary_kinds else self.fallback

    def run(self, request: WorkerRequest, tools: ToolBox) -> object | Awaitable[object]:
        return self.workers_for(request.kind).run(request, tools)


def _check_workers(workers: object, role: str) -> None:
    if not callable(getattr(workers, "run", None)):
        raise InvalidConfig(
            f"FallbackWorkers: the {role} workers have no run(request, tools) method"
        )


def _check_kinds(kinds: object, source: str) -> frozenset[str]:
    if isinstance(kinds, str | bytes) or not isinstance(kinds, Iterable):
        raise InvalidConfig(
            f"FallbackWorkers: {source} must be a collection of worker kind names, not "
            f"{type(kinds).__name__}"
        )
    names = list(kinds)
    unknown = sorted({repr(k) for k in names if k not in WORKER_KINDS})
    if unknown:
        raise InvalidConfig(
            f"FallbackWorkers: unknown worker kind(s) in {source}: {', '.join(unknown)} "
            f"(one of {', '.join(WORKER_KINDS)})"
        )
    return frozenset(names)
