"""Stories of the hot-memory flow on the recording in-memory ports.

Each story asserts the machine's state after every step and the exact port calls made, and the
port calls observed in each state are checked against the spec's declaration.
"""

from __future__ import annotations

import attrs
import pytest

from mnemon_sm import (
    AmbiguousMatch,
    CapacityExceeded,
    Config,
    CorruptStore,
    DuplicateEntry,
    IllegalEvent,
    InvalidInput,
    LockTimeout,
    MemoryRoot,
    NoMatch,
    ReadOnly,
    StorageError,
)
from mnemon_sm.engine.spec import load_flow
from mnemon_sm.errors import MnemonError
from mnemon_sm.flows.hot.compaction import Compaction
from mnemon_sm.flows.hot.model import LOCK_NAME, SOURCE_PATH, parse_source
from mnemon_sm.flows.hot.rules import check_request
from mnemon_sm.testing.faults import Fault, FaultInjector, RaisingPort, faulty_ports
from mnemon_sm.testing.memory import CallLog, MemoryFiles, memory_ports
from mnemon_sm.testing.snapshot import files_state
from tests._flow_probe import flow_probe

FLOW = "hot_memory_mutation"


def open_root(config: Config | None = None, *, faults: tuple[Fault, ...] = ()):
    ports, log = memory_ports()
    if faults:
        ports = faulty_ports(ports, FaultInjector(faults))
    root = MemoryRoot.open("/unused", config or Config(), ports=ports)
    log.probe = lambda: root._flow.state
    return root, ports, log


def files_of(ports) -> MemoryFiles:
    files = ports.files
    return files if isinstance(files, MemoryFiles) else files.inner


def test_opening_creates_the_layout_and_rests_in_ready() -> None:
    ports, log = memory_ports()
    root = MemoryRoot.open("/unused", Config(), ports=ports)
    assert root._flow.state == "ready"
    assert log.names() == [
        "files.ensure_dir",  # runtime/
        "files.read",  # no history file yet: created empty, durably
        "files.ensure_dir",
        "files.append",
        "files.fsync",
        "locks.acquire",
        "files.list",
        "files.read",
        "files.read",
        "files.write_temp",
        "files.rename",
        "files.read",
        "files.write_temp",
        "files.rename",
        "locks.release",
        "files.list",  # the maintenance journal's recovery finds nothing to recover
        "files.list",  # the document store's repair finds no documents/ directory
    ]
    assert ports.files.files["state/hot-history.jsonl"] == b""
    assert ports.files.files["runtime/USER.md"] == b""
    assert ports.files.files["runtime/MEMORY.md"] == b""
    assert SOURCE_PATH not in ports.files.files  # an empty store needs no source file


def test_ready_add_decides_then_commits() -> None:
    root, ports, log = open_root()
    log.clear()
    receipt = root.hot.add("user", "User prefers concise replies", importance="critical")
    assert root._flow.state == "committed"
    assert receipt.to_json() == {
        "success": True,
        "message": "Entry added.",
        "target": "user",
        "entryCount": 1,
        "usage": {"used": 28, "limit": 4096},
        "added": "User prefers concise replies",
    }
    assert log.names() == [
        "locks.acquire",
        "files.read",
        "clock.now_ms",
        "files.write_temp",
        "files.rename",
        "files.write_temp",
        "files.fsync",
        "files.rename",
        "files.fsync",
        "locks.release",
    ]
    # The lock, the reload and the clock decide; only committed writes, then unlocks.
    assert [c.state for c in log.calls] == ["deciding"] * 3 + ["committed"] * 7
    assert ports.files.files["runtime/USER.md"] == b"User prefers concise replies\n"


def test_committed_add_decides_and_commits_again() -> None:
    root, _, log = open_root()
    root.hot.add("memory", "Project uses pnpm workspaces")
    log.clear()
    root.hot.add("memory", "Release checks run with pnpm verify")
    assert root._flow.state == "committed"
    assert log.names()[0] == "locks.acquire" and log.names()[-1] == "locks.release"


