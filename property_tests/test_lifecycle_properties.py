"""Agent lifecycle properties.

- INV-LIF-5: all 32 combinations of the five switches against a small reference model of
  reference section 13, over generated turns (user text, tool calls and results).
- A state machine drives one agent through generated sessions, turns, steps, idle/busy
  changes, time and restarts, with review workers that complete, skip, fail, raise, try to
  change more than allowed, or stage a change and then hang (aborted by the next host event,
  or timed out):
  - INV-LIF-1: a failed, aborted or timed-out review never clears the activity; a completed
    one always does;
  - INV-LIF-2: a review never runs while the agent is busy or before its turn ended;
  - INV-LIF-3: one review changes hot memory at most once and documents at most once;
  - INV-LIF-4: after a restart (a new root on the same storage) the state, the score and the
    deadline are what they were;
  - INV-LIF-6: an aborted or timed-out review writes nothing, though it staged a change, and
    its tool box refuses calls once its run is over;
  - INV-LIF-7: the host event that aborts a review leaves the last review as it was.

The workers record what they see; the test asserts on those records, never inside a worker
(whose exceptions the library turns into failed reviews).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from typing import Any

import attrs
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from scoring_model import as_reference, reference_score

from mnemon_sm import Config, MemoryRoot, MnemonError
from mnemon_sm.flows.lifecycle.scoring import score_of
from mnemon_sm.ports import Ports
from mnemon_sm.ports.workers import ToolBox, WorkerRequest
from mnemon_sm.testing.memory import memory_ports

FAILED_KEEPS = "INV-LIF-1"
NEVER_WHILE_BUSY = "INV-LIF-2"
AT_MOST_ONE = "INV-LIF-3"
RESTART = "INV-LIF-4"
SWITCHES = "INV-LIF-5"
STAGED_ONLY = "INV-LIF-6"
ABORT_KEEPS = "INV-LIF-7"
IDLE_MS = 5_000

COMBOS = list(itertools.product(["guided", "off"], ["guided", "off"], *[[True, False]] * 3))


def test_the_score_matches_the_reference_rule_at_every_boundary() -> None:
    """Every combination of counts on and around each rule's steps (50 characters, 5 tool
    results, 3 unique tools, their caps), against the oracle written from the reference."""
    chars = (0, 1, 49, 50, 51, 99, 100, 149, 150, 151, 199, 200, 10_000)
    turns = (0, 1, 2, 3, 4, 5, 9)
    results = (0, 1, 4, 5, 6, 9, 10, 11, 14, 15, 100)
    unique = (0, 1, 2, 3, 4, 5, 6, 50)
    wrong = [
        counts
        for counts in itertools.product(chars, turns, results, unique)
        if as_reference(score_of(*counts)) != reference_score(*counts)
    ]
    assert not wrong, f"{len(wrong)} combinations differ, first {wrong[:5]}"


def message(ident: str, text: str, kind: str = "user") -> dict[str, Any]:
    return {
        "id": ident,
        "role": "user" if kind == "user" else "assistant",
        "content": [{"type": "text", "text": text}, {"type": "image", "data": "..."}],
        "source": {"kind": kind},
    }


@given(
    st.sampled_from(COMBOS),
    st.integers(0, 400),
    st.integers(0, 12),
    st.lists(st.sampled_from(["read", "write", "grep", "edit", "run"]), max_size=6),
)
def test_the_five_switches_follow_the_reference_model(
    combo: tuple[str, str, bool, bool, bool], chars: int, results: int, calls: list[str]
) -> None:
    recall, writeback, lifecycle, routing, writes = combo
    config = Config(
        recall_mode=recall,
        writeback_mode=writeback,
        lifecycle_enabled=lifecycle,
        routing_guidance=routing,
        write_enabled=writes,
        idle_review_ms=IDLE_MS,
    )
    ports, _ = memory_ports()
    root = MemoryRoot.open("/r", config, ports=ports)
    agent = root.lifecycle("agent")
    messages = [message("u1", "x" * chars)]
    out = agent.pre_step(1, 1, messages)
    # the model
    recording = lifecycle and writes and writeback == "guided"
    cue_recall = lifecycle and recall == "guided"
    cue_write = lifecycle and writeback == "guided" and writes
    expected_cue = cue_recall or cue_write
    assert out[: len(messages)] == messages and out[0] is messages[0], SWITCHES
    assert len(out) == len(messages) + int(expected_cue), SWITCHES
    if expected_cue:
        text = out[-1]["content"]
        assert ("search the active Documents" in text) == cue_recall, SWITCHES
        assert ("runtime-memory tool" in text) == cue_write, SWITCHES
    status = agent.status()
    assert status["counters"]["primes"] == int(lifecycle), SWITCHES
    assert status["counters"]["recallCues"] == int(cue_recall), SWITCHES
    assert status["counters"]["writebackCues"] == int(cue_write), SWITCHES
    events = [{"type": "tool/call", "name": n, "turn": 1} for n in calls]
    events += [{"type": "tool/result", "turn": 1}] * results
    agent.turn_stopping(1, events)
    counts = (chars, 1, results, len(set(calls))) if recording else (0, 0, 0, 0)
    model = reference_score(*counts)
    assert as_reference(agent.score) == model, SWITCHES
    assert (agent.score.user_chars, agent.score.turns) == counts[:2], SWITCHES
    assert (agent.score.tool_results, agent.score.unique_tools) == counts[2:], SWITCHES
    assert (agent.state == "armed") == (recording and model["eligible"]), SWITCHES
    agent.turn_ended(1)
    ports.clock.advance(IDLE_MS)  # type: ignore[attr-defined]
    agent.tick()
    assert agent.join(30)
    ran = agent.status()["counters"]["reviews"]
    assert ran == int(recording and model["eligible"]), SWITCHES
    assert (root.context.routing_guidance() != "") == routing, SWITCHES


# -- the state machine ---------------------------------------------------------------------------

BEHAVIOURS = ("complete", "skip", "fail", "raise", "greedy")


class Worker:
    """A review worker whose behaviour the test chooses; it records what it sees."""

    def __init__(self, machine: LifecycleMachine) -> None:
        self.machine = machine
        self.behaviour = "complete"
        self.runs = 0
        self.violations: list[str] = []
        self.refused_after_run: list[bool] = []
        self.boxes: list[ToolBox] = []
        self.started = threading.Event()

    def run(self, request: WorkerRequest, tools: ToolBox) -> object:
        m = self.machine
        if request.kind != "review" or m.busy or m.armed_turn not in m.ended:
            self.violations.append(f"{NEVER_WHILE_BUSY}: busy={m.busy} kind={request.kind}")
        self.runs += 1
        self.boxes.append(tools)
        if self.behaviour == "raise":
            raise RuntimeError("model unavailable")
        if self.behaviour == "hang":  # stage a change, then wait for the host to give up
            tools.call(
                "mnemon_runtime_memory",
                {"action": "add", "target": "memory", "content": f"never {self.runs}"},
            )
            self.started.set()
            tools.cancellation.wait(60)
            return {"summary": "late", "action": "stored", "documentIds": []}
        if self.behaviour == "greedy":
            documents: list[str] = []
            for i in range(3):  # the refusals after the first change are what is tested
                with contextlib.suppress(MnemonError):
                    content = f"greedy {self.runs}-{i}"
                    tools.call(
                        "mnemon_runtime_memory",
                        {"action": "add", "target": "memory", "content": content},
                    )
                with contextlib.suppress(MnemonError):
                    title = f"Doc {self.runs}-{i}"
                    staged = tools.call(
                        "mnemon_document_manage",
                        {"action": "create", "title": title, "content": "body"},
                    )
                    documents.append(staged["id"])
            return {"summary": "changed", "action": "stored", "documentIds": documents}
        if self.behaviour == "complete":  # one change, and a receipt that says so
            tools.call(
                "mnemon_runtime_memory",
                {"action": "add", "target": "user", "content": f"User fact {self.runs}"},
            )
            return {"summary": "saved one fact", "action": "stored", "documentIds": []}
        action = {"skip": "skipped", "fail": "failed"}[self.behaviour]
        return {"summary": self.behaviour, "action": action, "documentIds": []}


class LifecycleMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.worker = Worker(self)
        ports, _ = memory_ports()
        self.ports: Ports = attrs.evolve(ports, workers=self.worker)
        self.config = Config(idle_review_ms=IDLE_MS, durability="off")
        self.root = MemoryRoot.open("/r", self.config, ports=self.ports)
        self.agent = self.root.lifecycle("agent-1")
        self.turn = 0
        self.ended: set[int] = set()
        self.busy = False
        self.armed_turn: int | None = None
        self.serial = 0
        self.reviews = 0

    @rule(source=st.sampled_from(["startup", "resume", "clear"]))
    def session_start(self, source: str) -> None:
        self.agent.session_start(source)
        assert self.agent.score.turns == 0

    @rule(chars=st.integers(0, 300), steps=st.integers(1, 3))
    def user_turn(self, chars: int, steps: int) -> None:
        self.turn += 1
        self.serial += 1
        msgs = [message(f"m{self.serial}", "y" * chars)]
        for step in range(1, steps + 1):
            out = self.agent.pre_step(self.turn, step, msgs)
            assert out[: len(msgs)] == msgs
        if self.agent.state == "idle":
            self.armed_turn = None

    @precondition(lambda self: self.turn > 0)
    @rule(results=st.integers(0, 12), tools=st.integers(0, 5))
    def stop_turn(self, results: int, tools: int) -> None:
        events = [{"type": "tool/call", "name": f"t{i}", "turn": self.turn} for i in range(tools)]
        events += [{"type": "tool/result", "turn": self.turn}] * results
        self.agent.turn_stopping(self.turn, events)
        self.agent.turn_stopping(self.turn, events)  # repeated: never double counted
        if self.agent.state == "armed":
            self.armed_turn = self.turn

    @rule(chars=st.integers(150, 400), results=st.integers(5, 12), idle=st.booleans())
    def eligible_turn(self, chars: int, results: int, idle: bool) -> None:
        """A whole turn with enough activity to arm a review."""
        self.user_turn(chars, 1)
        self.stop_turn(results, 4)
        self.end_turn()
        self.status(not idle)

    @rule(behaviour=st.sampled_from(BEHAVIOURS))
    def review_now(self, behaviour: str) -> None:
        """An eligible turn, the agent idle, the deadline passed: a review runs."""
        self.eligible_turn(200, 6, True)
        runs = self.worker.runs
        self.time_passes(2 * IDLE_MS, behaviour)
        assert self.worker.runs == runs + 1

    @precondition(lambda self: self.turn > 0)
    @rule()
    def end_turn(self) -> None:
        self.ended.add(self.turn)
        self.agent.turn_ended(self.turn)

    @rule(busy=st.booleans())
    def status(self, busy: bool) -> None:
        self.busy = busy
        (self.agent.agent_busy if busy else self.agent.agent_idle)()

    @rule(
        ms=st.sampled_from([0, 1, IDLE_MS // 2, IDLE_MS, 2 * IDLE_MS]),
        behaviour=st.sampled_from(BEHAVIOURS),
    )
    def time_passes(self, ms: int, behaviour: str) -> None:
        self.worker.behaviour = behaviour
        before = self.agent.score
        runs = self.worker.runs
        hot_before = len(self.root.hot.snapshot().entries)
        docs_before = len(self.root.documents.records())
        self.ports.clock.advance(ms)  # type: ignore[attr-defined]
        self.agent.tick()
        assert self.agent.join(30)
        if self.worker.runs > runs:  # a review ran
            self.reviews += 1
            if behaviour in ("fail", "raise"):
                assert self.agent.score == before, FAILED_KEEPS
            else:
                assert self.agent.score.turns == 0, FAILED_KEEPS
            assert len(self.root.hot.snapshot().entries) - hot_before <= 1, AT_MOST_ONE
            assert len(self.root.documents.records()) - docs_before <= 1, AT_MOST_ONE
            assert self.agent.state == "idle"

    @rule(host=st.sampled_from(["pre_step", "busy", "session_start", "stop", "timeout"]))
    def review_cut_short(self, host: str) -> None:
        """A review stages a change and hangs; the next host event aborts it (or a tick past
        its timeout times it out): nothing is written, the activity is kept."""
        self.eligible_turn(200, 6, True)
        self.worker.behaviour = "hang"
        self.worker.started.clear()
        hot_before = self.root.hot.snapshot().entries
        last = self.agent.status()["lastReview"]
        failures = self.agent.status()["counters"]["failures"]
        self.ports.clock.advance(2 * IDLE_MS)  # type: ignore[attr-defined]
        self.agent.tick()
        assert self.agent.state == "reviewing"
        assert self.worker.started.wait(30)
        turns = self.agent.score.turns
        if host == "pre_step":
            self.user_turn(10, 1)
        elif host == "busy":
            self.status(True)
        elif host == "session_start":
            self.session_start("resume")
        elif host == "stop":
            self.stop_turn(0, 0)
        else:
            timeout = self.config.worker_timeout("review")
            self.ports.clock.advance(timeout)  # type: ignore[attr-defined]
            self.agent.tick()
        assert self.agent.state != "reviewing"
        assert self.agent.join(30)
        box = self.worker.boxes[-1]
        try:
            box.call("mnemon_memory_bodies", {})
            self.worker.refused_after_run.append(False)
        except MnemonError:
            self.worker.refused_after_run.append(True)
        assert self.root.hot.snapshot().entries == hot_before, STAGED_ONLY
        status = self.agent.status()
        if host == "timeout":
            assert status["counters"]["failures"] == failures + 1, FAILED_KEEPS
            assert status["lastReview"]["action"] == "failed", FAILED_KEEPS
        else:
            assert status["lastReview"] == last, ABORT_KEEPS
            assert status["counters"]["failures"] == failures, ABORT_KEEPS
        if host in ("timeout", "busy", "stop"):
            assert self.agent.score.turns >= turns, FAILED_KEEPS
        elif host == "pre_step":
            assert self.agent.score.turns == turns + 1, FAILED_KEEPS

    @rule()
    def restart(self) -> None:
        before = self.agent.status()
        score, deadline, state = self.agent.score, self.agent.deadline_ms, self.agent.state
        self.root = MemoryRoot.open("/r", self.config, ports=self.ports)
        self.agent = self.root.lifecycle("agent-1")
        assert (self.agent.score, self.agent.deadline_ms, self.agent.state) == (
            score,
            deadline,
            state,
        ), RESTART
        assert self.agent.status() == before, RESTART

    @invariant()
    def never_reviewing_at_rest(self) -> None:
        assert self.agent.state in ("idle", "armed", "deferred")

    @invariant()
    def workers_saw_nothing_wrong(self) -> None:
        assert self.worker.violations == [], NEVER_WHILE_BUSY
        assert all(self.worker.refused_after_run), STAGED_ONLY


TestLifecycle = LifecycleMachine.TestCase
