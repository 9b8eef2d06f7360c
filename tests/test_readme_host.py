"""A host written from the README alone, driving a whole conversation through the OpenAI
adapter against the loopback server.

The host does only what the README shows: it opens a root with ``OpenAIWorkers`` pointed at
an OpenAI-compatible server, gives its main agent ``root.context.runtime_memory()`` as the
system message and ``root.tools.to_openai()`` as its tools, dispatches each tool call with
``root.tools.call``, and drives the agent's lifecycle with the standard chat messages
(``pre_step``, ``turn_stopping``, ``turn_ended``, ``agent_idle``, ``tick``).

The "model" behind the server plays both parts over the real wire protocol: the main agent
(a script that adds the facts it is told, recalls when asked and answers from the tool
result) and every worker (:class:`~mnemon_sm.testing.wire_model.BuiltinOverWire`: the
built-in worker's decisions, sent as tool calls and a final JSON text). So the conversation
exercises, through the SDK and HTTP: hot-memory adds, a MEMORY.md overflow whose archive and
compaction the model proposes and the host checks, a recall through the recall worker, and
an idle review that stores what the user asked to remember.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import openai  # the [openai] extra (the test extra installs it)

from mnemon_sm import (
    BuiltinWorkers,
    MaintenanceRejected,
    MemoryRoot,
    OpenAIWorkers,
    ToolBox,
    WorkerRequest,
)
from mnemon_sm.testing.loopback import LoopbackModel, LoopbackRequest, Reply, ToolCall
from mnemon_sm.testing.wire_model import BuiltinOverWire, worker_data, worker_kind

IDLE_MS = 30_000
FACTS = [
    f"Build fact {i:02d}: the {name} stage runs "
    + "with cached dependencies and a pinned toolchain, " * 6
    + f"and its logs are kept for {i + 3} days."
    for i, name in enumerate(
        [
            "lint",
            "typecheck",
            "unit",
            "property",
            "wheel",
            "sdist",
            "docs",
            "spec",
            "drift",
            "demo",
        ]
        * 3
    )
]
REMEMBER = "Remember that the release train leaves on Thursdays."


def user_turns() -> list[str]:
    """What the user says, turn by turn."""
    chunks = [FACTS[i : i + 10] for i in range(0, len(FACTS), 10)]
    return [
        "Hi! I prefer concise replies.",
        *("Please note these build facts:\n" + "\n".join(f"- {f}" for f in c) for c in chunks),
        "Which stage keeps its logs for 5 days?",
        REMEMBER + " " + "That is all for today, thanks for the help with the build. " * 3,
    ]


def main_agent(request: LoopbackRequest) -> Reply:
    """The main agent's model: add what it is told, recall when asked, answer from tools."""
    said = user_turns()
    # the last message that is the user's or a tool's (the lifecycle may append a cue)
    last = next(
        m
        for m in reversed(request.body["messages"])
        if m["role"] == "tool" or (m["role"] == "user" and m.get("content") in said)
    )
    if last["role"] == "tool":  # the tools answered: say so, from the last result
        result = json.loads(last["content"])
        results = result.get("results") or []
        if results:
            return Reply(text=f"From memory: {results[0]['content']}")
        return Reply(text="Noted.")
    text = last["content"] if isinstance(last["content"], str) else ""
    if text.startswith("Hi!"):
        add = {"action": "add", "target": "user", "content": "User prefers concise replies"}
        return Reply(tool_calls=(ToolCall("mnemon_runtime_memory", add),))
    if text.startswith("Please note"):
        facts = [line[2:] for line in text.splitlines() if line.startswith("- ")]
        calls = tuple(
            ToolCall("mnemon_runtime_memory", {"action": "add", "target": "memory", "content": f})
            for f in facts
        )
        return Reply(tool_calls=calls)
    if text.startswith("Which stage"):
        return Reply(tool_calls=(ToolCall("mnemon_recall", {"query": "logs kept for 5 days"}),))
    return Reply(text="You are welcome.")


