"""Configuration: the five switches, the review delay, the limits and the durability level.

One frozen attrs class, built from keyword arguments (snake_case) or a TOML file whose keys use
the reference's camelCase spelling (``writeEnabled``, ``idleReviewMs``, ...). Every value is
checked when the object is built; a bad value raises ``InvalidConfig`` naming the key, and an
unknown key is an error rather than a silent no-op.

Unknown keyword arguments: attrs generates ``Config.__init__`` (so type checkers see every
field as a typed keyword), and that ``__init__`` is then wrapped once, below the class, by
:func:`_refusing_unknown_names`: a name that is not a field raises ``InvalidConfig`` naming it
as the caller spelt it, where Python would raise ``TypeError``. Everything that builds a
``Config`` goes through it: ``Config(...)``, :meth:`Config.of`, ``attrs.evolve`` and the
converter's structuring (which reports camelCase keys itself). Pickling does not call
``__init__``.
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import attrs

from mnemon_sm.convert import StructureFailed, camel_case, register_camel_case, structure
from mnemon_sm.errors import InvalidConfig

__all__ = ["Audit", "Config", "DocumentIndex", "Durability", "Projections"]

Durability = Literal["full", "normal", "off"]
Projections = Literal["eager", "lazy"]
DocumentIndex = Literal["auto", "file", "journal"]
Audit = Literal["on", "off", "content"]
LongTermBackend = Literal["auto", "embedded", "mnemon"]
Mode = Literal["guided", "off"]

# Reference defaults (dsh-mnemon v0.2.15, section 13 of the reference notes).
USER_LIMIT = 4096  # bytes of USER.md, delimiters included
MEMORY_LIMIT = 10240  # bytes of MEMORY.md, delimiters included
IDLE_REVIEW_MS = 30_000  # idle delay before a background review
LOCK_TIMEOUT_MS = 5_000  # how long a writer waits for the runtime lock
DOCUMENTS_ACTIVE_LIMIT = 10 * 1024 * 1024  # rendered bytes of active documents
WORKER_TIMEOUT_MS = 180_000  # how long the host waits for one worker run
#: Every kind of worker the library runs (the keys ``workerTimeoutsMs`` accepts).
WORKER_KINDS = ("recall", "write", "answer", "compact", "archive", "document_archive", "review")

# Bounds: limits stay large enough for one maximal entry's worth of structure and small
# enough to be injected into every model call; the review delay keeps the reference's range.
_LIMIT_RANGE = (256, 1_048_576)
_IDLE_RANGE = (5_000, 600_000)
_LOCK_RANGE = (100, 120_000)
_MNEMON_RANGE = (100, 120_000)  # per Mnemon CLI call, the reference's range
_DOCUMENTS_RANGE = (1024, 1024 * 1024 * 1024)
_WORKER_RANGE = (100, 3_600_000)


def _between(low: int, high: int) -> Any:
    def check(_: object, attribute: attrs.Attribute[int], value: object) -> None:
        if type(value) is not int or not low <= value <= high:
            raise InvalidConfig(
                f"{camel_case(attribute.name)} must be an integer in {low}..{high}, got {value!r}"
            )

    return check


def _one_of(*allowed: str) -> Any:
    def check(_: object, attribute: attrs.Attribute[str], value: object) -> None:
        if value not in allowed:
            choices = ", ".join(allowed)
            raise InvalidConfig(
                f"{camel_case(attribute.name)} must be one of {choices}, got {value!r}"
            )

    return check


def _optional_text(_: object, attribute: attrs.Attribute[str | None], value: object) -> None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise InvalidConfig(f"{camel_case(attribute.name)} must be a non-empty string")


def _timeouts(_: object, attribute: attrs.Attribute[dict[str, int]], value: object) -> None:
    name = camel_case(attribute.name)
    if not isinstance(value, dict):
        raise InvalidConfig(f"{name} must map worker kinds to milliseconds")
    low, high = _WORKER_RANGE
    for kind, ms in value.items():
        if kind not in WORKER_KINDS:
            raise InvalidConfig(
                f"{name}: unknown worker kind {kind!r} (one of {', '.join(WORKER_KINDS)})"
            )
        if type(ms) is not int or not low <= ms <= high:
            raise InvalidConfig(f"{name}.{kind} must be an integer in {low}..{high}, got {ms!r}")


def _flag(_: object, attribute: attrs.Attribute[bool], value: object) -> None:
    if type(value) is not bool:
        raise InvalidConfig(f"{camel_case(attribute.name)} must be true or false, got {value!r}")


@attrs.frozen(kw_only=True)
class Config:
    """Settings of one storage root. Building one with a bad value raises ``InvalidConfig``.

    Attributes:
        recall_mode: ``guided`` adds the recall clause to lifecycle cues; ``off`` drops it.
        writeback_mode: ``guided`` adds the write clause and enables background review.
        lifecycle_enabled: per-agent prime, cues, activity and review.
        routing_guidance: include the routing paragraph in the system prompt.
        write_enabled: when false every mutation raises ``ReadOnly`` before touching disk.
        idle_review_ms: idle delay before a background review (5000..600000).
        user_limit: byte budget of USER.md. memory_limit: byte budget of MEMORY.md.
        durability: ``full`` fsyncs the source file and its directory on every commit,
            ``normal`` the file only, ``off`` nothing (tests and throwaway roots).
        projections: ``eager`` (the default) rewrites USER.md / MEMORY.md in every commit
            that changes them, so other readers of the files (the reference implementation
            among them) always see the committed entries; ``lazy`` commits ``memories.json``
            only and writes the projections when context is rendered, when
            ``hot.write_projections()`` is called and when the root closes: one file write
            less per change, but a reader of the files may see them one render behind.
        lock_timeout_ms: how long a writer waits for the runtime lock (100..120000).
        default_recall_limit: results of a search when the request names no limit (1..50).
        long_term_store: ``embedded`` (the built-in SQLite store), ``mnemon`` (the Mnemon
            CLI) or ``auto`` (Mnemon when ``mnemon_path`` is set or ``mnemon`` is on PATH).
        mnemon_path: the Mnemon executable to use. mnemon_timeout_ms: per CLI call.
        documents_active_limit: rendered bytes all active Documents may take (1 KiB..1 GiB);
            a document that does not fit makes the least recently used one archived.
        audit: ``on`` (the default) appends every flow's transitions and outcomes to the
            root's audit log (``audit/``: names and states, no user content; about 1 MiB at
            most, the oldest segments removed); ``content`` also keeps an error's message
            (which may quote what the caller sent); ``off`` writes none. A root whose writes
            are disabled writes none either (and makes no ``audit/`` directory).
        documents_index: ``auto`` (the default) is ``file`` for a root in a directory and
            ``journal`` for a root on PostgreSQL (no reader of ``index.json`` there but this
            library); ``file`` commits every document change by rewriting
            ``documents/index.json``, so other readers of the file (the reference
            implementation among them) always see every document; ``journal`` appends the
            changed records to ``documents/index.journal`` instead and folds it into
            ``index.json`` every 256 KiB and when the root closes: a commit's cost no longer
            grows with the number of documents (a rewrite of several megabytes at 10,000), but
            a reader of ``index.json`` alone may see it a few hundred changes behind. Every
            root reads the journal whatever its mode, and a ``file`` root folds one it finds.
        worker_timeout_ms: how long the host waits for a worker run (100..3600000, default
            180000); a run past it is cancelled and fails with ``WorkerTimeout``, nothing
            written. worker_timeouts_ms: per-kind overrides, e.g. ``{"archive": 600000}``
            (kinds: recall, write, answer, compact, archive, document_archive, review).
        embedding_model: dense retrieval for relevance recall (needs the ``[embeddings]``
            extra): ``all-MiniLM-L6-v2`` for the model shipped with the extra, or the path of
            a local sentence-transformers model directory. None (the default): lexical only,
            no model. An embedder passed to ``MemoryRoot.open`` takes precedence.
    """

    recall_mode: Mode = attrs.field(default="guided", validator=_one_of("guided", "off"))
    writeback_mode: Mode = attrs.field(default="guided", validator=_one_of("guided", "off"))
    lifecycle_enabled: bool = attrs.field(default=True, validator=_flag)
    routing_guidance: bool = attrs.field(default=True, validator=_flag)
    write_enabled: bool = attrs.field(default=True, validator=_flag)
    idle_review_ms: int = attrs.field(default=IDLE_REVIEW_MS, validator=_between(*_IDLE_RANGE))
    user_limit: int = attrs.field(default=USER_LIMIT, validator=_between(*_LIMIT_RANGE))
    memory_limit: int = attrs.field(default=MEMORY_LIMIT, validator=_between(*_LIMIT_RANGE))
    durability: Durability = attrs.field(
        default="full", validator=_one_of("full", "normal", "off")
    )
    projections: Projections = attrs.field(default="eager", validator=_one_of("eager", "lazy"))
    lock_timeout_ms: int = attrs.field(default=LOCK_TIMEOUT_MS, validator=_between(*_LOCK_RANGE))
    default_recall_limit: int = attrs.field(default=10, validator=_between(1, 50))
    long_term_store: LongTermBackend = attrs.field(
        default="auto", validator=_one_of("auto", "embedded", "mnemon")
    )
    mnemon_path: str | None = attrs.field(default=None, validator=_optional_text)
    mnemon_timeout_ms: int = attrs.field(default=10_000, validator=_between(*_MNEMON_RANGE))
    documents_active_limit: int = attrs.field(
        default=DOCUMENTS_ACTIVE_LIMIT, validator=_between(*_DOCUMENTS_RANGE)
    )
    audit: Audit = attrs.field(default="on", validator=_one_of("on", "off", "content"))
    documents_index: DocumentIndex = attrs.field(
        default="auto", validator=_one_of("auto", "file", "journal")
    )
    worker_timeout_ms: int = attrs.field(
        default=WORKER_TIMEOUT_MS, validator=_between(*_WORKER_RANGE)
    )
    worker_timeouts_ms: dict[str, int] = attrs.field(factory=dict, validator=_timeouts)
    embedding_model: str | None = attrs.field(default=None, validator=_optional_text)

    @classmethod
    def from_mapping(cls, data: dict[str, Any], *, source: str = "config") -> Config:
        """Build from camelCase keys (a parsed TOML or JSON document)."""
        try:
            return structure(data, cls)
        except StructureFailed as exc:
            raise InvalidConfig(f"invalid {source}: {'; '.join(exc.problems)}") from None
        except InvalidConfig as exc:
            raise InvalidConfig(f"invalid {source}: {exc.message}") from None

    @classmethod
    def from_toml(cls, path: str | Path, **overrides: Any) -> Config:
        """Load a TOML file (camelCase keys), then apply snake_case keyword overrides."""
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise InvalidConfig(f"cannot read config file {path}: {exc}") from None
        return cls.from_mapping(data, source=f"config file {path}").replace(**overrides)

    @classmethod
    def of(cls, **values: Any) -> Config:
        """Build from snake_case keyword arguments, refusing unknown names."""
        return cls(**values)

    def replace(self, **values: Any) -> Config:
        """A copy with some values changed (validated like :meth:`of`)."""
        return Config.of(**{**attrs.asdict(self), **values})

    def limit(self, target: str) -> int:
        """Byte budget of a hot-memory target (``user`` or ``memory``)."""
        return self.user_limit if target == "user" else self.memory_limit

    def worker_timeout(self, kind: str) -> int:
        """Milliseconds the host waits for a worker of ``kind``."""
        return self.worker_timeouts_ms.get(kind, self.worker_timeout_ms)


def _refusing_unknown_names(init: Callable[..., None]) -> Callable[..., None]:
    """``init`` behind a check of the keyword names: an unknown one is ``InvalidConfig``."""
    names = frozenset(field.name for field in attrs.fields(Config))

    @functools.wraps(init)
    def checked(self: Config, **values: Any) -> None:
        unknown = sorted(set(values) - names)
        if unknown:
            raise InvalidConfig(f"unknown config option(s): {', '.join(unknown)}")
        init(self, **values)

    return checked


# setattr, not assignment: type checkers keep the attrs signature (the fields as keywords).
setattr(Config, "__init__", _refusing_unknown_names(Config.__init__))  # noqa: B010
register_camel_case(Config)
