"""Atomic file replacement and strict reading of versioned JSON files, shared by every tier.

``replace_file`` writes a temporary file beside the target, optionally fsyncs it, and renames
it over the target, so readers see the old bytes or the new ones, never a mix. A failure
removes the temporary file when it can (otherwise the next opener's clean-up does) and
re-raises the ``StorageError``; ``sync_dir`` fsyncs the directory so the rename survives a
power loss, and :func:`durable_replace` maps a root's durability level onto both.

:func:`parse_versioned` reads the ``{"version": 1, ...}`` JSON files the library owns through
the strict converter; anything else is ``CorruptStore`` naming the file.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from typing import TypeVar

from mnemon_sm.convert import StructureFailed, structure
from mnemon_sm.errors import CorruptStore, StorageError
from mnemon_sm.ports import Files

__all__ = [
    "complete_lines",
    "durable_append",
    "durable_replace",
    "parse_versioned",
    "replace_file",
    "split_lines",
]

T = TypeVar("T")


def replace_file(
    files: Files,
    path: str,
    data: bytes,
    *,
    sync: bool,
    sync_dir: bool = False,
    sync_first: Sequence[str] = (),
) -> None:
    """Atomically make ``path`` hold ``data``.

    Args:
        sync: fsync the new file before the rename (its bytes are durable).
        sync_dir: fsync the directory after the rename (the rename is durable).
        sync_first: other paths to fsync before the rename when ``sync`` is set (written
            just before, they are flushed by the same journal commit as the new file).
    """
    temp = files.write_temp(path, data)
    try:
        if sync:
            for other in sync_first:
                files.fsync(other)
            files.fsync(temp)
        files.rename(temp, path)
    except StorageError:
        with contextlib.suppress(StorageError):  # else the next opener removes it
            files.remove(temp)
        raise
    if sync_dir:
        files.fsync(path.rpartition("/")[0])


def durable_replace(
    files: Files, path: str, data: bytes, durability: str, sync_first: Sequence[str] = ()
) -> None:
    """:func:`replace_file` as a durability level asks: ``full`` fsyncs the file and its
    directory, ``normal`` the file, ``off`` nothing (``sync_first`` likewise)."""
    replace_file(
        files,
        path,
        data,
        sync=durability != "off",
        sync_dir=durability == "full",
        sync_first=sync_first,
    )


def complete_lines(data: bytes) -> bytes:
    """``data`` without a torn last line (the bytes after the last newline), for the
    append-only files whose tail a power loss may cut short."""
    return data[: data.rfind(b"\n") + 1]


def split_lines(complete: bytes) -> list[bytes]:
    """The lines of ``complete`` (which ends with a newline, or is empty), newlines kept."""
    return [line + b"\n" for line in complete.split(b"\n")[:-1]]


def durable_append(
    files: Files, path: str, lines: bytes, current: bytes | None, durability: str
) -> None:
    """Add ``lines`` (complete lines) to the append-only file ``path``, whose bytes the caller
    read under its lock as ``current`` (None: no file).

    A new file, or one whose last line is torn, is replaced atomically by its complete lines
    plus ``lines`` (:func:`durable_replace`: the new name is durable too); otherwise ``lines``
    are appended in one write and the file fsynced unless ``durability`` is ``off``.
    """
    if current is None or not current.endswith(b"\n"):
        durable_replace(files, path, complete_lines(current or b"") + lines, durability)
        return
    files.append(path, lines)
    if durability != "off":
        files.fsync(path)


def parse_versioned(data: bytes, cls: type[T], *, path: str, label: str | None = None) -> T:
    """Structure a version-1 JSON document strictly as ``cls``.

    Raises:
        CorruptStore: not UTF-8 JSON, not version 1, or not ``cls``; the message starts with
            ``label`` (default: "<path> is invalid").
    """
    try:
        raw = json.loads(data.decode("utf-8"))
        if not isinstance(raw, dict) or raw.get("version") != 1:
            raise ValueError("must use version 1")
        return structure(raw, cls)
    except (UnicodeDecodeError, ValueError, StructureFailed) as exc:
        raise CorruptStore(f"{label or path + ' is invalid'}: {exc}", path=path) from None
