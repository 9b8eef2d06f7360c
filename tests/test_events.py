"""Observability: the root's event hub, its log records and the async facade's tools.

The rules come from :mod:`mnemon_sm.observe`: every mutation, worker run, maintenance round
and review is reported once, after it settled, as an event with a content-free summary (logged
under ``mnemon_sm.<area>``, INFO or WARNING) and handed to the hooks; a hook that raises is
logged and the next one still runs; a hook may not call the root back (``Busy``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from typing import Any

import attrs
import pytest

from mnemon_sm import (
    AsyncMemoryRoot,
    Busy,
    Config,
    InvalidInput,
    MemoryEvent,
    MemoryRoot,
    NoMatch,
    WorkerFailed,
    WorkerTimeout,
)
from mnemon_sm.observe import EVENT_KINDS, summary
from mnemon_sm.ports import Ports
from mnemon_sm.ports.workers import ToolBox, WorkerRequest
from mnemon_sm.testing.longterm import ScriptedWorkers
from mnemon_sm.testing.maintenance import seed
from mnemon_sm.testing.memory import memory_ports

CONFIG = Config(durability="off")
SECRET = "the user's private fact zebra-quartz"
IDLE_MS = 30_000


def open_root(workers: Any = None, config: Config = CONFIG) -> tuple[MemoryRoot, Ports]:
    ports, _ = memory_ports()
    if workers is not None:
        ports = attrs.evolve(ports, workers=workers)
    return MemoryRoot.open("/r", config, ports=ports), ports


def recorder(root: MemoryRoot, kinds: Any = None) -> list[MemoryEvent]:
    seen: list[MemoryEvent] = []
    root.events.subscribe(seen.append, kinds)
    return seen


def memory_facts(n: int) -> list[tuple[Any, str, str]]:
    levels = ("critical", "normal", "low")
    return [
        ("memory", f"Fact {i:03d} about the build: " + "detail " * 28, levels[i % 3])
        for i in range(n)
    ]


def eligible_turn(lc: Any) -> None:
    """One turn whose activity arms the idle review (the lifecycle's scoring rules)."""
    message = {
        "id": "m1",
        "role": "user",
        "content": [{"type": "text", "text": "Remember that CI runs on Fridays. " * 6}],
        "source": {"kind": "user"},
    }
    lc.pre_step(1, 1, [message])
    calls = [{"type": "tool/call", "name": n, "turn": 1} for n in "abcd"]
    lc.turn_stopping(1, [*calls, *[{"type": "tool/result", "turn": 1}] * 5])
    lc.turn_ended(1)


def test_a_hot_add_is_one_event_with_its_receipt_and_no_content_in_the_summary() -> None:
    root, _ = open_root()
    seen = recorder(root)
    receipt = root.hot.add("user", SECRET)
    assert [e.kind for e in seen] == ["hot.add"]
    event = seen[0]
    assert event.ok and event.result is receipt
    assert event.data["target"] == "user" and event.data["entryCount"] == 1
    assert event.data["usage"] == {"used": receipt.usage.used, "limit": 4096}
    assert "zebra" not in json.dumps(event.to_json())
    assert event.to_json()["kind"] == "hot.add" and isinstance(event.to_json()["atMs"], int)


def test_a_refused_change_is_a_failure_event_naming_the_error_type() -> None:
    root, _ = open_root()
    seen = recorder(root)
    with pytest.raises(NoMatch):
        root.hot.replace("user", "nothing like this", "x")
    assert [(e.kind, e.ok) for e in seen] == [("hot.replace", False)]
    assert seen[0].data["error"]["type"] == "NoMatch" and seen[0].result is None


def test_events_are_logged_under_the_package_logger_without_content(
    caplog: pytest.LogCaptureFixture,
) -> None:
    root, _ = open_root()
    with caplog.at_level(logging.INFO, logger="mnemon_sm"):
        root.hot.add("memory", SECRET)
        with pytest.raises(NoMatch):
            root.hot.remove("memory", "absent text")
    records = [r for r in caplog.records if r.name.startswith("mnemon_sm")]
    assert [(r.name, r.levelno) for r in records] == [
        ("mnemon_sm.hot", logging.INFO),
        ("mnemon_sm.hot", logging.WARNING),
    ]
    assert records[0].mnemon_event["kind"] == "hot.add"  # type: ignore[attr-defined]
    assert records[1].mnemon_event["data"]["error"]["type"] == "NoMatch"  # type: ignore[attr-defined]
    assert not any("zebra" in r.getMessage() for r in records)


def test_worker_runs_are_reported_with_their_outcome() -> None:
    def write(request: WorkerRequest, tools: ToolBox) -> object:
        raise RuntimeError("model exploded")

    def recall(request: WorkerRequest, tools: ToolBox) -> object:
        return {"results": "not a list"}

    root, _ = open_root(ScriptedWorkers({"write": write, "recall": recall}))
    seen = recorder(root, "worker")
    with pytest.raises(WorkerFailed):
        root.long_term.remember("a fact")
    with pytest.raises(WorkerFailed):
        root.long_term.recall("a fact")
    outcomes = [(e.kind, e.data["workerKind"], e.data.get("outcome")) for e in seen]
    assert outcomes == [
        ("worker.started", "write", None),
        ("worker.finished", "write", "failed"),
        ("worker.started", "recall", None),
        ("worker.finished", "recall", "invalid"),
    ]
    assert [e.ok for e in seen] == [True, False, True, False]
    assert seen[1].data["error"]["type"] == "WorkerFailed"
    assert all(isinstance(e.data.get("durationMs", 0), int) for e in seen)


def test_a_timed_out_worker_is_reported_as_timeout() -> None:
    ports, _ = memory_ports()

    class Hanging:
        def run(self, request: WorkerRequest, tools: ToolBox) -> object:
            tools.cancellation.wait(5)
            return {}

    ports = attrs.evolve(ports, workers=Hanging())
    ports.clock.expire_waits = True  # type: ignore[attr-defined]
    root = MemoryRoot.open("/r", Config(durability="off", worker_timeout_ms=100), ports=ports)
    seen = recorder(root, "worker.finished")
    with pytest.raises(WorkerTimeout):
        root.long_term.remember("a fact")
    assert [(e.data["outcome"], e.ok) for e in seen] == [("timeout", False)]


def test_a_successful_remember_reports_the_worker_and_the_write() -> None:
    root, _ = open_root()
    seen = recorder(root)
    receipt = root.long_term.remember(SECRET)
    kinds = [e.kind for e in seen]
    assert kinds == ["worker.started", "worker.finished", "long_term.remember"]
    assert seen[1].data["outcome"] == "ok" and seen[2].result is receipt
    assert "zebra" not in json.dumps([e.to_json() for e in seen])


def test_a_memory_overflow_reports_the_maintenance_round() -> None:
    root, ports = open_root()
    seed(ports, memory_facts(49))
    root = MemoryRoot.open("/r", CONFIG, ports=ports)
    seen = recorder(root, ("maintenance", "hot"))
    receipt = root.hot.add("memory", "New durable fact: deploys need two approvals.")
    assert [e.kind for e in seen] == ["maintenance.finished", "hot.add"]
    block = receipt.maintenance
    assert block is not None and seen[0].result is block
    assert seen[0].data["maintenanceKind"] == block.kind == "long-term-archive"
    assert seen[0].data["sourceEntries"] == 49 and seen[0].data["target"] == "memory"


def test_a_refused_maintenance_round_is_reported_and_hot_memory_unchanged() -> None:
    def archive(request: WorkerRequest, tools: ToolBox) -> object:
        return {"summary": "lost everything", "archived": [], "compacted": []}

    root, ports = open_root(ScriptedWorkers({"archive": archive}))
    seed(ports, memory_facts(49))
    root = MemoryRoot.open("/r", CONFIG, ports=ports)
    before = root.hot.snapshot()
    seen = recorder(root, "maintenance")
    with pytest.raises(WorkerFailed):
        root.hot.add("memory", "New durable fact: deploys need two approvals.")
    assert [(e.kind, e.ok) for e in seen] == [("maintenance.failed", False)]
    assert root.hot.snapshot() == before


def test_a_review_is_reported_when_it_starts_and_finishes() -> None:
    root, ports = open_root()
    seen = recorder(root, "review")
    lc = root.lifecycle("main")
    eligible_turn(lc)
    lc.tick(ports.clock.now_ms() + IDLE_MS)
    assert lc.join(10)
    assert [(e.kind, e.ok) for e in seen] == [("review.started", True), ("review.finished", True)]
    assert seen[0].data["agentId"] == "main" and seen[0].data["runId"] == seen[1].data["runId"]
    assert seen[1].data["action"] == lc.status()["lastReview"]["action"]


def test_a_raising_hook_is_logged_and_the_next_hook_and_the_operation_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    root, _ = open_root()
    seen: list[str] = []

    def bad(event: MemoryEvent) -> None:
        raise RuntimeError("host bug")

    root.events.subscribe(bad)
    root.events.subscribe(lambda e: seen.append(e.kind))
    with caplog.at_level(logging.ERROR, logger="mnemon_sm.events"):
        receipt = root.hot.add("user", "likes tea")
    assert receipt.success and seen == ["hot.add"]
    assert root.hot.snapshot().of("user")[0].content == "likes tea"
    errors = [r for r in caplog.records if r.name == "mnemon_sm.events"]
    assert len(errors) == 1 and errors[0].exc_info is not None


def test_a_base_exception_in_a_hook_propagates_after_the_change_is_durable() -> None:
    root, _ = open_root()

    def interrupt(event: MemoryEvent) -> None:
        raise KeyboardInterrupt

    stop = root.events.subscribe(interrupt)
    with pytest.raises(KeyboardInterrupt):
        root.hot.add("user", "likes tea")
    assert root.hot.snapshot().of("user")[0].content == "likes tea"
    stop()
    assert root.hot.add("user", "likes coffee").success  # the root is still usable


def test_a_hook_calling_the_root_back_gets_busy() -> None:
    root, _ = open_root()
    errors: list[BaseException] = []

    def reentrant(event: MemoryEvent) -> None:
        try:
            root.hot.add("memory", "from a hook")
        except Busy as exc:
            errors.append(exc)

    root.events.subscribe(reentrant, "hot.add")
    root.hot.add("user", "likes tea")
    assert len(errors) == 1 and "event hook" in str(errors[0])
    assert root.hot.snapshot().of("memory") == ()


def test_unsubscribe_and_kind_filters() -> None:
    root, _ = open_root()
    all_events = recorder(root)
    only_remove = recorder(root, ["hot.remove"])
    seen: list[str] = []
    stop = root.events.subscribe(lambda e: seen.append(e.kind), "hot")
    root.hot.add("user", "likes tea")
    stop()
    root.hot.remove("user", "likes tea")
    assert seen == ["hot.add"]
    assert [e.kind for e in only_remove] == ["hot.remove"]
    assert [e.kind for e in all_events] == ["hot.add", "hot.remove"]


@pytest.mark.parametrize("kinds", ["hotness", ["hot.add", "nope"], [3]])
def test_subscribing_to_an_unknown_kind_is_refused(kinds: Any) -> None:
    root, _ = open_root()
    with pytest.raises(InvalidInput):
        root.events.subscribe(lambda e: None, kinds)


def test_a_hook_must_be_callable() -> None:
    root, _ = open_root()
    with pytest.raises(InvalidInput):
        root.events.subscribe("print")  # type: ignore[arg-type]


def test_document_and_space_changes_are_reported() -> None:
    root, _ = open_root()
    seen = recorder(root, ("documents", "long_term"))
    doc = root.documents.create("Runbook", "Deploy with make release.")
    root.documents.update(doc.document.id, content="Deploy with make ship.")
    root.long_term.create_space("Ops", "Operations notes", active=True)
    space = root.long_term.create_space("Old", "Old notes")
    root.long_term.update_space(space.id, description="Older notes")
    root.long_term.delete_space(space.id)
    assert [e.kind for e in seen] == [
        "documents.create",
        "documents.update",
        "long_term.create_space",
        "long_term.create_space",
        "long_term.update_space",
        "long_term.delete_space",
    ]
    assert seen[0].data["action"] == "created" and seen[1].data["action"] == "updated"
    assert seen[0].data["document"]["id"] == doc.document.id
    assert seen[0].result is doc and "Deploy" not in json.dumps(seen[0].to_json())
    assert seen[3].data["id"] == space.id


def test_the_summary_keeps_identifiers_and_numbers_and_drops_text() -> None:
    data = {
        "id": "abc",
        "target": "user",
        "content": "secret",
        "title": "secret",
        "entryCount": 3,
        "ok": True,
        "nested": {"summary": "secret", "runId": "r1"},
        "memoryBodyIds": ["a", "b"],
        "items": ["secret"],
    }
    assert summary(data) == {
        "id": "abc",
        "target": "user",
        "entryCount": 3,
        "ok": True,
        "nested": {"runId": "r1"},
        "memoryBodyIds": ["a", "b"],
    }


def test_every_event_kind_is_named_in_the_module_documentation() -> None:
    import mnemon_sm.observe as observe

    doc = observe.__doc__ or ""
    missing = [k for k in EVENT_KINDS if k not in doc and "." + k.split(".", 1)[1] not in doc]
    assert missing == []


def test_the_async_facade_exposes_the_tools_and_the_events() -> None:
    async def main() -> tuple[dict[str, Any], list[str], Any, Any]:
        ports, _ = memory_ports()
        root = AsyncMemoryRoot(MemoryRoot.open("/r", CONFIG, ports=ports))
        seen: list[str] = []
        root.events.subscribe(lambda e: seen.append(e.kind))
        result = await root.tools.call(
            "mnemon_runtime_memory", {"action": "add", "target": "user", "content": "likes tea"}
        )
        definitions = root.tools.definitions(), root.sync.tools.definitions()
        await root.close()
        return result, seen, *definitions

    result, seen, ours, theirs = asyncio.run(main())
    assert result["success"] is True and seen == ["hot.add"]
    assert ours == theirs


def test_a_background_run_cancelled_by_the_host_is_reported_as_cancelled() -> None:
    started, finished = threading.Event(), threading.Event()

    def review(request: WorkerRequest, tools: ToolBox) -> object:
        started.set()
        tools.cancellation.wait(30)
        finished.set()
        return {"summary": "late", "action": "skipped", "documentIds": []}

    root, ports = open_root(ScriptedWorkers({"review": review}))
    seen = recorder(root, "worker")
    lc = root.lifecycle("main")
    eligible_turn(lc)
    lc.tick(ports.clock.now_ms() + IDLE_MS)
    assert started.wait(10)
    lc.dispose()
    assert finished.wait(10) and lc.join(10)
    assert [(e.kind, e.data.get("outcome")) for e in seen] == [
        ("worker.started", None),
        ("worker.finished", "cancelled"),
    ]
