"""What happened in a root, for the host: structured log records and event hooks.

Theory of operation
-------------------
Every root has one :class:`Events` hub (``MemoryRoot.events``). The library tells it what
happened, once, at the point where it is settled, and the hub does two things with each
:class:`MemoryEvent`:

1. it logs it under the ``mnemon_sm`` logger hierarchy (``mnemon_sm.hot``,
   ``mnemon_sm.worker``, ``mnemon_sm.maintenance``, ``mnemon_sm.review``,
   ``mnemon_sm.documents``, ``mnemon_sm.long_term``): ``INFO`` for what succeeded,
   ``WARNING`` for what failed, the event's summary in the message and as the record's
   ``mnemon_event`` attribute (``event.to_json()``), for structured log handlers. The package
   installs a ``NullHandler``: nothing is printed unless the host configures logging;
2. it calls every hook the host subscribed (:meth:`Events.subscribe`), in order, on the thread
   that made the change, *after* the change is durable.

The summary (``data``) never holds memory content, only identifiers, counts, outcomes,
durations and error types with their redacted messages, so logs stay free of what the user
told the agent; the full result object (a receipt, a document result) travels to the hooks in
``MemoryEvent.result``.

Hooks are host code running inside a library call, so two rules keep them harmless:

* a hook that raises an ``Exception`` is logged (``mnemon_sm.events``, with the traceback) and
  the next hook still runs; the operation that emitted the event has already succeeded or
  failed on its own and reports exactly that. A ``BaseException`` (``KeyboardInterrupt``)
  propagates as it should;
* a hook may not call the root back: while hooks run, the root's public API raises ``Busy``
  (the same fence as inside a worker run), since the root may be holding its locks. Hand the
  event to a queue or another thread instead.

Event kinds (:data:`EVENT_KINDS`):

``worker.started`` / ``worker.finished``
    a worker run; ``data``: ``workerKind``, and on finish ``outcome`` (``ok``, ``failed``,
    ``timeout``, ``invalid``, ``cancelled``), ``durationMs`` and for failures ``error``.
``hot.add`` / ``hot.replace`` / ``hot.remove`` / ``hot.restore``
    a hot-memory commit (``result``: the :class:`~mnemon_sm.flows.hot.rules.Receipt`).
``maintenance.finished``
    a capacity-maintenance round that made room for an add: ``maintenanceKind`` (``compact``
    or ``archive``), ``sourceEntries``, ``keptEntries``, ``memoryBodyIds``.
``review.started`` / ``review.finished``
    an agent's idle review (``agentId``, ``runId``; on finish ``ok``, ``action``).
``documents.create`` / ``documents.update`` / ``documents.archive``
    a Document change (``result``: the ``DocumentResult``).
``long_term.remember`` / ``.link`` / ``.forget`` / ``.create_space`` / ``.update_space`` /
``.delete_space`` / ``.merge`` / ``.remember_many``
    a long-term write.

Every operation kind also has its failure: the same kind with ``ok`` false and ``error`` set
(``{"type", "message"}``), logged at ``WARNING``; ``maintenance.failed`` is emitted when the
maintenance an overflowing add needed was refused or failed (hot memory unchanged).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, ParamSpec, TypeVar

import attrs

from mnemon_sm.errors import InvalidInput
from mnemon_sm.redact import redact

__all__ = ["EVENT_KINDS", "IN_HOOK", "Events", "Hook", "MemoryEvent", "observed", "summary"]

P = ParamSpec("P")
R = TypeVar("R")

LOGGER = "mnemon_sm"
_PACKAGE_LOGGER = logging.getLogger(LOGGER)  # looked up once: getLogger takes a global lock
_PACKAGE_LOGGER.addHandler(logging.NullHandler())

EVENT_KINDS: frozenset[str] = frozenset(
    {
        "worker.started",
        "worker.finished",
        "hot.add",
        "hot.replace",
        "hot.remove",
        "hot.restore",
        "maintenance.finished",
        "maintenance.failed",
        "review.started",
        "review.finished",
        "documents.create",
        "documents.update",
        "documents.archive",
        "long_term.remember",
        "long_term.link",
        "long_term.forget",
        "long_term.create_space",
        "long_term.update_space",
        "long_term.delete_space",
        "long_term.merge",
        "long_term.remember_many",
    }
)

#: True while the hooks of an event run (the root's public API then raises ``Busy``).
IN_HOOK: ContextVar[bool] = ContextVar("mnemon_sm_in_hook", default=False)

# Keys of a result's JSON whose text is safe to log: names, ids and outcomes, never content.
_TEXT_KEYS = frozenset(
    {
        "id",
        "ids",
        "target",
        "operation",
        "action",
        "kind",
        "status",
        "memoryBodyId",
        "memoryBodyIds",
        "archivedIds",
        "archivedDocumentIds",
        "insightId",
        "runId",
        "agentId",
        "state",
        "workerKind",
        "maintenanceKind",
        "outcome",
        "error",
    }
)


@attrs.frozen
class MemoryEvent:
    """One thing that happened in a root.

    Attributes:
        kind: one of :data:`EVENT_KINDS`.
        at_ms: when (the root's clock, milliseconds since the epoch); None for a failure
            logged while nobody listens at ``INFO`` and no hook is subscribed (the log record
            has its own time): an event nobody asked for never reads the clock port.
        ok: False for a failure.
        data: the summary: identifiers, counts, outcomes, durations, the error's type and
            redacted message; never memory content (what the log record carries).
        result: the operation's full result (a receipt, ...) for hooks; None for failures
            and for events with no result object. Not logged.
    """

    kind: str
    at_ms: int | None
    ok: bool
    data: Mapping[str, Any]
    result: object = attrs.field(default=None, eq=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        """``{"kind", "atMs", "ok", "data"}`` (the summary only, never the result)."""
        return {"kind": self.kind, "atMs": self.at_ms, "ok": self.ok, "data": dict(self.data)}


Hook = Callable[[MemoryEvent], None]


def summary(value: object) -> dict[str, Any]:
    """The loggable part of a JSON-like result: numbers, booleans and the texts of
    identifier-like keys (:data:`_TEXT_KEYS`), recursively; every other text (content,
    titles, summaries, messages) is left out."""
    if not isinstance(value, Mapping):
        return {}
    out: dict[str, Any] = {}
    for key, item in value.items():
        kept = _kept(str(key), item)
        if kept is not None:
            out[str(key)] = kept
    return out


def _kept(key: str, item: object) -> object:
    if isinstance(item, bool | int | float):
        return item
    if isinstance(item, str):
        return redact(item) if key in _TEXT_KEYS else None
    if isinstance(item, Mapping):
        return summary(item) or None
    if isinstance(item, list | tuple) and key in _TEXT_KEYS:
        return [redact(x) if isinstance(x, str) else x for x in item if not isinstance(x, dict)]
    return None


def error_data(exc: BaseException) -> dict[str, str]:
    """The ``error`` entry of a failure's summary: the type and the redacted message."""
    message = getattr(exc, "message", None)
    text = message if isinstance(message, str) else str(exc)
    return {"type": type(exc).__name__, "message": redact(text)}


class Events:
    """A root's event hub: logs each event and calls the host's hooks (see the module)."""

    def __init__(self, now_ms: Callable[[], int]) -> None:
        self._now_ms = now_ms
        self._hooks: tuple[tuple[Hook, frozenset[str] | None], ...] = ()
        self._lock = threading.Lock()

    def subscribe(
        self, hook: Hook, kinds: str | tuple[str, ...] | None = None
    ) -> Callable[[], None]:
        """Call ``hook(event)`` for every event (or those whose kind is in ``kinds``, or
        starts with one of them followed by a dot: ``"hot"`` means every ``hot.*``); returns
        the function that unsubscribes it.

        Raises:
            InvalidInput: ``hook`` is not callable, or a kind matches no event kind.
        """
        if not callable(hook):
            raise InvalidInput("an event hook must be callable")
        wanted: frozenset[str] | None = None
        if kinds is not None:
            names = (kinds,) if isinstance(kinds, str) else tuple(kinds)
            bad = [k for k in names if not isinstance(k, str) or not _matches_any(k)]
            if bad:
                raise InvalidInput(f"unknown event kinds: {bad!r}; known: {sorted(EVENT_KINDS)}")
            wanted = frozenset(names)
        entry = (hook, wanted)
        with self._lock:
            self._hooks = (*self._hooks, entry)

        def unsubscribe() -> None:
            with self._lock:
                self._hooks = tuple(h for h in self._hooks if h is not entry)

        return unsubscribe

    @property
    def active(self) -> bool:
        """Whether anyone listens: a hook is subscribed or the package logger is enabled for
        ``INFO``. When nobody does, an event costs no clock reading and no allocation."""
        return bool(self._hooks) or _PACKAGE_LOGGER.isEnabledFor(logging.INFO)

    def emit(
        self, kind: str, data: Mapping[str, Any], *, ok: bool = True, result: object = None
    ) -> MemoryEvent | None:
        """Log the event and call the hooks subscribed to it; returns the event (None when
        nobody listens: see :attr:`active`)."""
        area = kind.split(".", 1)[0]
        logger = logging.getLogger(f"{LOGGER}.{area}")
        level = logging.INFO if ok else logging.WARNING
        hooks = self._hooks
        logged = logger.isEnabledFor(level)
        if not hooks and not logged:
            return None
        at_ms = self._now_ms() if hooks or self.active else None
        event = MemoryEvent(kind, at_ms, ok, dict(data), result)
        if logged:
            details = " ".join(f"{k}={v}" for k, v in event.data.items())
            logger.log(
                level,
                "%s%s %s",
                kind,
                "" if ok else " failed",
                details,
                extra={"mnemon_event": event.to_json()},
            )
        if hooks:
            with self._hook_scope():
                for hook, wanted in hooks:
                    if wanted is None or _wanted(kind, wanted):
                        try:
                            hook(event)
                        except Exception:
                            logging.getLogger(f"{LOGGER}.events").exception(
                                "an event hook raised on %s; the next hook still runs", kind
                            )
        return event

    def succeeded(self, kind: str, result: object, **data: Any) -> MemoryEvent | None:
        """Emit ``kind`` for an operation that returned ``result`` (summarised from its
        ``to_json()`` when it has one) plus ``data``."""
        if not self.active:  # a success is logged at INFO only
            return None
        to_json = getattr(result, "to_json", None)
        base = summary(to_json()) if callable(to_json) else {}
        return self.emit(kind, {**base, **data}, result=result)

    def failed(self, kind: str, exc: BaseException, **data: Any) -> MemoryEvent | None:
        """Emit ``kind`` as a failure with ``exc`` as its ``error``."""
        return self.emit(kind, {**data, "error": error_data(exc)}, ok=False)

    @staticmethod
    @contextmanager
    def _hook_scope() -> Iterator[None]:
        token = IN_HOOK.set(True)
        try:
            yield
        finally:
            IN_HOOK.reset(token)


def _matches_any(name: str) -> bool:
    return name in EVENT_KINDS or any(k.startswith(name + ".") for k in EVENT_KINDS)


def _wanted(kind: str, wanted: frozenset[str]) -> bool:
    return kind in wanted or kind.split(".", 1)[0] in wanted


def observed(kind: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Report a facade method's outcome as event ``kind`` to the hub of the facade's root
    (``self._delegate.events``): its result on success, its error (any ``Exception``,
    re-raised unchanged) on failure. Put it under ``host_only``, so a call refused there
    (from a worker or a hook) reports nothing."""
    if kind not in EVENT_KINDS:
        raise ValueError(f"unknown event kind {kind!r}")

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def reported(*args: P.args, **kwargs: P.kwargs) -> R:
            events: Events = getattr(args[0], "_delegate").events  # noqa: B009
            try:
                result = fn(*args, **kwargs)
            except Exception as exc:
                events.failed(kind, exc)
                raise
            events.succeeded(kind, result)
            return result

        return reported

    return wrap
