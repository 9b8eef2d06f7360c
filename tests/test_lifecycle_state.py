"""The lifecycle state under faults: other processes, long sessions, durability, read-only.

Hostile cases named here: several processes driving one agent (each acknowledged event must be
reflected, not overwritten by the last writer), a session of thousands of turns while the
review never runs (state and per-event work stay bounded, the score stays exact), a worker
returning a megabyte summary, a power loss (every persisted event is fsynced as the root's
``durability`` asks), and a read-only root (nothing written, nothing locked).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import attrs
import pytest

from mnemon_sm import Config, IllegalEvent, MemoryRoot, MnemonError, StorageError
from mnemon_sm.engine.spec import load_flow
from mnemon_sm.flows.lifecycle import state as persisted
from mnemon_sm.flows.lifecycle.api import AgentLifecycle
from mnemon_sm.flows.lifecycle.scoring import ACTIVITY_KEPT, MESSAGE_IDS_KEPT
from mnemon_sm.flows.lifecycle.state import FLOW
from mnemon_sm.flows.long_term.catalog import CATALOG_PATH
from mnemon_sm.testing.longterm import ScriptedWorkers
from mnemon_sm.testing.memory import memory_ports
from mnemon_sm.testing.snapshot import root_state
from mnemon_sm.testing.wrap import FailingFiles
from property_tests.scoring_model import as_reference, reference_score
from tests._flow_probe import calls_by_state, flow_probe, port_gaps
from tests.test_lifecycle import tools, user

IDLE_MS = 30_000
STATE = "state/lifecycle/main.json"


def open_agent(ports: Any, **config: Any) -> Any:
    settings = {"durability": "off", "idle_review_ms": IDLE_MS, **config}
    root = MemoryRoot.open("/r", Config(**settings), ports=ports)
    return root.lifecycle("main")


# -- what is written, and where -------------------------------------------------------------


def state_writes(log: Any) -> int:
    """Lines written to the agent's state file so far (appended, or a replacement)."""
    return sum(
        1
        for c in log.calls
        if (c.method == "append" and c.args[0] == STATE)
        or (c.method == "rename" and c.args[1] == STATE)
    )


def test_a_step_writes_the_state_once_when_it_changes_persisted_data_and_never_otherwise() -> None:
    """The spec's persist actions: entering a resting state writes the state once (a new
    agent's first state included); an internal transition writes only when its actions
    changed data; a step that changes nothing, or an illegal event, writes nothing."""
    ports, log = memory_ports()
    now = ports.clock.now_ms()

    def writes(expected: int, *events: Any) -> None:
        before = state_writes(log)
        for event in events:
            event()
        assert state_writes(log) - before == expected

    holder: list[Any] = []
    writes(1, lambda: holder.append(open_agent(ports)))  # a new agent enters idle
    agent = holder[0]
    writes(0, lambda: open_agent(ports))  # a restored one does not
    first = [user("m1", "y" * 200)]
    writes(1, lambda: agent.pre_step(1, 1, first))  # prime, cue, activity
    writes(0, lambda: agent.pre_step(1, 2, first))  # counted already, no cue
    writes(0, agent.agent_idle)  # idle already
    writes(1, agent.agent_busy)
    writes(0, agent.agent_busy)
    writes(1, lambda: agent.turn_ended(1))
    writes(0, lambda: agent.turn_ended(1))
    writes(0, lambda: agent.tick(now + 10 * IDLE_MS))  # nothing armed
    writes(1, lambda: agent.turn_stopping(1, tools(1, ["a", "b", "c", "d"], 5)))
    assert agent.state == "armed"
    writes(0, lambda: agent.tick(now + IDLE_MS - 1))  # not due yet
    writes(1, lambda: agent.tick(now + IDLE_MS))  # due while busy
    assert agent.state == "deferred"
    writes(0, agent.agent_busy)
    writes(1, agent.agent_idle)  # armed again, due now
    writes(2, agent.tick, lambda: agent.join(10))  # reviewing, then idle once it ended
    assert agent.state == "idle" and agent.status()["lastReview"]["action"] == "skipped"
    writes(1, agent.dispose)

    def illegal() -> None:
        with pytest.raises(IllegalEvent):
            agent.turn_ended(2)

    writes(0, illegal)
    assert state_writes(log) == 10


