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

Finding a term without scanning the bodies: the documents holding a query token are looked up
in the part's :class:`_Words` (the words of every folded body, each listing the documents that
hold it), so a token costs a scan of the vocabulary, not of the bodies; a token held by more
words than a quarter of the documents (short and common) is looked for in the bodies instead,
where it is found early. A phrase of several tokens is looked for only in the bodies holding
every one of them. Titles and descriptions (short) are scanned.

Recording access times: a search that returns results commits those records changed (see
:meth:`~mnemon_sm.flows.documents.cache.IndexCache.commit`: ``index.json`` rewritten, or one
journal line), which puts them in place at their positions; :meth:`SearchIndex.follow` takes
the new records without going over every record again (the index cache likewise re-encodes
only the records replaced).

Bound: one entry per document of the index in the searched status (archived documents are
indexed only once a search includes them), each holding its body, its folded body when that
differs, and its folded title and description: about twice the documents' text; plus the
words: each distinct word once (the vocabulary and its string) and 4 bytes per distinct word
of each body (with the slots retired since the last rebuild, at most as many as the live
ones): for prose, well under the text once more.
"""

from __future__ import annotations

import heapq
import operator
from array import array
from collections.abc import Iterable, Iterator
from itertools import compress, repeat

from mnemon_sm.errors import StorageError
from mnemon_sm.flows.documents import rules
from mnemon_sm.flows.documents.model import DocumentRecord, Status, body_of, content_hash
from mnemon_sm.ports import Files

__all__ = ["SearchIndex"]

Scored = tuple[int, DocumentRecord, str]

COMPACT_FLOOR = 64  # retired slots always tolerated
SCAN_FLOOR = 64  # words holding a token always looked up (above: a quarter of the bodies)
_WORD = rules.TOKEN  # the words of a folded body: maximal runs of a query token's class


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
        "slot",
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
        self.slot = -1  # its body's slot in the part's words (-1: none)

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


class _Words:
    """Which readable documents of one part hold each word of their folded body.

    A *word* is a maximal run of the token characters (``[\\w-]``, the class of
    :func:`rules.query_terms`) in a folded body. Every character of a query token is of that
    class, so a token occurs in a body exactly when it occurs in one of the body's words: the
    documents holding a token are those listed under the vocabulary words containing it.

    Each indexed body has a *slot* (a number, never reused before :meth:`compact`); the
    postings list the slots under each word (``array('I')``, 4 bytes a slot) and are never
    edited in place: a body that changes, becomes unreadable or leaves the index retires its
    slot (``owners[slot] = None``) and a changed body takes a new slot. The vocabulary string
    holds each word once between ``\\x00`` separators (never a word character), words new
    since the last search appended at its end; :meth:`having` finds a token in it with
    ``str.find``, maps each hit to its word by the separators around it and jumps to the word's
    end, so a token absent from every body costs one scan of the vocabulary (not of the
    bodies), and a present one a find per word holding it. When retired slots outnumber the
    live ones, everything is rebuilt from the live bodies (amortised: at least as many changes
    as documents since the last rebuild).
    """

    SEP = "\x00"

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Nothing indexed."""
        self.owners: list[_Entry | None] = []
        self.postings: dict[str, array[int]] = {}
        self.vocabulary = self.SEP
        self.fresh: list[str] = []  # words not yet in the vocabulary string
        self.live = 0

    def put(self, e: _Entry) -> None:
        """Index ``e``'s current body under a new slot (its old one retired)."""
        self.drop(e)
        slot = e.slot = len(self.owners)
        self.owners.append(e)
        self.live += 1
        postings = self.postings
        for word in set(_WORD.findall(e.text)):
            slots = postings.get(word)
            if slots is None:
                slots = postings[word] = array("I")
                self.fresh.append(word)
            slots.append(slot)

    def drop(self, e: _Entry) -> None:
        """Retire ``e``'s slot, if it has one."""
        if e.slot >= 0:
            self.owners[e.slot] = None
            e.slot = -1
            self.live -= 1

    def compact(self) -> None:
        """Rebuild when retired slots outnumber the live ones (and are not a handful)."""
        retired = len(self.owners) - self.live
        if retired <= max(self.live, COMPACT_FLOOR):
            return
        live = [e for e in self.owners if e is not None]
        self.reset()
        for e in live:
            e.slot = -1
            self.put(e)

    def having(self, token: str, limit: int) -> set[_Entry] | None:
        """The readable entries whose folded body holds ``token`` (a query token: no
        separator in it), or None when more than ``limit`` words hold it (then a scan of the
        bodies is the cheaper way)."""
        if self.fresh:
            self.vocabulary += self.SEP.join(self.fresh) + self.SEP
            self.fresh = []
        vocabulary, postings, sep = self.vocabulary, self.postings, self.SEP
        find, rfind = vocabulary.find, vocabulary.rfind
        slots: set[int] = set()
        pos, words = 0, 0
        while (hit := find(token, pos)) >= 0:
            words += 1
            if words > limit:
                return None
            pos = find(sep, hit)
            slots.update(postings[vocabulary[rfind(sep, 0, hit) + 1 : pos]])
        found: set[_Entry | None] = set(map(self.owners.__getitem__, slots))
        found.discard(None)
        return found  # type: ignore[return-value]


