"""Agent lifecycle stories: the scoring examples, counting rules, prime and cues, deadlines,
review outcomes, persistence, illegal events and the asyncio driver."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import attrs
import pytest

from mnemon_sm import Config, CorruptStore, IllegalEvent, InvalidInput, MemoryRoot
from mnemon_sm.engine.spec import TransitionDoc, load_flow
from mnemon_sm.flows.lifecycle.api import AsyncDriver
from mnemon_sm.flows.lifecycle.scoring import score_of
from mnemon_sm.ports import Ports
from mnemon_sm.ports.workers import ToolBox, WorkerRequest
from mnemon_sm.testing.longterm import ScriptedWorkers
from mnemon_sm.testing.memory import memory_ports

IDLE_MS = 30_000


def user(ident: str, text: str, *, extra: list[Any] | None = None) -> dict[str, Any]:
    return {
        "id": ident,
        "role": "user",
        "content": [{"type": "text", "text": text}, *(extra or [])],
        "source": {"kind": "user"},
    }


def tools(turn: int, calls: list[str], results: int) -> list[dict[str, Any]]:
    events = [{"type": "tool/call", "name": n, "turn": turn} for n in calls]
    return events + [{"type": "tool/result", "turn": turn}] * results


def agent(workers: Any = None, **config: Any) -> tuple[Any, MemoryRoot, Ports]:
    ports, _ = memory_ports()
    if workers is not None:
        ports = attrs.evolve(ports, workers=workers)
    root = MemoryRoot.open("/r", Config(durability="off", **config), ports=ports)
    return root.lifecycle("main"), root, ports


@pytest.mark.parametrize(
    ("chars", "turns", "results", "unique", "expected"),
    [
        (150, 1, 0, 0, 4),
        (150, 2, 0, 0, 5),
        (100, 1, 5, 3, 5),
        (0, 5, 0, 0, 5),
        (1000, 2, 100, 8, 9),
    ],
)
def test_scoring_examples(
    chars: int, turns: int, results: int, unique: int, expected: int
) -> None:
    s = score_of(chars, turns, results, unique)
    assert s.total == expected and s.eligible == (expected >= 5)


def test_the_guards_of_an_event_out_of_a_state_exclude_each_other() -> None:
    """Each edge states its whole condition: for every state and event of the spec, every
    truth assignment of the guards involved enables exactly one transition, so the diagram
    alone says which branch fires (document order never decides)."""
    spec = load_flow("agent_lifecycle").spec
    groups: dict[tuple[str, str], list[TransitionDoc]] = {}
    for t in spec.transitions:
        groups.setdefault((t.source, t.event), []).append(t)
    for (source, event), edges in groups.items():
        names = sorted({g for t in edges for g in (*t.cond, *t.unless)})
        for values in itertools.product([False, True], repeat=len(names)):
            truth = dict(zip(names, values, strict=True))
            enabled = [
                t.index
                for t in edges
                if all(truth[c] for c in t.cond) and not any(truth[u] for u in t.unless)
            ]
            assert len(enabled) == 1, (source, event, truth, enabled)


def test_the_guards_are_pure() -> None:
    """Every guard of the spec reads the flow's data and its arguments and decides: it
    changes no data and calls no port, however often the engine asks it."""
    import inspect

    from mnemon_sm.flows.lifecycle.agent import ReviewOutcome
    from mnemon_sm.flows.lifecycle.review import StagedChanges, StagedHotChange

    lc, _, ports = agent()
    eligible_turn(lc, 1)
    lc.turn_ended(1)
    lc.agent_busy()
    flow = lc._flow
    two = StagedChanges(
        hot=(StagedHotChange("add", "user", "A"), StagedHotChange("add", "user", "B"))
    )
    arguments = {
        "now": ports.clock.now_ms() + IDLE_MS,
        "turn": 2,
        "step": 1,
        "messages": [user("m2", "z" * 300)],
        "tool_events": tools(2, ["a", "b", "c", "d", "e"], 9),
        "run_id": "rev-1",
        "outcome": ReviewOutcome(True, "stored", "two", two),
    }
    guards = [
        n for n, roles in load_flow("agent_lifecycle").spec.callbacks().items() if "guard" in roles
    ]
    assert len(guards) == 10
    log = ports.files.log  # type: ignore[attr-defined]
    before, calls = flow.snapshot(), len(log.calls)
    for name in guards:
        method = getattr(flow, name)
        wanted = inspect.signature(method).parameters
        for _ in range(2):
            method(**{k: v for k, v in arguments.items() if k in wanted})
        assert len(log.calls) == calls, f"{name} called a port"
    assert flow.snapshot() == before and flow.activity.keys() == {1}


def test_the_reference_worked_example_through_the_hooks() -> None:
    lc, _, _ = agent()
    lc.pre_step(1, 1, [user("m1", "x" * 100)])
    lc.turn_stopping(1, tools(1, ["read", "read", "write", "search", "read"], 5))
    s = lc.score
    assert (s.text_score, s.turn_score, s.tool_score, s.diversity_score, s.total) == (
        2,
        1,
        1,
        1,
        5,
    )
    assert lc.state == "armed"


def test_counting_rules() -> None:
    lc, _, _ = agent()
    emoji = user("m1", "  😀 é  ", extra=[{"type": "image", "data": "..."}])
    lc.pre_step(1, 1, [emoji])
    lc.pre_step(1, 2, [emoji, {"id": "a1", "role": "assistant", "content": "long " * 99}])
    assert lc.score.user_chars == 4  # UTF-16 units of the trimmed text, counted once
    lc.turn_stopping(1, tools(1, ["a"], 7))
    lc.turn_stopping(1, tools(1, ["a"], 7))  # set, not added
    assert lc.score.tool_results == 7 and lc.score.turns == 1
    lc.pre_step(2, 1, [user("m2", "hi")])
    assert lc.score.turns == 2  # the turn in progress counts from its first pre-step


def test_prime_once_per_session_and_a_cue_per_turn_with_messages_untouched() -> None:
    lc, _, _ = agent()
    first = [user("m1", "hello", extra=[{"type": "image", "data": "abc"}])]
    out = lc.pre_step(1, 1, first)
    assert out[0] is first[0] and len(out) == 2 and first[0]["content"][1]["type"] == "image"
    assert out[1] == {"role": "user", "content": out[1]["content"]}  # a standard message
    assert out[1]["content"].startswith("[MEMORY]")
    assert lc.pre_step(1, 2, first) == first  # later steps: no cue
    lc.pre_step(2, 1, [user("m2", "again")])
    counters = lc.status()["counters"]
    assert (counters["primes"], counters["recallCues"], counters["writebackCues"]) == (1, 2, 2)
    own = lc.pre_step(3, 1, [out[1]])  # a turn started by our own cue
    assert own == [out[1]] and lc.status()["counters"]["recallCues"] == 2
    lc.session_start("resume")
    assert lc.status()["primePending"] and lc.score.turns == 0
    lc.pre_step(4, 1, [user("m4", "x")])
    assert lc.status()["counters"]["primes"] == 2


def test_no_cue_when_both_modes_are_off_and_no_write_clause_without_writes() -> None:
    lc, _, _ = agent(recall_mode="off", writeback_mode="off")
    msgs = [user("m1", "x")]
    assert lc.pre_step(1, 1, msgs) == msgs
    lc, _, _ = agent(write_enabled=False)
    text = lc.pre_step(1, 1, msgs)[-1]["content"]
    assert "runtime-memory" not in text and "Documents" in text


def eligible_turn(lc: Any, turn: int) -> None:
    lc.pre_step(turn, 1, [user(f"m{turn}", "y" * 200)])
    lc.turn_stopping(turn, tools(turn, ["a", "b", "c", "d"], 5))


def test_a_new_turn_cancels_the_armed_review_even_with_the_lifecycle_off() -> None:
    lc, root, ports = agent()
    eligible_turn(lc, 1)
    assert lc.state == "armed"
    lc.pre_step(2, 1, [user("m2", "next")])
    assert lc.state == "idle" and lc.deadline_ms is None and lc.score.turns == 2
    off = MemoryRoot.open("/r", Config(durability="off", lifecycle_enabled=False), ports=ports)
    lc_off = off.lifecycle("other")
    lc_off._flow.state = "armed"  # armed earlier, then the lifecycle was switched off
    lc_off._flow.deadline_ms = 1
    lc_off.pre_step(1, 1, [user("m", "x")])
    assert lc_off.state == "idle"
    del root


def test_deadline_while_busy_defers_until_idle_then_reviews() -> None:
    lc, root, ports = agent()
    eligible_turn(lc, 1)
    lc.turn_ended(1)
    lc.agent_busy()
    lc.tick(ports.clock.now_ms() + IDLE_MS - 1)
    assert lc.state == "armed"
    lc.tick(ports.clock.now_ms() + IDLE_MS)
    assert lc.state == "deferred"
    lc.agent_idle()
    assert lc.state == "armed" and lc.deadline_ms == ports.clock.now_ms()
    lc.tick()
    assert lc.join(10)  # the review runs on its own thread
    assert lc.state == "idle" and lc.status()["lastReview"]["action"] == "skipped"
    assert lc.score.turns == 0  # a completed review (a skip) clears the activity
    del root


def test_a_deadline_before_the_turn_ended_is_dropped_and_activity_kept() -> None:
    lc, _, ports = agent()
    eligible_turn(lc, 1)
    lc.tick(ports.clock.now_ms() + IDLE_MS)
    assert lc.state == "idle" and lc.score.turns == 1 and lc.status()["counters"]["reviews"] == 0


@pytest.mark.parametrize("failure", ["raise", "failed", "invalid"])
def test_a_failed_review_keeps_the_activity_and_is_not_retried_by_itself(failure: str) -> None:
    def worker(request: WorkerRequest, tools: ToolBox) -> object:
        if failure == "raise":
            raise TimeoutError("model timed out")
        if failure == "invalid":
            return {"summary": "x"}
        return {"summary": "could not decide", "action": "failed", "documentIds": []}

    lc, _, ports = agent(ScriptedWorkers({"review": worker}))
    eligible_turn(lc, 1)
    lc.turn_ended(1)
    before = lc.score
    lc.tick(ports.clock.now_ms() + IDLE_MS)
    assert lc.join(10)
    assert lc.state == "idle" and lc.score == before
    assert lc.status()["counters"]["failures"] == 1
    lc.tick(ports.clock.now_ms() + 10 * IDLE_MS)
    assert lc.status()["counters"]["failures"] == 1  # no retry storm
    eligible_turn(lc, 2)
    assert lc.state == "armed"  # a later eligible turn re-arms


def test_builtin_review_saves_one_explicit_statement() -> None:
    lc, root, ports = agent()
    lc.pre_step(
        1, 1, [user("m1", "I prefer tabs over spaces. Also remember that CI runs on Fridays.")]
    )
    lc.turn_stopping(1, tools(1, ["a", "b", "c", "d"], 5))
    lc.turn_ended(1)
    lc.tick(ports.clock.now_ms() + IDLE_MS)
    assert lc.join(10)
    assert lc.status()["lastReview"]["action"] == "stored"
    # one statement only, though the message holds two
    assert [(e.target, e.content) for e in root.hot.snapshot().entries] == [
        ("memory", "CI runs on Fridays")
    ]


def test_state_survives_a_restart_and_the_review_still_fires() -> None:
    lc, _, ports = agent()
    eligible_turn(lc, 1)
    lc.turn_ended(1)
    status = lc.status()
    again = MemoryRoot.open("/r", Config(durability="off"), ports=ports).lifecycle("main")
    assert again.status() == status and again.deadline_ms == lc.deadline_ms
    again.tick(ports.clock.now_ms() + IDLE_MS)
    assert again.join(10)
    assert again.status()["counters"]["reviews"] == 1


def test_the_session_start_source_is_recorded_and_survives_a_restart() -> None:
    """Regression: the source travelled as an event argument named ``source``, a name the
    engine reserves (it passes the state left), so every session recorded ``Idle``."""
    lc, _, ports = agent()
    for source in ("resume", "clear", "startup"):
        lc.session_start(source)
        assert lc._flow.start_source == source
        again = MemoryRoot.open("/r", Config(durability="off"), ports=ports).lifecycle("main")
        assert again._flow.start_source == source
        assert again._flow.snapshot().start_source == source


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: {**d, "flow": "hot_memory_mutation"},
        lambda d: {**d, "agentId": "someone-else"},
        lambda d: {**d, "state": "reviewing"},
        lambda d: {**d, "surprise": 1},
        lambda d: {k: v for k, v in d.items() if k != "deadlineMs"},
        lambda d: "not an object",
    ],
)
def test_a_corrupt_or_foreign_state_file_is_refused(edit: Any) -> None:
    lc, _, ports = agent()
    eligible_turn(lc, 1)
    path = "state/lifecycle/main.json"
    data = json.loads((ports.files.read(path) or b"").splitlines()[-1])
    line = json.dumps(edit(data)) + "\n"
    ports.files.put(path, line.encode())  # type: ignore[attr-defined]
    root = MemoryRoot.open("/r", Config(durability="off"), ports=ports)
    with pytest.raises(CorruptStore):
        root.lifecycle("main")


@pytest.mark.parametrize("damage", ["empty", "one torn line", "torn tail"])
def test_a_torn_or_empty_state_file_is_read_as_documented_and_stays_readable(
    damage: str,
) -> None:
    lc, _, ports = agent()
    eligible_turn(lc, 1)
    path = "state/lifecycle/main.json"
    data = ports.files.read(path) or b""
    last = data.splitlines()[-1]
    damaged = {
        "empty": b"",
        "one torn line": last[: len(last) // 2],
        "torn tail": data + last[: len(last) // 2],
    }[damage]
    ports.files.put(path, damaged)  # type: ignore[attr-defined]
    root = MemoryRoot.open("/r", Config(durability="off"), ports=ports)
    again = root.lifecycle("main")
    expected = ("armed", 1) if damage == "torn tail" else ("idle", 0)  # the last whole line
    assert (again.state, again.score.turns) == expected
    again.pre_step(2, 1, [user("m2", "next")])  # the next save must not extend a torn line
    state = (again.state, again.score.turns)
    reopened = MemoryRoot.open("/r", Config(durability="off"), ports=ports).lifecycle("main")
    assert (reopened.state, reopened.score.turns) == state
    assert (ports.files.read(path) or b"").endswith(b"\n")


@pytest.mark.parametrize(
    "call",
    [
        lambda lc: lc.pre_step("1", 1, []),  # a string turn
        lambda lc: lc.pre_step(True, 1, []),
        lambda lc: lc.pre_step(-1, 1, []),
        lambda lc: lc.pre_step(1, 1.5, []),
        lambda lc: lc.pre_step(1, 1, None),
        lambda lc: lc.pre_step(1, 1, "messages"),
        lambda lc: lc.pre_step(1, 1, ["not a mapping"]),
        lambda lc: lc.pre_step(1, 1, [{1: "int key"}]),
        lambda lc: lc.pre_step(1, 1, [user("m", "text \ud800")]),
        lambda lc: lc.turn_stopping(1, [5]),
        lambda lc: lc.turn_stopping(1, "events"),
        lambda lc: lc.turn_stopping("1", []),
        lambda lc: lc.turn_ended(None),
        lambda lc: lc.tick("soon"),
        lambda lc: lc.session_start("clear \udc80"),
    ],
)
def test_malformed_event_arguments_are_refused_and_record_nothing(call: Any) -> None:
    lc, root, ports = agent()
    eligible_turn(lc, 1)
    path = "state/lifecycle/main.json"
    before = (ports.files.read(path), lc.state, lc.score)
    with pytest.raises(InvalidInput):
        call(lc)
    assert (ports.files.read(path), lc.state, lc.score) == before
    lc.pre_step(2, 1, [user("m2", "still usable")])
    assert lc.score.turns == 2
    del root


def test_bad_agent_ids_and_events_after_dispose() -> None:
    lc, root, _ = agent()
    with pytest.raises(InvalidInput):
        root.lifecycle("../escape")
    lc.dispose()
    with pytest.raises(IllegalEvent) as caught:
        lc.pre_step(1, 1, [])
    assert caught.value.state == "disposed"
    assert lc.state == "disposed"


def test_async_driver_fires_the_deadline_with_a_fake_sleep() -> None:
    import threading

    release = threading.Event()

    def worker(request: WorkerRequest, tools: ToolBox) -> object:
        release.wait(30)  # runs until the driver sleeps toward the review's timeout
        return {"summary": "nothing new", "action": "skipped", "documentIds": []}

    lc, _, ports = agent(ScriptedWorkers({"review": worker}))
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 1:  # the review deadline passes at once
            ports.clock.advance(int(seconds * 1000))  # type: ignore[attr-defined]
        else:  # the review's timeout never comes: the review ends first
            release.set()
            await asyncio.Event().wait()

    async def main() -> None:
        driver = AsyncDriver(lc, ports.clock, sleep=fake_sleep)
        task = asyncio.create_task(driver.run())
        await asyncio.sleep(0)
        eligible_turn(lc, 1)
        lc.turn_ended(1)  # the driver listens: no notify needed
        for _ in range(50):
            await asyncio.sleep(0)
            if lc.state != "armed":
                break
        assert await asyncio.to_thread(lc.join, 10)
        for _ in range(50):  # the driver wakes on the review's end and goes back to waiting
            await asyncio.sleep(0)
        driver.stop()
        await task

    asyncio.run(main())
    timeout_s = Config().worker_timeout("review") / 1000
    assert slept == [IDLE_MS / 1000, timeout_s]
    assert lc.status()["counters"]["reviews"] == 1


def test_review_tools_refuse_what_is_not_granted() -> None:
    seen: list[Any] = []

    def worker(request: WorkerRequest, tools: ToolBox) -> object:
        seen.append(request.tools)
        for name, args in (
            ("mnemon_remember", {"content": "x"}),
            ("mnemon_document_manage", {"action": "archive", "id": "x"}),
        ):
            try:
                tools.call(name, args)
            except Exception as exc:
                seen.append(type(exc).__name__)
        return {"summary": "none", "action": "skipped", "documentIds": []}

    lc, _, ports = agent(ScriptedWorkers({"review": worker}))
    eligible_turn(lc, 1)
    lc.turn_ended(1)
    lc.tick(ports.clock.now_ms() + IDLE_MS)
    assert lc.join(10)
    assert "mnemon_remember" not in seen[0] and "mnemon_runtime_memory" in seen[0]
    assert seen[1:] == ["ToolRefused", "ToolRefused"]
    # calling a tool that was not granted fails the run: the activity is kept
    assert lc.status()["counters"]["failures"] == 1


def deferred_agent() -> tuple[Any, Ports]:
    lc, _, ports = agent()
    eligible_turn(lc, 1)
    lc.agent_busy()
    lc.tick(ports.clock.now_ms() + IDLE_MS)
    assert lc.state == "deferred"
    return lc, ports


def test_every_event_in_armed_and_deferred() -> None:
    for make in ("armed", "deferred"):
        if make == "armed":
            lc, _, _ = agent()
            eligible_turn(lc, 1)
        else:
            lc, _ = deferred_agent()
        lc.pre_step(1, 2, [user("late", "a later step of the same turn")])  # stays
        lc.turn_ended(1)
        lc.agent_busy()
        assert lc.state == make
        lc.turn_stopping(1, tools(1, ["a", "b", "c", "d"], 5))  # still eligible: re-armed
        assert lc.state == "armed"
        lc.dispose()
        assert lc.state == "disposed"

    lc, _ = deferred_agent()
    lc.session_start("clear")  # clears the activity, so the next stop is not eligible
    assert lc.state == "idle"
    lc, _ = deferred_agent()
    lc.dispose()
    assert lc.state == "disposed"
    for make in ("armed", "deferred"):  # no longer eligible: the deadline is cancelled
        if make == "armed":
            lc, _, _ = agent()
            eligible_turn(lc, 1)
        else:
            lc, _ = deferred_agent()
        assert lc.state == make
        lc._flow.activity.clear()
        lc.turn_stopping(1, tools(1, [], 0))
        assert lc.state == "idle" and lc.deadline_ms is None


def test_a_stopping_turn_with_recording_switched_off_changes_nothing() -> None:
    for make in ("armed", "deferred"):
        if make == "armed":
            lc, _, ports = agent()
            eligible_turn(lc, 1)
        else:
            lc, ports = deferred_agent()
        deadline = lc.deadline_ms
        off = MemoryRoot.open("/r", Config(durability="off", writeback_mode="off"), ports=ports)
        restored = off.lifecycle("main")  # the switch changed while a review was armed
        restored.turn_stopping(2, tools(2, ["x"], 9))
        assert (restored.state, restored.deadline_ms) == (make, deadline)


def test_the_turn_in_progress_counts_from_its_first_pre_step() -> None:
    """Reference 11.2: after a third turn begins, 182 characters and 3 turns score 6."""
    lc, _, _ = agent()
    for turn, text in ((1, "a" * 60), (2, "b" * 61), (3, "c" * 61)):
        lc.pre_step(turn, 1, [user(f"m{turn}", text)])
        if turn < 3:
            lc.turn_stopping(turn, [])
    s = lc.score
    assert (s.user_chars, s.turns, s.total) == (182, 3, 6)


def test_a_new_turn_in_deferred_cancels_and_a_tick_there_waits() -> None:
    lc, ports = deferred_agent()
    lc.tick(ports.clock.now_ms() + 10 * IDLE_MS)  # still busy: the review keeps waiting
    assert lc.state == "deferred"
    lc.pre_step(2, 1, [user("m2", "a new turn")])
    assert lc.state == "idle" and lc.deadline_ms is None and lc.score.turns == 2


def hanging_review() -> tuple[Any, Ports, Any, Any]:
    """An agent whose review hangs until cancelled (returns the agent, the ports, the started
    event and the finished event)."""
    import threading

    started, finished = threading.Event(), threading.Event()

    def worker(request: WorkerRequest, tools: ToolBox) -> object:
        started.set()
        tools.cancellation.wait(30)
        finished.set()
        return {"summary": "late", "action": "skipped", "documentIds": []}

    lc, _, ports = agent(ScriptedWorkers({"review": worker}))
    eligible_turn(lc, 1)
    lc.turn_ended(1)
    lc.tick(ports.clock.now_ms() + IDLE_MS)
    assert lc.state == "reviewing" and started.wait(10)
    return lc, ports, started, finished


def test_turn_ended_and_idle_while_reviewing_change_nothing_and_dispose_aborts() -> None:
    lc, _, _, finished = hanging_review()
    lc.turn_ended(1)
    lc.agent_idle()
    assert lc.state == "reviewing"
    lc.dispose()
    assert lc.state == "disposed" and finished.wait(10)
    assert lc.join(10) and lc.status()["lastReview"] is None


def test_a_stopping_turn_with_recording_off_still_aborts_a_running_review() -> None:
    lc, ports, _, finished = hanging_review()
    off = MemoryRoot.open("/r", Config(durability="off", writeback_mode="off"), ports=ports)
    lc._flow.config = off.config  # the switch changed while the review ran
    lc.turn_stopping(2, tools(2, ["x"], 9))
    assert lc.state == "idle" and finished.wait(10)


def test_a_turn_stopped_again_below_the_threshold_aborts_a_running_review() -> None:
    """The same turn stopping again with its final, smaller tool events (they are set, not
    added) leaves the activity below the threshold: the review is aborted and the agent rests
    idle with no deadline. (Spec: ``reviewing`` #3 on ``turn_stopping``.)"""
    lc, _, _, finished = hanging_review()
    lc.turn_stopping(1, [])
    assert lc.state == "idle" and finished.wait(10)
    assert lc.deadline_ms is None and not lc.score.eligible
    assert lc.score.tool_results == 0 and lc.score.turns == 1


def test_a_stale_review_result_arriving_in_deferred_is_dropped() -> None:
    import threading

    release = threading.Event()
    runs: list[int] = []

    def worker(request: WorkerRequest, tools: ToolBox) -> object:
        runs.append(1)
        if len(runs) == 1:
            release.wait(30)  # ignores cancellation: its result arrives after the abort
        return {"summary": "late", "action": "skipped", "documentIds": []}

    lc, _, ports = agent(ScriptedWorkers({"review": worker}))
    eligible_turn(lc, 1)
    lc.turn_ended(1)
    lc.tick(ports.clock.now_ms() + IDLE_MS)
    assert lc.state == "reviewing"
    lc.agent_busy()  # aborts it
    eligible_turn(lc, 2)
    lc.turn_ended(2)
    lc.tick(ports.clock.now_ms() + 3 * IDLE_MS)  # due while busy
    assert lc.state == "deferred"
    before = lc.status()
    delivered = threading.Event()
    lc.add_listener(delivered.set)  # the next event is the stale run's result
    release.set()  # the aborted run finishes now and sends its result
    assert delivered.wait(10)
    assert lc.state == "deferred" and lc.status() == before