def test_a_state_lost_under_an_open_agent_is_read_as_new_and_written_by_the_next_persist() -> None:
    """Another process emptied the file (or a power loss tore its only line): the open agent
    adopts a new agent's state; a read, which holds no lock, writes nothing; the next step
    that persists writes the whole state."""
    ports, log = memory_ports()
    agent = open_agent(ports)
    agent.pre_step(1, 1, [user("m1", "hello")])
    ports.files.put(STATE, b"")  # type: ignore[attr-defined]
    before = state_writes(log)
    assert agent.status()["counters"]["recallCues"] == 0 and agent.state == "idle"
    assert state_writes(log) == before and ports.files.read(STATE) == b""
    agent.tick()  # a step that persists nothing
    assert state_writes(log) == before
    agent.agent_idle()  # changes nothing itself, but persists what is unsaved
    assert state_writes(log) == before + 1
    restored = open_agent(ports).status()
    assert restored == agent.status() and restored["primePending"]


def lifecycle_probe(agents: Callable[[], Iterable[AgentLifecycle]]) -> Callable[[], str | None]:
    """:func:`~tests._flow_probe.flow_probe`, and a tag for the calls no flow context makes:
    those of an agent's facade around an event (its lock and re-read, and the opening of an
    agent, which counts as the initial state before its machine exists) get the state its flow
    is in, and those made on a review worker's thread the state of the agent reviewing."""
    flows = flow_probe(lambda: ())
    initial = load_flow(FLOW).spec.initial

    def probe() -> str | None:
        tag = flows()
        if tag is not None:
            return tag
        frame = sys._getframe(1)
        while frame is not None:
            owner = frame.f_locals.get("self")
            if isinstance(owner, AgentLifecycle):
                flow = getattr(owner, "_flow", None)
                return f"{FLOW}:{initial if flow is None else flow.state}"
            frame = frame.f_back  # type: ignore[assignment]
        reviewing = [a for a in agents() if a._flow.state == "reviewing"]
        return f"{FLOW}:reviewing" if reviewing else None

    return probe


def test_port_calls_in_each_state_are_the_ones_the_spec_declares() -> None:
    """Every port call the lifecycle makes is declared by the state the agent is in when it
    happens, and every declared call is made: resting states included (the lock and re-read
    of every event, the persist actions' appends and, for a new file or one whose tail a power
    loss tore, atomic replacements, whose temporary file is removed when the disk fails the
    rename); opening an agent counts as its initial state (a crashed replacement's temporary
    file removed); the review worker's tool calls are reviewing's (its listing registers a
    store found on disk: catalog writes); applying the review's change is the hot-memory
    flow's work."""
    inner, log = memory_ports()
    files = FailingFiles(inner.files)
    workers = ScriptedWorkers({"review": stage_and_skip}, log)
    ports = attrs.evolve(inner, files=files, workers=workers)
    config = Config(durability="full", idle_review_ms=IDLE_MS)
    root = MemoryRoot.open("/r", config, ports=ports)
    root.long_term.create_space("Build", "Build facts", active=True)
    root.long_term.service.remember("The build server listens on port 8443", space_id="default")
    inner.long_term.create_space("found")  # type: ignore[union-attr]
    inner.files.ensure_dir(persisted.STATE_DIR)
    inner.files.write_temp(STATE, b"left by a crashed replacement")
    now = inner.clock.now_ms()
    log.probe = lifecycle_probe(lambda: root._lifecycles.values())

    def tear(path: str = STATE) -> None:  # a power loss tore the tail: the next save replaces
        inner.files.put(path, inner.files.files[path] + b'{"torn')  # type: ignore[attr-defined]

    def failing_replacement(event: Callable[[], object], path: str = STATE) -> None:
        tear(path)
        failed = files.fail_next("rename", path)
        with pytest.raises(StorageError):
            event()
        assert failed == [path]

    agent = root.lifecycle("main")  # idle: the stale temp removed, the first state written
    agent.pre_step(1, 1, [user("m1", "y" * 200)])
    agent.turn_stopping(1, tools(1, ["a", "b", "c", "d"], 5))
    failing_replacement(agent.agent_busy)  # armed
    agent.turn_ended(1)  # writes what the failure left unsaved, replacing the torn file
    agent.tick(now + IDLE_MS)
    assert agent.state == "deferred"
    failing_replacement(lambda: agent.pre_step(1, 2, [user("m1b", "z" * 50)]))
    agent.status()
    agent.turn_ended(1)
    agent.agent_idle()
    tear()  # reviewing replaces the file as it is entered
    # the worker cannot register the store on disk
    failed = files.fail_next("rename", CATALOG_PATH)
    agent.tick()
    agent.turn_ended(2)
    assert agent.join(10) and agent.status()["lastReview"]["action"] == "skipped"
    assert failed == [CATALOG_PATH]
    agent.pre_step(3, 1, [user("m3", "remember that the port is 8443 " + "p" * 200)])
    agent.turn_stopping(3, tools(3, ["a", "b", "c", "d"], 5))
    agent.turn_ended(3)
    agent.tick(now + IDLE_MS)  # this one looks around (registering the store), then stores
    assert agent.join(10) and agent.status()["lastReview"]["action"] == "stored"
    agent.dispose()
    agent.status()
    other = root.lifecycle("other")  # another agent of the root
    failing_replacement(other.dispose, persisted.state_path("other"))  # disposed
    assert other.state == "idle"  # an entry action failed: the state is put back
    other.dispose()
    with pytest.raises(IllegalEvent):
        agent.tick()
    observed = calls_by_state(log.calls)
    gaps = port_gaps(observed, [FLOW])
    assert gaps == {}, f"(undeclared, unused) per state: {gaps}"
    spec = load_flow(FLOW).spec
    assert {state for flow, state in observed if flow == FLOW} == {*spec.resting, "applying"}
    for state in spec.resting:  # every event's lock and re-read, and the persist actions
        wanted = {"locks.acquire", "files.read", "files.append", "files.fsync", "locks.release"}
        assert wanted <= observed[(FLOW, state)], (state, observed[(FLOW, state)])
    assert {"files.list", "files.remove"} <= observed[(FLOW, "idle")]  # opening: a stale temp
    assert "workers.run" in observed[(FLOW, "reviewing")]