class _Part:
    """The entries of the documents of one status."""

    def __init__(self, status: Status) -> None:
        self.status = status
        self.entries: dict[str, _Entry] = {}
        self.unread: set[str] = set()  # entries whose file is to be read (again)
        self.records: tuple[DocumentRecord, ...] | None = None
        self.words = _Words()
        self._columns: tuple[list[_Entry], list[str], list[str], list[str]] | None = None
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
                        self.forget(e)  # not searched until read again
                        self.unread.add(r.id)
                if e.pos != i:
                    e.pos, changed = i, True
                entries[r.id] = e
            if changed or len(entries) != len(known):
                for doc in known.keys() - entries.keys():
                    self.words.drop(known[doc])
                self.unread &= entries.keys()
                self.changed()
            self.entries, self.records = entries, records
        if not self.unread:
            return set()
        read = [doc for doc in self.entries if doc in self.unread]  # in index order
        for doc in read:
            e = self.entries[doc]
            body = e.read(files)
            if body is None:
                self.forget(e)
            else:
                self.take(e, body)
                self.unread.discard(doc)
        return set(read)

    def follow(
        self,
        searched: tuple[DocumentRecord, ...],
        records: tuple[DocumentRecord, ...],
        changed: dict[str, DocumentRecord],
    ) -> None:
        """``records`` are ``searched`` with the records of ``changed`` (by id) put in their
        place: if ``searched`` are the records last synced, take ``records`` without going
        over every record. A changed record that a search would see differently makes the
        next sync go over them all."""
        if self.records is not searched:
            return
        entries = self.entries
        for doc, r in changed.items():
            e = entries.get(doc)
            if e is None:
                if r.status == self.status:
                    self.records = None
                continue
            if r.status != self.status or records[e.pos] is not r:
                self.records = None
                continue
            seen, reload = e.refresh(r)
            if seen or reload:
                self.records = None  # the full sync reads or re-ranks it
                if reload:
                    self.forget(e)
                    self.unread.add(doc)
                self.changed()
        if self.records is not None:
            self.records = records

    def take(self, e: _Entry, body: str) -> None:
        e.take(body)
        self.words.put(e)
        self.changed()

    def forget(self, e: _Entry) -> None:
        """``e`` has no readable body (missing, unreadable, or to be read again)."""
        if e.body is not None or e.slot >= 0:
            e.body = None
            self.words.drop(e)
            self.changed()

    def changed(self) -> None:
        self._columns = self._recency = None

    def live(self) -> list[_Entry]:
        """Readable entries, latest update first (then index order)."""
        if self._recency is None:
            readable = [e for e in self.entries.values() if e.body is not None]
            self._recency = sorted(readable, key=_Entry.rank)
        return self._recency

    def columns(self) -> tuple[list[_Entry], list[str], list[str], list[str]]:
        """The readable entries and their folded titles, descriptions and bodies."""
        if self._columns is None:
            live = self.live()
            self._columns = (
                live,
                [e.title for e in live],
                [e.description for e in live],
                [e.text for e in live],
            )
        return self._columns

    def verify(self, files: Files, e: _Entry) -> str:
        """``same``, ``gone`` (missing or unreadable: retried next time) or ``changed``."""
        body = e.read(files)
        if body is None:
            self.forget(e)
            self.unread.add(e.record.id)
            return "gone"
        if body == e.body:
            return "same"
        self.take(e, body)
        return "changed"

    def scores(self, q: str, tokens: list[str]) -> dict[_Entry, int]:
        """Each readable entry's score, those above 0 (see :func:`rules.score`)."""
        self.words.compact()
        live, titles, descriptions, texts = self.columns()
        contains = operator.contains
        limit = max(SCAN_FLOOR, len(live) // 4)

        def having(needle: str, column: list[str]) -> set[_Entry]:
            return set(compress(live, map(contains, column, repeat(needle))))

        def in_bodies(token: str) -> set[_Entry]:
            found = self.words.having(token, limit)
            return having(token, texts) if found is None else found

        found: dict[str, tuple[set[_Entry], set[_Entry], set[_Entry]]] = {}
        for t in tokens:
            if t not in found:
                found[t] = (having(t, titles), having(t, descriptions), in_bodies(t))
        if tokens == [q]:  # the phrase is one token
            in_text = found[q][2]
        elif tokens:  # the phrase holds every token: look for it where they all are
            inside = set.intersection(*(found[t][2] for t in found))
            in_text = {e for e in inside if q in e.text}
        else:
            in_text = having(q, texts)
        points: dict[_Entry, int] = {}
        _tiers(points, having(q, titles), having(q, descriptions), in_text, 12, 7, 4)
        for t in tokens:
            _tiers(points, *found[t], 4, 2, 1)
        return points


def _tiers(
    points: dict[_Entry, int],
    title: set[_Entry],
    description: set[_Entry],
    text: set[_Entry],
    *worth: int,
) -> None:
    """Add ``worth[0]`` to the entries in ``title``, else ``worth[1]`` in ``description``,
    else ``worth[2]`` in ``text``."""
    get = points.get
    for e in title:
        points[e] = get(e, 0) + worth[0]
    for e in description - title:
        points[e] = get(e, 0) + worth[1]
    for e in text - title - description:
        points[e] = get(e, 0) + worth[2]


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

    def follow(
        self,
        searched: tuple[DocumentRecord, ...],
        records: tuple[DocumentRecord, ...],
        fresh: dict[str, DocumentRecord],
    ) -> None:
        """The index is now ``records``: ``searched`` with the records of ``fresh`` put in
        their place (their access times recorded); see :meth:`_Part.follow`."""
        for part in self._parts.values():
            part.follow(searched, records, fresh)


def _ranking(parts: list[_Part], q: str, tokens: list[str]) -> Iterator[tuple[int, _Part, _Entry]]:
    """Every matching entry, best first: score, then latest update, then index order."""
    if not q:
        yield from ((1, p, e) for p, e in _recency(parts))
        return
    points: dict[_Entry, int] = {}
    owner: dict[_Entry, _Part] = {}
    for part in parts:
        found = part.scores(q, tokens)
        points.update(found)
        owner.update(dict.fromkeys(found, part))
    groups: dict[int, list[_Entry]] = {}
    for e, p in points.items():
        groups.setdefault(p, []).append(e)
    live = sum(len(part.live()) for part in parts)
    for p in sorted(groups, reverse=True):
        members = groups[p]
        if len(members) * 8 >= live:  # a large share: the recency order finds them soonest
            wanted = set(members)
            yield from ((p, part, e) for part, e in _recency(parts) if e in wanted)
        else:
            yield from ((p, owner[e], e) for e in sorted(members, key=_Entry.rank))


def _recency(parts: list[_Part]) -> Iterable[tuple[_Part, _Entry]]:
    """The readable entries of ``parts``, latest update first (then index order)."""
    if len(parts) == 1:
        return ((parts[0], e) for e in parts[0].live())
    return heapq.merge(*(((p, e) for e in p.live()) for p in parts), key=lambda pe: pe[1].rank())
