"""The side index: a rebuildable file next to ``mnemon.db`` that finds candidates fast.

Theory of operation
-------------------
``mnemon.db`` must stay exactly Mnemon's, so everything recall and remember need beyond its
own indexes lives in ``mnemon-sm-index.db`` in the same store directory, attached to the
store's connection as schema ``idx`` (so one transaction covers both files):

- ``docs``: one row per ACTIVE insight, keyed by the insight's rowid in ``mnemon.db``: its id,
  category, source, importance, creation second (``ts``), a hash of its content (duplicate
  checks, vectors), a signature of the columns the index depends on, its Mnemon tokens and
  entity keys, and its analyzed terms (:mod:`.lexical`) with their count;
- ``fts``: an FTS5 table over ``docs.terms`` (external content, tokenizer ``unicode61``, which
  leaves our already analyzed terms as they are), ``vocab(term, df)`` (document frequencies,
  prefix and spelling lookups: kept by add and remove, because FTS5's own vocabulary table
  counts a term's documents by reading its whole posting list, 0.2 ms for a word in 8% of
  100k memories) and ``totals`` (insight count and total length, for BM25): relevance
  recall's lexical half;
- ``postings(token, imp, ts, doc)``: every Mnemon token of an insight's content, tags and
  entities (smart and keyword recall);
- ``ent_postings(key, doc)`` and ``ents(key, df)``: entity keys, for entity edges and for
  recognising stored entities in a query;
- ``vectors(hash, model, vec, seq)``: the embedder's vectors by content hash, numbered in the
  order they were stored (:mod:`.vectors`); they survive rebuilds, and the last insight
  holding a content takes its vector with it;
- ``meta``: the format, the fingerprint below, ``generation`` (bumped by every change of
  ``docs``) and ``epoch`` (bumped by rebuilds and by refreshes after another program's
  changes), which caches built on the index compare.

The index only ever selects candidates; every score is computed from the insight itself, so
results equal a full scan (a row sharing a token with the query is always found).

Staleness. ``meta.fingerprint`` holds ``[row count, max rowid, max updated_at, max oplog id]``
of ``mnemon.db`` as of the index's last change; our writes keep it current in the same
transaction. ``PRAGMA data_version`` tells a connection when another connection committed to
either file; then (and once after opening) the real fingerprint is computed and, when it
differs, the index is refreshed: rows whose signature (id, updated_at, importance, category,
source, created_at, content length, tags, entities) changed are re-indexed, vanished or deleted
ones dropped; when most rows changed, or the file is unreadable or of another format, it is
rebuilt from scratch, telling ``progress`` how far it got when the store is large. An edit that
changes none of those values goes unnoticed; ``EmbeddedStore.rebuild_index`` forces a rebuild.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import sqlite3
import stat
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy

from mnemon_sm.adapters.sqlite.lexical import Rowids, Stats, analyze
from mnemon_sm.adapters.sqlite.recall import ts_key
from mnemon_sm.adapters.sqlite.rows import COLUMNS, insight
from mnemon_sm.adapters.sqlite.tokens import EntityMatcher, entity_key, token_set

__all__ = ["INDEX_FILE", "SideIndex", "content_hash"]

INDEX_FILE = "mnemon-sm-index.db"
FORMAT = "3"
_CHUNK = 500  # ids per IN (...) list
_SCAN = 400  # vocabulary rows a prefix lookup reads at most
PROGRESS_FROM = 2000  # insights a refresh must index before it reports progress
_NEAR_SCAN = 1000  # vocabulary rows a spelling lookup reads at most
# dropped by a reset (fts_vocab: format 2 and older)
_TABLES = ("fts_vocab", "fts", "docs", "postings", "ent_postings", "ents", "vocab", "totals")
_DDL = (
    "CREATE TABLE IF NOT EXISTS idx.meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS idx.docs (doc INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE,"
    " category TEXT NOT NULL, source TEXT NOT NULL, imp INTEGER NOT NULL, ts INTEGER NOT NULL,"
    " hash INTEGER NOT NULL, sig INTEGER NOT NULL, tokens TEXT NOT NULL, ents TEXT NOT NULL,"
    " terms TEXT NOT NULL, dl INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS idx.docs_ts ON docs(ts, doc)",
    "CREATE INDEX IF NOT EXISTS idx.docs_source_ts ON docs(source, ts, doc)",
    "CREATE INDEX IF NOT EXISTS idx.docs_hash ON docs(hash)",
    "CREATE TABLE IF NOT EXISTS idx.postings (token TEXT NOT NULL, imp INTEGER NOT NULL,"
    " ts INTEGER NOT NULL, doc INTEGER NOT NULL, PRIMARY KEY (token, imp, ts, doc))"
    " WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS idx.ent_postings (key TEXT NOT NULL, doc INTEGER NOT NULL,"
    " PRIMARY KEY (key, doc)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS idx.ents (key TEXT PRIMARY KEY, df INTEGER NOT NULL)"
    " WITHOUT ROWID",
    "CREATE VIRTUAL TABLE IF NOT EXISTS idx.fts USING fts5(terms, content='docs',"
    " content_rowid='doc', tokenize='unicode61 remove_diacritics 0', detail=column)",
    "CREATE TABLE IF NOT EXISTS idx.vocab (term TEXT PRIMARY KEY, df INTEGER NOT NULL)"
    " WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS idx.totals (id INTEGER PRIMARY KEY CHECK (id = 0),"
    " docs INTEGER NOT NULL, length INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO idx.totals VALUES (0, 0, 0)",
    "CREATE TABLE IF NOT EXISTS idx.vectors (hash INTEGER PRIMARY KEY, model TEXT NOT NULL,"
    " vec BLOB NOT NULL, seq INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS idx.vectors_seq ON vectors(seq)",
)
_KEY = {"ents": "key", "vocab": "term"}  # the key column of each counted-key table
_SIG_COLUMNS = (
    "id, updated_at, importance, category, source, created_at, length(content), tags, entities"
)


def _int64(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big", signed=True)


def content_hash(content: str) -> int:
    return _int64(content.encode("utf-8", "surrogatepass"))


def _sig(values: Sequence[Any]) -> int:
    return _int64(repr(tuple(values)).encode("utf-8", "surrogatepass"))


def _chunks(items: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def _marks(items: Sequence[Any]) -> str:
    return ",".join("?" * len(items))


def _create(path: str) -> None:
    """Create the index file ``path`` (mode 0600) if it is missing, through no link; the
    open's own checks are in :mod:`.pin`. An existing file is not opened: closing a descriptor
    of it would drop the locks another connection of this process holds on it (see
    :mod:`.pin`), so only a link is refused here (``ELOOP``, as ``O_NOFOLLOW`` gives)."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_NOFOLLOW, 0o600))
    except FileExistsError:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            raise OSError(errno.ELOOP, "the side index is a symbolic link", path) from None