def stage_and_skip(request: Any, tools_: Any) -> object:
    """A review that lists the spaces (a failing disk may refuse it), previews a change it
    cannot make and skips; or, when a user asked to remember something, looks at what
    long-term memory and the documents hold, stages it and says so."""
    texts = [t for turn in request.data["turns"] for t in turn["userTexts"]]
    if any(t.startswith("remember") for t in texts):
        tools_.call("mnemon_memory_bodies", {})
        found = tools_.call("mnemon_recall", {"query": "port"})["results"]
        related = {"memoryBodyId": found[0]["memoryBodyId"], "id": found[0]["id"]}
        tools_.call("mnemon_related", related)
        tools_.call("mnemon_document_search", {"query": "port"})
        add = {"action": "add", "target": "memory", "content": "The port is 8443"}
        tools_.call("mnemon_runtime_memory", add)
        return {"summary": "saved", "action": "stored", "documentIds": []}
    with contextlib.suppress(MnemonError):
        tools_.call("mnemon_memory_bodies", {})
    with contextlib.suppress(MnemonError):
        tools_.call(
            "mnemon_runtime_memory", {"action": "remove", "target": "user", "oldText": "x"}
        )
    return {"summary": "nothing new", "action": "skipped", "documentIds": []}


# -- several writers -----------------------------------------------------------------------


def test_two_agents_on_one_root_see_each_others_events() -> None:
    """Two facades of one agent (two hosts sharing the root) alternate events: each adopts
    what the other persisted before its own event, so nothing is overwritten."""
    ports, _ = memory_ports()
    first, second = open_agent(ports), open_agent(ports)
    first.pre_step(1, 1, [user("m1", "x" * 60)])
    second.pre_step(2, 1, [user("m2", "y" * 40)])
    first.turn_stopping(2, tools(2, ["read", "grep"], 3))
    second.turn_ended(2)
    for agent in (first, second):
        status = agent.status()
        assert status["activity"]["turns"] == 2
        assert status["activity"]["userChars"] == 100
        assert status["activity"]["toolResults"] == 3
        assert status["counters"]["recallCues"] == 2
    assert open_agent(ports).status() == first.status()


