"""The in-process search index of one root's documents: bodies read once per change.

Theory of operation
-------------------
The search rules are :func:`~mnemon_sm.flows.documents.rules.score` (substring matches of the
folded phrase and tokens in the folded title, description and body) and the order "score,
then latest update, then index order". A plain scan reads and folds every candidate's file on
every search; this index keeps, per document, what the scan would compute: the folded title
and description (from its record) and the body and folded body (from its file), and answers a
search from them with the same rules. A differential test holds it equal to the plain scan.

Keeping in step (every call is made under the index lock, or the root's mutex on a read-only
root, with the records just read from the index):

- an entry is refreshed when its record is not the very record seen before (the root's
  :class:`~mnemon_sm.flows.documents.cache.IndexCache` hands out the same objects while the
  index is unchanged) and differs from it; its file is read again only when the record's path
  changed or its content hash is neither the one it had nor the hash of the body read, so a
  change by another process costs reading just the changed documents;
- documents the index no longer lists are dropped; a document whose file is missing or
  unreadable (a symlink) is retried on every search and never returned;
- every document a search would return is verified first: its file is read again (a few
  small files: at most the limit, plus those found changed) and its body compared with the
  one indexed. A file now missing or unreadable is skipped; a file changed in place is
  indexed as it is now and the ranking is made again. So every result is what its file holds
  now (the spec's INV-DSR-1), and a document whose file was edited by hand without its record
  changing is seen as edited when it would be returned; until then it is ranked by what was
  read before.

Bound: one entry per document of the index in the searched status (archived documents are
indexed only once a search includes them), each holding its body, its folded body when that
differs, and its folded title and description: about twice the documents' text.
"""

from __future__ import annotations

import heapq
import operator
from collections.abc import Iterable, Iterator
from itertools import compress, repeat

from mnemon_sm.errors import StorageError
from mnemon_sm.flows.documents import rules
from mnemon_sm.flows.documents.model import DocumentRecord, Status, body_of, content_hash
from mnemon_sm.ports import Files

__all__ = ["SearchIndex"]

Scored = tuple[int, DocumentRecord, str]


def _descending(stamp: str) -> str:
    """A key ordering ISO stamps latest first exactly as comparing ``(-ord(c), ...)`` tuples
    does (a prefix first): each character mirrored in the code point range."""
    return "".join(chr(0x10FFFF - ord(c)) for c in stamp)


class _Entry:
    """One document: its record's folded fields and its file's body as last read."""

    __slots__ = (
        "body",
        "description",
        "digest",
        "order",
        "path",
        "pos",
        "record",
        "text",
        "title",
    )

    def __init__(self, record: DocumentRecord, pos: int) -> None:
        self.record, self.pos = record, pos
        self.title = rules.fold(record.title)
        self.description = rules.fold(record.description)
        self.order = _descending(record.updated_at)
        self.path = record.path()
        self.body: str | None = None  # None: not read, missing or unreadable
        self.text = ""
        self.digest = ""

    def refresh(self, record: DocumentRecord) -> tuple[bool, bool]:
        """Take ``record`` (the same document, changed). Returns whether what a search sees
        of it changed (title, description, order) and whether its file must be read again."""
        old, self.record = self.record, record
        seen = False
        if record.title != old.title:
            self.title, seen = rules.fold(record.title), True
        if record.description != old.description:
            self.description, seen = rules.fold(record.description), True
        if record.updated_at != old.updated_at:
            self.order, seen = _descending(record.updated_at), True
        path = record.path()
        if path != self.path:
            self.path = path
            return True, True
        return seen, record.content_hash not in (old.content_hash, self.digest)

    def read(self, files: Files) -> str | None:
        """The body of the file as it is now (None: missing or unreadable)."""
        try:
            data = files.read(self.path)
        except StorageError:
            return None
        return None if data is None else body_of(data)

    def load(self, files: Files) -> None:
        """Index the file as it is now (a missing or unreadable one leaves no body)."""
        body = self.read(files)
        if body is None:
            self.body = None
        else:
            self.take(body)

    def take(self, body: str) -> None:
        text = rules.fold(body)
        self.body, self.digest = body, content_hash(body)
        self.text = body if text == body else text

    def rank(self) -> tuple[str, int]:
        return self.order, self.pos


