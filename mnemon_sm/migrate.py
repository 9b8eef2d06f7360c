"""Copying a storage root to another backend: ``migrate(source, target)``.

Either end is a directory or a root on PostgreSQL (``postgresql://...?root=NAME``); the copy is
the ``root_migration`` flow (:mod:`mnemon_sm.flows.migration`), run on the two roots' raw ports
(no root is opened, so nothing is repaired or written on the way): the source is read through
read-only adapters, the target must be empty (a directory is created if missing).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from mnemon_sm.adapters.postgres import PgBackend, PgSpaces, is_postgres_url
from mnemon_sm.adapters.real import RealFiles, SystemClock
from mnemon_sm.adapters.sqlite import EmbeddedStore
from mnemon_sm.errors import InvalidInput, StorageError
from mnemon_sm.flows.migration import MigrationEnd, MigrationFlow, MigrationReport

__all__ = ["migrate"]


@contextlib.contextmanager
def _end(location: str | Path, *, source: bool) -> Iterator[MigrationEnd]:
    if is_postgres_url(location):
        backend = PgBackend(str(location))
        store = PgSpaces(backend, SystemClock(), readonly=source)
        try:
            yield MigrationEnd(backend.files, store, backend.display)
        finally:
            store.close(checkpoint=False)
            backend.close()
        return
    path = Path(location).expanduser()
    if source and not path.is_dir():
        raise InvalidInput(f"no root directory at {path}")
    if not source:
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create the target directory {path}: {exc}") from exc
    local = EmbeddedStore(path, SystemClock(), readonly=source)
    try:
        yield MigrationEnd(RealFiles(path), local, os.fspath(path))
    finally:
        local.close(checkpoint=False)


def migrate(
    source: str | Path,
    target: str | Path,
    *,
    progress: Callable[[str, int, int], None] | None = None,
    batch: int = 64,
) -> MigrationReport:
    """Copy the root at ``source`` into the empty root at ``target`` and verify the copy.

    ``progress(what, done, total)`` is told after each step (``files``, ``spaces``,
    ``verify``). Raises ``InvalidInput`` (a target that is not empty, a bad location or
    batch), ``StorageError`` (a read or write failed), ``MigrationMismatch`` (the roots differ
    afterwards: one changed meanwhile). A failed migration leaves the source as it was; start
    again into a new empty target.
    """
    with _end(source, source=True) as src, _end(target, source=False) as dst:
        flow = MigrationFlow(src, dst)
        try:
            report: MigrationReport = flow.perform("migrate", batch=batch, progress=progress)
        finally:
            flow.close()
        return report
