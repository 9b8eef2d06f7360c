"""``EmbeddedStore``: the ``LongTermStore`` port over Mnemon-compatible SQLite files.

Theory of operation
-------------------
A space is a Mnemon store: the directory ``<root>/data/<space>/`` holding ``mnemon.db`` (shared
with the real Mnemon, schema in :mod:`.schema`) and our rebuildable side index (:mod:`.sideindex`).
Directories we create are 0700 and files 0600 (SQLite gives ``-wal`` and ``-shm`` the mode of
their database). No symlink below the root is followed: every operation lstat's the path of its
store from the root down (:mod:`..layout`), an open is bracketed by the checks of :mod:`.pin`,
and stores behind a link are not listed. Drafts of creations that crashed are removed when
their space is opened or listed (:mod:`.drafts`).

Each space gets one connection (:class:`handles.Handle`), opened on first use, reopened when
the file was replaced, and kept until :meth:`EmbeddedStore.close` (which checkpoints the WAL with
``TRUNCATE`` so backups see one clean file). A process-wide re-entrant lock per store file
serialises our own threads and instances; SQLite's busy timeout (5 s) covers other processes.
Lock order, everywhere: this object's guard of its handle table, then a store's file lock.
Writes run in one ``BEGIN IMMEDIATE`` transaction and reads in a deferred one (see
:mod:`.handles`). Time comes only from the injected clock, read once per operation.

A read-only store (``readonly``, a root with writes disabled) creates and changes no file: each
space is read through a read-only handle (see :mod:`.handles`) with a private side index in
memory; when no writer has a space's file open (no ``-wal``), it is read as an immutable
snapshot, checked after every read to be still the file's content (else read again).

Recall: ``relevance`` (the default) ranks by :mod:`.lexical` relevance and, with an embedder,
dense similarity from :mod:`.vectors` (query and missing vectors embedded before any lock is
taken), under the rule of :mod:`..ranking`; ``smart``, ``keyword`` and ``basic`` are
Mnemon's own (:mod:`.recall`). The connection syncs as the root's durability asks.

Replica: with an ``upstream`` (Memory Spaces on PostgreSQL), every space here is a replica of
the upstream's (:mod:`.replica`): a read first catches up with it, a write runs inside the
upstream's lock and commits there before it commits here; what only this host computes (the
side index, vectors) is written locally alone. ``export_rows``, ``import_rows`` and
``space_digest`` copy a space's rows as they are (a migration's ``SpaceRows`` capability).

Errors: arguments are validated (:mod:`.checks`) before any lock or transaction, so
``InvalidInput`` means nothing changed; an unknown space is ``UnknownSpace``; a missing or
deleted insight ``UnknownInsight``; every ``sqlite3`` or operating-system failure becomes
``StorageError`` with the original as ``__cause__``.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from types import TracebackType
from typing import TypeVar

import attrs

from mnemon_sm.adapters.path_locks import path_lock
from mnemon_sm.adapters.sqlite import drafts, reads, replica, schema, vectors, writes
from mnemon_sm.adapters.sqlite.handles import Handle, fsync_directory, mkdir_private, storage_error
from mnemon_sm.adapters.sqlite.reads import in_order
from mnemon_sm.adapters.sqlite.replica import Upstream
from mnemon_sm.adapters.sqlite.sideindex import SideIndex
from mnemon_sm.adapters.sqlite.tx import Tx
from mnemon_sm.adapters.sqlite.vectors import EMBED_PER_RECALL, VectorSet
from mnemon_sm.errors import (
    EmbeddingFailed,
    InvalidInput,
    MnemonError,
    StorageError,
    UnknownSpace,
)
from mnemon_sm.ports import Clock
from mnemon_sm.ports.embedder import Embedder, Vectors
from mnemon_sm.ports.embedder_checks import embed_checked
from mnemon_sm.ports.long_term import checks, layout
from mnemon_sm.ports.long_term.checks import Prepared
from mnemon_sm.ports.long_term.digest import COLUMNS, RowsDigest, keyset_pages
from mnemon_sm.ports.long_term.layout import DB_FILE
from mnemon_sm.ports.long_term.port import ROW_TABLES, Rows
from mnemon_sm.ports.long_term.values import (
    Capabilities,
    ForgetReceipt,
    GraphSnapshot,
    ImportDraft,
    ImportReport,
    Insight,
    LinkReceipt,
    RecallResult,
    RelatedHit,
    RememberReceipt,
    SpaceDigest,
    SpaceStatus,
)

__all__ = ["DB_FILE", "DENSE_UNAVAILABLE", "EmbeddedStore"]

T = TypeVar("T")
DENSE_UNAVAILABLE = "dense_unavailable"  # the hint of a relevance recall whose embedder failed
_QUERY_CACHE = 256
_OPLOG_NAMES = {
    "relevance": "recall",
    "smart": "recall",
    "basic": "recall:basic",
    "keyword": "search",
}


class EmbeddedStore:
    """Memory Spaces of one storage root as Mnemon stores (the default long-term store).

    Args:
        root: the storage root; spaces live in ``<root>/data/<space>/mnemon.db``.
        clock: the source of every timestamp written.
        prune_ceiling: auto-prune when a space holds more active insights than this; 0 (the
            default) turns auto-prune off. Mnemon's own default is 1000.
        embedder: turns texts into vectors for dense retrieval in relevance recall (None: lexical
            only). Its failures never fail a recall: it goes on lexically, hinted
            ``dense_unavailable``.
        durability: ``full`` (the default) syncs every commit, ``normal`` syncs at WAL
            checkpoints, ``off`` never (the root's ``durability`` setting).
        progress: told ``(space, done, total)`` while a space's side index is rebuilt from
            scratch (a new or changed index format, a store written by Mnemon itself), for
            stores of :data:`~.sideindex.PROGRESS_FROM` insights or more.
        readonly: create and change no file (reads only; a write raises ``StorageError``).
        upstream: keep every space a replica of this upstream, which holds the truth
            (:mod:`.replica`; the PostgreSQL adapter): reads catch up with it first, writes
            commit there first.
    """

    def __init__(
        self,
        root: str | Path,
        clock: Clock,
        *,
        prune_ceiling: int = 0,
        embedder: Embedder | None = None,
        durability: str = "full",
        progress: Callable[[str, int, int], None] | None = None,
        readonly: bool = False,
        upstream: Upstream | None = None,
    ) -> None:
        if isinstance(prune_ceiling, bool) or not isinstance(prune_ceiling, int):
            raise InvalidInput("prune_ceiling must be an integer")
        if prune_ceiling < 0:
            raise InvalidInput("prune_ceiling must be 0 (off) or positive")
        self._root = Path(root)
        self._clock = clock
        self._ceiling = prune_ceiling
        self._handles: dict[str, Handle] = {}
        self._guard = threading.Lock()
        self._embedder = embedder
        if durability not in schema.SYNCHRONOUS:
            raise InvalidInput("durability must be full, normal or off")
        self._durability = durability
        self._progress = progress
        self._readonly = readonly
        self._upstream = upstream
        self._queries: OrderedDict[str, Vectors] = OrderedDict()  # recent query vectors
        self._vectors: dict[str, VectorSet] = {}  # per space; used under its file lock
        # (space, model) -> (index epoch, rowid up to which every insight has a vector)
        self._embedded_up_to: dict[tuple[str, str], tuple[str, int]] = {}

    # -- plumbing -----------------------------------------------------------------------------

    @property
    def root(self) -> Path:
        return self._root

    @property
    def embedder(self) -> Embedder | None:
        """The embedder of dense retrieval, if any."""
        return self._embedder

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities()

    def _db(self, space: str) -> Path:
        return self._root / "data" / space / DB_FILE

    def _handle(self, space: str) -> Handle:
        """The open handle of ``space``: its path is lstat'ed down from the root on every call
        (a link is refused, a replaced file reopened); opening a space first removes its stale
        drafts (:mod:`.drafts`)."""
        space = checks.space_id(space)
        try:
            info = layout.check_store(self._root, space)
            extra = self._extra(space, info)
            identity = (*layout.identity(info), *extra)
        except FileNotFoundError:
            raise UnknownSpace(f"no space {space!r}") from None
        except OSError as exc:
            raise storage_error(f"opening space {space!r}", exc) from exc
        with self._guard:
            handle = self._handles.get(space)
            if handle is not None and handle.identity == identity and not handle.closed:
                return handle
            if handle is not None:
                with handle.lock:
                    handle.close(checkpoint=False)
            report = self._progress
            if not self._readonly:
                drafts.remove_stale(self._db(space).parent)
            handle = Handle.open(
                self._root,
                space,
                self._durability,
                None if report is None else lambda done, total: report(space, done, total),
                readonly=self._readonly,
                immutable=self._readonly and extra[0] == 0,
                extra=extra,
            )
            self._handles[space] = handle
            return handle

    @contextmanager
    def _locked(self, space: str, what: str) -> Iterator[Handle]:
        while True:
            handle = self._handle(space)
            with handle.lock:
                if handle.closed:
                    continue
                try:
                    yield handle
                except MnemonError:  # typed already (LockTimeout is an OSError too)
                    raise
                except (sqlite3.Error, OSError) as exc:
                    raise storage_error(f"{what} on space {space!r}", exc) from exc
                return

    def _write(self, space: str, what: str, body: Callable[[Tx], T], *, local: bool = False) -> T:
        """Run ``body`` in one write transaction of ``space``; through the upstream unless
        ``local`` (what only the side index holds: vectors, a rebuild)."""
        with self._locked(space, what) as handle:
            upstream = self._upstream
            if upstream is None or local:
                return handle.write(body, self._clock)
            return handle.write(lambda tx: upstream.write(space, tx, body), self._clock)

    def _extra(self, space: str, info: os.stat_result) -> tuple[int, ...]:
        """What else makes an open handle still right for a read-only store: whether a WAL
        exists and, when none does (the handle is then immutable), the file's size and
        times. Nothing for a writable store."""
        if not self._readonly:
            return ()
        if os.path.lexists(f"{self._db(space)}-wal"):
            return (1,)
        return (0, info.st_size, info.st_mtime_ns, info.st_ctime_ns)

    def _read(self, space: str, what: str, body: Callable[[Handle], T], *, index: bool) -> T:
        while True:
            with self._locked(space, what) as handle:
                if self._upstream is not None:
                    self._upstream.catch_up(
                        space, handle.conn, lambda step: handle.write(step, self._clock)
                    )
                result = handle.read(body, self._clock, sync_index=index)
                if not handle.immutable or self._unchanged(space, handle):
                    return result
            # A writer changed the file under an immutable read: read again, through the
            # handle of the file as it is now.

    def _unchanged(self, space: str, handle: Handle) -> bool:
        try:
            info = layout.check_store(self._root, space)
            return (*layout.identity(info), *self._extra(space, info)) == handle.identity
        except OSError:
            return False

    def close(self, *, checkpoint: bool = True) -> None:
        """Checkpoint (``TRUNCATE``) and close every open space; the store stays usable.

        A read-only store checkpoints nothing (a checkpoint writes the database file).
        ``checkpoint=False`` closes the connections only (what a closing ``MemoryRoot`` asks):
        a ``TRUNCATE`` checkpoint holds the write lock while it waits for readers, so other
        processes' writers could time out behind it; SQLite's own checkpoint when the last
        connection closes never waits."""
        with self._guard:
            handles, self._handles = list(self._handles.values()), {}
        failure: BaseException | None = None
        for handle in handles:
            with handle.lock:
                try:
                    handle.close(checkpoint=checkpoint and not self._readonly)
                except sqlite3.Error as exc:
                    failure = failure or exc
        if failure is not None:
            raise storage_error("closing the store", failure) from failure

    def __enter__(self) -> EmbeddedStore:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- spaces -------------------------------------------------------------------------------

    def spaces(self) -> tuple[str, ...]:
        """The stores on disk (:func:`..layout.store_dirs`: a symlinked one is not listed, a
        symlinked ``data/`` is ``CorruptStore``); a space directory without a store has its
        stale drafts removed on the way (a crash during its first creation)."""
        found = layout.store_dirs(self._root)
        for name, is_store in found:
            if not is_store and not self._readonly:
                drafts.remove_stale(self._root / "data" / name)
        return tuple(name for name, is_store in found if is_store)

    def create_space(self, space: str) -> None:
        db = self._db(checks.space_id(space))
        where = layout.where(space, DB_FILE)
        try:
            mkdir_private(self._root)  # the root itself may be a link; nothing below it
            layout.ensure_dir(db.parent.parent, "data")
            layout.ensure_dir(db.parent, layout.where(space))
            if os.path.lexists(db):
                raise FileExistsError(db)
            # The schema is written beside the final name and linked into place, so no
            # program ever sees an empty mnemon.db of ours (an empty one is CorruptStore).
            draft = drafts.draft_path(db)
            draft.unlink(missing_ok=True)  # a crashed attempt of this same thread
            try:
                schema.create(str(draft), where)
                os.link(draft, db, follow_symlinks=False)  # FileExistsError when beaten to it
            finally:
                draft.unlink(missing_ok=True)
            made = layout.identity(os.lstat(db))
            fsync_directory(db.parent)
        except FileExistsError:
            raise InvalidInput(f"space {space!r} already exists") from None
        except (OSError, sqlite3.Error) as exc:
            raise storage_error(f"creating space {space!r}", exc) from exc
        try:
            self._handle(space)  # creates the schema and the side index
        except BaseException:
            with self._guard:
                self._handles.pop(space, None)
            self._discard(space, made)
            raise

    def _discard(self, space: str, made: layout.Identity) -> None:
        """Remove a store this object just created and could not open, only while its path
        still leads, through no link, to the very file it created."""
        try:
            if layout.identity(layout.check_store(self._root, space)) != made:
                return
        except (OSError, StorageError):
            return
        db = self._db(space)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)

    def delete_space(self, space: str) -> None:
        db = self._db(checks.space_id(space))
        with self._guard:  # lock order everywhere: the guard, then a store's file lock
            handle = self._handles.pop(space, None)
        with path_lock(db):
            if handle is not None:
                handle.close(checkpoint=False)
            try:
                layout.check_store(self._root, space)  # never through a link
            except FileNotFoundError:
                raise UnknownSpace(f"no space {space!r}") from None
            except OSError as exc:
                raise storage_error(f"deleting space {space!r}", exc) from exc
            try:
                shutil.rmtree(db.parent)
            except OSError as exc:
                raise storage_error(f"deleting space {space!r}", exc) from exc

    def rebuild_index(self, space: str) -> None:
        """Rebuild the space's side index from ``mnemon.db`` (never needed for correctness
        after changes that touch a fingerprint column; see :mod:`.sideindex`)."""
        self._write(space, "rebuild_index", lambda tx: tx.index.sync(force=True), local=True)

    # -- reads --------------------------------------------------------------------------------

    def status(self, space: str) -> SpaceStatus:
        return self._read(space, "status", lambda h: reads.status(h.conn, h.db_path), index=False)

    def recall(
        self,
        space: str,
        query: str,
        *,
        mode: str = "relevance",
        limit: int = 10,
        category: str | None = None,
        source: str | None = None,
        intent: str | None = None,
        readonly: bool = False,
    ) -> RecallResult:
        query = checks.query(query)
        mode = checks.mode(mode)
        limit = checks.limit(limit)
        category = checks.category_filter(category)
        source = checks.source_filter(source)
        intent = checks.intent(intent)

        now_ms = self._clock.now_ms()
        dense = self._dense(space, query) if mode == "relevance" else None

        def run(conn: sqlite3.Connection, index: SideIndex) -> RecallResult:
            found = reads.recall_rows(
                conn,
                index,
                query,
                mode=mode,
                limit=limit,
                category=category,
                source=source,
                intent=intent,
                now_ms=now_ms,
                dense=None if dense is None else dense.bind(conn, index),
            )
            if dense is not None and dense.failed:
                return attrs.evolve(found, hint=DENSE_UNAVAILABLE)
            return found

        if readonly:
            return self._read(
                space, "recall", lambda h: run(h.conn, h.index), index=mode != "basic"
            )

        def counted(tx: Tx) -> RecallResult:
            result = run(tx.conn, tx.index)
            now = writes.count_access(
                tx, [hit.insight for hit in result.hits], _OPLOG_NAMES[mode], query
            )
            hits = tuple(attrs.evolve(hit, insight=now[hit.insight.id]) for hit in result.hits)
            return attrs.evolve(result, hits=hits)

        return self._write(space, "recall", counted)

    # -- vectors ------------------------------------------------------------------------------

    def _dense(self, space: str, query: str) -> _DenseRecall | None:
        """Prepare the dense half of a relevance recall: embed up to EMBED_PER_RECALL insights
        that lack a vector, then the query; an embedder failure leaves it lexical."""
        embedder = self._embedder
        if embedder is None:
            return None
        try:
            self._embed_batch(space, embedder, EMBED_PER_RECALL)
            vector = self._query_vector(embedder, query)
        except (EmbeddingFailed, StorageError):
            return _DenseRecall(self, space, None)
        return _DenseRecall(self, space, vector)

    def _query_vector(self, embedder: Embedder, query: str) -> Vectors:
        key = f"{embedder.model_id}\n{query}"
        with self._guard:
            found = self._queries.get(key)
            if found is not None:
                self._queries.move_to_end(key)
                return found
        vector: Vectors = embed_checked(embedder, [query])[0]
        with self._guard:
            self._queries[key] = vector
            while len(self._queries) > _QUERY_CACHE:
                self._queries.popitem(last=False)
        return vector

    def _embed_batch(self, space: str, embedder: Embedder, k: int) -> int:
        """Embed up to ``k`` of the newest insights without a vector (no lock held while the
        model runs); returns how many were embedded."""
        model = embedder.model_id
        key = (space, model)

        def look(h: Handle) -> tuple[str, list[tuple[int, int, str]], int]:
            epoch = h.index.epoch()  # a rebuild or an edit in place: look at everything again
            seen_epoch, seen_top = self._embedded_up_to.get(key, ("", 0))
            after = seen_top if seen_epoch == epoch else 0
            return (epoch, *vectors.pending(h.conn, model, k, after))

        epoch, todo, top = self._read(space, "embed", look, index=True)
        if todo and self._upstream is not None:  # another host may have embedded them
            self._fetch_vectors(space, model)
            epoch, todo, top = self._read(space, "embed", look, index=True)
        self._embed_items(space, embedder, todo)
        if len(todo) < k:  # every insight up to `top` has its vector now
            self._embedded_up_to[key] = (epoch, top)
        return len(todo)

    def _embed_items(
        self, space: str, embedder: Embedder, todo: Sequence[tuple[int, int, str]]
    ) -> None:
        if not todo:
            return
        model = embedder.model_id
        found = embed_checked(embedder, [content for _, _, content in todo])
        items = [(digest, vectors.as_bytes(found[i])) for i, (_, digest, _) in enumerate(todo)]
        self._write(
            space, "embed", lambda tx: vectors.store_vectors(tx.conn, model, items), local=True
        )
        if self._upstream is not None:
            self._upstream.share_vectors(space, model, items)

    def _fetch_vectors(self, space: str, model: str) -> None:
        """Store the vectors other hosts of the upstream computed (a replica only)."""
        upstream = self._upstream
        if upstream is None:
            return
        with self._locked(space, "embed") as handle:
            upstream.fetch_vectors(
                space, model, handle.conn, lambda step: handle.write(step, self._clock)
            )

    def embed_missing(
        self, space: str, *, batch: int = 64, progress: Callable[[int, int], None] | None = None
    ) -> int:
        """Embed every insight of ``space`` that has no vector yet, ``batch`` at a time,
        calling ``progress(done, total)`` after each batch; returns how many were embedded.

        Raises:
            InvalidInput: no embedder is configured. EmbeddingFailed: the embedder failed
            (what was stored before stays).
        """
        embedder = self._embedder
        if embedder is None:
            raise InvalidInput("no embedder is configured")
        model = embedder.model_id
        self._read(space, "embed", lambda h: None, index=True)  # caught up, for a replica
        self._fetch_vectors(space, model)
        total = self._read(
            space, "embed", lambda h: vectors.missing_count(h.conn, model), index=True
        )
        done = cursor = 0
        size = max(1, batch)

        def oldest(after: int) -> Callable[[Handle], tuple[list[tuple[int, int, str]], int]]:
            return lambda h: vectors.pending(h.conn, model, size, after, newest_first=False)

        while True:  # oldest first, from a cursor: each batch reads only what it embeds
            todo, _ = self._read(space, "embed", oldest(cursor), index=True)
            if not todo:
                break
            self._embed_items(space, embedder, todo)
            cursor = todo[-1][0]
            done += len(todo)
            if progress is not None:
                progress(done, max(total, done))
        return done

    def related(
        self, space: str, insight_id: str, *, depth: int = 2, edge_type: str | None = None
    ) -> tuple[RelatedHit, ...]:
        start = checks.insight_id(insight_id)
        depth = checks.depth(depth)
        kind = None if edge_type is None else checks.edge_type(edge_type)
        return self._read(
            space, "related", lambda h: reads.related(h.conn, start, depth, kind), index=False
        )

    def list(
        self,
        space: str,
        *,
        query: str | None = None,
        category: str | None = None,
        limit: int = 100_000,
    ) -> tuple[Insight, ...]:
        text = "" if query is None else checks.query(query)
        category = checks.category_filter(category)
        limit = checks.limit(limit)
        return self._read(
            space,
            "list",
            lambda h: tuple(reads.list_rows(h.conn, text, category, None, limit)),
            index=False,
        )

    def insights(self, space: str, ids: Sequence[str]) -> tuple[Insight, ...]:
        wanted = [checks.insight_id(i) for i in ids]
        found = self._read(
            space, "insights", lambda h: reads.rows_by_id(h.conn, wanted), index=False
        )
        return in_order(found, wanted)

    def graph(self, space: str) -> GraphSnapshot:
        return self._read(space, "graph", lambda h: reads.graph(h.conn), index=False)

    # -- writes -------------------------------------------------------------------------------

    def remember(
        self,
        space: str,
        content: str | Prepared,
        *,
        category: str = "general",
        importance: int = 3,
        tags: tuple[str, ...] = (),
        entities: tuple[str, ...] = (),
        source: str = "user",
    ) -> RememberReceipt:
        item = checks.remembered(content, category, importance, tags, entities, source)
        return self._write(space, "remember", lambda tx: writes.remember(tx, item, self._ceiling))

    def link(
        self,
        space: str,
        source_id: str,
        target_id: str,
        *,
        edge_type: str = "semantic",
        weight: float = 0.5,
        reason: str | None = None,
    ) -> LinkReceipt:
        src, dst = checks.insight_id(source_id), checks.insight_id(target_id)
        if src == dst:
            raise InvalidInput("an insight cannot be linked to itself")
        kind, value = checks.edge_type(edge_type), checks.weight(weight)
        why = checks.reason(reason)
        return self._write(space, "link", lambda tx: writes.link(tx, src, dst, kind, value, why))

    def forget(self, space: str, insight_id: str) -> ForgetReceipt:
        node = checks.insight_id(insight_id)
        return self._write(space, "forget", lambda tx: writes.forget(tx, node))

    def import_draft(self, space: str, draft: ImportDraft) -> ImportReport:
        items, draft_edges = checks.draft(draft)
        return self._write(
            space,
            "import",
            lambda tx: writes.import_draft(tx, items, draft_edges, self._ceiling),
        )

    # -- rows (the SpaceRows capability: a migration's copy) ----------------------------------

    def export_rows(self, space: str, batch: int = 2000) -> Iterator[tuple[str, Rows]]:
        """Every row of ``space`` as ``mnemon.db`` holds it, table by table, in rowid order,
        ``batch`` rows per page (each page read on its own)."""
        return _export(self, checks.space_id(space), batch)

    def import_rows(self, space: str, batches: Iterable[tuple[str, Rows]]) -> None:
        """Create ``space`` holding exactly these rows, in one transaction, and build its side
        index; a failure removes the space again."""
        space = checks.space_id(space)
        self.create_space(space)

        def load(tx: Tx) -> None:
            for table, rows in batches:
                if table not in ROW_TABLES:
                    raise InvalidInput(f"no table {table!r} in a Mnemon store")
                replica.insert_rows(tx, table, rows)
            tx.index.sync(force=True)

        try:
            self._write(space, "import_rows", load, local=True)
        except BaseException:
            with suppress(MnemonError):
                self.delete_space(space)
            raise

    def space_digest(self, space: str) -> SpaceDigest:
        """Row counts and SHA-256 of ``space`` (:mod:`...ports.long_term.digest`)."""
        return RowsDigest().feed(self.export_rows(space)).result()


# -- rows (a migration's) -----------------------------------------------------------------------


def _export(store: EmbeddedStore, space: str, batch: int) -> Iterator[tuple[str, Rows]]:
    size = max(1, batch)
    sql = {
        table: f"SELECT rowid, {', '.join(COLUMNS[table])} FROM main.{table}"
        " WHERE rowid > ? ORDER BY rowid LIMIT ?"
        for table in ROW_TABLES
    }

    def page(table: str, after: int) -> Rows:
        def read(h: Handle) -> Rows:
            rows: Rows = h.conn.execute(sql[table], (after, size)).fetchall()
            return rows

        return store._read(space, "export", read, index=False)

    return keyset_pages(page)


class _DenseRecall:
    """The dense half of one relevance recall: the query vector, bound to the store's
    connection when the recall reads (``vector`` None: the embedder failed)."""

    def __init__(self, store: EmbeddedStore, space: str, vector: Vectors | None) -> None:
        self._store, self._space, self._vector = store, space, vector
        self.failed = vector is None

    def bind(self, conn: sqlite3.Connection, index: SideIndex) -> reads.Dense | None:
        embedder = self._store._embedder
        if self._vector is None or embedder is None:
            return None
        # called under the space's file lock, which guards its vector set
        found = self._store._vectors.get(self._space)
        if found is None or found.model != embedder.model_id:
            found = VectorSet(embedder.model_id, embedder.dimensions)
            self._store._vectors[self._space] = found
        found.refresh(conn, index.generation(), index.epoch())
        return _BoundDense(found, self._vector)


class _BoundDense:
    def __init__(self, found: VectorSet, vector: Vectors) -> None:
        self._set, self._vector = found, vector

    def similar(
        self, query: str, k: int, also: Sequence[int], allowed: Collection[int] | None
    ) -> dict[int, float]:
        return self._set.similar(self._vector, k, also, allowed)
