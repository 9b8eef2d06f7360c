"""The document index of one root, parsed once per change and encoded from its records' blocks.

Theory of operation
-------------------
Every document operation starts from ``documents/index.json``. At 10,000 documents that file
is several megabytes, and parsing it strictly (JSON, then the converter, then the path checks)
costs far more than reading it; so a root keeps, in one :class:`IndexCache`:

- the last index bytes it read or wrote and their parse. :meth:`IndexCache.load` parses only
  bytes that differ from them; equality of bytes is the proof that the parse still holds, so
  another process's change (other bytes) is always parsed, and nothing is ever served stale
  (the same rule as the hot tier's ``SourceCache``). A writer that commits the index seeds the
  cache with what it wrote (:meth:`IndexCache.remember`: the bytes and the records it encoded
  them from, which parse back equal, a property test proves it), so the next operation of
  this process does not parse what it wrote;
- each record's block of the index file (its indented JSON), by document id, as of the last
  encoding. :meth:`IndexCache.encode` re-serialises only records that are not the ones
  encoded before (identity first, then equality), so a change to one document encodes one
  block and joins the rest. When the records replace the ones encoded (or remembered) last at
  the same positions under the same ids, as a search recording access times does, only the
  replaced positions are looked at (found by comparing identities at C speed), in
  :meth:`IndexCache.encode` as in the checks of :meth:`IndexCache.remember`.

Bounds: one index (its bytes and its records) and one block per record of the last index
encoded; both are replaced as a whole, never grown past the index they describe. Reads outside
the index lock (``get``, ``records``) see one consistent ``(bytes, records)`` pair: the pair is
one attribute, replaced in one assignment.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from itertools import compress

from mnemon_sm.errors import CorruptStore
from mnemon_sm.flows.documents import model
from mnemon_sm.flows.documents.model import INDEX_PATH, DocumentRecord
from mnemon_sm.ports import Files

__all__ = ["IndexCache"]

Records = tuple[DocumentRecord, ...]


class IndexCache:
    """The last index this root read or wrote, its parse, and its records' encoded blocks."""

    def __init__(self) -> None:
        self._seen: tuple[bytes | None, Records] = (None, ())
        self._blocks: dict[str, tuple[DocumentRecord, bytes]] = {}
        self._encoded: tuple[Records, list[bytes]] = ((), [])  # the last encoding, in order

    def read(self, files: Files) -> tuple[bytes | None, Records]:
        """The index's bytes (None: no index yet) and its records; raises ``CorruptStore``."""
        data = files.read(INDEX_PATH)
        return data, self.load(data)

    def load(self, data: bytes | None) -> Records:
        """The records of ``data``, parsed unless they are the bytes seen last."""
        if data is None:
            return ()
        seen, records = self._seen
        if data != seen:
            records = model.parse_index(data)
            self._seen = (data, records)
        return records

    def remember(self, data: bytes, records: Records) -> None:
        """What a commit just wrote: ``data``, encoded (by :meth:`encode`) from ``records``.

        Records that the parse would refuse (an id twice, a file name not of this library's
        form) are not remembered: the next read parses the bytes and reports them, as it
        would in any other process. Records that replace the ones seen at the same positions
        under the same ids (an access time recorded) are the only ones checked."""
        seen = self._seen[1]
        changed = _replaced(records, seen)
        try:
            if changed is None:
                model.check_index(records, checked=seen)
            else:
                model.check_index([records[i] for i in changed], checked=(), unique=False)
        except CorruptStore:
            return
        self._seen = (data, records)

    def encode(self, records: Iterable[DocumentRecord]) -> bytes:
        """The index file of ``records``, re-serialising only the records not encoded last.
        When ``records`` replace the ones encoded last at the same positions under the same
        ids, only those positions are looked at."""
        records = tuple(records)
        last, last_blocks = self._encoded
        changed = _replaced(records, last)
        if changed is not None:
            patched = last_blocks.copy()
            for i in changed:
                new = records[i]
                block = patched[i] if new == last[i] else model.record_block(new)
                self._blocks[new.id] = (new, block)
                patched[i] = block
            self._encoded = (records, patched)
            return model.join_blocks(patched)
        known: dict[str, tuple[DocumentRecord, bytes]] = self._blocks
        seen: dict[str, tuple[DocumentRecord, bytes]] = {}
        blocks: list[bytes] = []
        for r in records:
            hit = known.get(r.id)
            if hit is None or (hit[0] is not r and hit[0] != r):
                hit = (r, model.record_block(r))
            seen[r.id] = hit
            blocks.append(hit[1])
        self._blocks = seen
        self._encoded = (records, blocks)
        return model.join_blocks(blocks)


def _replaced(records: Records, old: Records) -> list[int] | None:
    """The positions where ``records`` hold other objects than ``old``, when they are as
    many and every such record has the id of the one it replaces (None: otherwise)."""
    if len(records) != len(old) or not records:
        return None
    changed = list(compress(range(len(records)), map(operator.is_not, records, old)))
    if len(changed) * 4 > len(records):
        return None  # most changed: the general way is as quick
    for i in changed:
        if records[i].id != old[i].id:
            return None
    return changed