def test_committed_duplicate_add_goes_to_ready_without_writing() -> None:
    root, ports, log = open_root()
    root.hot.add("memory", "Project uses pnpm workspaces")
    before = files_state(ports.files.files)
    log.clear()
    receipt = root.hot.add("memory", "  Project uses\tpnpm workspaces ")
    assert receipt.message == "Entry already exists (no duplicate added)."
    assert receipt.added == "Project uses pnpm workspaces"
    assert root._flow.state == "ready"
    assert "files.write_temp" not in log.names()
    assert files_state(ports.files.files) == before
    # Decided and unlocked in deciding (the is_duplicate edge): nothing ran in committed.
    assert {c.state for c in log.calls} == {"deciding"}
    assert log.names()[-1] == "locks.release"


@pytest.mark.parametrize(
    ("prepare", "call", "error"),
    [
        ([], lambda h: h.remove("memory", "nothing"), NoMatch),
        (["a fact", "another fact"], lambda h: h.remove("memory", "fact"), AmbiguousMatch),
        (["a", "b"], lambda h: h.replace("memory", "a", "b"), DuplicateEntry),
        ([], lambda h: h.add("user", "x" * 4097, maintenance=False), CapacityExceeded),
    ],
)
def test_committed_rejection_goes_to_ready_and_writes_nothing(prepare, call, error) -> None:
    root, ports, log = open_root()
    root.hot.add("memory", "seed entry")
    for text in prepare:
        root.hot.add("memory", text)
    before = files_state(ports.files.files)
    log.clear()
    with pytest.raises(error):
        call(root.hot)
    assert root._flow.state == "ready"
    assert files_state(ports.files.files) == before
    assert log.names()[-1] == "locks.release"
    assert not ports.locks.held
    # The is_rejected edge releases the lock itself: nothing ran in committed.
    assert {c.state for c in log.calls} == {"deciding"}


def test_ready_rejection_goes_through_deciding_back_to_ready() -> None:
    root, _, _ = open_root()
    with pytest.raises(NoMatch):
        root.hot.remove("user", "nothing")
    assert root._flow.state == "ready"
    with pytest.raises(NoMatch):
        root.hot.remove("user", "still nothing")
    assert root._flow.state == "ready"


@pytest.mark.parametrize(
    "call",
    [
        lambda h: h.add("user", "§ not allowed"),
        lambda h: h.add("user", " \t\u3000 "),
        lambda h: h.add("nobody", "text"),
        lambda h: h.add("user", "text", importance="urgent"),
        lambda h: h.add("user", "x" * 8193),
        lambda h: h.replace("user", "", "text"),
        lambda h: h.add("user", "\udc80 lone surrogate"),
    ],
)
def test_invalid_input_is_refused_by_the_validators_before_any_port_call(call) -> None:
    root, ports, log = open_root()
    before = files_state(ports.files.files)
    log.clear()
    with pytest.raises(InvalidInput):
        call(root.hot)
    assert log.calls == []
    assert root._flow.state == "ready"
    assert files_state(ports.files.files) == before


def test_read_only_refuses_every_mutation_before_touching_anything() -> None:
    root, _, log = open_root(Config(write_enabled=False))
    log.clear()
    for call in (
        lambda: root.hot.add("user", "x"),
        lambda: root.hot.replace("user", "x", "y"),
        lambda: root.hot.remove("user", "x"),
    ):
        with pytest.raises(ReadOnly):
            call()
    assert log.calls == []


def test_lock_timeout_takes_the_has_failed_edge_out_of_deciding() -> None:
    root, ports, _ = open_root()
    root.hot.add("user", "first")
    ports.locks.hold(LOCK_NAME)
    with pytest.raises(LockTimeout):
        root.hot.add("user", "second")
    assert root._flow.state == "ready"
    ports.locks.let_go(LOCK_NAME)
    assert root.hot.add("user", "second").entry_count == 2


def test_corrupt_source_is_reported_and_never_rewritten() -> None:
    root, ports, _ = open_root()
    ports.files.put(SOURCE_PATH, b"{broken")
    with pytest.raises(CorruptStore) as caught:
        root.hot.add("user", "anything")
    assert caught.value.path == SOURCE_PATH
    assert ports.files.files[SOURCE_PATH] == b"{broken"
    assert root._flow.state == "ready"
    with pytest.raises(CorruptStore):
        root.hot.snapshot()
    with pytest.raises(CorruptStore):
        root.context.runtime_memory()


