"""The audit log: every flow's transitions and outcomes, bounded, crash-safe, no user content.

The oracle is the spec (the transitions a hot add takes, read from the loaded flow) and the
bytes under ``audit/``, read through the Files port (or the file system), not our reader."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from mnemon_sm import Config, MemoryRoot
from mnemon_sm.errors import InvalidInput, NoMatch, StorageError
from mnemon_sm.flows import audit as audit_module
from mnemon_sm.flows.audit import AUDIT_DIR, AuditLog, read_audit
from mnemon_sm.testing.calls import by_audit_log
from mnemon_sm.testing.faults import FaultInjector, RaisingPort, faulty_ports
from mnemon_sm.testing.memory import FakeClock, MemoryFiles, MemoryLocks, memory_ports
from mnemon_sm.testing.snapshot import files_state, root_state

SECRET = "the vault code is 4417"


DEFAULT = Config()  # the audit log is on by default


def _open(config: Config = DEFAULT, **ports_: Any) -> tuple[MemoryRoot, Any]:
    ports, _ = memory_ports()
    if ports_:
        import attrs

        ports = attrs.evolve(ports, **ports_)
    return MemoryRoot.open("/unused", config, ports=ports), ports


def _lines(files: Any) -> list[dict[str, Any]]:
    """Every parsable line under audit/, read as bytes through the port."""
    out = []
    for name in sorted(files.list(AUDIT_DIR)):
        if name.endswith(".jsonl"):
            for line in (files.read(f"{AUDIT_DIR}/{name}") or b"").splitlines():
                if line.strip():
                    out.append(json.loads(line))
    return out


def test_an_operation_is_one_run_of_transitions_and_an_outcome_with_no_user_content() -> None:
    root, ports = _open()
    root.hot.add("memory", SECRET)
    root.close()
    lines = [line for line in _lines(ports.files) if line["flow"] == "hot_memory_mutation"]
    add = [line for line in lines if line["event"] == "add" and "outcome" in line]
    assert len(add) == 1 and add[0]["outcome"] == "ok" and add[0]["state"] == "committed"
    run = [line for line in lines if line["run"] == add[0]["run"]]
    steps = [(line["from"], line["event"], line["to"]) for line in run if "from" in line]
    assert steps[0] == ("ready", "add", "deciding") and steps[-1][2] == "committed"
    assert run[-1] is add[0]  # the outcome closes its run
    every = b"".join(
        ports.files.read(f"{AUDIT_DIR}/{n}") or b"" for n in ports.files.list(AUDIT_DIR)
    )
    assert b"4417" not in every and b"vault" not in every


def test_an_error_outcome_names_its_type_and_keeps_its_message_only_when_asked() -> None:
    for setting, kept in (("on", False), ("content", True)):  # "on" is the default
        root, _ = _open(Config(audit=setting))
        with pytest.raises(NoMatch):
            root.hot.replace("memory", SECRET, "x")
        records = root.audit_tail(10, flow="hot_memory_mutation")
        root.close()
        failed = [r for r in records if r.outcome == "NoMatch"]
        assert len(failed) == 1 and failed[0].event == "replace"
        assert (failed[0].detail is not None and SECRET in failed[0].detail) is kept


def test_every_flow_writes_to_the_log() -> None:
    root, ports = _open()
    root.long_term.recall("deploy")
    root.documents.create("Runbook", "# Runbook\n\nsteps\n")
    root.lifecycle("main").session_start()
    root.close()
    flows = {line["flow"] for line in _lines(ports.files)}
    assert {
        "hot_memory_mutation",
        "recall",
        "document_mutation",
        "agent_lifecycle",
    } <= flows


def test_lines_wait_in_memory_until_enough_or_old_enough() -> None:
    clock = FakeClock()
    files, locks = MemoryFiles(), MemoryLocks()
    log = AuditLog(files, locks, clock)
    log.transition("r-1", "f", "a", "go", "b")
    log.outcome("r-1", "f", "go", "ok", "b", None)
    assert files.list(AUDIT_DIR) == ()  # buffered
    clock.advance(audit_module.FLUSH_MS)
    log.outcome("r-2", "f", "go", "ok", "b", None)  # the oldest line is a second old
    assert len(read_audit(files, 10)) == 3
    for n in range(audit_module.FLUSH_LINES):
        log.transition(f"r-{n}", "f", "a", "go", "b")
    log.outcome("r-x", "f", "go", "ok", "b", None)  # enough lines
    assert len(read_audit(files, 1000)) == 3 + audit_module.FLUSH_LINES + 1


def test_the_log_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(audit_module, "SEGMENT_BYTES", 2048)
    monkeypatch.setattr(audit_module, "SEGMENTS_KEPT", 3)
    monkeypatch.setattr(audit_module, "FLUSH_LINES", 4)
    root, ports = _open()
    for i in range(150):
        root.hot.add("memory", f"fact number {i}", maintenance=False)
        root.hot.remove("memory", f"fact number {i}")
    root.close()
    names = [n for n in ports.files.list(AUDIT_DIR) if n.endswith(".jsonl")]
    sizes = [len(ports.files.read(f"{AUDIT_DIR}/{n}") or b"") for n in names]
    assert len(names) == 3, names
    assert max(sizes) <= 2048 + 2048 // 4 + 4096, sizes  # one quarter overshoot, one flush
    numbers = sorted(int(n.split(".")[1]) for n in names)
    assert numbers[-1] > 3  # segments were started and the oldest removed
    assert any(r.flow == "hot_memory_mutation" for r in read_audit(ports.files, 50))


def test_a_torn_tail_is_skipped_and_the_next_lines_are_whole() -> None:
    root, ports = _open()
    root.hot.add("memory", "first fact")
    root.audit_tail(1)  # flushed
    newest = sorted(ports.files.list(AUDIT_DIR))[-1]
    ports.files.append(f"{AUDIT_DIR}/{newest}", b'{"at": 17, "run": "torn')  # a power loss
    root.hot.add("memory", "second fact")
    records = root.audit_tail(100, flow="hot_memory_mutation")
    root.close()
    assert [r.outcome for r in records if r.outcome] == ["ok", "ok"]
    assert all(r.run != "torn" for r in records)
    for run in {r.run for r in records}:  # each run whole: its first transition is there
        assert any(r.run == run and r.event == "add" and r.target == "deciding" for r in records)


def test_a_failed_append_never_fails_an_operation_and_is_written_later() -> None:
    files = RaisingPort(MemoryFiles(), "append", StorageError("disk full"))
    root, _ = _open(files=files)
    files.armed = True
    root.hot.add("memory", "written while the log cannot be")
    assert root.audit_tail(10) == []  # the append failed, nothing raised
    assert files.fired
    records = root.audit_tail(10)  # the next flush writes what waited
    root.close()
    assert any(r.outcome == "ok" and r.event == "add" for r in records)


def test_a_default_root_writes_an_audit_log(tmp_path: Path) -> None:
    """On by default: a root built with ``Config()`` logs a hot add (in memory and on disk)."""
    root, ports = _open(Config())
    root.hot.add("memory", "Deploys need a second reviewer")
    records = root.audit_tail(100, flow="hot_memory_mutation")
    root.close()
    assert any(r.event == "add" and r.outcome == "ok" for r in records)
    assert [n for n in ports.files.list(AUDIT_DIR) if n.endswith(".jsonl")]
    directory = tmp_path / "root"
    with MemoryRoot.open(directory, Config(durability="off")) as opened:
        opened.hot.add("memory", "Deploys need a second reviewer")
        assert opened.audit_tail(10)
    assert [p.name for p in (directory / AUDIT_DIR).glob("transitions.*.jsonl")]


def test_nothing_is_written_when_off_or_read_only(tmp_path: Path) -> None:
    for config in (Config(audit="off"), Config(write_enabled=False)):
        root, ports = _open(config)
        root.context.runtime_memory()
        root.close()
        assert ports.files.list(AUDIT_DIR) == ()
        assert "audit" not in ports.files.dirs  # not even the directory
    directory = tmp_path / "root"
    with MemoryRoot.open(directory, Config(audit="off", durability="off")) as seeded:
        seeded.hot.add("memory", "Deploys need a second reviewer")  # a root to read
    with MemoryRoot.open(directory, Config(write_enabled=False)) as read_only:
        assert "second reviewer" in read_only.context.runtime_memory()
        assert read_only.audit_tail(10) == []
    assert not (directory / AUDIT_DIR).exists()


def test_a_failing_clock_never_fails_an_operation() -> None:
    """The sink never raises: a clock the audit log cannot read (an injected failure of its
    next reading) leaves the operation's answer alone; that line keeps the last reading."""
    inner, _ = memory_ports()
    clock = RaisingPort(inner.clock, "now_ms", StorageError("clock gone"), when=by_audit_log)
    root, _ = _open(clock=clock)
    root.hot.add("memory", "first fact")
    root.audit_tail(1)
    last = inner.clock.now_ms()
    clock.armed = True
    inner.clock.advance(5000)  # type: ignore[attr-defined]
    assert root.hot.add("memory", "second fact").entry_count == 2
    assert clock.fired
    records = root.audit_tail(100, flow="hot_memory_mutation")
    root.close()
    assert [r.outcome for r in records if r.outcome] == ["ok", "ok"]
    second = [r for r in records if r.run == records[-1].run]
    assert (second[0].at, second[-1].at) == (last, last + 5000)


