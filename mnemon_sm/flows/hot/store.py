"""I/O mechanics of the hot store, shared by the mutation flow and context rendering.

Everything here goes through the ``Files`` port. The commit protocol:

1. write and rename the changed projection(s) (derived data: no fsync); with
   ``projections = "lazy"`` this step is skipped, and the stale projections are rewritten by
   the next render of context, ``hot.write_projections()`` or closing the root (the same
   repair that follows a crash between the steps);
2. write the new ``memories.json`` to a temporary file, fsync it (durability ``full`` and
   ``normal``), rename it over the old one (the commit point) and fsync the directory
   (``full``).

A crash before step 2's rename leaves the old source authoritative; projections that already
show the new state are repaired from the source when a root is opened or context is rendered.
Temporary files of crashed writers are removed, under the lock, when a root is opened.

:class:`SourceCache` remembers the last source bytes seen and their parse, so an unchanged file
is never parsed twice; equality of bytes is the proof, never a timestamp.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from mnemon_sm.flows.hot.model import (
    RUNTIME_DIR,
    SOURCE_PATH,
    TARGETS,
    HotStore,
    parse_source,
    projection_path,
)
from mnemon_sm.ports import TEMP_NAME, Files, Stamp
from mnemon_sm.ports.storage import durable_replace, replace_file

__all__ = [
    "SourceCache",
    "clear_stale_temps",
    "commit",
    "repair_projections",
    "write_projections",
    "write_source",
]

_MISSING = b"\x00missing"  # cache key of an absent source (no real file has these bytes)


@attrs.define
class SourceCache:
    """The last ``memories.json`` bytes seen and their parse, plus, per projection, the stamp
    it had when it was last seen to match that source (absent: not verified)."""

    data: bytes | None = _MISSING
    store: HotStore = attrs.Factory(HotStore)
    stamp: Stamp | None = None
    projection_stamps: dict[str, Stamp] = attrs.Factory(dict)

    def load(self, data: bytes | None) -> HotStore:
        """Parse ``data`` unless it equals the bytes already parsed (raises CorruptStore)."""
        key = _MISSING if data is None else data
        if key != self.data:
            store = parse_source(data)
            self.data, self.store, self.stamp = key, store, None
            self.projection_stamps.clear()
        return self.store

    def remember(self, data: bytes, store: HotStore, *changed: str) -> None:
        """Record what a commit just wrote; only the ``changed`` projections were rewritten."""
        self.data, self.store, self.stamp = data, store, None
        for target in changed:
            self.projection_stamps.pop(target, None)

    def forget(self) -> None:
        """Drop everything (after a failed commit, so the next reader checks the disk)."""
        self.data, self.store, self.stamp = _MISSING, HotStore(), None
        self.projection_stamps.clear()


def clear_stale_temps(files: Files) -> int:
    """Remove temporary files left in ``runtime/`` by crashed writers (call under the lock)."""
    stale = [n for n in files.list(RUNTIME_DIR) if TEMP_NAME.match(n)]
    for name in stale:
        files.remove(f"{RUNTIME_DIR}/{name}")
    return len(stale)


def repair_projections(files: Files, store: HotStore) -> int:
    """Rewrite every projection whose bytes differ from ``store`` (call under the lock)."""
    repaired = 0
    for target in TARGETS:
        path, expected = projection_path(target), store.projection(target)
        if files.read(path) != expected:
            replace_file(files, path, expected, sync=False)
            repaired += 1
    return repaired


def write_projections(
    files: Files, before: HotStore, after: HotStore, targets: tuple[str, ...] = TARGETS
) -> None:
    """Step 1 of a commit: replace each projection (of ``targets``) whose content changes."""
    for target in targets:
        if not after.same_projection(before, target):
            replace_file(files, projection_path(target), after.projection(target), sync=False)


def write_source(
    files: Files, after: HotStore, durability: str, sync_first: Sequence[str] = ()
) -> bytes:
    """Step 2 of a commit (the commit point); returns the bytes written. ``sync_first`` are
    files the commit depends on (the history of what it removes), fsynced before its point."""
    data = after.encode()
    durable_replace(files, SOURCE_PATH, data, durability, sync_first)
    return data


def commit(
    files: Files,
    before: HotStore,
    after: HotStore,
    durability: str,
    targets: tuple[str, ...] = TARGETS,
    sync_first: Sequence[str] = (),
) -> bytes:
    """The commit protocol: projections first, then the source; returns the source bytes.

    ``targets`` may name the only targets that changed, to skip comparing the others;
    ``sync_first`` is passed to :func:`write_source`.
    """
    write_projections(files, before, after, targets)
    return write_source(files, after, durability, sync_first)
