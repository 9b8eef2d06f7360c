"""The document index of one root: read once per change, committed by rewrite or by journal.

Theory of operation
-------------------
Every document operation starts from the committed index: ``documents/index.json`` with the
lines of ``documents/index.journal`` applied (see :mod:`~mnemon_sm.flows.documents.journal`;
no journal: the index alone). At 10,000 documents ``index.json`` is several megabytes, and
parsing it strictly (JSON, then the converter, then the path checks) costs far more than an
operation should; so a root keeps, in one :class:`IndexCache`:

- ``index.json`` as last seen: the adapter's stamp of it, its bytes and its parse. It is read
  again only when its stamp changed (``Files.read_if_changed``: equal stamps prove equal
  bytes) and parsed only when the bytes differ from the ones seen; a commit that rewrites it
  seeds the cache with what it wrote, so the next operation of this process parses nothing,
  and another process's change (another stamp, other bytes) is always parsed: nothing is
  ever served stale (the same rule as the hot tier's ``SourceCache``);
- the journal as last seen (bytes; bounded by the journal's compaction). Lines past the ones
  applied are applied to the current view; a journal that is not the one seen plus more lines
  (another process compacted it) is applied whole to ``index.json``'s records again;
- the :class:`~mnemon_sm.flows.documents.view.IndexView` of the committed index (records,
  positions, active total), carried forward by each commit, so finding a document and checking
  the capacity do not walk the records;
- each record's block of the ``index.json`` encoding, by document id, as of the last encoding.
  :meth:`IndexCache.encode` re-serialises only records that are not the ones encoded before
  (identity first, then equality), so a rewrite after one change encodes one block and joins
  the rest; when the records replace the ones encoded last at the same positions under the
  same ids (a search recording access times), only the replaced positions are looked at.

Reading order: the journal is read before ``index.json``. A compaction (another process's, or
a ``file``-mode commit) writes ``index.json`` first and removes the journal second, so a reader
outside the lock that races one sees an old index with its journal, or the new index with the
old journal's lines (which the merge rule makes no-ops), never the new journal without its
index.

Commits (:meth:`IndexCache.commit`, called under the index lock right after
:meth:`IndexCache.view`): in ``file`` mode the new records are encoded and ``index.json``
replaced (then any journal removed: the index now holds it); in ``journal`` mode the changed
records are appended as one journal line. Both go through the caller's
:class:`~mnemon_sm.flows.documents.undo.Undo`, so a failed request puts back what it wrote.
:meth:`IndexCache.compact` folds the journal into ``index.json``: through
:meth:`IndexCache.fold_if_due` once a request has succeeded (past
:data:`~mnemon_sm.flows.documents.journal.JOURNAL_MAX`), and whole when a root closes and when
a ``file``-mode root opens.

Bounds: one index (bytes, records, view), one journal, one block per record of the last index
encoded; each replaced as a whole, never grown past what it describes. The cache's own lock
makes a read outside the index lock (``get``, ``records``) see one consistent state.
"""

from __future__ import annotations

import contextlib
import operator
import threading
from collections.abc import Iterable, Sequence
from itertools import compress

import attrs

from mnemon_sm.errors import StorageError
from mnemon_sm.flows.documents import journal, model
from mnemon_sm.flows.documents.journal import JOURNAL_MAX, JOURNAL_PATH
from mnemon_sm.flows.documents.model import DOCUMENTS_DIR, INDEX_PATH, DocumentRecord
from mnemon_sm.flows.documents.undo import Undo
from mnemon_sm.flows.documents.view import IndexView
from mnemon_sm.ports import Files, Stamp
from mnemon_sm.ports.storage import complete_lines, durable_replace

__all__ = ["IndexCache"]

Records = tuple[DocumentRecord, ...]


@attrs.frozen
class _Seen:
    """A file as last seen: the adapter's stamp (None: read it next time), its bytes (None:
    no file)."""

    stamp: Stamp | None = None
    data: bytes | None = None


