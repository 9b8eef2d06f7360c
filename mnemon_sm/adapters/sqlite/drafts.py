"""The draft of a new store, and the removal of drafts a crashed writer left behind.

Theory of operation
-------------------
A new store is written as ``.mnemon.db.<pid>.<thread id>.new`` beside ``mnemon.db`` and then
linked to that name (:mod:`.schema`), so no program ever sees an empty store of ours. A writer
that dies in between leaves the draft (and SQLite's ``-journal`` of it) behind for good. They
are removed when a space is opened or created, and when a listing meets a space directory
without a store (a crash during its very first creation), under a rule that never removes a
draft being written now. A draft is stale when:

- its writer is gone: no process has its pid (``kill(pid, 0)`` fails with "no such
  process"), or the pid is this process and no live thread has its thread id; or
- it is older than :data:`STALE_AFTER_S` by the file system's clock (its ``st_mtime``
  against the wall clock, the same clock the kernel stamped it with), which covers a pid
  reused by an unrelated process and a writer on another host of a shared file system.

Writing a draft takes milliseconds, so a live writer's draft is always young and its pid and
thread alive. What is left: a writer stopped for longer than :data:`STALE_AFTER_S` in the
middle of a creation, or a new thread of this process that reuses a dead thread's id and
writes the same name between the check and the unlink. Either loses its draft, so its link to
``mnemon.db`` fails and the creation reports ``StorageError``; no store is ever damaged.
"""

from __future__ import annotations

import os
import re
import threading
import time
from contextlib import suppress
from pathlib import Path

__all__ = ["STALE_AFTER_S", "draft_path", "remove_stale"]

STALE_AFTER_S = 3600
_DRAFT = re.compile(r"^\.mnemon\.db\.([0-9]+)\.([0-9]+)\.new(-journal)?$")


def draft_path(db: Path) -> Path:
    """The draft name of the calling thread for the store file ``db``."""
    return db.with_name(f".{db.name}.{os.getpid()}.{threading.get_ident()}.new")


def _writer_gone(pid: int, thread: int) -> bool:
    if pid == os.getpid():
        return thread not in {t.ident for t in threading.enumerate()}
    if pid <= 0:  # kill(0, ...) would signal our own process group: never ours
        return True
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return True
    except OSError:  # EPERM: a process of another user has that pid
        return False
    return False


def _stale(path: Path, pid: int, thread: int) -> bool:
    if _writer_gone(pid, thread):
        return True
    try:
        age_ns = time.time_ns() - os.lstat(path).st_mtime_ns
    except FileNotFoundError:
        return False
    return age_ns > STALE_AFTER_S * 1_000_000_000


def remove_stale(directory: Path) -> int:
    """Remove the stale drafts in ``directory`` (see the module rules); how many were removed.
    A directory that is gone or unreadable has none (opening its store reports the problem)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    removed = 0
    for name in names:
        found = _DRAFT.match(name)
        if found is None:
            continue
        path = directory / name
        if _stale(path, int(found.group(1)), int(found.group(2))):
            with suppress(OSError):  # gone meanwhile, or not ours to remove
                os.unlink(path)  # a link's own name, never its target
                removed += 1
    return removed