def test_a_source_that_fails_after_locking_takes_the_has_failed_edge_which_unlocks() -> None:
    root, ports, log = open_root()
    root.hot.add("user", "first")
    ports.files.put(SOURCE_PATH, b"{broken")
    log.clear()
    with pytest.raises(CorruptStore):
        root.hot.add("user", "second")
    assert log.names() == ["locks.acquire", "files.read", "locks.release"]
    assert {c.state for c in log.calls} == {"deciding"}  # released by the edge, not by run
    assert root._flow.state == "ready"
    assert not ports.locks.held


def raising_root(port: str, method: str, error: BaseException):
    """A recorded root whose ``port`` raises ``error`` from ``method`` once armed."""
    ports, log = memory_ports()
    raising = RaisingPort(getattr(ports, port), method, error)
    root = MemoryRoot.open("/unused", Config(), ports=attrs.evolve(ports, **{port: raising}))
    log.probe = lambda: root._flow.state
    return root, ports, log, raising


@pytest.mark.parametrize(
    ("error", "rest", "unlocked_in"),
    [
        # the engine stops in deciding: abort takes it to ready and unlocks
        (KeyboardInterrupt(), "ready", "deciding"),
        # the engine steps back to where the event found it, at rest: the operation unlocks
        (RuntimeError("bug"), "committed", "committed"),
    ],
    ids=["KeyboardInterrupt", "RuntimeError"],
)
def test_an_exception_while_deciding_leaves_the_machine_at_rest_and_unlocked(
    error, rest, unlocked_in
) -> None:
    root, ports, log, raising = raising_root("clock", "now_ms", error)
    root.hot.add("user", "first")
    before = files_state(ports.files.files)
    log.clear()
    raising.armed = True
    with pytest.raises(type(error)) as caught:
        root.hot.add("user", "second")
    assert caught.value is error
    assert root._flow.state == rest
    assert log.names() == ["locks.acquire", "files.read", "locks.release"]
    assert [c.state for c in log.calls] == ["deciding", "deciding", unlocked_in]
    assert not ports.locks.held and files_state(ports.files.files) == before
    assert root.hot.add("user", "second").entry_count == 2


def test_an_exception_escaping_the_writes_aborts_without_writing_again() -> None:
    """The engine falls back to deciding to abort; the verdict was taken on leaving it, so
    the can_commit edge does not run the writes a second time."""
    root, ports, log, raising = raising_root("files", "rename", RuntimeError("bug"))
    root.hot.add("memory", "kept")
    source = ports.files.files[SOURCE_PATH]
    log.clear()
    raising.armed = True
    with pytest.raises(RuntimeError):
        root.hot.add("memory", "lost")
    assert ports.files.files[SOURCE_PATH] == source
    assert log.names().count("files.write_temp") == 1  # the projection's, never retried
    assert log.calls[-1].name == "locks.release" and log.calls[-1].state == "deciding"
    assert root._flow.state == "ready"
    assert not ports.locks.held
    assert root.hot.add("memory", "next").entry_count == 2


def test_opening_a_corrupt_root_succeeds_and_leaves_it_alone() -> None:
    ports, _ = memory_ports()
    ports.files.put(SOURCE_PATH, b'{"version": 2, "entries": []}\n')
    ports.files.put("runtime/USER.md", b"hand edited\n")
    root = MemoryRoot.open("/unused", Config(), ports=ports)
    assert root._flow.state == "ready"
    assert ports.files.files["runtime/USER.md"] == b"hand edited\n"
    with pytest.raises(CorruptStore, match="version 1"):
        root.hot.add("user", "x")


def test_opening_fails_when_the_lock_is_held() -> None:
    ports, _ = memory_ports()
    ports.locks.hold(LOCK_NAME)
    with pytest.raises(LockTimeout):
        MemoryRoot.open("/unused", Config(), ports=ports)


def open_faulty():
    """Fake ports behind a fault injector whose only planned fault is never reached."""
    return open_root(faults=(Fault(10**6, "fail"),))