def test_every_event_holds_the_agents_lock() -> None:
    """While another process holds the agent's lock, an event times out and changes
    nothing (it never reads, decides and writes around another writer)."""
    from mnemon_sm import LockTimeout

    ports, log = memory_ports()
    agent = open_agent(ports)
    agent.pre_step(1, 1, [user("m1", "hello")])
    lock = persisted.lock_name("main")
    acquired = [c.args[0] for c in log.calls if c.method == "acquire"]
    assert acquired[-1] == lock
    before = ports.files.read(STATE)
    ports.locks.hold(lock)  # type: ignore[attr-defined]
    for event in (
        lambda: agent.pre_step(2, 1, [user("m2", "hello")]),
        lambda: agent.turn_stopping(1, tools(1, ["a"], 1)),
        lambda: agent.session_start("clear"),
    ):
        with pytest.raises(LockTimeout):
            event()
    assert ports.files.read(STATE) == before
    ports.locks.let_go(lock)  # type: ignore[attr-defined]
    agent.pre_step(2, 1, [user("m2", "hello")])
    assert agent.status()["activity"]["turns"] == 2


def test_an_event_from_another_process_aborts_the_review_in_flight_here() -> None:
    """A review started on a state another process has since changed is cancelled: its basis
    is gone, and nothing it staged is written."""
    import threading

    cancelled = threading.Event()

    def worker(request: Any, tools_: Any) -> object:
        tools_.cancellation.wait(30)
        cancelled.set()
        return {"summary": "late", "action": "skipped", "documentIds": []}

    ports, _ = memory_ports()
    ports = attrs.evolve(ports, workers=ScriptedWorkers({"review": worker}))
    here, there = open_agent(ports), open_agent(ports)
    here.pre_step(1, 1, [user("m1", "y" * 200)])
    here.turn_stopping(1, tools(1, ["a", "b", "c", "d"], 5))
    here.turn_ended(1)
    here.tick(ports.clock.now_ms() + IDLE_MS)
    assert here.state == "reviewing"
    there.pre_step(2, 1, [user("m2", "z")])  # the other process starts a new turn
    here.agent_idle()
    assert cancelled.wait(10) and here.join(10)
    assert here.state == there.state == "idle"
    assert here.status()["lastReview"] is None
    assert here.status()["activity"]["turns"] == 2


class Runs(list[int]):
    """The review runs started so far (a worker thread appends as it starts); :meth:`reach`
    waits, without sleeping, until a number of them started."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = threading.Condition()

    def start(self) -> None:
        with self.changed:
            self.append(1)
            self.changed.notify_all()

    def reach(self, count: int) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: len(self) >= count, timeout=10)


def hanging_reviews(ports: Any) -> tuple[Any, Runs, threading.Event]:
    """Ports whose review worker hangs until cancelled (counting its runs), and the release."""
    runs = Runs()
    release = threading.Event()

    def worker(request: Any, tools_: Any) -> object:
        runs.start()
        tools_.cancellation.wait(30)
        release.wait(30)
        return {"summary": "late", "action": "skipped", "documentIds": []}

    return attrs.evolve(ports, workers=ScriptedWorkers({"review": worker})), runs, release


def test_a_review_running_in_one_facade_is_not_started_again_by_another() -> None:
    """The running review's lease (its timeout) is persisted: another process ticking at the
    same deadline waits for it instead of starting a second review (two drivers would
    otherwise abort each other's reviews for ever); once the lease ran out (its holder died)
    the review runs there."""
    ports, runs, release = hanging_reviews(memory_ports()[0])
    here, there = open_agent(ports), open_agent(ports)
    here.pre_step(1, 1, [user("m1", "y" * 200)])
    here.turn_stopping(1, tools(1, ["a", "b", "c", "d"], 5))
    here.turn_ended(1)
    due = ports.clock.now_ms() + IDLE_MS
    here.tick(due)
    assert here.state == "reviewing" and runs.reach(1) and len(runs) == 1
    timeout = Config().worker_timeout("review")
    there.tick(due + 1)
    assert there.state == "armed" and len(runs) == 1
    assert there.next_tick_ms == due + timeout
    there.turn_ended(7)  # persisted by the other facade: the lease goes with it
    third = open_agent(ports)
    third.tick(due + 2)
    assert third.state == "armed" and len(runs) == 1
    ports.clock.advance(IDLE_MS + timeout)  # type: ignore[attr-defined]
    there.tick()
    assert there.state == "reviewing" and runs.reach(2) and len(runs) == 2
    release.set()
    here.agent_idle()  # sees the other's review: its own (long dead) is dropped
    there.agent_busy()  # aborts the other
    assert here.join(10) and there.join(10)
    assert here.status()["counters"]["reviews"] == 0


def test_a_new_turn_in_another_facade_ends_the_lease() -> None:
    ports, runs, release = hanging_reviews(memory_ports()[0])
    here, there = open_agent(ports), open_agent(ports)
    here.pre_step(1, 1, [user("m1", "y" * 200)])
    here.turn_stopping(1, tools(1, ["a", "b", "c", "d"], 5))
    here.turn_ended(1)
    here.tick(ports.clock.now_ms() + IDLE_MS)
    there.pre_step(2, 1, [user("m2", "next")])  # the user is back: the review is moot
    state, _ = persisted.load(ports.files, "main")
    assert state is not None and state.review_lease is None and state.deadline_ms is None
    release.set()
    here.agent_idle()  # adopts the new state: its own review is aborted
    assert here.join(10) and here.state == "idle"
    assert here.status()["lastReview"] is None and runs.reach(1) and len(runs) == 1


WRITER = textwrap.dedent(
    """
    import json, sys
    from mnemon_sm import Config, MemoryRoot

    root_path, proc, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    root = MemoryRoot.open(root_path, Config(durability="off", idle_review_ms=600000))
    agent = root.lifecycle("shared")
    sys.stdin.readline()  # start barrier
    for i in range(count):
        turn = 1_000_000 * proc + i
        agent.pre_step(turn, 1, [{"id": f"p{proc}-{i}", "role": "user",
                                  "content": "hello", "source": {"kind": "user"}}])
        print(json.dumps({"proc": proc, "event": i}), flush=True)
    """
)


def test_concurrent_processes_lose_no_acknowledged_event(tmp_path: Path) -> None:
    """Three processes send first steps for one agent at once: every acknowledged step is
    counted (its cue), none lost to another process's write."""
    root, procs, count = tmp_path / "root", 3, 60
    MemoryRoot.open(root).lifecycle("shared")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    started = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(root), str(p), str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        for p in range(procs)
    ]
    for proc in started:
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
    acknowledged = 0
    for proc in started:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        acknowledged += len(out.splitlines())
    assert acknowledged == procs * count
    status = MemoryRoot.open(root).lifecycle("shared").status()
    assert status["counters"]["recallCues"] == acknowledged
    assert status["counters"]["writebackCues"] == acknowledged
    assert status["counters"]["primes"] == 1


