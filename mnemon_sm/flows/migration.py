"""Context of ``specs/root_migration.yaml``: copy a storage root to another backend, then prove it.

A run's steps are the spec's states: ``preparing`` lists the source (its files through the
``FileTree`` capability of its ``Files`` port, its spaces through its store) and checks that
the target is empty; ``copying_files`` copies one batch of files per step, each written to a
temporary file, flushed and renamed, its SHA-256 recorded; ``copying_spaces`` copies one space
per step (the store's ``SpaceRows`` capability: exported in pages, imported in one
transaction); ``verifying`` reads both roots again and compares file lists, file digests,
space lists and every space's row counts and digest. What a run knows travels with its events
as one frozen :class:`MigrationRun`; the pure guards ``has_files`` and ``has_spaces`` choose
the next step.

What is copied as files (:func:`copied_paths`): every file except temporary files (a crashed
writer's), lock files (``*.lock``, ``*.flock``: a backend's own locks) and the files of the
stores themselves (``data/<space>/...``: SQLite files and their side index, copied as rows).
The catalog ``data/.dsh-memory-bodies.json`` is a file and is copied as one. A source in the
reference's directory layout (dsh-mnemon) is read as it is.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from mnemon_sm.engine.context import FlowContext
from mnemon_sm.engine.flow import Machine
from mnemon_sm.engine.registry import flow_context
from mnemon_sm.errors import InvalidInput, MigrationMismatch, MnemonError
from mnemon_sm.ports import TEMP_NAME, Files, FileTree
from mnemon_sm.ports.long_term.port import LongTermStore, SpaceRows
from mnemon_sm.ports.long_term.values import SpaceDigest

__all__ = [
    "MigrationEnd",
    "MigrationFlow",
    "MigrationReport",
    "MigrationRun",
    "copied_paths",
]

Progress = Callable[[str, int, int], None]  # (what, done, total)


@attrs.frozen
class MigrationEnd:
    """One root of a migration: its files, its store, and where it is (for messages)."""

    files: Files
    store: LongTermStore
    where: str


@attrs.frozen
class MigrationRun:
    """What a run has left to do and what it copied (each file's SHA-256 and size)."""

    files: tuple[str, ...]
    spaces: tuple[str, ...]
    progress: Progress | None
    batch: int
    files_done: int = 0
    spaces_done: int = 0
    copied: tuple[tuple[str, str, int], ...] = ()

    def files_left(self) -> tuple[str, ...]:
        return self.files[self.files_done :]

    def spaces_left(self) -> tuple[str, ...]:
        return self.spaces[self.spaces_done :]


@attrs.frozen
class MigrationReport:
    """What a verified migration copied: files, bytes, and each space's row counts; the
    ``files_sha256`` digest covers every copied path with its content's SHA-256."""

    source: str
    target: str
    files: int
    bytes: int
    files_sha256: str
    spaces: dict[str, dict[str, int]]

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


def copied_paths(paths: tuple[str, ...]) -> tuple[str, ...]:
    """The files of a root a migration copies as files (see the module)."""
    out = []
    for path in paths:
        parts = path.split("/")
        leaf = parts[-1]
        if TEMP_NAME.match(leaf) or leaf.endswith((".lock", ".flock")):
            continue
        if parts[0] == "data" and len(parts) > 2:  # a store's own files
            continue
        out.append(path)
    return tuple(sorted(out))


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _manifest(copied: tuple[tuple[str, str, int], ...]) -> str:
    return _digest("".join(f"{path}\0{sha}\n" for path, sha, _ in copied).encode())


@flow_context("MigrationFlow")
class MigrationFlow(FlowContext):
    """Migrates ``source`` into ``target`` (see the module)."""

    FLOW = "root_migration"

    def __init__(self, source: MigrationEnd, target: MigrationEnd) -> None:
        self.source, self.target = source, target
        self._dirs: set[str] = set()  # the target's directories made by this run
        super().__init__()

    def reset(self) -> None:
        self._dirs = set()

    # -- validators and guards (pure) --------------------------------------------------------

    def check_request(self, batch: int = 64, progress: Progress | None = None) -> None:
        if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= 10_000:
            raise InvalidInput("batch must be an integer from 1 to 10000")
        if progress is not None and not callable(progress):
            raise InvalidInput("progress must be callable")

    def has_files(self, run: MigrationRun) -> bool:
        return bool(run.files_left())

    def has_spaces(self, run: MigrationRun) -> bool:
        return bool(run.spaces_left())

    # -- steps -------------------------------------------------------------------------------

    def _rows(self, end: MigrationEnd) -> SpaceRows:
        store = end.store
        if not isinstance(store, SpaceRows):
            raise InvalidInput(f"the Memory Spaces of {end.where} cannot be copied row by row")
        return store

    def _tree(self, end: MigrationEnd) -> FileTree:
        files = end.files
        if not isinstance(files, FileTree):
            raise InvalidInput(f"the files of {end.where} cannot be listed")
        return files

    def plan_migration(
        self, machine: Machine, batch: int = 64, progress: Progress | None = None
    ) -> None:
        """Entry of ``preparing``."""
        try:
            self._rows(self.source)
            self._rows(self.target)
            files = copied_paths(self._tree(self.source).walk())
            spaces = tuple(sorted(self.source.store.spaces()))
            present = self._tree(self.target).walk()
            if present or self.target.store.spaces():
                raise InvalidInput(
                    f"the target {self.target.where} is not empty: a migration copies into an "
                    "empty root only"
                )
        except MnemonError as exc:
            return self.refuse(machine, "migration_refused", exc)
        run = MigrationRun(files, spaces, progress, batch)
        machine.raise_("migration_planned", run=run)

    def copy_files(self, machine: Machine, run: MigrationRun) -> None:
        """Entry of ``copying_files``: one batch."""
        part = run.files_left()[: run.batch]
        copied = []
        try:
            for path in part:
                data = self.source.files.read(path)
                if data is None:
                    raise MigrationMismatch(f"{path} vanished from {self.source.where}")
                self._write(path, data)
                copied.append((path, _digest(data), len(data)))
            for directory in sorted({path.rpartition("/")[0] for path in part}):
                self.target.files.fsync(directory)  # the new names, durable
        except MnemonError as exc:
            return self.refuse(machine, "copy_failed", exc)
        run = attrs.evolve(
            run, files_done=run.files_done + len(part), copied=run.copied + tuple(copied)
        )
        if run.progress is not None:
            run.progress("files", run.files_done, len(run.files))
        machine.raise_("files_copied", run=run)

    def _write(self, path: str, data: bytes) -> None:
        files = self.target.files
        directory = path.rpartition("/")[0]
        if directory and directory not in self._dirs:
            files.ensure_dir(directory)
            self._dirs.add(directory)
        temp = files.write_temp(path, data)
        files.fsync(temp)
        files.rename(temp, path)

    def copy_space(self, machine: Machine, run: MigrationRun) -> None:
        """Entry of ``copying_spaces``: one space."""
        space = run.spaces_left()[0]
        try:
            self._rows(self.target).import_rows(space, self._rows(self.source).export_rows(space))
        except MnemonError as exc:
            return self.refuse(machine, "space_copy_failed", exc)
        run = attrs.evolve(run, spaces_done=run.spaces_done + 1)
        if run.progress is not None:
            run.progress("spaces", run.spaces_done, len(run.spaces))
        machine.raise_("spaces_copied", run=run)

    def verify_copy(self, machine: Machine, run: MigrationRun) -> None:
        """Entry of ``verifying``: read both roots again and compare."""
        try:
            digests = self._verify(run)
        except MnemonError as exc:
            return self.refuse(machine, "verification_failed", exc)
        report = MigrationReport(
            source=self.source.where,
            target=self.target.where,
            files=len(run.copied),
            bytes=sum(size for _, _, size in run.copied),
            files_sha256=_manifest(run.copied),
            spaces={space: dict(digest.counts) for space, digest in digests.items()},
        )
        self.settle(machine, "migration_verified", report)

    def _verify(self, run: MigrationRun) -> Mapping[str, SpaceDigest]:
        problems: list[str] = []
        for end in (self.source, self.target):
            listed = copied_paths(self._tree(end).walk())
            if listed != run.files:
                extra = sorted(set(listed) - set(run.files))[:3]
                missing = sorted(set(run.files) - set(listed))[:3]
                problems.append(
                    f"{end.where} lists other files (extra {extra}, missing {missing})"
                )
            if tuple(sorted(end.store.spaces())) != run.spaces:
                problems.append(f"{end.where} holds other spaces: {sorted(end.store.spaces())}")
        for done, (path, sha, _) in enumerate(run.copied, 1):
            for end in (self.source, self.target):
                data = end.files.read(path)
                if data is None or _digest(data) != sha:
                    problems.append(f"{path} differs in {end.where}")
            if run.progress is not None and done % run.batch == 0:
                run.progress("verify", done, len(run.copied))
        digests: dict[str, SpaceDigest] = {}
        for space in run.spaces:
            source = self._rows(self.source).space_digest(space)
            target = self._rows(self.target).space_digest(space)
            if source != target:
                problems.append(
                    f"space {space} differs: {source.counts} in {self.source.where}, "
                    f"{target.counts} in {self.target.where}"
                )
            digests[space] = target
        if problems:
            shown = "; ".join(problems[:5])
            more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
            raise MigrationMismatch(f"the copy does not match its source: {shown}{more}")
        if run.progress is not None:
            run.progress("verify", len(run.copied), len(run.copied))
        return digests
