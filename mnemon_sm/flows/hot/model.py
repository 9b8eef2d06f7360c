"""Hot memory values and the ``memories.json`` format.

Theory of operation
-------------------
``runtime/memories.json`` is the single source of truth; ``USER.md`` and ``MEMORY.md`` are its
projections. The format is the reference implementation's (dsh-mnemon v0.2.15), byte for byte:
a 2-space indented JSON object ``{"version": 1, "entries": [...]}`` plus one newline, entries of
both targets interleaved in file order, keys in the order ``content, created_at, updated_at,
target, importance``. A projection is its target's contents joined by ``"\\n§\\n"`` plus one
newline, or an empty file. The revision is the SHA-256 of the compact JSON of the same object.

Reading is strict and goes through the converter: any deviation (bad JSON, wrong version, an
unknown key, a bad entry) raises ``CorruptStore`` and the file is never rewritten. Writing uses a
specialised encoder that caches each entry's JSON; a property test proves it byte-identical to
``json.dumps(converter.unstructure(...), indent=2, ensure_ascii=False)``.
"""

from __future__ import annotations

import hashlib
import json
from json.encoder import encode_basestring
from typing import Any, Literal, get_args

import attrs

from mnemon_sm import inputs
from mnemon_sm.convert import StructureFailed, structure
from mnemon_sm.errors import CorruptStore, InvalidInput
from mnemon_sm.ports.hot_format import DELIMITER, IMPORTANCES, Importance
from mnemon_sm.text import collapse_whitespace

__all__ = [
    "DELIMITER",
    "ENTRY_MAX_BYTES",
    "IMPORTANCES",
    "SOURCE_PATH",
    "TARGETS",
    "HotEntry",
    "HotStore",
    "Importance",
    "Target",
    "normalize",
    "parse_source",
    "projection_path",
]

Target = Literal["user", "memory"]
TARGETS: tuple[Target, ...] = get_args(Target)
#: What capacity maintenance does to a target (see :func:`maintenance_kind`).
Kind = Literal["local-compaction", "long-term-archive"]


def maintenance_kind(target: str) -> Kind:
    """What capacity maintenance does to ``target``: MEMORY.md is archived, USER.md compacted
    locally."""
    return "long-term-archive" if target == "memory" else "local-compaction"


_DELIMITER_BYTES = DELIMITER.encode("utf-8")
ENTRY_MAX_BYTES = 8192  # one entry, UTF-8 (larger than USER.md's budget, as in the reference)
RUNTIME_DIR = "runtime"
SOURCE_PATH = "runtime/memories.json"
LOCK_NAME = "runtime/.memories.lock"
_PROJECTIONS: dict[str, str] = {"user": "runtime/USER.md", "memory": "runtime/MEMORY.md"}


def projection_path(target: str) -> str:
    """Path of a target's projection relative to the storage root."""
    return _PROJECTIONS[target]


def normalize(value: object, field: str) -> str:
    """Collapse whitespace and enforce the entry rules, or raise ``InvalidInput``.

    Rules (reference 8.3): required after collapsing; no ``§``; at most 8192 UTF-8 bytes;
    and, beyond the reference, valid Unicode (a lone surrogate cannot be stored as UTF-8).
    """
    if value is None:
        value = ""
    text = collapse_whitespace(inputs.text(value, field))
    if not text:
        raise InvalidInput(f"{field} is required")
    if "§" in text:
        raise InvalidInput(f"{field} must not contain the reserved § entry delimiter")
    size = len(text.encode("utf-8"))
    if size > ENTRY_MAX_BYTES:
        raise InvalidInput(f"{field} is too large ({size} bytes; max {ENTRY_MAX_BYTES})")
    return text


def _pretty(entry: HotEntry) -> str:
    return (
        '    {\n      "content": ' + encode_basestring(entry.content)
        + ',\n      "created_at": ' + encode_basestring(entry.created_at)
        + ',\n      "updated_at": ' + encode_basestring(entry.updated_at)
        + ',\n      "target": "' + entry.target
        + '",\n      "importance": "' + entry.importance + '"\n    }'
    )  # fmt: skip


def _compact(entry: HotEntry) -> str:
    return (
        '{"content":' + encode_basestring(entry.content)
        + ',"created_at":' + encode_basestring(entry.created_at)
        + ',"updated_at":' + encode_basestring(entry.updated_at)
        + ',"target":"' + entry.target + '","importance":"' + entry.importance + '"}'
    )  # fmt: skip


@attrs.frozen
class HotEntry:
    """One fact in hot memory. Identity is ``(target, content)``; there is no id."""

    content: str
    created_at: str
    updated_at: str
    target: Target
    importance: Importance = "normal"
    # Derived once per entry, so writing a store joins bytes instead of re-encoding text.
    pretty: bytes = attrs.field(init=False, eq=False, repr=False)
    utf8: bytes = attrs.field(init=False, eq=False, repr=False)

    @pretty.default
    def _pretty_default(self) -> bytes:
        return _pretty(self).encode("utf-8")

    @utf8.default
    def _utf8_default(self) -> bytes:
        return self.content.encode("utf-8")