# -- bounded however long the session -------------------------------------------------------


def long_session(agent: Any, turns: int) -> list[tuple[int, int, list[str]]]:
    """``turns`` turns, none reviewed; returns what each turn did (chars, results, tools)."""
    done = []
    names = ["read", "grep", "edit", "test", "lint", "run"]
    for turn in range(1, turns + 1):
        text = "w" * (turn % 7 * 9)
        calls = names[: turn % 4]
        agent.pre_step(turn, 1, [user(f"u{turn}", text)] if text else [])
        agent.turn_stopping(turn, tools(turn, calls, turn % 3))
        done.append((len(text), turn % 3, calls))
    return done


def test_a_long_session_keeps_a_bounded_state_and_the_exact_score() -> None:
    """600 turns without a review: the state keeps ACTIVITY_KEPT turns whole and folds the
    rest, the file stays small, and the score equals the reference's over every turn."""
    ports, _ = memory_ports()
    agent = open_agent(ports)
    done = long_session(agent, 600)
    chars = sum(c for c, _, _ in done)
    results = sum(r for _, r, _ in done)
    unique = len({n for _, _, calls in done for n in calls})
    assert as_reference(agent.score) == reference_score(chars, len(done), results, unique)
    status = agent.status()
    assert (status["activity"]["userChars"], status["activity"]["toolResults"]) == (chars, results)
    state, _ = persisted.load(ports.files, "main")
    assert state is not None and len(state.activity) == ACTIVITY_KEPT
    assert state.earlier is not None and state.earlier.turns == 600 - ACTIVITY_KEPT
    data = ports.files.read(STATE)
    assert data is not None and len(data) <= persisted.LOG_MAX
    assert open_agent(ports).status() == status  # the folded state restores the same score


def test_a_folded_turn_records_nothing_more() -> None:
    ports, _ = memory_ports()
    agent = open_agent(ports)
    long_session(agent, ACTIVITY_KEPT + 3)
    before = agent.status()["activity"]
    agent.pre_step(1, 2, [user("late", "x" * 500)])  # turn 1 was folded long ago
    agent.turn_stopping(1, tools(1, ["new-tool"], 9))
    assert agent.status()["activity"] == before


