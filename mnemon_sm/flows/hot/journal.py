"""The maintenance journal: long-term writes an archive made, so no later attempt repeats them.

Theory of operation
-------------------
An archive writes to long-term memory before it compacts hot memory, and the two cannot be
one transaction. The remembers an archive applied are recorded in
``state/maintenance-journal.json`` (one atomic, fsynced update once they are made, also when
a later one failed), keyed by the SHA-256 of their content. Before a later archive applies a
remember, it looks the content up here; if the recorded insight is still active in the same
space, that insight is reused and nothing is written. So an archive refused after its writes
(a revision conflict, a space mismatch) never leaves a second copy when it is tried again. A
crash between the writes and their record is covered by the store itself, which skips
byte-identical content of an active insight and returns the existing id.

When an archive's compaction commits, the records it used are dropped. Opening a root
recovers the journal: temporary files of crashed writers are removed and records beyond
:data:`MAX_RECORDS` (oldest first) are pruned. The file is read strictly; a corrupt journal
raises ``CorruptStore`` and is never rewritten.

Format::

    {"version": 1, "writes": [{"contentSha256": "...", "memoryBodyId": "...", "id": "...",
     "runId": "...", "at": "2026-12-02T10:00:00.000Z"}]}
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable

import attrs

from mnemon_sm.convert import converter, register_camel_case
from mnemon_sm.ports import TEMP_NAME, Files, Locks
from mnemon_sm.ports.storage import parse_versioned, replace_file

__all__ = ["JOURNAL_PATH", "Journal", "JournalWrite", "content_key"]

STATE_DIR = "state"
JOURNAL_NAME = "maintenance-journal.json"
JOURNAL_PATH = f"{STATE_DIR}/{JOURNAL_NAME}"
JOURNAL_LOCK = "state/.maintenance-journal.lock"
MAX_RECORDS = 4096


def content_key(content: str) -> str:
    """The journal's key of a remembered content."""
    return hashlib.sha256(content.strip().encode("utf-8")).hexdigest()


@attrs.frozen
class JournalWrite:
    content_sha256: str
    memory_body_id: str
    id: str
    run_id: str
    at: str


@attrs.frozen
class _JournalDoc:
    version: int
    writes: list[JournalWrite]


register_camel_case(JournalWrite)


class Journal:
    """Read-modify-write access to the journal, under its own short lock."""

    def __init__(self, files: Files, locks: Locks, lock_timeout_ms: int) -> None:
        self._files, self._locks, self._timeout = files, locks, lock_timeout_ms

    def find(self, content: str) -> JournalWrite | None:
        """The latest record of ``content``, if any."""
        key = content_key(content)
        return next((w for w in reversed(self.read()) if w.content_sha256 == key), None)

    def record(self, writes: list[JournalWrite]) -> None:
        """Append records, in one durable update (none: nothing is written)."""
        if writes:
            self._change(lambda current: [*current, *writes])

    def settle(self, keys: Iterable[str]) -> None:
        """Drop the records of ``keys`` (their archive's compaction committed)."""
        done = set(keys)
        if done:
            self._change(lambda writes: [w for w in writes if w.content_sha256 not in done])

    def recover(self) -> int:
        """Remove temporary files left by crashed writers and prune old records; returns the
        number of temporary files removed. Takes the journal lock."""
        files = self._files
        names = files.list(STATE_DIR)
        if JOURNAL_NAME not in names and not any(TEMP_NAME.match(n) for n in names):
            return 0  # nothing to recover: no lock taken
        self._locks.acquire(JOURNAL_LOCK, self._timeout)
        try:
            stale = [n for n in files.list(STATE_DIR) if TEMP_NAME.match(n)]
            for name in stale:
                files.remove(f"{STATE_DIR}/{name}")
            writes = self.read()
            if len(writes) > MAX_RECORDS:
                self._write(writes[-MAX_RECORDS:])
            return len(stale)
        finally:
            self._locks.release(JOURNAL_LOCK)

    def read(self) -> list[JournalWrite]:
        data = self._files.read(JOURNAL_PATH)
        if data is None:
            return []
        return list(parse_versioned(data, _JournalDoc, path=JOURNAL_PATH).writes)

    def _change(self, edit: Callable[[list[JournalWrite]], list[JournalWrite]]) -> None:
        self._files.ensure_dir(STATE_DIR)
        self._locks.acquire(JOURNAL_LOCK, self._timeout)
        try:
            self._write(edit(self.read())[-MAX_RECORDS:])
        finally:
            self._locks.release(JOURNAL_LOCK)

    def _write(self, writes: list[JournalWrite]) -> None:
        doc = {"version": 1, "writes": converter.unstructure(writes, list[JournalWrite])}
        data = (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
        replace_file(self._files, JOURNAL_PATH, data, sync=True, sync_dir=True)
