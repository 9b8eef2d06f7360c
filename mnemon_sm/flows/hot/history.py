"""The hot-memory history: every entry capacity maintenance takes out of hot memory, kept.

Theory of operation
-------------------
When capacity maintenance compacts USER.md or MEMORY.md, entries leave hot memory: removed, or
rewritten into a merged entry. Before the compaction's commit point the host (never a worker)
appends one *round* to ``state/hot-history.jsonl`` holding the exact text, importance and
times of every entry that leaves, so no compaction can lose a user's fact: it can be listed
and restored later. :func:`preserved_round` decides, without I/O, what a round holds: every
snapshot entry except those a kept candidate carries over verbatim (equal content), each
marked ``rewritten`` when a kept candidate names it as a source and ``removed`` otherwise.

A round is appended before the commit, so a compaction that then fails (a revision conflict,
a crash) leaves a round for entries that are in fact still in hot memory: the history errs on
the side of keeping. A round without entries writes nothing.

The file is host-owned and append-only: one JSON line per round, written with one ``append`` by
the maintenance commit that removes the entries, under the hot-memory lock (the only writer,
so the history needs no lock of its own), and fsynced before that commit's point unless the
durability is ``off`` (``full`` also fsyncs ``state/`` when the append created the file): the
append returns the paths to fsync and the commit syncs them together with its source file.
Readers take no lock. A power loss can leave the last line torn (no trailing
newline); readers ignore it and the next append repairs the file by rewriting it atomically
without the torn bytes. Every complete line is read strictly (an unknown key, a wrong type or
version is ``CorruptStore`` naming the file); appending never parses old lines, so a corrupt
line never blocks the preservation of new rounds.

The bound: once the file plus the new line would pass :data:`MAX_BYTES` (1 MiB), it is
rewritten atomically (temporary file, rename) holding the newest lines that fit in half of
that, the new one included, and never fewer than the newest :data:`KEEP_ROUNDS` rounds (the
new one included), even when those alone are larger. Old lines are copied as raw bytes.

Format (one line per round, oldest first; keys in this order, UTF-8, no ASCII escaping)::

    {"version":1,"id":"mnt-1786608000000-0a1b2c3d","at":"2026-08-13T08:00:00.000Z",
     "target":"user","kind":"local-compaction","revision":"0a1b2c3d...","entries":[
     {"id":"mnt-1786608000000-0a1b2c3d-2","index":2,"content":"...","importance":"normal",
      "createdAt":"...","updatedAt":"...","fate":"rewritten"}]}

An entry's ``id`` is ``<round id>-<index>``, ``index`` its one-based position in the snapshot
the round compacted, ``revision`` the hot-memory revision of that snapshot.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal, get_args

import attrs

from mnemon_sm.convert import converter, register_camel_case
from mnemon_sm.errors import InvalidInput, UnknownHistoryEntry
from mnemon_sm.flows.hot.maintenance_values import Candidate
from mnemon_sm.flows.hot.model import TARGETS, HotEntry, Importance, Kind, Target
from mnemon_sm.ports import Files
from mnemon_sm.ports.storage import (
    complete_lines,
    durable_replace,
    parse_versioned,
    split_lines,
)

__all__ = [
    "HISTORY_PATH",
    "KEEP_ROUNDS",
    "MAX_BYTES",
    "STATE_DIR",
    "HistoryItem",
    "HistoryRound",
    "HotHistory",
    "PreservedEntry",
    "encode_round",
    "preserved_round",
]

STATE_DIR = "state"
HISTORY_PATH = "state/hot-history.jsonl"
KEEP_ROUNDS = 64  # the newest rounds a compaction never drops
MAX_BYTES = 1 << 20  # past this size the file is compacted

Fate = Literal["removed", "rewritten"]
KINDS: tuple[Kind, ...] = get_args(Kind)


@attrs.frozen
class PreservedEntry:
    """One entry that left hot memory, as it was in the snapshot."""

    id: str  # f"{round_id}-{index}"
    index: int  # one-based position in the round's snapshot
    content: str
    importance: Importance
    created_at: str
    updated_at: str
    fate: Fate


@attrs.frozen
class HistoryRound:
    """One compaction's preserved entries (one line of the file)."""

    version: int  # always 1
    id: str  # the maintenance run id
    at: str  # ISO-8601 ms UTC
    target: Target
    kind: Kind
    revision: str  # the hot-memory revision the round compacted
    entries: list[PreservedEntry]


@attrs.frozen
class HistoryItem:
    """One preserved entry with its round, as ``MemoryRoot.hot.history()`` lists it."""

    id: str
    target: Target
    content: str
    importance: Importance
    created_at: str
    updated_at: str
    fate: Fate
    round_id: str
    at: str  # when the round preserved it
    kind: Kind

    @classmethod
    def of(cls, round: HistoryRound, entry: PreservedEntry) -> HistoryItem:
        return cls(
            entry.id,
            round.target,
            entry.content,
            entry.importance,
            entry.created_at,
            entry.updated_at,
            entry.fate,
            round.id,
            round.at,
            round.kind,
        )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = converter.unstructure(self)
        return data


for _cls in (PreservedEntry, HistoryRound, HistoryItem):
    register_camel_case(_cls)


