"""Vectors for dense retrieval: stored in the side index, searched in memory.

Theory of operation
-------------------
With an embedder configured, every active insight gets a vector of its content, stored in the
side index (``idx.vectors``: content hash, model id, float32 bytes), never in ``mnemon.db``:
Mnemon's own ``embedding`` column holds vectors of Mnemon's model, and mixing two models' spaces
would corrupt its recall. Keyed by content hash, a vector survives rebuilds of the side index and
is shared by insights with the same content; a vector whose content no active insight holds any
more is deleted with the last such insight, and one of another model id is ignored and replaced.

Vectors are computed lazily, outside every lock: a recall first embeds up to
:data:`EMBED_PER_RECALL` insights that have none (newest first), so what was just remembered is
found by meaning at once, and :meth:`EmbeddedStore.embed_missing` does the rest in batches with
progress. Writing them is idempotent (``INSERT OR IGNORE`` by content hash, only while an active
insight holds that content).

:class:`VectorSet` is a store's in-memory copy, one row per indexed insight with a vector,
kept in step with the side index without rereading it: new insights are those above the
highest rowid it has seen, new vectors those numbered above the last it loaded, and a count
that differs (an insight forgotten) or a new ``epoch`` (a rebuild, another program's edit)
makes it compare everything. So a recall after one remember reads one row, not the store.
Search is one matrix-vector product.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Sequence

import numpy

from mnemon_sm.ports.embedder import Vectors

__all__ = [
    "EMBED_PER_RECALL",
    "VectorSet",
    "as_bytes",
    "missing_count",
    "pending",
    "store_vectors",
]

EMBED_PER_RECALL = 64


def pending(
    conn: sqlite3.Connection, model: str, k: int, after: int = 0, *, newest_first: bool = True
) -> tuple[list[tuple[int, int, str]], int]:
    """(rowid, content hash, content) of up to ``k`` active insights above rowid ``after``
    without a vector of ``model`` (newest or oldest first), and the highest rowid indexed:
    when fewer than ``k`` were found, once they are embedded every insight up to it has a
    vector."""
    rows = conn.execute(
        "SELECT d.doc, d.hash, i.content FROM idx.docs d JOIN main.insights i ON i.rowid = d.doc"
        " WHERE d.doc > ? AND NOT EXISTS"
        " (SELECT 1 FROM idx.vectors v WHERE v.hash = d.hash AND v.model = ?)"
        f" ORDER BY d.doc {'DESC' if newest_first else 'ASC'} LIMIT ?",
        (after, model, k),
    )
    found = [(int(doc), int(digest), str(content)) for doc, digest, content in rows]
    top = conn.execute("SELECT coalesce(max(doc), 0) FROM idx.docs").fetchone()[0]
    return found, int(top)


def missing_count(conn: sqlite3.Connection, model: str) -> int:
    """How many active insights have no vector of ``model``."""
    row = conn.execute(
        "SELECT count(*) FROM idx.docs d WHERE NOT EXISTS"
        " (SELECT 1 FROM idx.vectors v WHERE v.hash = d.hash AND v.model = ?)",
        (model,),
    ).fetchone()
    return int(row[0])


def as_bytes(vector: Vectors) -> bytes:
    """A vector as stored: little-endian float32."""
    return numpy.asarray(vector, dtype="<f4").tobytes()


def store_vectors(
    conn: sqlite3.Connection, model: str, items: Sequence[tuple[int, Vectors | bytes]]
) -> int:
    """Store vectors (or their :func:`as_bytes`) by content hash while an active insight holds
    that content; a vector of another model for the same hash is replaced. Returns how many
    were written."""
    written = 0
    seq = int(conn.execute("SELECT coalesce(max(seq), 0) FROM idx.vectors").fetchone()[0])
    for digest, vector in items:
        if conn.execute("SELECT 1 FROM idx.docs WHERE hash = ? LIMIT 1", (digest,)).fetchone():
            data = vector if isinstance(vector, bytes) else as_bytes(vector)
            seq += 1
            conn.execute(
                "INSERT INTO idx.vectors VALUES (?, ?, ?, ?) ON CONFLICT(hash) DO UPDATE SET"
                " model = excluded.model, vec = excluded.vec, seq = excluded.seq"
                " WHERE model != excluded.model",
                (digest, model, data, seq),
            )
            written += 1
    return written


class VectorSet:
    """The vectors of one store's indexed insights, for one model (see the module)."""

    def __init__(self, model: str, dimensions: int) -> None:
        self.model, self.dimensions = model, dimensions
        self._marks: tuple[str, str] | None = None  # (generation, epoch) last seen
        self._known: dict[int, int] = {}  # rowid -> content hash, every indexed insight
        self._top = 0  # the highest rowid in _known
        self._seq = 0  # vectors up to this number are loaded
        self._slot: dict[int, int] = {}  # rowid -> row of the matrix
        self._hash: dict[int, int] = {}  # rowid -> content hash of its vector
        self._docs = numpy.full(0, -1, dtype=numpy.int64)
        self._matrix = numpy.zeros((0, dimensions), dtype=numpy.float32)
        self._free: list[int] = []

    def refresh(self, conn: sqlite3.Connection, generation: str, epoch: str) -> None:
        """Bring the set in line with the index: new insights (rowids above the highest seen),
        vanished ones (the count differs: a full comparison), vectors stored since the last
        look (by number); after a rebuild or another program's changes, everything."""
        if self._marks is None or epoch != self._marks[1]:
            self._known, self._top, self._seq = {}, 0, 0
            for doc in list(self._slot):
                self._drop(doc)
        if self._marks is None or (generation, epoch) != self._marks:
            new = conn.execute(
                "SELECT doc, hash FROM idx.docs WHERE doc > ?", (self._top,)
            ).fetchall()
            self._known.update((int(d), int(h)) for d, h in new)
            self._top = max(self._known, default=0)
            count = conn.execute("SELECT count(*) FROM idx.docs").fetchone()[0]
            if count != len(self._known):
                rows = conn.execute("SELECT doc, hash FROM idx.docs")
                self._known = {int(d): int(h) for d, h in rows}
                for doc in [d for d, h in self._hash.items() if self._known.get(d) != h]:
                    self._drop(doc)
                new = list(self._known.items())
            self._load(conn, [int(d) for d, _ in new if int(d) not in self._slot])
            self._marks = (generation, epoch)
        seq = int(conn.execute("SELECT coalesce(max(seq), 0) FROM idx.vectors").fetchone()[0])
        if seq > self._seq:
            rows = conn.execute(
                "SELECT d.doc, d.hash, v.vec FROM idx.vectors v"
                " JOIN idx.docs d ON d.hash = v.hash WHERE v.seq > ? AND v.model = ?",
                (self._seq, self.model),
            )
            for doc, digest, data in rows:
                self._accept(int(doc), int(digest), data)
            self._seq = seq

    def _load(self, conn: sqlite3.Connection, docs: Sequence[int]) -> None:
        """The stored vectors of these rowids."""
        for start in range(0, len(docs), 500):
            part = docs[start : start + 500]
            marks = ",".join("?" * len(part))
            rows = conn.execute(
                "SELECT d.doc, d.hash, v.vec FROM idx.docs d JOIN idx.vectors v"
                f" ON v.hash = d.hash WHERE v.model = ? AND d.doc IN ({marks})",
                (self.model, *part),
            )
            for doc, digest, data in rows:
                self._accept(int(doc), int(digest), data)

    def _accept(self, doc: int, digest: int, data: bytes) -> None:
        if self._known.get(doc) != digest:
            return
        if doc in self._slot:
            if self._hash[doc] == digest:
                return
            self._drop(doc)
        vector = numpy.frombuffer(data, dtype="<f4")
        if vector.shape == (self.dimensions,) and numpy.isfinite(vector).all():
            self._put(doc, digest, vector)

    def _put(self, doc: int, digest: int, vector: Vectors) -> None:
        if self._free:
            slot = self._free.pop()
        else:
            slot = len(self._slot) + len(self._free)
            if slot >= len(self._docs):
                grown = max(64, 2 * len(self._docs))
                docs = numpy.full(grown, -1, dtype=numpy.int64)
                docs[: len(self._docs)] = self._docs
                matrix = numpy.zeros((grown, self.dimensions), dtype=numpy.float32)
                matrix[: len(self._matrix)] = self._matrix
                self._docs, self._matrix = docs, matrix
        self._docs[slot] = doc
        self._matrix[slot] = vector
        self._slot[doc], self._hash[doc] = slot, digest

    def _drop(self, doc: int) -> None:
        slot = self._slot.pop(doc)
        del self._hash[doc]
        self._docs[slot] = -1
        self._matrix[slot] = 0.0
        self._free.append(slot)

    def __len__(self) -> int:
        return len(self._slot)

    def similar(
        self, query: Vectors, k: int, also: Sequence[int], allowed: Collection[int] | None
    ) -> dict[int, float]:
        """Cosine similarity of the ``k`` nearest rowids (among ``allowed``) and of ``also``."""
        used = len(self._slot) + len(self._free)
        if not self._slot:
            return {}
        if allowed is None:  # a view of the used rows: no copy of the matrix
            sims = _dot(self._matrix[:used], query)
            docs = self._docs[:used]
        else:
            slots = numpy.fromiter(
                (self._slot[d] for d in allowed if d in self._slot), dtype=numpy.int64
            )
            sims = _dot(self._matrix[slots], query)
            docs = self._docs[slots]
        out: dict[int, float] = {}
        if len(docs):
            sims[docs < 0] = -numpy.inf
            top = min(k, len(docs))
            best = numpy.argpartition(sims, len(sims) - top)[len(sims) - top :]
            for i in best:
                if docs[i] >= 0:
                    out[int(docs[i])] = float(sims[i])
        extra = [
            (doc, slot)
            for doc in also
            if doc not in out
            and (slot := self._slot.get(doc)) is not None
            and (allowed is None or doc in allowed)
        ]
        if extra:
            values = _dot(self._matrix[[slot for _, slot in extra]], query)
            out.update((doc, float(value)) for (doc, _), value in zip(extra, values, strict=True))
        return out


def _dot(matrix: Vectors, query: Vectors) -> Vectors:
    """``matrix @ query`` without BLAS: the product is bound by memory, not arithmetic, and a
    multi-threaded BLAS keeps its threads spinning after it, which slowed the embedder's
    next call (the query's vector) from 18 to 47 ms at 100k vectors on two cores."""
    result: Vectors = numpy.einsum("ij,j->i", matrix, query)
    return result
