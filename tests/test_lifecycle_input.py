"""The lifecycle's input contract: standard OpenAI and Anthropic messages (no ids) count like
the reference host's id-carrying ones; a re-sent, cut or summarized conversation counts each
message once; every malformed input is ``InvalidInput`` with the state file untouched; the cue
is a standard message recognized when it comes back; an agent whose state file is bad is reset
by API and by CLI, the file moved aside."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import attrs
import pytest

from mnemon_sm import Config, CorruptStore, InvalidInput, MemoryRoot, ReadOnly
from mnemon_sm.flows.lifecycle import scoring
from mnemon_sm.flows.lifecycle.cues import CUE_TEXTS
from mnemon_sm.flows.lifecycle.state import LOG_MAX
from mnemon_sm.ports import Ports
from mnemon_sm.ports.workers import ToolBox, WorkerRequest
from mnemon_sm.testing.longterm import ScriptedWorkers
from mnemon_sm.testing.memory import memory_ports
from tests.test_lifecycle import tools, user

STATE = "state/lifecycle/main.json"
IDLE_MS = 30_000


def open_agent(ports: Ports, **config: Any) -> Any:
    settings = {"durability": "off", "idle_review_ms": IDLE_MS, **config}
    return MemoryRoot.open("/r", Config(**settings), ports=ports).lifecycle("main")


def openai_turn(turn: int, text: str, names: list[str]) -> list[list[dict[str, Any]]]:
    """What an OpenAI Chat Completions host enters at each step of a turn."""
    calls = [
        {"id": f"c{turn}-{i}", "type": "function", "function": {"name": n, "arguments": "{}"}}
        for i, n in enumerate(names)
    ]
    results = [
        {"role": "tool", "tool_call_id": c["id"], "content": "result text " * 20} for c in calls
    ]
    asked = {"role": "assistant", "content": None, "tool_calls": calls}
    return [[{"role": "user", "content": text}], [asked, *results]]


def anthropic_turn(turn: int, text: str, names: list[str]) -> list[list[dict[str, Any]]]:
    """What an Anthropic Messages host enters at each step of a turn."""
    uses = [
        {"type": "tool_use", "id": f"t{turn}-{i}", "name": n, "input": {"q": "x" * 80}}
        for i, n in enumerate(names)
    ]
    results = [
        {"type": "tool_result", "tool_use_id": u["id"], "content": "result text " * 20}
        for u in uses
    ]
    asked = {"role": "assistant", "content": [{"type": "text", "text": "Looking."}, *uses]}
    said = {"role": "user", "content": [{"type": "text", "text": text}]}
    return [[said], [asked, {"role": "user", "content": results}]]


def run_whole_history(agent: Any, steps_of: Any, turns: int, resend: bool = True) -> list[Any]:
    """A host that sends the whole conversation at every step and keeps the cue."""
    history: list[Any] = []
    for turn in range(1, turns + 1):
        for step, new in enumerate(steps_of(turn), 1):
            history += new
            out = agent.pre_step(turn, step, list(history))
            if resend:
                agent.pre_step(turn, step, list(history))  # a retried step
            history = out
        history.append({"role": "assistant", "content": f"Done with {turn}."})
        agent.turn_stopping(turn, [])
        agent.turn_ended(turn)
    return history


NAMES = ["read", "write", "search", "grep", "read"]


@pytest.mark.parametrize("shape", [openai_turn, anthropic_turn])
def test_standard_conversations_score_and_start_a_review_like_id_carrying_ones(
    shape: Any,
) -> None:
    ports, _ = memory_ports()
    seen: list[WorkerRequest] = []

    def review(request: WorkerRequest, tools: ToolBox) -> object:
        seen.append(request)
        return {"summary": "nothing to keep", "action": "skipped", "documentIds": []}

    agent = open_agent(attrs.evolve(ports, workers=ScriptedWorkers({"review": review})))
    run_whole_history(agent, lambda t: shape(t, "x" * 100, NAMES), 1)
    s = agent.score
    # 100 user characters (tool inputs and results are not user text), one turn, five tool
    # results and four tools found in the messages: the reference example's counts.
    assert (s.user_chars, s.turns, s.tool_results, s.unique_tools) == (100, 1, 5, 4)
    assert (s.text_score, s.turn_score, s.tool_score, s.diversity_score) == (2, 1, 1, 2)
    assert agent.state == "armed"

    reference, _ = memory_ports()
    ref = open_agent(reference)
    ref.pre_step(1, 1, [user("m1", "x" * 100)])
    ref.turn_stopping(1, tools(1, ["read", "write", "search", "grep"], 5))
    assert ref.score == s  # the same activity through the reference host's shape

    ports.clock.advance(IDLE_MS)  # type: ignore[attr-defined]
    agent.tick()
    assert agent.join(10) and agent.status()["counters"]["reviews"] == 1
    assert len(seen) == 1 and seen[0].data["turns"] == [{"turn": 1, "userTexts": ["x" * 100]}]
    assert agent.score.turns == 0  # a completed review clears the activity


@pytest.mark.parametrize("shape", [openai_turn, anthropic_turn])
def test_re_sending_the_history_counts_nothing_twice(shape: Any) -> None:
    ports, _ = memory_ports()
    agent = open_agent(ports)
    run_whole_history(agent, lambda t: shape(t, f"turn {t} says hello", ["a", "b"]), 4)
    s = agent.score
    assert (s.user_chars, s.turns, s.tool_results, s.unique_tools) == (4 * 17, 4, 8, 2)


def test_a_message_repeated_word_for_word_counts_again_and_a_cut_front_does_not() -> None:
    ports, _ = memory_ports()
    agent = open_agent(ports)
    history: list[Any] = []
    for turn in range(1, 13):  # the user says the same thing every turn
        history.append({"role": "user", "content": "yes please"})
        history = agent.pre_step(turn, 1, history)
        history.append({"role": "assistant", "content": f"answer {turn}"})
        if turn == 4:  # the host cuts the front, keeping the last ten messages
            history = history[-10:]
        if turn == 6:  # and later keeps only the last four
            history = history[-4:]
        if turn == 9:  # and later summarizes all but the last three
            history = [{"role": "system", "content": "Summary so far."}, *history[-3:]]
    assert (agent.score.user_chars, agent.score.turns) == (12 * 10, 12)
    assert agent.status()["counters"]["recallCues"] == 12  # the cue in the history is ours


def test_an_incremental_host_without_ids_counts_each_entered_message() -> None:
    ports, _ = memory_ports()
    agent = open_agent(ports)
    for turn in range(1, 4):
        for step, new in enumerate(openai_turn(turn, "same words", ["a"]), 1):
            agent.pre_step(turn, step, new)
    s = agent.score
    assert (s.user_chars, s.turns, s.tool_results, s.unique_tools) == (30, 3, 3, 1)


def test_tool_events_and_tool_messages_are_not_summed_and_names_are_united() -> None:
    ports, _ = memory_ports()
    agent = open_agent(ports)
    for step, new in enumerate(openai_turn(1, "hi", ["a", "b", "c"]), 1):
        agent.pre_step(1, step, new)
    agent.turn_stopping(1, tools(1, ["a", "d"], 2))
    s = agent.score  # 3 results in the messages, 2 events: the larger; tools a, b, c, d
    assert (s.tool_results, s.unique_tools) == (3, 4)
    agent.turn_stopping(1, tools(1, ["a"], 7))
    assert (agent.score.tool_results, agent.score.unique_tools) == (7, 3)


def test_the_persisted_state_stays_bounded_over_a_long_whole_history_session() -> None:
    ports, _ = memory_ports()
    agent = open_agent(ports)
    history = run_whole_history(agent, lambda t: openai_turn(t, "y" * 300, ["a"]), 60, False)
    assert len(history) > 200
    data = ports.files.read(STATE) or b""
    assert len(data) <= LOG_MAX
    last = json.loads(data.splitlines()[-1])
    assert len(last["conversation"]["tail"]) == scoring.TAIL_KEPT
    assert agent.score.turns == 60 and agent.score.tool_results == 60


# -- the cue ------------------------------------------------------------------------------------


def test_the_cue_is_a_standard_user_message_recognized_when_sent_back() -> None:
    ports, _ = memory_ports()
    agent = open_agent(ports)
    said = [{"role": "user", "content": "hello there"}]
    out = agent.pre_step(1, 1, said)
    cue = out[-1]
    assert set(cue) == {"role", "content"} and cue["role"] == "user"
    assert isinstance(cue["content"], str) and cue["content"] in CUE_TEXTS
    # sent back in the history (also as a text block), it is not user activity
    back = [*said, {"role": "user", "content": [{"type": "text", "text": cue["content"]}]}]
    assert agent.pre_step(1, 2, back) == back
    assert agent.score.user_chars == len("hello there")
    # a turn opened by the cue alone is not cued again
    assert agent.pre_step(2, 1, [dict(cue)]) == [cue]
    assert agent.status()["counters"]["recallCues"] == 1
    # a user who types the marker is still a user
    typed = [{"role": "user", "content": "[MEMORY] what do you remember?"}]
    assert len(agent.pre_step(3, 1, typed)) == 2


# -- malformed input ----------------------------------------------------------------------------

BAD = {
    "string turn": lambda a: a.pre_step("1", 1, []),
    "bool turn": lambda a: a.pre_step(True, 1, []),
    "negative step": lambda a: a.pre_step(1, -1, []),
    "float step": lambda a: a.pre_step(1, 1.0, []),
    "huge turn": lambda a: a.pre_step(2**60, 1, []),
    "messages None": lambda a: a.pre_step(1, 1, None),
    "messages a string": lambda a: a.pre_step(1, 1, "hi"),
    "messages a mapping": lambda a: a.pre_step(1, 1, {"role": "user", "content": "hi"}),
    "a message not a mapping": lambda a: a.pre_step(1, 1, ["hi"]),
    "a non-string key": lambda a: a.pre_step(1, 1, [{1: "x", "role": "user"}]),
    "no role": lambda a: a.pre_step(1, 1, [{"content": "hi"}]),
    "unknown role": lambda a: a.pre_step(1, 1, [{"role": "robot", "content": "hi"}]),
    "role not a string": lambda a: a.pre_step(1, 1, [{"role": ["user"], "content": "hi"}]),
    "source not an object": lambda a: a.pre_step(1, 1, [{"role": "user", "source": "user"}]),
    "content a number": lambda a: a.pre_step(1, 1, [{"role": "user", "content": 5}]),
    "a block without a type": lambda a: a.pre_step(1, 1, [{"role": "user", "content": [{}]}]),
    "a text block's text a number": lambda a: a.pre_step(
        1, 1, [{"role": "user", "content": [{"type": "text", "text": 5}]}]
    ),
    "a tool_use without a name": lambda a: a.pre_step(
        1, 1, [{"role": "assistant", "content": [{"type": "tool_use", "id": "t"}]}]
    ),
    "tool_calls not a list": lambda a: a.pre_step(
        1, 1, [{"role": "assistant", "tool_calls": "read"}]
    ),
    "a tool call without a function": lambda a: a.pre_step(
        1, 1, [{"role": "assistant", "tool_calls": [{"id": "c"}]}]
    ),
    "a tool call with an empty name": lambda a: a.pre_step(
        1, 1, [{"role": "assistant", "tool_calls": [{"function": {"name": ""}}]}]
    ),
    "an id that is a list": lambda a: a.pre_step(1, 1, [{"role": "user", "id": ["x"]}]),
    "a lone surrogate in user text": lambda a: a.pre_step(
        1, 1, [{"role": "user", "content": "bad \ud800"}]
    ),
    "tool events None": lambda a: a.turn_stopping(1, None),
    "a tool event not a mapping": lambda a: a.turn_stopping(1, ["tool/call"]),
    "a tool event without a type": lambda a: a.turn_stopping(1, [{"turn": 1}]),
    "a tool event with a string turn": lambda a: a.turn_stopping(
        1, [{"type": "tool/result", "turn": "1"}]
    ),
    "a tool call event without a name": lambda a: a.turn_stopping(
        1, [{"type": "tool/call", "turn": 1}]
    ),
    "a string turn to turn_stopping": lambda a: a.turn_stopping("1", []),
    "a bool turn to turn_ended": lambda a: a.turn_ended(False),
    "a string time to tick": lambda a: a.tick("10"),
    "an unknown session source": lambda a: a.session_start("reboot"),
}


@pytest.mark.parametrize("call", BAD.values(), ids=BAD.keys())
def test_every_malformed_input_is_refused_with_the_state_file_unchanged(call: Any) -> None:
    ports, _ = memory_ports()
    agent = open_agent(ports)
    for step, new in enumerate(openai_turn(1, "y" * 200, ["a", "b", "c", "d"]), 1):
        agent.pre_step(1, step, new)
    agent.turn_stopping(1, [])
    before = (ports.files.read(STATE), agent.status())
    with pytest.raises(InvalidInput):
        call(agent)
    assert (ports.files.read(STATE), agent.status()) == before
    again = open_agent(ports)  # nothing persisted: a restart sees the same agent
    assert again.status() == before[1]


def test_bad_agent_ids_are_refused_everywhere() -> None:
    ports, _ = memory_ports()
    root = MemoryRoot.open("/r", Config(durability="off"), ports=ports)
    for bad in ("", "../x", ".hidden", "a/b", "x" * 65, 7, None):
        with pytest.raises(InvalidInput):
            root.lifecycle(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidInput):
            root.reset_lifecycle(bad)  # type: ignore[arg-type]


# -- reset --------------------------------------------------------------------------------------


def poisoned(line: bytes) -> bytes:
    """A state line as an older version wrote it after accepting ``pre_step("1", ...)``."""
    data = json.loads(line)
    data["activity"][0]["turn"] = "1"
    data["endedTurns"] = ["1"]
    return (json.dumps(data) + "\n").encode()


DAMAGE = {
    "torn": lambda d: d + d[: len(d) // 2].replace(b"\n", b"") + b"\n{",
    "not JSON": lambda d: b"\x00\xff not json at all\n",
    "wrong schema": lambda d: b'{"version": 1, "flow": "agent_lifecycle"}\n',
    "old poison": lambda d: poisoned(d.splitlines()[-1]),
}


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
def test_a_bad_state_file_is_reset_by_the_api_and_moved_aside(damage: Any) -> None:
    ports, _ = memory_ports()
    agent = open_agent(ports)
    agent.pre_step(1, 1, [user("m1", "y" * 200)])
    bad = damage(ports.files.read(STATE) or b"")
    ports.files.put(STATE, bad)  # type: ignore[attr-defined]
    root = MemoryRoot.open("/r", Config(durability="off"), ports=ports)
    with pytest.raises(CorruptStore):
        root.lifecycle("main")
    receipt = root.reset_lifecycle("main").to_json()
    assert receipt["reset"] and receipt["problem"]
    moved = receipt["movedTo"]
    assert moved.startswith("state/lifecycle/main.json.bad-") and ports.files.read(moved) == bad
    assert ports.files.read(STATE) is None
    fresh = root.lifecycle("main")  # a new agent now
    assert fresh.score.turns == 0 and fresh.status()["primePending"]
    fresh.pre_step(1, 1, [{"role": "user", "content": "hello"}])
    assert (
        MemoryRoot.open("/r", Config(durability="off"), ports=ports).lifecycle("main").score.turns
        == 1
    )


def test_reset_of_a_readable_agent_an_open_facade_and_a_missing_file() -> None:
    ports, _ = memory_ports()
    root = MemoryRoot.open("/r", Config(durability="off"), ports=ports)
    agent = root.lifecycle("main")
    agent.pre_step(1, 1, [user("m1", "y" * 200)])
    first = root.reset_lifecycle("main").to_json()
    assert first["reset"] and first["problem"] is None and ".reset-" in first["movedTo"]
    assert agent.score.turns == 0  # the open facade adopts the reset
    agent.pre_step(1, 1, [user("m1", "y" * 200)])
    second = root.reset_lifecycle("main").to_json()  # same clock: a second name beside the first
    assert second["movedTo"] == first["movedTo"] + "-1"
    assert root.reset_lifecycle("main").to_json() == {
        "agentId": "main",
        "reset": False,
        "movedTo": None,
        "problem": None,
    }
    read_only = MemoryRoot.open("/r", Config(durability="off", write_enabled=False), ports=ports)
    with pytest.raises(ReadOnly):
        read_only.reset_lifecycle("main")


def test_reset_moves_a_symlinked_state_file_as_a_link(tmp_path: Path) -> None:
    root_dir = tmp_path / "root"
    root = MemoryRoot.open(root_dir, Config(durability="off"))
    root.lifecycle("main").pre_step(1, 1, [user("m1", "hi")])
    outside = tmp_path / "outside.json"
    outside.write_bytes(b"precious\n")
    state = root_dir / STATE
    state.unlink()
    os.symlink(outside, state)
    again = MemoryRoot.open(root_dir, Config(durability="off"))
    receipt = again.reset_lifecycle("main").to_json()
    moved = root_dir / receipt["movedTo"]
    assert receipt["reset"] and moved.is_symlink() and not state.exists()
    assert outside.read_bytes() == b"precious\n"  # never followed, never written
    assert again.lifecycle("main").score.turns == 0


def test_reset_by_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from mnemon_sm.cli.main import main

    root_dir = tmp_path / "root"
    root = MemoryRoot.open(root_dir, Config(durability="off"))
    root.lifecycle("main").pre_step(1, 1, [user("m1", "hi")])
    (root_dir / STATE).write_bytes(b"\x00garbage\n")
    main(["lifecycle", "reset", "main", "--root", str(root_dir)])
    receipt = json.loads(capsys.readouterr().out)
    assert receipt["reset"] and receipt["movedTo"].startswith("state/lifecycle/main.json.bad-")
    assert (root_dir / receipt["movedTo"]).read_bytes() == b"\x00garbage\n"
    main(["--root", str(root_dir), "lifecycle", "reset", "main"])
    assert json.loads(capsys.readouterr().out)["reset"] is False
    with pytest.raises(SystemExit) as exited:
        main(["--root", str(root_dir), "lifecycle", "reset", "../escape"])
    assert exited.value.code == 1
    assert json.loads(capsys.readouterr().err)["error"]["type"] == "InvalidInput"


def test_reset_holds_the_agents_lock() -> None:
    """While another process holds the agent's lock, reset times out and moves nothing."""
    from mnemon_sm import LockTimeout
    from mnemon_sm.flows.lifecycle.state import lock_name

    ports, _ = memory_ports()
    root = MemoryRoot.open("/r", Config(durability="off", lock_timeout_ms=100), ports=ports)
    root.lifecycle("main").pre_step(1, 1, [user("m1", "hello")])
    before = ports.files.read(STATE)
    ports.locks.hold(lock_name("main"))  # type: ignore[attr-defined]
    with pytest.raises(LockTimeout):
        root.reset_lifecycle("main")
    assert ports.files.read(STATE) == before
    ports.locks.let_go(lock_name("main"))  # type: ignore[attr-defined]
    assert root.reset_lifecycle("main").reset