def test_the_fault_injector_and_the_call_log_keep_the_audit_log_s_calls_apart() -> None:
    """A flow's calls are the same, numbered the same, with the audit log on or off: the
    fakes' call log and the fault injector set the audit log's calls apart (so a fault planned
    for the n-th call of a flow lands on that call), and do see them."""
    seen = []
    for config in (Config(audit="off"), Config()):
        ports, log = memory_ports()
        injector = FaultInjector()
        root = MemoryRoot.open("/unused", config, ports=faulty_ports(ports, injector))
        log.clear()
        root.hot.add("memory", "a fact")
        with pytest.raises(NoMatch):
            root.hot.remove("memory", "nothing like it")
        root.close()
        seen.append((injector.names, log.names(), injector.audit_names, log.audit_calls))
    off, on = seen
    assert on[:2] == off[:2]  # numbered and logged alike
    assert off[2:] == ([], [])  # no audit log, no call of it
    numbered_apart, logged_apart = on[2:]
    assert "files.append" in numbered_apart and "clock.now_ms" in numbered_apart
    assert [c.name for c in logged_apart] == numbered_apart


def test_a_snapshot_of_the_memory_leaves_the_audit_log_out(tmp_path: Path) -> None:
    """The tests' "nothing changed" (``root_state``, ``files_state``) ignores what the audit
    log appends, and nothing else: a change beside it, even in a name that starts alike, is
    seen, and so is the log with ``exclude=()``."""
    (tmp_path / AUDIT_DIR).mkdir()
    (tmp_path / "runtime").mkdir()
    (tmp_path / "runtime" / "MEMORY.md").write_bytes(b"a fact\n")
    (tmp_path / f"{AUDIT_DIR}.md").write_bytes(b"not the log\n")
    segment = tmp_path / AUDIT_DIR / "transitions.1.jsonl"
    segment.write_bytes(b'{"at":1}\n')
    memory, everything = root_state(tmp_path), root_state(tmp_path, exclude=())
    assert f"{AUDIT_DIR}/transitions.1.jsonl" in everything and f"{AUDIT_DIR}.md" in memory
    segment.write_bytes(b'{"at":1}\n{"at":2}\n')
    (tmp_path / AUDIT_DIR / "transitions.2.jsonl").write_bytes(b"")
    assert root_state(tmp_path) == memory
    assert root_state(tmp_path, exclude=()) != everything
    (tmp_path / f"{AUDIT_DIR}.md").write_bytes(b"changed\n")
    assert root_state(tmp_path) != memory
    (tmp_path / f"{AUDIT_DIR}.md").write_bytes(b"not the log\n")
    (tmp_path / "runtime" / "MEMORY.md").write_bytes(b"another fact\n")
    assert root_state(tmp_path) != memory
    files = {"runtime/MEMORY.md": b"a", f"{AUDIT_DIR}/transitions.1.jsonl": b"x"}
    assert files_state(files) == {"runtime/MEMORY.md": b"a"}
    assert files_state(files, exclude=()) == files