def preserved_round(
    round_id: str,
    at: str,
    target: Target,
    kind: str,
    revision: str,
    snapshot: Sequence[HotEntry],
    candidates: Sequence[Candidate],
    kept: Sequence[int],
) -> HistoryRound:
    """The round that preserves what a compaction takes out of hot memory. Pure.

    Args:
        snapshot: the target's committed entries the compaction worked from (index =
            position + 1).
        candidates: the checked compacted entries (``sources`` are one-based indexes).
        kept: positions (zero-based, into ``candidates``) that packing keeps.

    Every snapshot entry is preserved unless a kept candidate has exactly its content (it
    stays in hot memory verbatim); its fate is ``rewritten`` when a kept candidate names it
    as a source, else ``removed``. Snapshot order is kept.

    Raises:
        ValueError: ``kind`` is not a maintenance kind.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown maintenance kind {kind!r}")
    survivors = [candidates[k] for k in kept]
    verbatim = {c.content for c in survivors}
    merged = {index for c in survivors for index in c.sources}
    entries = [
        PreservedEntry(
            id=f"{round_id}-{index}",
            index=index,
            content=entry.content,
            importance=entry.importance,
            created_at=entry.created_at,
            updated_at=entry.updated_at,
            fate="rewritten" if index in merged else "removed",
        )
        for index, entry in enumerate(snapshot, start=1)
        if entry.content not in verbatim
    ]
    return HistoryRound(1, round_id, at, target, kind, revision, entries)


def encode_round(round: HistoryRound) -> bytes:
    """The exact bytes of ``round``'s line, trailing newline included (the converter's
    camelCase unstructuring, spelled out: a test proves the two equal)."""
    data = {
        "version": round.version,
        "id": round.id,
        "at": round.at,
        "target": round.target,
        "kind": round.kind,
        "revision": round.revision,
        "entries": [
            {
                "id": e.id,
                "index": e.index,
                "content": e.content,
                "importance": e.importance,
                "createdAt": e.created_at,
                "updatedAt": e.updated_at,
                "fate": e.fate,
            }
            for e in round.entries
        ],
    }
    return (json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def _compacted(old: list[bytes], line: bytes) -> bytes:
    """The newest ``old`` lines plus ``line`` that fit in half of :data:`MAX_BYTES`, but at
    least the newest ``KEEP_ROUNDS - 1`` old lines."""
    budget, floor = MAX_BYTES // 2, KEEP_ROUNDS - 1
    size, start = len(line), len(old)
    while start > 0:
        grown = size + len(old[start - 1])
        if len(old) - start >= floor and grown > budget:
            break
        size, start = grown, start - 1
    return b"".join(old[start:]) + line


class HotHistory:
    """Append-only, bounded store of the entries compactions took out of hot memory."""

    def __init__(self, files: Files) -> None:
        self._files = files

    def create(self, *, durability: str) -> None:
        """Create the empty file if it is missing, durably as ``durability`` asks (opening a
        root does, so no compaction pays for creating it)."""
        files = self._files
        if files.read(HISTORY_PATH) is None:
            files.ensure_dir(STATE_DIR)
            files.append(HISTORY_PATH, b"")
            if durability == "full":
                files.fsync(STATE_DIR)

    def append(self, round: HistoryRound, *, durability: str) -> tuple[str, ...]:
        """Write ``round`` (call it holding the hot-memory lock); returns the paths the caller
        must fsync before its commit point for ``round`` to be durable as ``durability``
        asks (none for ``off``, none after an atomic rewrite, which synced itself). A round
        without entries writes nothing.

        Raises:
            StorageError: a read or write failed; nothing was acknowledged.
        """
        if not round.entries:
            return ()
        line = encode_round(round)
        files = self._files
        files.ensure_dir(STATE_DIR)
        current = files.read(HISTORY_PATH)
        data = current or b""
        complete = complete_lines(data)
        if len(complete) + len(line) > MAX_BYTES:
            durable_replace(
                files, HISTORY_PATH, _compacted(split_lines(complete), line), durability
            )
            return ()
        if len(complete) != len(data):  # a torn last line: rewrite without it
            durable_replace(files, HISTORY_PATH, complete + line, durability)
            return ()
        files.append(HISTORY_PATH, line)
        if durability == "off":
            return ()
        if durability == "full" and current is None:  # the file's new name too
            return (HISTORY_PATH, STATE_DIR)
        return (HISTORY_PATH,)

    def rounds(self) -> list[HistoryRound]:
        """Every round, oldest first (a torn last line is ignored).

        Raises:
            CorruptStore: a complete line is not a valid round.
        """
        data = self._files.read(HISTORY_PATH)
        if data is None:
            return []
        return [
            parse_versioned(line, HistoryRound, path=HISTORY_PATH)
            for line in split_lines(complete_lines(data))
        ]

    def entries(self, target: str | None = None) -> list[tuple[HistoryRound, PreservedEntry]]:
        """Preserved entries, newest round first, each round's in index order; only rounds
        of ``target`` when given.

        Raises:
            InvalidInput: ``target`` is not ``user`` or ``memory``.
        """
        if target is not None and target not in TARGETS:
            raise InvalidInput(f"target must be one of {', '.join(TARGETS)}, got {target!r}")
        return [
            (r, entry)
            for r in reversed(self.rounds())
            if target is None or r.target == target
            for entry in r.entries
        ]

    def find(self, entry_id: str) -> tuple[HistoryRound, PreservedEntry]:
        """The round and entry with ``entry_id`` (the newest, should it repeat).

        Raises:
            UnknownHistoryEntry: no preserved entry has this id.
        """
        for r in reversed(self.rounds()):
            for entry in r.entries:
                if entry.id == entry_id:
                    return r, entry
        raise UnknownHistoryEntry(f"no hot-memory history entry has the id {entry_id!r}")