class SideIndex:
    """The side index of one store, attached to that store's connection."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        path: str,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.conn = conn
        self.path = path
        self._progress = progress  # told (done, total) while a large refresh runs
        self.dirty = False  # changed inside the current transaction
        self._seen: tuple[int, int] | None = None
        self._matcher: EntityMatcher | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def attach(
        self, checked: Callable[[sqlite3.Connection], None] | None = None, *, private: bool = False
    ) -> None:
        """Attach the index file (created 0600 if missing; recreated if unreadable).
        ``checked(conn)`` runs right after the ``ATTACH``, before anything is read or written
        there (the check that SQLite opened the right file, see :mod:`.pin`).

        ``private``: attach an index in memory instead, built from ``mnemon.db`` on first use
        and kept current the same way, for a store that must write no file (read-only).
        """
        if private:
            self._attach(None, ":memory:")
            return
        deadline = time.monotonic() + ATTACH_WAIT_S
        while True:
            try:
                self._attach(checked)
                return
            except sqlite3.DatabaseError as exc:
                if any(row[1] == "idx" for row in self.conn.execute("PRAGMA database_list")):
                    self.conn.execute("DETACH DATABASE idx")
                if _unreadable(exc):
                    break
                # Busy or locked: another process opens or creates the same index (SQLite
                # answers some of those races at once, without its busy handler): again.
                if not _busy(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(_ATTACH_POLL_S)
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(self.path + suffix):
                os.unlink(self.path + suffix)
        self._attach(checked)

    def _attach(
        self, checked: Callable[[sqlite3.Connection], None] | None, path: str | None = None
    ) -> None:
        path = self.path if path is None else path
        if path != ":memory:":
            _create(path)
        self.conn.execute("ATTACH DATABASE ? AS idx", (path,))
        if checked is not None:
            checked(self.conn)
        self.conn.execute("PRAGMA idx.journal_mode = WAL")
        self.conn.execute("PRAGMA idx.synchronous = NORMAL")  # rebuildable: no fsync per commit
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _DDL:
                self.conn.execute(statement)
            if self._meta("format") != FORMAT:
                self._reset()
                self._set_meta("format", FORMAT)
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def _meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM idx.meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO idx.meta VALUES (?, ?)", (key, value))

    def _reset(self) -> None:
        for table in _TABLES:
            self.conn.execute(f"DROP TABLE IF EXISTS idx.{table}")
        self.conn.execute("DELETE FROM idx.meta WHERE key = 'fingerprint'")
        for statement in _DDL:
            self.conn.execute(statement)
        self._matcher = None
        self.changed()
        self._new_epoch()

    def changed(self) -> None:
        """Note a change of the index inside the current transaction (bumps ``generation``)."""
        self.dirty = True
        self.conn.execute(
            "INSERT INTO idx.meta VALUES ('generation', '1') ON CONFLICT(key)"
            " DO UPDATE SET value = CAST(value AS INTEGER) + 1"
        )

    def generation(self) -> str:
        """A counter of the index's changes (any connection's), for caches built on it."""
        return self._meta("generation") or "0"

    def epoch(self) -> str:
        """A counter of the rebuilds and of the refreshes after another program's changes
        (when an indexed insight may have changed in place)."""
        return self._meta("epoch") or "0"

    def _new_epoch(self) -> None:
        self.conn.execute(
            "INSERT INTO idx.meta VALUES ('epoch', '1') ON CONFLICT(key)"
            " DO UPDATE SET value = CAST(value AS INTEGER) + 1"
        )

    # -- staleness --------------------------------------------------------------------------

    def _versions(self) -> tuple[int, int]:
        main = self.conn.execute("PRAGMA main.data_version").fetchone()[0]
        side = self.conn.execute("PRAGMA idx.data_version").fetchone()[0]
        return int(main), int(side)

    def needs_sync(self) -> bool:
        """True when another connection may have changed either file since the last sync."""
        return self._seen is None or self._versions() != self._seen

    def fingerprint(self) -> list[Any]:
        """``[row count, max rowid, max updated_at, max oplog id]`` of ``mnemon.db`` (a scan)."""
        count, top, updated = self.conn.execute(
            "SELECT count(*), max(rowid), max(updated_at) FROM main.insights"
        ).fetchone()
        oplog = self.conn.execute("SELECT max(id) FROM main.oplog").fetchone()[0]
        return [count, top, updated, oplog]

    def sync(self, *, force: bool = False) -> None:
        """Inside a write transaction: bring the index in line with ``mnemon.db``."""
        seen = self._versions()
        if not force and seen == self._seen:
            return
        current = self.fingerprint()
        stored = self._meta("fingerprint")
        if force:
            self._reset()
        if force or stored is None or json.loads(stored) != current:
            self._refresh()
            self._set_meta("fingerprint", json.dumps(current))
        self._matcher = None
        self._seen = seen

    def forget_sync(self) -> None:
        """After a rolled-back transaction that changed the index: check again next time."""
        self._seen = None
        self._matcher = None
        self.dirty = False

    def note_write(self, added: int, updated_at: str | None) -> None:
        """After our own write in this transaction: carry the stored fingerprint forward."""
        stored = self._meta("fingerprint")
        if stored is None:
            return
        count, _, top_updated, _ = json.loads(stored)
        if updated_at is not None and (top_updated is None or updated_at > top_updated):
            top_updated = updated_at
        top = self.conn.execute("SELECT max(rowid) FROM main.insights").fetchone()[0]
        oplog = self.conn.execute("SELECT max(id) FROM main.oplog").fetchone()[0]
        self._set_meta("fingerprint", json.dumps([count + added, top, top_updated, oplog]))

    def _refresh(self) -> None:
        rows = self.conn.execute(
            f"SELECT rowid, {_SIG_COLUMNS} FROM main.insights WHERE deleted_at IS NULL"
        )
        active = {row[0]: _sig(row[1:]) for row in rows}
        indexed = dict(self.conn.execute("SELECT doc, sig FROM idx.docs").fetchall())
        stale = [doc for doc, sig in indexed.items() if active.get(doc) != sig]
        fresh = [doc for doc, sig in active.items() if indexed.get(doc) != sig]
        if len(fresh) > 1000 and 2 * len(fresh) > len(active):
            self._reset()
            stale, fresh = [], list(active)
        if stale or fresh:
            self._new_epoch()
        self.remove(stale)
        fresh.sort()
        report = self._progress if len(fresh) >= PROGRESS_FROM else None
        for start in range(0, len(fresh), _CHUNK):
            self._add_part(fresh[start : start + _CHUNK])
            if report is not None:
                report(min(start + _CHUNK, len(fresh)), len(fresh))

    def refresh_rows(self, rowids: Sequence[int]) -> None:
        """Inside a write transaction, after rows of ``mnemon.db`` were written behind the
        index's back by its owner (a replica applying its upstream's changes, see
        :mod:`.replica`): re-index those of ``rowids`` whose indexed columns changed, drop the
        ones no longer active, and take the fingerprint as current, so no full refresh
        follows."""
        active: dict[int, int] = {}
        indexed: dict[int, int] = {}
        for part in _chunks(rowids):
            marks = _marks(part)
            rows = self.conn.execute(
                f"SELECT rowid, {_SIG_COLUMNS} FROM main.insights"
                f" WHERE rowid IN ({marks}) AND +deleted_at IS NULL",
                part,
            )
            active.update((row[0], _sig(row[1:])) for row in rows)
            indexed.update(
                self.conn.execute(f"SELECT doc, sig FROM idx.docs WHERE doc IN ({marks})", part)
            )
        stale = [doc for doc, sig in indexed.items() if active.get(doc) != sig]
        fresh = sorted(doc for doc, sig in active.items() if indexed.get(doc) != sig)
        if any(doc in active for doc in stale):  # changed in place: caches look again
            self._new_epoch()
        self.remove(stale)
        self.add(fresh)
        self._set_meta("fingerprint", json.dumps(self.fingerprint()))

    # -- maintenance ------------------------------------------------------------------------

    def add(self, rowids: Sequence[int]) -> None:
        """Index the insights with these rowids (read from ``mnemon.db``, active ones only)."""
        for part in _chunks(rowids):
            self._add_part(part)

    def _add_part(self, rowids: Sequence[int]) -> None:
        docs: list[tuple[Any, ...]] = []
        postings: list[tuple[str, int, int, int]] = []
        ents: list[tuple[str, int]] = []
        vocab: Counter[str] = Counter()
        length = 0
        rows = self.conn.execute(
            f"SELECT {COLUMNS}, {_SIG_COLUMNS} FROM main.insights"
            f" WHERE rowid IN ({_marks(rowids)}) AND +deleted_at IS NULL",
            tuple(rowids),
        )
        for row in rows:
            doc, item = row[0], insight(row[:11])
            tokens = token_set(item.content, *item.tags, *item.entities)
            terms = analyze(" ".join((item.content, *item.tags, *item.entities)))
            keys = sorted({entity_key(e) for e in item.entities})
            ts = ts_key(item.created_at)
            length += len(terms)
            docs.append(
                (
                    *(doc, item.id, item.category, item.source, item.importance, ts),
                    *(content_hash(item.content), _sig(row[11:])),
                    *(" ".join(sorted(tokens)), json.dumps(keys), " ".join(terms), len(terms)),
                )
            )
            postings.extend((token, item.importance, ts, doc) for token in tokens)
            ents.extend((key, doc) for key in keys)
            vocab.update(set(terms))
        if not docs:
            return
        self.changed()
        postings.sort()
        self.conn.executemany("INSERT INTO idx.docs VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", docs)
        self.conn.executemany(
            "INSERT INTO idx.fts (rowid, terms) VALUES (?, ?)", [(d[0], d[10]) for d in docs]
        )
        self.conn.execute(
            "UPDATE idx.totals SET docs = docs + ?, length = length + ? WHERE id = 0",
            (len(docs), length),
        )
        self.conn.executemany("INSERT INTO idx.postings VALUES (?,?,?,?)", postings)
        self.conn.executemany("INSERT INTO idx.ent_postings VALUES (?,?)", ents)
        self._count("ents", Counter(key for key, _ in ents))
        self._count("vocab", vocab)
        if self._matcher is not None:
            for key, _ in ents:
                self._matcher.add(key)

    def _count(self, table: str, counts: Counter[str]) -> None:
        """Add ``counts`` to the document frequencies of a counted-key table (ents, vocab)."""
        key = _KEY[table]
        self.conn.executemany(
            f"INSERT INTO idx.{table} VALUES (?, ?)"
            f" ON CONFLICT({key}) DO UPDATE SET df = df + excluded.df",
            sorted(counts.items()),
        )

    def _uncount(self, table: str, keys: Iterable[str]) -> list[str]:
        """One document fewer for each of ``keys``; returns the keys no document holds now
        (their rows are gone)."""
        key, gone = _KEY[table], []
        for value in sorted(keys):
            self.conn.execute(f"UPDATE idx.{table} SET df = df - 1 WHERE {key} = ?", (value,))
            dropped = self.conn.execute(
                f"DELETE FROM idx.{table} WHERE {key} = ? AND df <= 0", (value,)
            )
            if dropped.rowcount:
                gone.append(value)
        return gone

    def remove(self, docs: Iterable[int]) -> None:
        """Drop these rowids from the index (missing ones are ignored)."""
        for doc in docs:
            row = self.conn.execute(
                "SELECT imp, ts, tokens, ents, terms, dl, hash FROM idx.docs WHERE doc = ?", (doc,)
            ).fetchone()
            if row is None:
                continue
            self.changed()
            imp, ts, tokens, keys = row[0], row[1], row[2].split(), json.loads(row[3])
            self.conn.execute(
                "INSERT INTO idx.fts (fts, rowid, terms) VALUES ('delete', ?, ?)", (doc, row[4])
            )
            self.conn.execute(
                "UPDATE idx.totals SET docs = docs - 1, length = length - ? WHERE id = 0",
                (row[5],),
            )
            self.conn.executemany(
                "DELETE FROM idx.postings WHERE token = ? AND imp = ? AND ts = ? AND doc = ?",
                [(token, imp, ts, doc) for token in tokens],
            )
            for key in keys:
                self.conn.execute(
                    "DELETE FROM idx.ent_postings WHERE key = ? AND doc = ?", (key, doc)
                )
            for key in self._uncount("ents", keys):
                if self._matcher is not None:
                    self._matcher.discard(key)
            self._uncount("vocab", set(row[4].split()))
            self.conn.execute("DELETE FROM idx.docs WHERE doc = ?", (doc,))
            self.conn.execute(
                "DELETE FROM idx.vectors WHERE hash = ?1"
                " AND NOT EXISTS (SELECT 1 FROM idx.docs WHERE hash = ?1)",
                (row[6],),
            )

    # -- queries ----------------------------------------------------------------------------

    def matcher(self) -> EntityMatcher:
        """The stored entity keys (cached; kept current by add and remove)."""
        if self._matcher is None:
            keys = [key for (key,) in self.conn.execute("SELECT key FROM idx.ents")]
            self._matcher = EntityMatcher(keys)
        return self._matcher

    def _ids(self, docs: Sequence[int]) -> list[str]:
        found: dict[int, str] = {}
        for part in _chunks(docs):
            sql = f"SELECT doc, id FROM idx.docs WHERE doc IN ({_marks(part)})"
            found.update(self.conn.execute(sql, tuple(part)).fetchall())
        return [found[doc] for doc in docs if doc in found]

    def keyword_top(
        self, tokens: Iterable[str], k: int, category: str | None, source: str | None
    ) -> list[str]:
        """Ids ranked by (token overlap, importance, ts, rowid), at least one token shared."""
        wanted = sorted(tokens)
        if not wanted:
            return []
        where, args = [f"p.token IN ({_marks(wanted)})"], list[Any](wanted)
        join = ""
        if category is not None or source is not None:
            join = " JOIN idx.docs d ON d.doc = p.doc"
            for column, value in (("category", category), ("source", source)):
                if value is not None:
                    where.append(f"d.{column} = ?")
                    args.append(value)
        rows = self.conn.execute(
            f"SELECT p.doc, count(*) AS n FROM idx.postings p{join} WHERE {' AND '.join(where)}"
            " GROUP BY p.imp, p.ts, p.doc ORDER BY n DESC, p.imp DESC, p.ts DESC, p.doc DESC"
            " LIMIT ?",
            (*args, k),
        )
        return self._ids([doc for doc, _ in rows])

    # -- relevance ---------------------------------------------------------------------------

    def frequency(self, terms: Sequence[str]) -> dict[str, int]:
        """The document frequency of those ``terms`` the index holds."""
        out: dict[str, int] = {}
        for term in terms:
            row = self.conn.execute("SELECT df FROM idx.vocab WHERE term = ?", (term,)).fetchone()
            if row is not None and row[0] > 0:
                out[term] = int(row[0])
        return out

    def extensions(self, term: str, k: int) -> list[str]:
        """Up to ``k`` stored terms that start with ``term`` (longer ones), most frequent first,
        among the first :data:`_SCAN` in order."""
        rows = self.conn.execute(
            "SELECT term, df FROM idx.vocab WHERE term > ? AND term < ? LIMIT ?",
            (term, term + "\U0010ffff", _SCAN),
        ).fetchall()
        rows.sort(key=lambda row: (-row[1], row[0]))
        return [str(found) for found, _ in rows[:k]]

    def neighbours(self, term: str, bound: int) -> list[str]:
        """Stored terms sharing the first three letters of ``term`` whose length is within
        ``bound`` of its length (at most :data:`_NEAR_SCAN` looked at)."""
        head = term[:3]
        rows = self.conn.execute(
            "SELECT term FROM idx.vocab WHERE term >= ? AND term < ? LIMIT ?",
            (head, head + "\U0010ffff", _NEAR_SCAN),
        )
        return [str(found) for (found,) in rows if abs(len(found) - len(term)) <= bound]

    def stats(self, terms: Sequence[str]) -> Stats:
        """The collection's size and mean length, and the frequency of ``terms``."""
        docs, length = self.conn.execute(
            "SELECT docs, length FROM idx.totals WHERE id = 0"
        ).fetchone()
        mean = length / docs if docs else 0.0
        return Stats(int(docs), mean, self.frequency(terms))

    def matching(
        self, expression: str, k: int, category: str | None, source: str | None
    ) -> Rowids:
        """Rowids of the ``k`` newest memories matching the FTS5 ``expression``, filtered, in
        no particular order. (No bm25 here: ranking a match costs a lookup of its length; see
        :func:`lexical.candidate_pool`.) Read as one comma-joined string: thousands of rows
        cost a millisecond as Python rows, 40 us this way."""
        where, args = ["fts MATCH ?"], list[Any]([expression])
        filters = [(c, v) for c, v in (("category", category), ("source", source)) if v]
        if filters:
            clause = " AND ".join(f"{column} = ?" for column, _ in filters)
            where.append(f"rowid IN (SELECT doc FROM idx.docs WHERE {clause})")
            args.extend(value for _, value in filters)
        (joined,) = self.conn.execute(
            "SELECT group_concat(rowid) FROM (SELECT rowid FROM idx.fts"
            f" WHERE {' AND '.join(where)} ORDER BY rowid DESC LIMIT ?)",
            (*args, k),
        ).fetchone()
        return numpy.fromstring(joined or "", dtype=numpy.int64, sep=",")

    def terms_of(self, docs: Sequence[int]) -> dict[int, list[str]]:
        """The analyzed terms of these rowids."""
        out: dict[int, list[str]] = {}
        for part in _chunks(docs):
            sql = f"SELECT doc, terms FROM idx.docs WHERE doc IN ({_marks(part)})"
            for doc, text in self.conn.execute(sql, tuple(part)):
                out[int(doc)] = text.split()
        return out

    def newest(self, k: int, category: str | None = None, source: str | None = None) -> list[str]:
        """Ids of the ``k`` newest active insights (ts, then rowid), optionally filtered."""
        where, args = [], []
        for column, value in (("category", category), ("source", source)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        sql = f"SELECT id FROM idx.docs{clause} ORDER BY ts DESC, doc DESC LIMIT ?"
        return [node for (node,) in self.conn.execute(sql, (*args, k))]

    def tokens(self, ids: Sequence[str]) -> dict[str, frozenset[str]]:
        out: dict[str, frozenset[str]] = {}
        for part in _chunks(ids):
            sql = f"SELECT id, tokens FROM idx.docs WHERE id IN ({_marks(part)})"
            for node, text in self.conn.execute(sql, tuple(part)):
                out[node] = frozenset(text.split())
        return out

    def duplicate(self, content: str) -> str | None:
        """The oldest active insight whose content is byte-identical to ``content``."""
        row = self.conn.execute(
            "SELECT i.id FROM idx.docs d JOIN main.insights i ON i.rowid = d.doc"
            " WHERE d.hash = ? AND i.content = ? AND +i.deleted_at IS NULL ORDER BY d.doc LIMIT 1",
            (content_hash(content), content),
        ).fetchone()
        return None if row is None else str(row[0])

    def latest_of_source(self, source: str, exclude: int) -> tuple[str, int] | None:
        """(id, ts) of the newest active insight from ``source`` other than ``exclude``."""
        row = self.conn.execute(
            "SELECT id, ts FROM idx.docs WHERE source = ? AND doc != ?"
            " ORDER BY ts DESC, doc DESC LIMIT 1",
            (source, exclude),
        ).fetchone()
        return None if row is None else (str(row[0]), int(row[1]))

    def window(self, low: int, high: int, k: int, exclude: int) -> list[tuple[str, int]]:
        """(id, ts) of up to ``k`` newest insights created within ``[low, high]``."""
        rows = self.conn.execute(
            "SELECT id, ts FROM idx.docs WHERE ts BETWEEN ? AND ? AND doc != ?"
            " ORDER BY ts DESC, doc DESC LIMIT ?",
            (low, high, exclude, k),
        )
        return [(str(node), int(ts)) for node, ts in rows]

    def with_entity(self, key: str, k: int, exclude: int) -> list[str]:
        """Ids of the ``k`` most recently written insights carrying the entity ``key``."""
        docs = self.conn.execute(
            "SELECT doc FROM idx.ent_postings WHERE key = ? AND doc != ?"
            " ORDER BY doc DESC LIMIT ?",
            (key, exclude, k),
        )
        return self._ids([doc for (doc,) in docs])

    def last_written(self, k: int, exclude: int) -> list[tuple[str, int, int, frozenset[str]]]:
        """(id, ts, rowid, tokens) of the ``k`` most recently written other insights."""
        rows = self.conn.execute(
            "SELECT id, ts, doc, tokens FROM idx.docs WHERE doc != ? ORDER BY doc DESC LIMIT ?",
            (exclude, k),
        )
        return [(str(a), int(b), int(c), frozenset(d.split())) for a, b, c, d in rows]

    def timeline(self, source: str) -> list[str]:
        """Ids of the source's active insights, oldest first (ts, then rowid)."""
        rows = self.conn.execute(
            "SELECT id FROM idx.docs WHERE source = ? ORDER BY ts, doc", (source,)
        )
        return [node for (node,) in rows]


_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_CORRUPT, _SQLITE_NOTADB = 5, 6, 11, 26
ATTACH_WAIT_S = 5.0  # how long attaching retries while another process holds the index
_ATTACH_POLL_S = 0.01


def _busy(exc: sqlite3.DatabaseError) -> bool:
    """Whether SQLite refused because another connection holds a lock."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def _unreadable(exc: sqlite3.DatabaseError) -> bool:
    """Whether SQLite found the index file damaged or not a database (so it is rebuilt),
    rather than busy, locked or failing for another reason (which is raised)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
    text = str(exc)
    return "malformed" in text or "not a database" in text
