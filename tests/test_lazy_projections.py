"""``projections = "lazy"``: commits write ``memories.json`` only; USER.md and MEMORY.md
follow at the next render of context, at ``hot.write_projections()`` and when the root closes.
The default (``eager``) keeps them current in every commit."""

from __future__ import annotations

from pathlib import Path

import pytest

from mnemon_sm import Config, MemoryRoot
from mnemon_sm.errors import InvalidConfig
from mnemon_sm.flows.hot.model import SOURCE_PATH
from mnemon_sm.testing.faults import Fault, FaultInjector, SimulatedCrash, faulty_ports
from mnemon_sm.testing.memory import memory_ports

MEMORY_MD = "runtime/MEMORY.md"
USER_MD = "runtime/USER.md"


def _written(log: object) -> list[str]:
    return [c.args[0] for c in log.calls if c.method == "write_temp"]  # type: ignore[attr-defined]


def test_a_lazy_commit_writes_the_source_only_and_a_render_brings_the_files_up() -> None:
    ports, log = memory_ports()
    root = MemoryRoot.open("/lazy", Config(projections="lazy"), ports=ports)
    log.clear()
    root.hot.add("memory", "first fact")
    root.hot.add("user", "prefers tea")
    root.hot.replace("memory", "first", "first fact, revised")
    assert _written(log) == [SOURCE_PATH] * 3
    assert ports.files.read(MEMORY_MD) in (None, b"")
    text = root.context.runtime_memory()
    assert "first fact, revised" in text
    assert ports.files.read(MEMORY_MD) == b"first fact, revised\n"
    assert ports.files.read(USER_MD) == b"prefers tea\n"


def test_the_default_is_eager_and_every_commit_writes_its_projection() -> None:
    ports, log = memory_ports()
    root = MemoryRoot.open("/eager", Config(), ports=ports)
    assert root.config.projections == "eager"
    log.clear()
    root.hot.add("memory", "first fact")
    assert _written(log) == [MEMORY_MD, SOURCE_PATH]
    assert ports.files.read(MEMORY_MD) == b"first fact\n"


def test_write_projections_and_close_bring_the_files_up_to_date() -> None:
    ports, _ = memory_ports()
    root = MemoryRoot.open("/lazy", Config(projections="lazy"), ports=ports)
    root.hot.add("memory", "one")
    assert root.hot.write_projections() is True
    assert ports.files.read(MEMORY_MD) == b"one\n"
    assert root.hot.write_projections() is True  # nothing to do: still current
    root.hot.add("memory", "two")
    assert ports.files.read(MEMORY_MD) == b"one\n"
    root.close()
    assert ports.files.read(MEMORY_MD) == b"one\n\xc2\xa7\ntwo\n"


def test_write_projections_reports_a_busy_lock() -> None:
    ports, _ = memory_ports()
    root = MemoryRoot.open("/lazy", Config(projections="lazy"), ports=ports)
    root.hot.add("memory", "one")
    ports.locks.hold("runtime/.memories.lock")  # type: ignore[attr-defined]
    assert root.hot.write_projections() is False
    assert ports.files.read(MEMORY_MD) in (None, b"")


# An add at durability full makes 8 port calls: lock, read, clock, write_temp, fsync, rename,
# fsync of the directory, release. A crash before or after each of them:
@pytest.mark.parametrize("kind", ["crash_before", "crash_after"])
@pytest.mark.parametrize("at", range(8))
def test_a_crash_in_a_lazy_commit_is_repaired_when_the_root_opens(kind: str, at: int) -> None:
    inner, _ = memory_ports()
    MemoryRoot.open("/lazy", Config(projections="lazy"), ports=inner).hot.add("memory", "a")
    injector = FaultInjector([])
    root = MemoryRoot.open(
        "/lazy", Config(projections="lazy"), ports=faulty_ports(inner, injector)
    )
    start = injector.count
    injector.faults = {start + at: Fault(start + at, kind)}  # type: ignore[arg-type]
    with pytest.raises(SimulatedCrash):
        root.hot.add("memory", "b")
    assert injector.count == start + at + 1  # the crash hit the add, at that call
    inner.locks.release_all()  # type: ignore[attr-defined]  # the kernel drops a dead process's locks
    reopened = MemoryRoot.open("/lazy", Config(projections="lazy"), ports=inner)
    contents = [e.content for e in reopened.hot.snapshot().entries]
    assert contents in (["a"], ["a", "b"])
    assert inner.files.read(MEMORY_MD) == "\n\xa7\n".join(contents).encode() + b"\n"


def test_real_files_follow_a_render(tmp_path: Path) -> None:
    root = MemoryRoot.open(tmp_path, Config(projections="lazy", durability="off"))
    root.hot.add("memory", "on disk")
    projection = tmp_path / "runtime" / "MEMORY.md"
    assert not projection.exists() or projection.read_bytes() == b""
    root.context.runtime_memory()
    assert projection.read_bytes() == b"on disk\n"


@pytest.mark.parametrize("value", ["sometimes", "", None, 1])
def test_an_unknown_projections_value_is_refused(value: object) -> None:
    with pytest.raises(InvalidConfig):
        Config(projections=value)  # type: ignore[arg-type]


def test_the_option_reads_from_a_config_file(tmp_path: Path) -> None:
    path = tmp_path / "mnemon.toml"
    path.write_text('projections = "lazy"\n')
    assert Config.from_toml(path).projections == "lazy"