def test_a_failed_write_reports_storage_error_and_leaves_the_source() -> None:
    root, ports, _ = open_faulty()
    root.hot.add("memory", "kept")
    files = files_of(ports)
    source = files.files[SOURCE_PATH]
    injector = ports.files.injector
    # Fail the next source rename: calls of an add are acquire, read, now, write_temp,
    # rename (projection), write_temp, fsync, rename (source), ...
    injector.faults[injector.count + 7] = Fault(injector.count + 7, "fail")
    with pytest.raises(StorageError):
        root.hot.add("memory", "lost")
    assert files.files[SOURCE_PATH] == source
    assert root._flow.state == "ready"
    assert not [n for n in files.files if n.endswith(".tmp")]
    assert root.hot.add("memory", "next").entry_count == 2
    # The projection written before the failed commit is repaired when context renders.
    assert "lost" not in root.context.runtime_memory()
    assert files.files["runtime/MEMORY.md"] == b"kept\n\xc2\xa7\nnext\n"


def test_close_is_final_and_later_events_are_illegal() -> None:
    root, _, _ = open_root()
    root.close()
    assert root._flow.state == "closed"
    with pytest.raises(IllegalEvent) as caught:
        root.hot.add("user", "x")
    assert caught.value.state == "closed" and caught.value.event == "add"
    with pytest.raises(IllegalEvent):
        root.close()


def test_port_calls_in_each_state_are_the_ones_the_spec_declares() -> None:
    """Observed calls per state equal the declared ones: none undeclared, none unused."""
    observed: dict[str, set[str]] = {}

    def record(log: CallLog) -> None:
        for call in log.calls:
            if call.state is not None:  # a facade's own reads are no flow's
                observed.setdefault(call.state.partition(":")[2], set()).add(call.name)
        log.clear()

    inner, log = memory_ports()
    inner.files.put("runtime/.memories.json.1.2.ab.tmp", b"left by a crashed writer")
    injector = FaultInjector()
    ports = faulty_ports(inner, injector)
    log.probe = lambda: f"{FLOW}:opening"  # the machine is being built
    root = MemoryRoot.open("/unused", Config(), ports=ports)
    record(log)
    log.probe = flow_probe(lambda: [root._flow])
    hot = root.hot
    injector.faults[injector.count + 4] = Fault(injector.count + 4, "fail")  # a rename
    with pytest.raises(StorageError):
        hot.add("user", "zero")
    hot.add("user", "one")
    hot.add("memory", "fact one")
    hot.add("memory", "fact one")
    hot.replace("memory", "fact one", "fact two")
    hot.remove("memory", "fact two")
    for bad in (
        lambda: hot.remove("user", "missing"),
        lambda: hot.add("user", "x" * 5000, maintenance=False),
    ):
        with pytest.raises(MnemonError):
            bad()
    inner.locks.hold(LOCK_NAME)
    with pytest.raises(LockTimeout):
        hot.add("user", "two")
    inner.locks.let_go(LOCK_NAME)
    store = parse_source(inner.files.files[SOURCE_PATH])  # read by hand: no port call
    # a compaction commit preserves what it takes out
    compaction = Compaction(
        "user",
        store.revision(),
        store.of("user"),
        (),
        100,
        check_request("add", "user", "three"),
        "mnt-1-abc",
    )
    root._flow.run("compact", compaction=compaction)
    assert [e.content for e in hot.history("user")] == ["one"]
    inner.files.put("runtime/USER.md", b"edited by hand\n")  # repaired by the next render
    assert "three" in root.context.runtime_memory()
    assert inner.files.files["runtime/USER.md"] == b"three\n"
    root.close()
    record(log)
    spec = load_flow(FLOW).spec
    for state, calls in observed.items():
        declared = set(spec.states[state].ports)
        assert calls == declared, (
            f"{state}: undeclared {calls - declared}, unused {declared - calls}"
        )
    assert set(observed) == {"opening", "deciding", "committed", "repairing"}
    ported_states = {s for s, d in spec.states.items() if d.ports}
    assert ported_states == set(observed)
