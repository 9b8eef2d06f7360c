"""What a storage root holds, for tests that require a call to change nothing on disk.

Every file by its bytes, except SQLite databases, which are compared by their rows (a
checkpoint moves pages between a database and its WAL without changing a row, and closing
a store checkpoints); WAL, shared-memory and lock files are left out for the same reason.

The root's audit log (``audit/``, :mod:`mnemon_sm.flows.audit`) is left out too, by default:
it is not memory, and every operation appends to it, a refused one included (when its buffer
is flushed: after enough lines, a second, or at close). "Nothing changed" means nothing of
the memory changed; pass ``exclude=()`` for every file.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Collection, Mapping
from pathlib import Path

from mnemon_sm.flows.audit import AUDIT_DIR

__all__ = ["NOT_MEMORY", "files_state", "root_state", "under"]

_SKIPPED = ("-shm", "-wal", ".lock", ".flock")

#: The directories of a root that hold no memory: left out of a state by default.
NOT_MEMORY: tuple[str, ...] = (AUDIT_DIR,)


def under(path: str, directories: Collection[str]) -> bool:
    """Whether ``path`` (relative to the root, ``/``-separated) is one of ``directories`` or
    inside one."""
    return any(path == d or path.startswith(f"{d}/") for d in directories)


def root_state(root: str | Path, *, exclude: Collection[str] = NOT_MEMORY) -> dict[str, object]:
    """``{relative path: bytes, or the database's SQL dump}`` for every file under ``root``
    but those under ``exclude``."""
    base = Path(root)
    out: dict[str, object] = {}
    for path in sorted(base.rglob("*")):
        if not path.is_file() or path.name.endswith(_SKIPPED):
            continue
        name = path.relative_to(base).as_posix()
        if under(name, exclude):
            continue
        if path.read_bytes()[:16] == b"SQLite format 3\x00":
            uri = path.absolute().as_uri() + "?mode=ro"
            with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
                out[name] = list(conn.iterdump())
        else:
            out[name] = path.read_bytes()
    return out


def files_state(
    files: Mapping[str, bytes], *, exclude: Collection[str] = NOT_MEMORY
) -> dict[str, bytes]:
    """A copy of an in-memory file tree (``{path: bytes}``, e.g.
    :attr:`~mnemon_sm.testing.memory.MemoryFiles.files`) without the files under
    ``exclude``: what :func:`root_state` is for a root in a directory."""
    return {path: data for path, data in files.items() if not under(path, exclude)}
