"""Process-wide re-entrant locks keyed by a path's real location.

Every store object that opens the same file (or data directory) gets the same lock, so
threads of one process serialize on it however many objects they hold; other processes are
kept out by file locks and SQLite's own locking.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

__all__ = ["path_lock"]

_GUARD = threading.Lock()
_LOCKS: dict[str, threading.RLock] = {}


def path_lock(path: Path) -> threading.RLock:
    """The process-wide lock of ``path`` (resolved, so aliases share it)."""
    key = os.path.realpath(path)
    with _GUARD:
        return _LOCKS.setdefault(key, threading.RLock())
