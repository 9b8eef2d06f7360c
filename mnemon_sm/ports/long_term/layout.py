"""Where a root's Memory Space stores live, and the rule that no symlink is followed there.

Theory of operation
-------------------
A store is ``<root>/data/<space>/mnemon.db``. Below the root nothing may be a symbolic link:
not ``data/``, not ``data/<space>/``, not ``mnemon.db`` and not any file a database engine
opens beside it (``-wal``, ``-shm``, the side index). A link there would make a write land in
its target, outside the root or in another store. The root itself may be a link: users point
it where they like.

Every check here is an ``lstat`` of each component from the root down, so a link is seen for
what it is. A component that is a link or of the wrong kind is :class:`CorruptStore` naming it
relative to the root, raised before anything was opened or written through it; a missing one
is ``FileNotFoundError``, for the caller to translate. Stores found on disk are listed only when
their directory and file pass the same checks, so a symlinked store is never registered. The
checks cost one ``lstat`` per component: a handful per open or listing, none per statement.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

from mnemon_sm.errors import CorruptStore, StorageError
from mnemon_sm.ports.long_term.checks import SPACE_ID

__all__ = [
    "DB_FILE",
    "Identity",
    "check_dirs",
    "check_side_file",
    "check_store",
    "ensure_dir",
    "identity",
    "list_stores",
    "store_dirs",
    "where",
]

DB_FILE = "mnemon.db"
Identity = tuple[int, int]  # (st_dev, st_ino): which file a name stands for


def where(space: str, name: str | None = None) -> str:
    """``data/<space>`` or ``data/<space>/<name>``: how errors name a store's paths."""
    return f"data/{space}" if name is None else f"data/{space}/{name}"


def identity(info: os.stat_result) -> Identity:
    return info.st_dev, info.st_ino


def _require(
    path: str | Path, name: str, kind: Callable[[int], bool], what: str
) -> os.stat_result:
    """``lstat`` of ``path``, which must be a ``what`` (``kind``) and never a symlink."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise CorruptStore(f"{name} is a symbolic link, which is refused", path=name)
    if not kind(info.st_mode):
        raise CorruptStore(f"{name} is not a {what}", path=name)
    return info


def check_dirs(root: Path, space: str) -> tuple[Identity, Identity]:
    """The identities of ``data/`` and ``data/<space>/``, each a directory, not a link."""
    data = os.path.join(root, "data")  # strings, not Path: this runs on every operation
    found = _require(data, "data", stat.S_ISDIR, "directory")
    folder = _require(os.path.join(data, space), where(space), stat.S_ISDIR, "directory")
    return identity(found), identity(folder)


def check_store(root: Path, space: str) -> os.stat_result:
    """``lstat`` of ``data/<space>/mnemon.db`` after :func:`check_dirs`: a regular file."""
    check_dirs(root, space)
    path = os.path.join(root, "data", space, DB_FILE)
    return _require(path, where(space, DB_FILE), stat.S_ISREG, "regular file")


def check_side_file(root: Path, space: str, name: str) -> None:
    """A file beside ``mnemon.db`` that SQLite opens by name (``mnemon.db-wal``, the side
    index...): absent or a regular file, never a link."""
    path = os.path.join(root, "data", space, name)
    with suppress(FileNotFoundError):
        _require(path, where(space, name), stat.S_ISREG, "regular file")


def ensure_dir(path: Path, name: str) -> None:
    """Create the directory ``path`` with mode 0700 unless it exists, then require it to be a
    directory, not a link (``name`` is how errors call it)."""
    with suppress(FileExistsError):
        path.mkdir(mode=0o700)
    _require(path, name, stat.S_ISDIR, "directory")


def _is_file(path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)  # a link is S_ISLNK, never a file
    except OSError:
        return False


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def store_dirs(root: Path) -> tuple[tuple[str, bool], ...]:
    """Every ``data/<id>/`` directory (an id matching the pattern, not a link), sorted, with
    whether it holds a store (``mnemon.db`` a regular file, not a link).

    Raises:
        CorruptStore: ``data/`` is a link or not a directory. StorageError: it cannot be listed.
    """
    data = os.path.join(root, "data")
    try:
        _require(data, "data", stat.S_ISDIR, "directory")
        with os.scandir(data) as entries:
            dirs = sorted(e.name for e in entries if SPACE_ID.fullmatch(e.name) and _is_dir(e))
    except FileNotFoundError:
        return ()
    except OSError as exc:
        raise StorageError(f"listing spaces failed: {exc}") from exc
    return tuple((name, _is_file(os.path.join(data, name, DB_FILE))) for name in dirs)


def list_stores(root: Path) -> tuple[str, ...]:
    """The ids of the stores on disk (see :func:`store_dirs`); a symlinked one is not listed."""
    return tuple(name for name, is_store in store_dirs(root) if is_store)