@attrs.frozen
class _SourceDoc:
    """The on-disk shape of memories.json, as the converter reads it."""

    version: int
    entries: list[_EntryDoc]


@attrs.frozen
class _EntryDoc:
    content: str
    created_at: str
    updated_at: str
    target: Target
    importance: Importance


@attrs.frozen
class HotStore:
    """An immutable snapshot of ``memories.json``. Derived views are computed once."""

    entries: tuple[HotEntry, ...] = ()
    _memo: dict[str, Any] = attrs.field(factory=dict, init=False, eq=False, repr=False)

    @classmethod
    def derive(
        cls,
        before: HotStore,
        entries: tuple[HotEntry, ...],
        target: str,
        target_entries: tuple[HotEntry, ...],
        target_used: int,
    ) -> HotStore:
        """A store that changed only ``target``: the other target's views are reused and the
        changed target's entries and size come precomputed (a property test checks both)."""
        store = cls(entries)
        other = "memory" if target == "user" else "user"
        memo = store._memo
        memo["of:" + other] = before.of(other)
        memo["bytes:" + other] = before._joined_bytes(other)
        memo["of:" + target] = target_entries
        memo["used:" + target] = target_used
        return store

    def of(self, target: str) -> tuple[HotEntry, ...]:
        """The target's entries in file order."""
        key = "of:" + target
        found: tuple[HotEntry, ...] | None = self._memo.get(key)
        if found is None:
            found = tuple([e for e in self.entries if e.target == target])
            self._memo[key] = found
        return found

    def joined(self, target: str) -> str:
        """The target's contents joined by the delimiter (no trailing newline)."""
        return DELIMITER.join(e.content for e in self.of(target))

    def _joined_bytes(self, target: str) -> bytes:
        key = "bytes:" + target
        found: bytes | None = self._memo.get(key)
        if found is None:
            found = _DELIMITER_BYTES.join([e.utf8 for e in self.of(target)])
            self._memo[key] = found
        return found

    def used(self, target: str) -> int:
        """Capacity metric: UTF-8 bytes of :meth:`joined`."""
        key = "used:" + target
        found: int | None = self._memo.get(key)
        if found is None:
            found = len(self._joined_bytes(target))
            self._memo[key] = found
        return found

    def same_projection(self, other: HotStore, target: str) -> bool:
        """Whether ``other``'s projection of ``target`` has the same bytes (compared without
        building either file's text)."""
        return self._joined_bytes(target) == other._joined_bytes(target)

    def projection(self, target: str) -> bytes:
        """The exact bytes of ``USER.md`` / ``MEMORY.md``."""
        data = self._joined_bytes(target)
        return data + b"\n" if data else b""

    def encode(self) -> bytes:
        """The exact bytes of ``memories.json``."""
        if not self.entries:
            return b'{\n  "version": 1,\n  "entries": []\n}\n'
        body = b",\n".join([e.pretty for e in self.entries])
        return b'{\n  "version": 1,\n  "entries": [\n' + body + b"\n  ]\n}\n"

    def canonical(self) -> bytes:
        """Compact JSON of the source, the input of :meth:`revision`."""
        body = ",".join(_compact(e) for e in self.entries)
        return ('{"version":1,"entries":[' + body + "]}").encode("utf-8")

    def revision(self) -> str:
        """SHA-256 (hex) of :meth:`canonical`, the reference's revision."""
        found: str | None = self._memo.get("revision")
        if found is None:
            found = hashlib.sha256(self.canonical()).hexdigest()
            self._memo["revision"] = found
        return found

    def unstructure(self) -> dict[str, Any]:
        """The source as plain data (what the converter writes)."""
        return {
            "version": 1,
            "entries": [
                {
                    "content": e.content,
                    "created_at": e.created_at,
                    "updated_at": e.updated_at,
                    "target": e.target,
                    "importance": e.importance,
                }
                for e in self.entries
            ],
        }


def parse_source(data: bytes | None, *, path: str = SOURCE_PATH) -> HotStore:
    """Parse ``memories.json`` strictly; a missing file (None) is an empty store.

    Raises:
        CorruptStore: anything but a valid version-1 document; the message names the problem.
    """
    if data is None:
        return HotStore()
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CorruptStore(f"{path} is unreadable: {exc}", path=path) from None
    if not isinstance(raw, dict) or raw.get("version") != 1:
        raise CorruptStore(f"{path} must use version 1", path=path)
    try:
        doc = structure(raw, _SourceDoc)
    except StructureFailed as exc:
        raise CorruptStore(f"{path} is invalid: {'; '.join(exc.problems)}", path=path) from None
    entries = []
    for index, item in enumerate(doc.entries):
        try:
            content = normalize(item.content, "content")
        except InvalidInput as exc:
            raise CorruptStore(
                f"{path} contains an invalid entry at $.entries[{index}]: {exc.message}", path=path
            ) from None
        entries.append(
            HotEntry(content, item.created_at, item.updated_at, item.target, item.importance)
        )
    return HotStore(tuple(entries))
