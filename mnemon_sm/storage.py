"""Atomic file replacement through the ``Files`` port, shared by every tier.

``replace_file`` writes a temporary file beside the target, optionally fsyncs it, and renames
it over the target, so readers see the old bytes or the new ones, never a mix. A failure
removes the temporary file when it can (otherwise the next opener's clean-up does) and
re-raises the ``StorageError``. ``durable_dir`` fsyncs the directory so the rename survives a
power loss.
"""

from __future__ import annotations

import contextlib

from .errors import StorageError
from .ports import Files

__all__ = ["replace_file"]


def replace_file(
    files: Files, path: str, data: bytes, *, sync: bool, sync_dir: bool = False
) -> None:
    """Atomically make ``path`` hold ``data``.

    Args:
        sync: fsync the new file before the rename (its bytes are durable).
        sync_dir: fsync the directory after the rename (the rename is durable).
    """
    temp = files.write_temp(path, data)
    try:
        if sync:
            files.fsync(temp)
        files.rename(temp, path)
    except StorageError:
        with contextlib.suppress(StorageError):  # else the next opener removes it
            files.remove(temp)
        raise
    if sync_dir:
        files.fsync(path.rpartition("/")[0])
