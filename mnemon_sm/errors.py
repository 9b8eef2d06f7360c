"""Every exception mnemon_sm raises, under one root.

Theory of operation
-------------------
A caller needs to know two things about a failure: whose fault it was and whether anything
changed. The tree answers both:

- ``RequestRejected`` and its subclasses: the request broke a rule (bad input, no match,
  over capacity, read-only). Nothing was written. Fix the request, not the storage.
- ``StorageError`` and its subclasses: the storage root could not be used (lock timeout, a
  corrupt source of truth, an operating-system error). Nothing acknowledged was lost; retry
  or repair the root.
- ``IllegalEvent``: a flow was asked to do something its spec does not allow in its current
  state. The state did not move. This is a programming error of the caller.

Internal code raises these classes directly; the engine's own ``TransitionNotAllowed`` is
translated to ``IllegalEvent`` exactly once, where events are sent (``engine.flow``).
Every error renders to the JSON shape the CLI prints: ``{"type": ..., "message": ...}`` plus
the error's own fields.
"""

from __future__ import annotations

from typing import Any

from mnemon_sm.redact import redact

__all__ = [
    "AmbiguousMatch",
    "Busy",
    "CapacityExceeded",
    "CorruptStore",
    "DocumentArchived",
    "DocumentCapacityExceeded",
    "DocumentConflict",
    "DocumentNotFound",
    "DuplicateEntry",
    "EmbeddingFailed",
    "IllegalEvent",
    "InactiveSpace",
    "InvalidConfig",
    "InvalidInput",
    "LockTimeout",
    "MaintenanceRejected",
    "MigrationMismatch",
    "MnemonError",
    "NoMatch",
    "ReadOnly",
    "RequestRejected",
    "RevisionConflict",
    "SpecError",
    "StorageError",
    "ToolRefused",
    "UnknownHistoryEntry",
    "UnknownInsight",
    "UnknownSpace",
    "WorkerCancelled",
    "WorkerFailed",
    "WorkerTimeout",
]


class MnemonError(Exception):
    """Root of every error mnemon_sm raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def fields(self) -> dict[str, Any]:
        """Structured details beyond the message (empty unless a subclass adds some)."""
        return {}

    def to_json(self) -> dict[str, Any]:
        """The error as the CLI prints it: type, message and the error's fields."""
        return {"type": type(self).__name__, "message": self.message, **self.fields()}


class RequestRejected(MnemonError):
    """The request broke a rule; nothing was written. Change the request and try again."""


class InvalidInput(RequestRejected, ValueError):
    """A value is missing, malformed or too large (for example content with the § delimiter)."""


class InvalidConfig(InvalidInput):
    """A configuration value is out of range or of the wrong type."""


class NoMatch(RequestRejected, LookupError):
    """``old_text`` matched no entry of the target."""


class AmbiguousMatch(RequestRejected, LookupError):
    """``old_text`` matched several entries; use a longer, unique substring.

    ``candidates`` holds short previews of the matching entries.
    """

    def __init__(self, message: str, candidates: tuple[str, ...]) -> None:
        super().__init__(message)
        self.candidates = candidates

    def fields(self) -> dict[str, Any]:
        return {"candidates": list(self.candidates)}


class DuplicateEntry(RequestRejected):
    """A replacement would make the entry identical to another entry of the same target."""


class CapacityExceeded(RequestRejected):
    """The change would push the target past its byte limit (UTF-8 bytes, delimiters included).

    ``used`` is the target's size before the change, ``projected`` the size after it.
    """

    def __init__(self, message: str, *, target: str, used: int, projected: int, limit: int):
        super().__init__(message)
        self.target = target
        self.used = used
        self.projected = projected
        self.limit = limit

    def fields(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "used": self.used,
            "projected": self.projected,
            "limit": self.limit,
        }


class DocumentNotFound(RequestRejected, LookupError):
    """No document has this id."""


class DocumentArchived(RequestRejected):
    """The document is archived; archived documents are immutable."""


class DocumentConflict(RequestRejected):
    """The document changed while it was being archived; the active copy was kept."""


class DocumentCapacityExceeded(RequestRejected):
    """Active documents would exceed their byte limit and nothing more can be archived.

    ``candidates`` lists the ids that could be archived, least recently used first.
    """

    def __init__(
        self, message: str, *, projected: int, limit: int, candidates: tuple[str, ...] = ()
    ) -> None:
        super().__init__(message)
        self.projected = projected
        self.limit = limit
        self.candidates = candidates

    def fields(self) -> dict[str, Any]:
        return {
            "projected": self.projected,
            "limit": self.limit,
            "candidates": list(self.candidates),
        }


