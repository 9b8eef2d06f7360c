"""The newcomer path as the README prints it: ``Config`` refuses what it does not know with
``InvalidConfig``, and a closed root leaves no file descriptor behind.

The command-line side of the same path (``--version``, options before positionals, file
errors as JSON, a replay that leaves the live root alone, ``specs render --out``, a guarded
``demo``) is in ``test_cli.py``.
"""

from __future__ import annotations

import contextlib
import os
import pickle
from pathlib import Path

import attrs
import pytest

from mnemon_sm import Config, InvalidConfig, MemoryRoot
from mnemon_sm.adapters.real import SystemClock, real_ports
from mnemon_sm.adapters.sqlite import EmbeddedStore
from mnemon_sm.convert import structure

# -- Config: unknown keyword arguments ------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"foo": 1}, "foo"),
        ({"userLimit": 4096}, "userLimit"),
        ({"user_limit": 4096, "colour": "red", "writeEnabled": False}, "colour, writeEnabled"),
    ],
)
def test_an_unknown_keyword_is_invalid_config_naming_it(
    values: dict[str, object], named: str
) -> None:
    with pytest.raises(InvalidConfig, match=f"unknown config option\\(s\\): {named}$"):
        Config(**values)  # type: ignore[arg-type]
    with pytest.raises(InvalidConfig, match=named):
        Config.of(**values)


def test_config_is_still_an_attrs_value() -> None:
    config = Config(user_limit=2048, worker_timeouts_ms={"archive": 600_000})
    assert attrs.evolve(config, memory_limit=4096).memory_limit == 4096
    assert attrs.evolve(config, memory_limit=4096).user_limit == 2048
    with pytest.raises(InvalidConfig, match="foo"):
        attrs.evolve(config, foo=1)
    assert pickle.loads(pickle.dumps(config)) == config
    camel = {"userLimit": 2048, "workerTimeoutsMs": {"archive": 600_000}}
    assert structure(camel, Config) == config
    assert config.replace(user_limit=4096) == Config(worker_timeouts_ms={"archive": 600_000})
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        config.user_limit = 1  # type: ignore[misc]


# -- close releases every file descriptor ---------------------------------------------------


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _targets(under: Path) -> list[str]:
    """What this process's open descriptors point to under ``under`` (files, directories)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith(str(under)):
                found.append(target)
    return found


def _use_and_close(path: Path) -> None:
    root = MemoryRoot.open(path, Config(long_term_store="embedded", durability="off"))
    root.hot.add("user", "User prefers concise replies")
    root.long_term.remember("The build runs with make")
    assert root.long_term.recall("build").results
    root.close()


def test_closing_a_root_releases_every_descriptor(tmp_path: Path) -> None:
    # One root first: whatever the process opens once and keeps (nothing today) is counted
    # in the baseline, not as growth.
    _use_and_close(tmp_path / "warm")
    before = _open_fds()
    for n in range(100):
        _use_and_close(tmp_path / str(n))
    # Nothing under the roots stays open. (The process's count may also move with what
    # other threads of a test worker open or close, so it is bounded, not compared exactly.)
    assert _targets(tmp_path) == []
    assert _open_fds() <= before


def test_a_store_passed_in_stays_open_after_close(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path, SystemClock(), durability="off")
    ports = attrs.evolve(real_ports(tmp_path), long_term=store)
    root = MemoryRoot.open(tmp_path, Config(durability="off"), ports=ports)
    root.long_term.remember("The build runs with make")
    with_store_open = _open_fds()
    root.close()
    # The caller's store is the caller's to close: its connections are still open.
    assert _open_fds() == with_store_open
    store.close()
    assert _open_fds() < with_store_open