class IndexCache:
    """The committed index of one root as last read or written, and how to commit to it.

    ``mode`` is the root's ``documents_index``: ``file`` commits rewrite ``index.json``,
    ``journal`` commits append to the journal."""

    def __init__(self, mode: str = "file") -> None:
        self.mode = "journal" if mode == "journal" else "file"  # ``auto`` unresolved: file
        self._lock = threading.RLock()
        self._index = _Seen()  # index.json
        self._index_records: Records = ()  # its parse
        self._journal = _Seen()
        self._view = IndexView.of(())
        self._blocks: dict[str, tuple[DocumentRecord, bytes]] = {}
        self._encoded: tuple[Records, list[bytes]] = ((), [])  # the last encoding, in order

    def view(self, files: Files) -> IndexView:
        """The committed index (see the module for what is read and parsed);
        raises ``CorruptStore`` (nothing remembered) or ``StorageError``."""
        with self._lock:
            jstamp, jdata = files.read_if_changed(JOURNAL_PATH, self._journal.stamp)
            if jstamp is not None and jdata is None:  # provably as seen
                jdata = self._journal.data
            stamp, data = files.read_if_changed(INDEX_PATH, self._index.stamp)
            records, rebuilt = self._index_records, False
            if stamp is None:  # no index.json
                rebuilt, records = self._index.data is not None, ()
            elif data is None:  # provably as seen
                data = self._index.data
            elif data != self._index.data:
                records, rebuilt = model.parse_index(data), True
                self._seed_blocks(data, records)
            seen = complete_lines(self._journal.data or b"")
            lines = complete_lines(jdata or b"")
            if rebuilt or not lines.startswith(seen):
                view = journal.apply(IndexView.of(records), lines)
            elif len(lines) > len(seen):
                view = journal.apply(self._view, lines[len(seen) :])
            else:
                view = self._view
            self._index, self._index_records = _Seen(stamp, data), records
            self._journal, self._view = _Seen(jstamp, jdata), view
            return view

    def commit(self, files: Files, undo: Undo, changed: Sequence[DocumentRecord]) -> IndexView:
        """Commit ``changed`` (each replaces the record of its id, or is added) through
        ``undo``, synced as ``undo``'s durability says; call under the index lock, after
        :meth:`view`. Returns the new view.
        Raises ``CorruptStore`` before writing anything for a record the index may not hold,
        or ``StorageError`` (the caller rolls ``undo`` back)."""
        with self._lock:
            model.check_index(changed, unique=False)
            view = self._view.with_records(changed)
            if self.mode == "journal":
                line = journal.encode_line(changed)
                before = self._journal.data
                undo.append(JOURNAL_PATH, line, before)
                self._journal = _Seen(None, complete_lines(before or b"") + line)
            else:
                data = self.encode(view.records)
                undo.write_over(INDEX_PATH, data, self._index.data)
                self._index, self._index_records = _Seen(None, data), view.records
                if self._journal.data is not None:  # now in index.json: a leftover is a no-op
                    with contextlib.suppress(StorageError):
                        files.remove(JOURNAL_PATH)
                    self._journal = _Seen()
            self._view = view
            return view

    def compact(self, files: Files, durability: str, *, due_only: bool = True) -> bool:
        """Fold the journal into ``index.json`` and remove it (only once it passed
        ``JOURNAL_MAX`` when ``due_only``); call under the index lock, after :meth:`view` or
        a commit. ``index.json`` is durable (file and directory, unless ``durability`` is
        ``off``) before the journal is removed. Returns whether it compacted."""
        with self._lock:
            size = len(self._journal.data or b"")
            if self._journal.data is None or (due_only and size <= JOURNAL_MAX):
                return False
            records = self._view.records
            data = self.encode(records)
            durable_replace(files, INDEX_PATH, data, "off" if durability == "off" else "full")
            self._index, self._index_records = _Seen(None, data), records
            files.remove(JOURNAL_PATH)
            if durability != "off":
                files.fsync(DOCUMENTS_DIR)
            self._journal = _Seen()
            return True

    def fold_if_due(self, files: Files, durability: str) -> None:
        """After a request's commit (under the index lock): fold a journal past its bound.
        The request is committed either way, so a failure here only leaves the journal,
        valid, for a later commit to fold."""
        with contextlib.suppress(StorageError):
            self.compact(files, durability)

    def _seed_blocks(self, data: bytes, records: Records) -> None:
        """Take the blocks of the index just parsed from its bytes, so that the first rewrite
        encodes only what changed: a file in the canonical layout (ours, and the reference's
        ``JSON.stringify(index, null, 2)``) cut at its record boundaries, which no string can
        hold (a newline inside a string is escaped). Kept only when there is one block per
        record and the blocks join back into exactly ``data``."""
        blocks = model.split_blocks(data)
        if blocks is not None and len(blocks) == len(records):
            self._blocks = {r.id: (r, b) for r, b in zip(records, blocks, strict=True)}
            self._encoded = (records, blocks)

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