class RevisionConflict(RequestRejected):
    """Hot memory changed between a maintenance snapshot and its commit (another writer got
    there first). Nothing in hot memory was written; run the operation again.

    ``expected`` is the snapshot's revision, ``actual`` the one found at commit time.
    """

    def __init__(self, message: str, *, expected: str, actual: str) -> None:
        super().__init__(message)
        self.expected = expected
        self.actual = actual

    def fields(self) -> dict[str, Any]:
        return {"expected": self.expected, "actual": self.actual}


class UnknownSpace(RequestRejected, LookupError):
    """No Memory Space has this id."""


class InactiveSpace(RequestRejected):
    """The Memory Space exists but is not active, so it cannot be read explicitly."""


class UnknownInsight(RequestRejected, LookupError):
    """No active insight of the space has this id (it never existed or was forgotten)."""


class UnknownHistoryEntry(RequestRejected, LookupError):
    """No entry of the hot-memory history has this id."""


class ToolRefused(RequestRejected):
    """A worker called a tool its request did not grant, or called a tool after its run
    ended; nothing was done. The message is redacted (it may quote what the worker sent)."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


class WorkerCancelled(ToolRefused):
    """The worker's run was cancelled (a new turn started, the run timed out, the host
    stopped it): its tool box refuses every further call and nothing it staged is written.
    A worker that sees this should stop."""


class Busy(RequestRejected):
    """The root's API was called from inside one of its worker runs. A worker reaches memory
    only through the tool box it was handed; nothing was done."""


class ReadOnly(RequestRejected):
    """The root is configured with ``writeEnabled = false``; no mutation is allowed."""

    def __init__(
        self, message: str = "this storage root is configured read-only (writeEnabled = false)"
    ) -> None:
        super().__init__(message)


class StorageError(MnemonError):
    """The storage root could not be read or written. The cause, if any, is ``__cause__``."""


class LockTimeout(StorageError, TimeoutError):
    """Another writer held the root's lock for longer than the configured timeout."""


class MigrationMismatch(StorageError):
    """After a migration, the target does not hold what the source holds (a root changed
    during the migration, or a write was lost); the message names what differs."""


class CorruptStore(StorageError):
    """A source-of-truth file cannot be parsed or breaks its format; it was left untouched.

    ``path`` names the file relative to the storage root.
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path

    def fields(self) -> dict[str, Any]:
        return {"path": self.path}


class WorkerFailed(MnemonError):
    """An LLM worker failed, timed out, returned nothing valid, called a tool it was not
    granted, or returned something the host's checks refused. Its result was not used and
    the writes it staged were dropped: nothing was written.

    The message is one line of at most 500 characters with secrets redacted (API keys, bearer
    tokens, ``key=value`` credentials, long tokens): a provider's error text may carry them.
    """

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


class WorkerTimeout(WorkerFailed):
    """The worker did not finish within its timeout (``workerTimeoutMs``); its run was
    cancelled and nothing it staged was written. ``timeout_ms`` is the limit applied."""

    def __init__(self, message: str, *, kind: str, timeout_ms: int) -> None:
        super().__init__(message)
        self.kind = kind
        self.timeout_ms = timeout_ms

    def fields(self) -> dict[str, Any]:
        return {"kind": self.kind, "timeoutMs": self.timeout_ms}


class MaintenanceRejected(WorkerFailed):
    """The host refused a maintenance worker's result (a compaction or an archive) because it
    breaks ``rule``; the message names the rule and the offending detail. Hot memory was not
    written; an archive's long-term writes were not made.
    """

    def __init__(self, rule: str, detail: str) -> None:
        super().__init__(f"maintenance result rejected ({rule}): {detail}")
        self.rule = rule
        self.detail = redact(detail)

    def fields(self) -> dict[str, Any]:
        return {"rule": self.rule}


class EmbeddingFailed(MnemonError):
    """The embedder (a model turning texts into vectors) raised, or returned something the
    host's checks refused: not an array, a wrong shape, a non-finite value, a zero row. Its
    vectors were not used. The message names what was wrong, never a vector's values or the
    texts; the embedder's own exception, if any, is ``__cause__``.
    """


class IllegalEvent(MnemonError):
    """The flow's spec does not allow this event in the current state; the state did not move."""

    def __init__(self, *, flow: str, state: str, event: str) -> None:
        super().__init__(f"{flow}: event {event!r} is not allowed in state {state!r}")
        self.flow = flow
        self.state = state
        self.event = event

    def fields(self) -> dict[str, Any]:
        return {"flow": self.flow, "state": self.state, "event": self.event}


class SpecError(MnemonError):
    """A spec file is malformed or disagrees with its context class (found when loading)."""