class _Part:
    """The entries of the documents of one status."""

    def __init__(self, status: Status) -> None:
        self.status = status
        self.entries: dict[str, _Entry] = {}
        self.unread: set[str] = set()  # entries whose file is to be read (again)
        self.records: tuple[DocumentRecord, ...] | None = None
        self._columns: tuple[list[str], list[str], list[str], list[str]] | None = None
        self._recency: list[_Entry] | None = None

    def sync(self, files: Files, records: tuple[DocumentRecord, ...]) -> set[str]:
        """Bring the entries in step with ``records``; returns the documents whose file was
        read now (as fresh as a verification)."""
        if records is not self.records:
            known, entries, changed = self.entries, {}, False
            for i, r in enumerate(records):
                if r.status != self.status:
                    continue
                e = known.get(r.id)
                if e is None:
                    e, changed = _Entry(r, i), True
                    self.unread.add(r.id)
                elif e.record is not r:
                    seen, reload = e.refresh(r)
                    changed = changed or seen or reload
                    if reload:
                        e.body = None  # not searched until read again
                        self.unread.add(r.id)
                if e.pos != i:
                    e.pos, changed = i, True
                entries[r.id] = e
            if changed or len(entries) != len(known):
                self.unread &= entries.keys()
                self.changed()
            self.entries, self.records = entries, records
        if not self.unread:
            return set()
        read = [doc for doc in self.entries if doc in self.unread]  # in index order
        for doc in read:
            e = self.entries[doc]
            e.load(files)
            if e.body is not None:
                self.unread.discard(doc)
                self.changed()
        return set(read)

    def changed(self) -> None:
        self._columns = self._recency = None

    def live(self) -> list[_Entry]:
        """Readable entries, latest update first (then index order)."""
        if self._recency is None:
            readable = [e for e in self.entries.values() if e.body is not None]
            self._recency = sorted(readable, key=_Entry.rank)
        return self._recency

    def columns(self) -> tuple[list[str], list[str], list[str], list[str]]:
        """Ids, folded titles, descriptions and bodies of the readable entries."""
        if self._columns is None:
            live = self.live()
            self._columns = (
                [e.record.id for e in live],
                [e.title for e in live],
                [e.description for e in live],
                [e.text for e in live],
            )
        return self._columns

    def verify(self, files: Files, e: _Entry) -> str:
        """``same``, ``gone`` (missing or unreadable: retried next time) or ``changed``."""
        body = e.read(files)
        if body is None:
            e.body = None
            self.unread.add(e.record.id)
            self.changed()
            return "gone"
        if body == e.body:
            return "same"
        e.take(body)
        self.changed()
        return "changed"

    def scores(self, q: str, tokens: list[str]) -> dict[str, int]:
        """Each readable document's score, those above 0 (see :func:`rules.score`)."""
        ids, titles, descriptions, texts = self.columns()
        contains = operator.contains

        def having(needle: str, column: list[str]) -> set[str]:
            return set(compress(ids, map(contains, column, repeat(needle))))

        found: dict[str, tuple[set[str], set[str], set[str]]] = {}
        for t in tokens:
            if t not in found:
                found[t] = (having(t, titles), having(t, descriptions), having(t, texts))
        if tokens == [q]:  # the phrase is one token
            in_text = found[q][2]
        elif tokens:  # the phrase holds every token: look for it where they all are
            inside = set.intersection(*(found[t][2] for t in found))
            entries = self.entries
            in_text = {d for d in inside if q in entries[d].text}
        else:
            in_text = having(q, texts)
        points: dict[str, int] = {}
        _tiers(points, having(q, titles), having(q, descriptions), in_text, 12, 7, 4)
        for t in tokens:
            _tiers(points, *found[t], 4, 2, 1)
        return points


def _tiers(
    points: dict[str, int],
    title: set[str],
    description: set[str],
    text: set[str],
    *worth: int,
) -> None:
    """Add ``worth[0]`` to the documents in ``title``, else ``worth[1]`` in ``description``,
    else ``worth[2]`` in ``text``."""
    get = points.get
    for doc in title:
        points[doc] = get(doc, 0) + worth[0]
    for doc in description - title:
        points[doc] = get(doc, 0) + worth[1]
    for doc in text - title - description:
        points[doc] = get(doc, 0) + worth[2]


class SearchIndex:
    """The documents of one root as the search scores them (see the module)."""

    def __init__(self) -> None:
        self._parts = {"active": _Part("active"), "archived": _Part("archived")}

    def search(
        self,
        files: Files,
        records: tuple[DocumentRecord, ...],
        query: str,
        limit: int,
        archived: bool,
    ) -> list[Scored]:
        """The best ``limit`` documents of ``records`` for ``query`` as ``(score, record,
        body)``, ordered as the plain scan orders them; every one verified against its file."""
        parts = [self._parts["active"]] + ([self._parts["archived"]] if archived else [])
        verified: set[str] = set()  # read during this search
        for part in parts:
            verified |= part.sync(files, records)
        q, tokens = rules.query_terms(query)
        while True:
            hits: list[Scored] = []
            restart = False
            for points, part, e in _ranking(parts, q, tokens):
                doc = e.record.id
                if doc not in verified:
                    verified.add(doc)
                    outcome = part.verify(files, e)
                    if outcome == "gone":
                        continue
                    if outcome == "changed":
                        restart = True  # its score may have changed: rank again
                        break
                if e.body is None:  # never: only readable entries are ranked
                    continue
                hits.append((points, e.record, e.body))
                if len(hits) == limit:
                    break
            if not restart:
                return hits


def _ranking(parts: list[_Part], q: str, tokens: list[str]) -> Iterator[tuple[int, _Part, _Entry]]:
    """Every matching entry, best first: score, then latest update, then index order."""
    if not q:
        yield from ((1, p, e) for p, e in _recency(parts))
        return
    points: dict[str, int] = {}
    owner: dict[str, _Part] = {}
    for part in parts:
        found = part.scores(q, tokens)
        points.update(found)
        owner.update(dict.fromkeys(found, part))
    groups: dict[int, list[str]] = {}
    for doc, p in points.items():
        groups.setdefault(p, []).append(doc)
    live = sum(len(part.live()) for part in parts)
    for p in sorted(groups, reverse=True):
        members = groups[p]
        if len(members) * 8 >= live:  # a large share: the recency order finds them soonest
            wanted = set(members)
            yield from ((p, part, e) for part, e in _recency(parts) if e.record.id in wanted)
        else:
            ordered = sorted((owner[d].entries[d] for d in members), key=_Entry.rank)
            yield from ((p, owner[e.record.id], e) for e in ordered)


def _recency(parts: list[_Part]) -> Iterable[tuple[_Part, _Entry]]:
    """The readable entries of ``parts``, latest update first (then index order)."""
    if len(parts) == 1:
        return ((parts[0], e) for e in parts[0].live())
    return heapq.merge(*(((p, e) for e in p.live()) for p in parts), key=lambda pe: pe[1].rank())
