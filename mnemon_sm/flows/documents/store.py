"""I/O of the document store through the ``Files`` and ``Locks`` ports.

Protocols (every write is a temporary file, fsynced, renamed; committing the index is the
commit point: ``index.json`` replaced, or, for a root whose ``documents_index`` is
``journal``, one line appended to ``documents/index.journal``, see
:mod:`~mnemon_sm.flows.documents.journal`):

- create: write the new file, then commit the index; a crash in between leaves an orphan
  file no record names, which opening removes (the create was never acknowledged);
- update: replace the active file, then commit the index; a crash in between leaves a file
  whose front matter is newer than its record, which opening rolls forward from the file (the
  file is the update's redo record: a crash answers nothing, so the update may take effect);
- archive (move): write the archived copy, commit the index with the archived record, then
  remove the active file. Opening removes an active copy the index no longer names, an
  archived copy the index does not name yet, and restores a missing active file from its
  archived copy. At every point the body exists at least once; the active original is never
  removed before the index says archived and the archived copy is durable.

A request that *fails* (a ``StorageError`` reaches the caller) is different from a crash: its
writes are put back before the error is raised (:class:`~mnemon_sm.flows.documents.undo.Undo`,
a journal line included), so nothing of it is visible and opening has nothing to roll forward.

Directories are checked to be real directories (never symlinks) before use; files are opened
without following symlinks by the adapter.

The index is read and written through the root's
:class:`~mnemon_sm.flows.documents.cache.IndexCache` (parsed once per change, encoded from
cached record blocks, committed by rewrite or by journal); the protocols above do not depend
on it.
"""

from __future__ import annotations

import threading

import attrs

from mnemon_sm.errors import StorageError
from mnemon_sm.flows.documents.cache import IndexCache
from mnemon_sm.flows.documents.model import (
    ACTIVE_DIR,
    ARCHIVED_DIR,
    DOCUMENTS_DIR,
    LOCK_NAME,
    DocumentRecord,
    body_of,
    content_hash,
    front_matter,
    render,
)
from mnemon_sm.flows.documents.undo import Undo
from mnemon_sm.ports import TEMP_NAME, Files, Locks
from mnemon_sm.ports.storage import durable_replace

__all__ = [
    "IndexLock",
    "Undo",
    "ensure_dirs",
    "read_index",
    "repair",
    "write_file",
]


class IndexLock:
    """The in-process mutex, then the cross-process index lock; released in reverse."""

    def __init__(self, mutex: threading.RLock, locks: Locks, timeout_ms: int) -> None:
        self._mutex, self._locks, self._timeout = mutex, locks, timeout_ms

    def __enter__(self) -> None:
        self._mutex.acquire()
        try:
            self._locks.acquire(LOCK_NAME, self._timeout)
        except BaseException:
            self._mutex.release()
            raise

    def __exit__(self, *exc: object) -> None:
        try:
            self._locks.release(LOCK_NAME)
        finally:
            self._mutex.release()


def ensure_dirs(files: Files) -> None:
    """Create (or check) ``documents/``, ``active/`` and ``archived/`` as real directories."""
    for directory in (DOCUMENTS_DIR, ACTIVE_DIR, ARCHIVED_DIR):
        files.ensure_dir(directory)


def read_index(files: Files, cache: IndexCache) -> tuple[DocumentRecord, ...]:
    """The committed records (parsed only when the index changed since ``cache`` saw it)."""
    return cache.view(files).records


def write_file(files: Files, path: str, data: bytes, durability: str = "full") -> None:
    """Atomic replace; fsync as the root's durability level asks (see ``Config``)."""
    durable_replace(files, path, data, durability)


def repair(files: Files, cache: IndexCache) -> tuple[DocumentRecord, ...]:
    """Bring the files and the index back into agreement after a crash (call under the lock);
    a ``file``-mode root also folds a journal left by a ``journal``-mode one into the index.

    Returns the (possibly rolled-forward) records. Never removes the only copy of a body.
    """
    records = list(read_index(files, cache))
    rolled: list[DocumentRecord] = []
    for folder in (DOCUMENTS_DIR, ACTIVE_DIR, ARCHIVED_DIR):
        for name in files.list(folder):
            if TEMP_NAME.match(name):
                files.remove(f"{folder}/{name}")
    for i, r in enumerate(records):
        active, archived = files.read(r.path("active")), files.read(r.path("archived"))
        if r.status == "archived":
            if active is not None:
                if archived is None or content_hash(body_of(archived)) != r.content_hash:
                    write_file(files, r.path("archived"), render(r, body_of(active)))
                files.remove(r.path("active"))
            continue
        if active is None and archived is not None:
            write_file(files, r.path("active"), render(r, body_of(archived)))
            active = files.read(r.path("active"))
        if archived is not None and active is not None:
            files.remove(r.path("archived"))
        if active is not None:
            forward = _roll_forward(r, active)
            if forward is not r:
                records[i] = forward
                rolled.append(forward)
    named = {r.filename for r in records}
    for name in files.list(ACTIVE_DIR):
        if name.endswith(".md") and name not in named and not TEMP_NAME.match(name):
            data = files.read(f"{ACTIVE_DIR}/{name}")
            ident = front_matter(data or b"").get("id")
            if isinstance(ident, str) and ident not in {r.id for r in records}:
                files.remove(f"{ACTIVE_DIR}/{name}")  # an unacknowledged create
    if rolled:
        cache.commit(files, Undo(files), rolled)
    if cache.mode == "file":
        cache.compact(files, "full", due_only=False)
    return tuple(records)


def _roll_forward(r: DocumentRecord, data: bytes) -> DocumentRecord:
    """A file our own update wrote whose index commit did not happen: adopt it."""
    body = body_of(data)
    digest = content_hash(body)
    if digest == r.content_hash:
        return r
    head = front_matter(data)
    if head.get("content_hash") != digest or head.get("id") != r.id:
        return r  # edited by hand: leave it, search reads the file as it is
    updated = str(head.get("updated_at") or r.updated_at)
    return attrs.evolve(
        r,
        title=str(head.get("title") or r.title),
        description=str(head.get("description") or ""),
        source_paths=tuple(head.get("source_paths") or r.source_paths),
        session_ids=tuple(head.get("session_ids") or r.session_ids),
        updated_at=updated,
        last_accessed_at=max(updated, r.last_accessed_at),
        revision=r.revision + 1,
        content_hash=digest,
        size_bytes=len(data),
    )


def read_body(files: Files, record: DocumentRecord) -> str | None:
    """The body of a document's file, or None when its file is missing or unreadable."""
    try:
        data = files.read(record.path())
    except StorageError:
        return None
    return None if data is None else body_of(data)
