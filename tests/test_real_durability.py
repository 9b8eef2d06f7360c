"""Durability on the real file system: what reaches the disk, in which order.

The power-loss properties run on the in-memory fake, which trusts the real adapter to do what
its ``fsync`` and ``rename`` say. These tests watch the system calls themselves: ``os.fsync``
(the file each descriptor names, read back from ``/proc/self/fd``), ``os.replace`` and
``os.rename`` are wrapped to record, and a hot add, a document create and a long-term remember
run on a real root. A replacement is durable when its temporary file was fsynced before the
rename (the new bytes are on disk before the name points at them) and the directory was
fsynced after it (the new name itself is on disk). ``Config.durability`` says which levels
ask for what: ``full`` both, ``normal`` the file only, ``off`` neither. SQLite syncs on its own
(outside Python's ``os``), so for the long-term store the test reads the level its connection
was given.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import attrs
import pytest

from mnemon_sm import Config, MemoryRoot
from mnemon_sm.flows.hot.model import SOURCE_PATH
from mnemon_sm.flows.long_term.catalog import CATALOG_PATH
from mnemon_sm.ports import TEMP_NAME

#: (temporary file fsynced before the rename, directory fsynced after it), per level.
LEVELS = {"full": (True, True), "normal": (True, False), "off": (False, False)}
#: SQLite's ``PRAGMA synchronous`` for each level (FULL, NORMAL, OFF).
SQLITE_LEVELS = {"full": 2, "normal": 1, "off": 0}


@attrs.frozen
class Synced:
    """``os.fsync`` of ``path`` (relative to the root; "" is the root), a directory or not."""

    path: str
    directory: bool


@attrs.frozen
class Renamed:
    """``os.replace`` or ``os.rename`` of ``source`` onto ``target`` (relative paths)."""

    source: str
    target: str


class SystemCalls:
    """Records the durability-relevant system calls made under ``root``, in order."""

    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self.calls: list[Synced | Renamed] = []

    def relative(self, path: str | os.PathLike[str]) -> str | None:
        full = os.fspath(path)
        if full != self.root and not full.startswith(self.root + os.sep):
            return None  # not ours (a temporary directory of the test runner, say)
        relative = os.path.relpath(full, self.root).replace(os.sep, "/")
        return "" if relative == "." else relative

    @staticmethod
    def absolute(path: str | os.PathLike[str], dir_fd: object) -> str:
        """``path`` as an absolute path (relative to the directory ``dir_fd`` names, if any)."""
        if isinstance(dir_fd, int):
            return os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), os.fspath(path))
        return os.fspath(path)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        fsync, replace, rename = os.fsync, os.replace, os.rename

        def recording_fsync(fd: int) -> None:
            path = self.relative(os.readlink(f"/proc/self/fd/{fd}"))
            if path is not None:
                self.calls.append(Synced(path, stat.S_ISDIR(os.fstat(fd).st_mode)))
            fsync(fd)

        def recording(call: object) -> object:
            def run(source: str, target: str, **kwargs: object) -> None:
                src = self.relative(self.absolute(source, kwargs.get("src_dir_fd")))
                dst = self.relative(self.absolute(target, kwargs.get("dst_dir_fd")))
                if src is not None and dst is not None:
                    self.calls.append(Renamed(src, dst))
                call(source, target, **kwargs)  # type: ignore[operator]

            return run

        monkeypatch.setattr(os, "fsync", recording_fsync)
        monkeypatch.setattr(os, "replace", recording(replace))
        monkeypatch.setattr(os, "rename", recording(rename))

    def replacement(self, target: str) -> tuple[bool, bool]:
        """For the one rename onto ``target``: (its temporary file was fsynced before it, its
        directory was fsynced after it)."""
        [at] = [
            i for i, c in enumerate(self.calls) if isinstance(c, Renamed) and c.target == target
        ]
        renamed = self.calls[at]
        assert isinstance(renamed, Renamed) and TEMP_NAME.match(renamed.source.split("/")[-1])
        directory = target.rpartition("/")[0]
        return (
            Synced(renamed.source, False) in self.calls[:at],
            Synced(directory, True) in self.calls[at + 1 :],
        )


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SystemCalls:
    recorder = SystemCalls(tmp_path / "root")
    recorder.install(monkeypatch)
    return recorder


def test_the_recorder_sees_a_durable_replacement(calls: SystemCalls, tmp_path: Path) -> None:
    """The recorder itself: a file fsynced, renamed, its directory fsynced, in that order."""
    (tmp_path / "root").mkdir()
    temp = tmp_path / "root" / ".a.1.2.3.tmp"
    temp.write_bytes(b"A")
    fd = os.open(temp, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    os.replace(temp, tmp_path / "root" / "a")
    fd = os.open(tmp_path / "root", os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    assert calls.calls == [
        Synced(".a.1.2.3.tmp", False),
        Renamed(".a.1.2.3.tmp", "a"),
        Synced("", True),
    ]
    assert calls.replacement("a") == (True, True)


@pytest.mark.parametrize("durability", sorted(LEVELS))
def test_a_hot_add_commits_the_source_as_the_durability_level_asks(
    calls: SystemCalls, tmp_path: Path, durability: str
) -> None:
    root = MemoryRoot.open(tmp_path / "root", Config(durability=durability))
    calls.calls.clear()
    root.hot.add("user", "User prefers concise replies")
    assert calls.replacement(SOURCE_PATH) == LEVELS[durability]
    if durability == "off":
        assert not any(isinstance(c, Synced) for c in calls.calls)


@pytest.mark.parametrize("durability", sorted(LEVELS))
def test_a_document_create_writes_its_file_and_the_index_as_the_level_asks(
    calls: SystemCalls, tmp_path: Path, durability: str
) -> None:
    root = MemoryRoot.open(tmp_path / "root", Config(durability=durability))
    root.documents.create("Warm-up", "# Warm-up\n\nMakes the directories.")
    calls.calls.clear()
    doc = root.documents.create("Runbook", "# Runbook\n\nDeploy with care.").document
    assert calls.replacement(doc.path()) == LEVELS[durability]
    assert calls.replacement("documents/index.json") == LEVELS[durability]
    if durability == "off":
        assert not any(isinstance(c, Synced) for c in calls.calls)


@pytest.mark.parametrize("durability", sorted(LEVELS))
def test_a_long_term_remember_syncs_its_catalog_and_its_store_as_the_level_asks(
    calls: SystemCalls, tmp_path: Path, durability: str
) -> None:
    root = MemoryRoot.open(
        tmp_path / "root", Config(durability=durability, long_term_store="embedded")
    )
    calls.calls.clear()
    receipt = root.long_term.remember("The deploy script lives in tools/deploy.sh")
    assert receipt.memory_body_ids == ("default",)  # the first remember creates the space
    if durability == "full":
        assert calls.replacement(CATALOG_PATH) == (True, True)
    handle = root.long_term.service.store._handle("default")  # type: ignore[attr-defined]
    level = handle.conn.execute("PRAGMA main.synchronous").fetchone()[0]
    assert level == SQLITE_LEVELS[durability]