def converse(root: MemoryRoot, server: LoopbackModel) -> dict[str, Any]:
    """The host loop, as the README's sections put it together."""
    client = openai.OpenAI(base_url=server.openai_url, api_key="test", max_retries=0)
    agent = root.lifecycle("main")
    agent.session_start("startup")
    history: list[dict[str, Any]] = []
    answers: list[str] = []
    receipts: list[dict[str, Any]] = []
    for turn, said in enumerate(user_turns(), 1):
        history.append({"role": "user", "content": said})
        tool_events: list[dict[str, Any]] = []
        for step in range(1, 10):
            messages = agent.pre_step(turn, step, history)
            system = {"role": "system", "content": root.context.runtime_memory()}
            reply = client.chat.completions.create(
                model="loopback", messages=[system, *messages], tools=root.tools.to_openai()
            )
            message = reply.choices[0].message
            history.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                answers.append(message.content or "")
                break
            for call in message.tool_calls:
                result = root.tools.call(call.function.name, call.function.arguments)
                receipts.append(result)
                tool_events.append({"type": "tool/call", "name": call.function.name})
                tool_events.append({"type": "tool/result", "name": call.function.name})
                history.append(
                    {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
                )
        agent.turn_stopping(turn, [{**e, "turn": turn} for e in tool_events])
        agent.turn_ended(turn)
    agent.agent_idle()
    status = agent.status()
    if agent.deadline_ms is not None:
        agent.tick(agent.deadline_ms + 1)
    assert agent.join(60), "the review did not finish"
    return {"answers": answers, "receipts": receipts, "armed": status, "after": agent.status()}


def test_a_readme_host_runs_a_conversation_with_overflow_recall_and_review(
    tmp_path: Path,
) -> None:
    model = BuiltinOverWire(fallback=main_agent)
    with LoopbackModel(model) as server:
        # the built-in archive worker remembers one entry per tool call (a model would batch
        # them in one reply): room for every entry of a full MEMORY.md
        workers = OpenAIWorkers(
            model="loopback",
            base_url=server.openai_url,
            api_key="test",
            max_retries=0,
            max_rounds=64,
        )
        with MemoryRoot.open(tmp_path / "root", workers=workers) as root:
            run = converse(root, server)
            snapshot = root.hot.snapshot()
            memory_md = (tmp_path / "root" / "runtime" / "MEMORY.md").read_text("utf-8")
            user_md = (tmp_path / "root" / "runtime" / "USER.md").read_text("utf-8")
            archived = root.long_term.search("Build fact", limit=50)

    # hot memory: the user's preference, and every fact either kept or archived
    assert "User prefers concise replies" in user_md
    overflowed = [r for r in run["receipts"] if r.get("maintenance")]
    assert len(overflowed) == 1, "exactly one add overflowed MEMORY.md"
    assert overflowed[0]["maintenance"]["kind"] == "long-term-archive"
    assert [r for r in run["receipts"] if "error" in r] == []
    kept = {e.content for e in snapshot.entries if e.target == "memory"}
    stored = {hit.hit.insight.content for hit in archived.hits}
    assert set(FACTS) <= kept | stored, "no fact was lost"
    assert stored, "the archive wrote facts to long-term memory"
    assert len(memory_md.encode("utf-8")) <= 10240
    # the worker kinds the model played, over the wire
    assert model.kinds.count("archive") == 1 and "recall" in model.kinds
    assert "review" in model.kinds
    # the recall turn answered from long-term memory or hot memory
    assert any("logs are kept for 5 days" in a for a in run["answers"]), run["answers"]
    # the idle review stored what the user asked to remember
    assert run["armed"]["state"] == "armed", run["armed"]
    assert run["after"]["lastReview"]["action"] == "stored", run["after"]
    assert "release train leaves on Thursdays" in memory_md + user_md


def test_the_wire_model_reads_back_the_request_data_of_every_kind_it_played(
    tmp_path: Path,
) -> None:
    """The model reads each request from the prompt alone; what it reads must be the data the
    host built (the byte budget of maintenance, never shown to a model, excepted)."""
    seen: list[Any] = []
    builtin = BuiltinWorkers()

    class Capturing:
        def run(self, request: WorkerRequest, tools: ToolBox) -> object:
            seen.append(request)
            return builtin.run(request, tools)

    with MemoryRoot.open(tmp_path / "root", workers=Capturing()) as root:
        for i, fact in enumerate(FACTS):
            root.hot.add("memory", fact, ("critical", "normal", "low")[i % 3])
        with contextlib.suppress(MaintenanceRejected):  # nothing to merge: it declines
            for i in range(20):
                root.hot.add("user", f"User detail {i:02d}: " + "prefers short answers, " * 12)
        root.long_term.remember("The kiwi orchard is watered at dawn")
        root.long_term.recall("kiwi orchard")
    kinds = {r.kind for r in seen}
    assert {"archive", "compact", "write", "recall"} <= kinds
    for request in seen:
        assert worker_kind(request.persona) == request.kind
        read = worker_data(request.kind, request.prompt)
        if request.kind in ("compact", "archive"):
            read.pop("budgetBytes")
            expected = {k: v for k, v in request.data.items() if k != "budgetBytes"}
        else:
            expected = dict(request.data)
        assert read == expected, request.kind