def test_bad_settings_and_arguments_are_refused() -> None:
    from mnemon_sm.errors import InvalidConfig

    with pytest.raises(InvalidConfig):
        Config(audit="everything")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        read_audit(MemoryFiles(), 0)


def test_the_command_line_tails_the_log(tmp_path: Path) -> None:
    from tests.test_cli import run_cli

    root = tmp_path / "root"
    config = tmp_path / "config.toml"
    config.write_text('audit = "on"\n')
    added = run_cli(
        tmp_path, "--root", str(root), "--config", str(config), "hot", "add",
        "--target", "memory", "A fact",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    shown = run_cli(tmp_path, "--root", str(root), "audit", "tail", "-n", "40")
    assert shown.returncode == 0, shown.stderr
    lines = [json.loads(line) for line in shown.stdout.splitlines()]
    assert 0 < len(lines) <= 40
    assert {"event": "add", "outcome": "ok"}.items() <= next(
        line for line in lines if line.get("outcome")
    ).items()
    only = run_cli(tmp_path, "--root", str(root), "audit", "tail", "--flow", "hot_memory_mutation")
    assert {json.loads(line)["flow"] for line in only.stdout.splitlines()} == {
        "hot_memory_mutation"
    }


def test_every_record_names_its_process_closes_included() -> None:
    """A transition outside a caller event (a flow closing) is a run of its own, named by the
    process like every other, so a reader can tell where each process's flow stands."""
    root, ports = _open()
    root.hot.add("memory", "The release branch is cut on Thursdays")
    root.documents.create("Runbook", "# Runbook\n\nRestart the queue.\n")
    root.close()
    lines = _lines(ports.files)
    closes = [line for line in lines if line.get("event") == "close"]
    assert {line["flow"] for line in closes} >= {"hot_memory_mutation", "document_mutation"}
    runs = {line["run"] for line in lines}
    assert all(re.fullmatch(r"[0-9a-f]+-[0-9]+", run) for run in runs), sorted(runs)[:5]
    assert len({run.rpartition("-")[0] for run in runs}) == 1