def test_a_turn_counts_at_most_its_kept_message_ids() -> None:
    ports, _ = memory_ports()
    agent = open_agent(ports)
    many = [user(f"m{i}", "x") for i in range(MESSAGE_IDS_KEPT + 40)]
    agent.pre_step(1, 1, many)
    agent.pre_step(1, 2, many)  # the same messages again: nothing new
    assert agent.status()["activity"]["userChars"] == MESSAGE_IDS_KEPT


def test_long_message_ids_are_kept_as_digests_and_still_counted_once() -> None:
    ports, _ = memory_ports()
    agent = open_agent(ports)
    ident = "id-" + "7" * 5000
    agent.pre_step(1, 1, [user(ident, "hello")])
    agent.pre_step(1, 2, [user(ident, "hello")])
    assert agent.status()["activity"]["userChars"] == 5
    data = ports.files.read(STATE)
    assert data is not None and len(data) < 2000


def test_a_huge_review_summary_is_cut() -> None:
    def worker(request: Any, tools_: Any) -> object:
        return {"summary": "s" * 5_000_000, "action": "skipped", "documentIds": []}

    ports, _ = memory_ports()
    ports = attrs.evolve(ports, workers=ScriptedWorkers({"review": worker}))
    agent = open_agent(ports)
    agent.pre_step(1, 1, [user("m1", "y" * 200)])
    agent.turn_stopping(1, tools(1, ["a", "b", "c", "d"], 5))
    agent.turn_ended(1)
    agent.tick(ports.clock.now_ms() + IDLE_MS)
    assert agent.join(60)  # redacting 5 MB takes seconds on a loaded machine
    summary = agent.status()["lastReview"]["summary"]
    assert len(summary) <= persisted.SUMMARY_CHARS
    data = ports.files.read(STATE)
    assert data is not None and len(data) < 8000


# -- durability -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("durability", "file_syncs", "dir_syncs"),
    [("full", True, True), ("normal", True, True), ("off", False, False)],
)
def test_each_persisted_event_is_synced_as_the_durability_asks(
    durability: str, file_syncs: bool, dir_syncs: bool
) -> None:
    ports, log = memory_ports()
    agent = open_agent(ports, durability=durability)  # the first save replaces the file
    log.calls.clear()
    agent.pre_step(1, 1, [user("m1", "hello")])  # appended
    synced = [c.args[0] for c in log.calls if c.method == "fsync"]
    assert (STATE in synced) is file_syncs
    ports.files.append(STATE, b'{"torn')  # a power loss tore the tail: next save replaces
    log.calls.clear()
    agent.pre_step(2, 1, [user("m2", "again")])
    synced = [c.args[0] for c in log.calls if c.method == "fsync"]
    assert any(p.startswith("state/lifecycle/.main.json.") for p in synced) is file_syncs
    assert ("state/lifecycle" in synced) is dir_syncs


def test_a_power_loss_keeps_every_acknowledged_event_at_durability_normal() -> None:
    ports, _ = memory_ports(track_durability=True)
    agent = open_agent(ports, durability="normal")
    for turn in range(1, 40):
        agent.pre_step(turn, 1, [user(f"m{turn}", "hello")])
    ports.files.lose_power()  # type: ignore[attr-defined]
    status = open_agent(ports).status()
    assert status["counters"]["recallCues"] == 39
    assert status["activity"]["turns"] == 39


# -- read-only ------------------------------------------------------------------------------


def test_read_only_hooks_write_and_lock_nothing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    writer = MemoryRoot.open(root, Config(durability="off"))
    agent = writer.lifecycle("main")
    agent.pre_step(1, 1, [user("m1", "hello")])
    before = root_state(root)
    reader = MemoryRoot.open(root, Config(write_enabled=False)).lifecycle("main")
    reader.session_start("resume")
    reader.pre_step(2, 1, [user("m2", "hello again")])
    reader.turn_stopping(2, tools(2, ["a"], 1))
    reader.turn_ended(2)
    reader.tick()
    assert reader.status()["counters"]["recallCues"] == 2  # in memory only
    assert root_state(root) == before
    fresh = MemoryRoot.open(root, Config(write_enabled=False)).lifecycle("other")
    fresh.pre_step(1, 1, [user("m1", "hello")])
    assert root_state(root) == before


def test_a_read_only_root_lists_the_agents_and_follows_what_writers_persist(
    tmp_path: Path,
) -> None:
    """``agents()`` lists the agents with a state file (not temporary or set-aside files);
    ``agent_status`` on a read-only root reads the file anew each time, where its own
    facade keeps what hooks changed in memory."""
    root = tmp_path / "root"
    writer = MemoryRoot.open(root, Config(durability="off"))
    reader = MemoryRoot.open(root, Config(write_enabled=False))
    assert reader.agents() == ()
    for agent in ("zeta", "alpha"):
        writer.lifecycle(agent).pre_step(1, 1, [user("m1", "hello")])
    lifecycle_dir = root / persisted.STATE_DIR
    (lifecycle_dir / ".alpha.json.tmp-1").write_text("x")
    (lifecycle_dir / "beta.json.bad-123").write_text("x")
    assert reader.agents() == writer.agents() == ("alpha", "zeta")
    assert reader.agent_status("alpha")["counters"]["recallCues"] == 1
    writer.lifecycle("alpha").pre_step(2, 1, [user("m2", "again")])
    assert reader.agent_status("alpha")["counters"]["recallCues"] == 2
    assert reader.lifecycle("alpha").status()["counters"]["recallCues"] == 2
    writer.lifecycle("alpha").pre_step(3, 1, [user("m3", "once more")])
    assert reader.agent_status("alpha")["counters"]["recallCues"] == 3
    assert reader.lifecycle("alpha").status()["counters"]["recallCues"] == 2  # its own copy
    assert reader.agent_status("alpha") == writer.agent_status("alpha")
    with pytest.raises(MnemonError):
        reader.agent_status("../escape")
    writer.close()


def test_a_summary_past_its_limit_is_cut() -> None:
    assert persisted.clip_summary("s" * 999) == "s" * 999
    clipped = persisted.clip_summary("s" * 5000)
    assert len(clipped) == persisted.SUMMARY_CHARS and clipped.endswith("\u2026")


def test_a_crashed_replacements_temp_file_is_removed_when_the_agent_opens() -> None:
    ports, _ = memory_ports()
    open_agent(ports).pre_step(1, 1, [user("m1", "hello")])
    stale = ports.files.write_temp(STATE, b"half a state")
    other = ports.files.write_temp("state/lifecycle/other.json", b"not this agent's")
    open_agent(ports)
    assert ports.files.read(stale) is None
    assert ports.files.read(other) is not None


def test_the_state_file_is_one_json_line_per_change() -> None:
    ports, _ = memory_ports()
    agent = open_agent(ports)
    agent.pre_step(1, 1, [user("m1", "hello")])
    data = ports.files.read(STATE)
    assert data is not None
    lines = data.splitlines()
    assert len(lines) == 2 and all(json.loads(line)["agentId"] == "main" for line in lines)


def test_a_failed_write_entering_a_review_leaves_no_review_running() -> None:
    """Regression: the state write as ``reviewing`` is entered fails after the review worker
    started. The agent must come back to rest with that worker cancelled and no review in
    flight (before, the engine put it back in ``armed`` with the worker still running:
    ``join`` timed out and ``status()`` showed a review forever)."""
    inner, _ = memory_ports()
    started: list[Any] = []

    def slow_review(request: Any, tools_: Any) -> object:
        started.append(request)
        tools_.cancellation.wait(10)  # a model thinking, until the host gives up on it
        return {"summary": "nothing", "action": "skipped"}

    files = FailingFiles(inner.files)
    ports = attrs.evolve(inner, files=files, workers=ScriptedWorkers({"review": slow_review}))
    agent = open_agent(ports)
    agent.pre_step(1, 1, [user("m1", "remember that the port is 8443 " + "p" * 200)])
    agent.turn_stopping(1, tools(1, ["a", "b", "c", "d"], 5))
    agent.turn_ended(1)
    assert agent.state == "armed"
    files.fail_next("append", STATE)
    with pytest.raises(StorageError):
        agent.tick(inner.clock.now_ms() + IDLE_MS)
    assert files.failed == [STATE]
    assert agent.state in load_flow(FLOW).spec.resting
    assert agent.status()["review"] is None
    assert agent.join(5)  # the worker was cancelled: nothing runs
    agent.pre_step(2, 1, [user("m2", "next turn")])  # usable
