"""Capacity maintenance stories: the reference's worked examples, each refusal path, the
built-in workers and the journal. Properties live in property_tests/test_maintenance_*.py."""

from __future__ import annotations

import functools
import json
import threading
from typing import Any

import attrs
import pytest

from mnemon_sm import (
    CapacityExceeded,
    Config,
    CorruptStore,
    InvalidInput,
    MaintenanceRejected,
    MemoryRoot,
    ReadOnly,
    RevisionConflict,
    StorageError,
    ToolRefused,
    WorkerFailed,
)
from mnemon_sm.adapters.workers.builtin import BuiltinWorkers
from mnemon_sm.engine.spec import load_flow
from mnemon_sm.flows.hot import journal as journal_module
from mnemon_sm.flows.hot.journal import JOURNAL_PATH, Journal
from mnemon_sm.flows.hot.maintenance import ARCHIVE_GRANTS, MaintenanceFlow
from mnemon_sm.flows.hot.packing import budget, pack
from mnemon_sm.flows.long_term.catalog import CATALOG_PATH
from mnemon_sm.ports import Ports
from mnemon_sm.ports.workers import ToolBox, WorkerRequest
from mnemon_sm.testing.longterm import ScriptedWorkers
from mnemon_sm.testing.maintenance import (
    archive_script,
    held_run_data,
    insight_contents,
    seed,
    world,
)
from mnemon_sm.testing.memory import memory_ports
from mnemon_sm.testing.wrap import FailingFiles
from tests._flow_probe import calls_by_state, flow_probe, port_gaps

CONFIG = Config(durability="off")


def open_root(workers: Any = None, config: Config = CONFIG) -> tuple[MemoryRoot, Ports]:
    ports, _ = memory_ports()
    if workers is not None:
        ports = attrs.evolve(ports, workers=workers)
    return MemoryRoot.open("/unused", config, ports=ports), ports


def reopen(ports: Ports, config: Config = CONFIG) -> MemoryRoot:
    return MemoryRoot.open("/unused", config, ports=ports)


def memory_facts(n: int, size: int = 200) -> list[tuple[Any, str, str]]:
    """``n`` distinct MEMORY.md entries of about ``size`` bytes, importance cycling."""
    levels = ("critical", "normal", "low")
    return [
        (
            "memory",
            (f"Fact {i:03d} about the build: " + "detail " * (size // 7)).strip(),
            levels[i % 3],
        )
        for i in range(n)
    ]


# -- the reference's worked examples ---------------------------------------------------------


def test_packing_example_keeps_critical_and_low_in_original_order() -> None:
    items = [
        ("normal candidate that cannot join the critical one", "normal"),
        ("critical rule", "critical"),
        ("low detail", "low"),
    ]
    assert len(items[0][0].encode()) == 50
    assert pack(items, 28) == (1, 2)  # 13 + 4 + 10 = 27 <= 28; the normal one would be 67


def test_budgets_of_the_reference() -> None:
    assert budget(4096, 0) == 2859
    assert budget(10240, 17) == 7143  # "New durable fact." is 17 bytes
    assert budget(4096, 5000) == 0


def test_memory_budget_handed_to_the_archiver_is_7143_for_a_17_byte_add() -> None:
    seen: list[WorkerRequest] = []

    def archiver(request: WorkerRequest, tools: ToolBox) -> object:
        seen.append(request)
        return archive_script("default")(request, tools)

    root, ports = open_root(ScriptedWorkers({"archive": archiver}))
    root.long_term.create_space("Project", "Project facts", active=True)
    seed(ports, memory_facts(49))
    root = reopen(ports)
    assert root.hot.snapshot().usage["memory"][0] > 10240 - 21
    receipt = root.hot.add("memory", "New durable fact.")
    assert seen[0].data["budgetBytes"] == 7143
    assert receipt.added == "New durable fact."
    assert receipt.maintenance is not None
    assert receipt.usage.used <= 7143 + 4 + 17


# -- the capacity example and the paths that do not run maintenance --------------------------


def test_replace_overflow_fails_without_running_a_worker() -> None:
    workers = ScriptedWorkers({})
    root, ports = open_root(workers)
    seed(ports, [("user", "x" * 4000, "normal")])
    root = reopen(ports)
    with pytest.raises(CapacityExceeded):
        root.hot.replace("user", "xxx", "y" * 4100)
    assert workers.requests == []


def test_no_maintenance_flag_reports_the_overflow() -> None:
    workers = ScriptedWorkers({})
    root, ports = open_root(workers)
    seed(ports, [("user", "x" * 4090, "normal")])
    root = reopen(ports)
    before = world(ports)
    with pytest.raises(CapacityExceeded) as caught:
        root.hot.add("user", "超出", maintenance=False)
    assert (caught.value.used, caught.value.projected) == (4090, 4100)
    assert workers.requests == [] and world(ports) == before


def _overflow_of(root: MemoryRoot, target: str, content: str) -> CapacityExceeded:
    """The CapacityExceeded the hot-memory flow gives an add of ``content`` now."""
    with pytest.raises(CapacityExceeded) as caught:
        root.hot.preview("add", target, content=content)
    return caught.value


def test_a_read_only_root_never_runs_maintenance_even_when_asked() -> None:
    """The spec's guard: an overflowed event on a read-only root is reported unchanged. (A
    public add there is refused as ReadOnly before any overflow; the guard holds anyway.)"""
    workers = ScriptedWorkers({})
    _, ports = open_root(workers)
    seed(ports, [("user", "x" * 4090, "normal")])
    overflow = _overflow_of(reopen(ports), "user", "超出")
    read_only = reopen(ports, Config(durability="off", write_enabled=False))
    before = world(ports)
    flow = read_only._maintenance
    request = {"target": "user", "content": "超出", "importance": None}
    with pytest.raises(CapacityExceeded) as caught:
        flow.perform("overflowed", request=request, overflow=overflow, maintenance=True)
    assert caught.value is overflow
    assert workers.requests == [] and world(ports) == before and flow.state == "idle"
    with pytest.raises(ReadOnly):
        read_only.hot.add("user", "超出")


def test_an_overflow_of_another_target_is_refused_by_the_validator() -> None:
    workers = ScriptedWorkers({})
    root, ports = open_root(workers)
    seed(ports, [("user", "x" * 4090, "normal")])
    root = reopen(ports)
    overflow = _overflow_of(root, "user", "超出")
    request = {"target": "memory", "content": "超出", "importance": None}
    with pytest.raises(InvalidInput, match="does not belong"):
        root._maintenance.perform(
            "overflowed", request=request, overflow=overflow, maintenance=True
        )
    assert workers.requests == [] and root._maintenance.state == "idle"


@pytest.mark.parametrize(
    "error",
    [RuntimeError("model unavailable"), KeyboardInterrupt()],
    ids=lambda e: type(e).__name__,
)
@pytest.mark.parametrize(
    "state", ["snapshotting", "delegating", "validating", "archiving", "committing"]
)
def test_nothing_of_an_interrupted_run_reaches_the_next_one(
    state: str, error: BaseException, monkeypatch: pytest.MonkeyPatch
) -> None:
    """INV-MNT-9: a step does its work (its outcome event, carrying the evolved run, is
    queued), then an exception escapes it. Afterwards the root holds no run and no tool box,
    and the next run works from its own snapshot and its own add alone."""
    [action] = load_flow("hot_memory_maintenance").spec.state_defs[state]["enter"]
    original = getattr(MaintenanceFlow, action)
    fired: list[str] = []

    @functools.wraps(original)  # the engine passes what the original's signature asks for
    def then_raise(self: MaintenanceFlow, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        if not fired:
            fired.append(state)
            raise error

    monkeypatch.setattr(MaintenanceFlow, action, then_raise)  # machines built from now on
    seen: list[WorkerRequest] = []

    def archiver(request: WorkerRequest, tools: ToolBox) -> object:
        seen.append(request)
        return archive_script("default")(request, tools)

    root, ports = open_root(ScriptedWorkers({"archive": archiver}))
    root.long_term.create_space("Project", "Project facts", active=True)  # id "default"
    seed(ports, memory_facts(49))
    root = reopen(ports)
    with pytest.raises(type(error)) as caught:
        root.hot.add("memory", "First new fact " * 10)
    assert caught.value is error and fired == [state]
    assert root._maintenance.state == "idle"
    assert held_run_data(root) == []

    facts = [*memory_facts(49)[1:], ("memory", "A fact about deploys " + "z" * 180, "normal")]
    seed(ports, facts)  # another snapshot than the interrupted run's
    receipt = root.hot.add("memory", "Second new fact " * 10)
    assert seen[-1].data["snapshot"] == [
        {"index": i, "content": c, "importance": imp} for i, (_, c, imp) in enumerate(facts, 1)
    ]
    assert seen[-1].data["pending"]["content"] == "Second new fact " * 9 + "Second new fact"
    assert receipt.added == "Second new fact " * 9 + "Second new fact"
    assert receipt.maintenance is not None and receipt.maintenance.source_entries == len(facts)
    assert receipt.maintenance.memory_body_ids == ("default",)
    contents = insight_contents(ports)["default"]
    assert len(contents) == len(set(contents))
    assert held_run_data(root) == []


@pytest.mark.parametrize(
    ("entries", "content", "why"),
    [
        ([], "y" * 4097, "no committed entries"),
        ([("memory", "a fact", "normal")], "z" * 8000, None),
        ([("user", "a preference", "normal")], "z" * 4097, "the entry alone exceeds it"),
    ],
)
def test_an_add_maintenance_cannot_help_fails_without_a_worker(
    entries: list[Any], content: str, why: str | None
) -> None:
    workers = ScriptedWorkers({})
    root, ports = open_root(workers, Config(durability="off", memory_limit=4096))
    seed(ports, entries)
    root = reopen(ports, Config(durability="off", memory_limit=4096))
    target = "user" if not entries else entries[0][0]
    before = world(ports)
    with pytest.raises(CapacityExceeded) as caught:
        root.hot.add(target, content)
    assert "Maintenance cannot help" in caught.value.message
    if why:
        assert why in caught.value.message
    assert workers.requests == [] and world(ports) == before


def test_a_non_capacity_rejection_is_reported_as_is() -> None:
    workers = ScriptedWorkers({})
    root, ports = open_root(workers)
    seed(ports, [("user", "x" * 4090, "normal")])
    root = reopen(ports)
    with pytest.raises(InvalidInput):
        root.hot.add("nobody", "text")
    with pytest.raises(InvalidInput, match="§"):
        root.hot.add("user", "a § b")
    assert workers.requests == []


# -- USER.md compaction ----------------------------------------------------------------------


def test_user_compactor_has_no_tools_and_sees_the_pending_add_apart() -> None:
    seen: list[WorkerRequest] = []
    refused: list[str] = []

    def compactor(request: WorkerRequest, tools: ToolBox) -> object:
        seen.append(request)
        for tool in ("mnemon_remember", "mnemon_memory_bodies", "mnemon_recall"):
            try:
                tools.call(tool, {"content": "leak"})
            except Exception as exc:  # the tool box refuses every call
                refused.append(type(exc).__name__)
        return {"summary": "", "action": "compacted", "compactedEntries": []}

    root, ports = open_root(ScriptedWorkers({"compact": compactor}))
    seed(
        ports,
        [
            ("user", "User prefers concise Chinese release notes.", "critical"),
            ("user", "User wants blockers listed first in release notes." + " x" * 1800, "normal"),
        ],
    )
    root = reopen(ports)
    before = world(ports)
    with pytest.raises(WorkerFailed) as caught:
        root.hot.add("user", "User likes " + "tea " * 300)
    assert "not granted" in caught.value.message
    assert refused == ["ToolRefused"] * 3
    assert world(ports) == before  # nothing written, long-term untouched
    request = seen[0]
    assert request.kind == "compact" and request.tools == ()
    assert request.prompt.startswith("Run local USER.md compaction now.\n\n")
    assert "Pending add (uncommitted; do not include it in the compaction" in request.prompt
    assert "    [importance=normal] User likes tea" in request.prompt
    assert (
        "Committed USER.md snapshot (read-only run data, untrusted; numbering is one-based):\n"
        '<runtime-memory-snapshot target="user">\n'
        "1. [importance=critical] User prefers concise Chinese release notes.\n§\n"
        "2. [importance=normal] User wants blockers listed first in release notes. x x"
    ) in request.prompt
    assert "T" not in request.prompt.split("<runtime-memory-snapshot")[1].split("2026")[0]
    assert "2026" not in request.prompt and "runtime/" not in request.prompt


def test_builtin_compactor_merges_folded_duplicates_and_contained_entries() -> None:
    root, ports = open_root()
    dark = ("User prefers dark mode " + "in every editor and terminal " * 25).strip()
    seed(
        ports,
        [
            ("user", dark.replace(" ", "   "), "low"),  # equal after whitespace folding
            ("memory", "A project fact", "normal"),
            ("user", dark.upper(), "critical"),  # equal after case folding
            ("user", dark + " and IDE", "normal"),  # contains the others
            ("user", "User works in UTC", "normal"),
        ],
    )
    root = reopen(ports)
    pending = ("User drinks tea " * 122).strip()
    receipt = root.hot.add("user", pending)
    assert receipt.maintenance is not None
    assert receipt.maintenance.kind == "local-compaction"
    assert receipt.maintenance.memory_body_ids == ()
    assert (receipt.maintenance.source_entries, receipt.maintenance.kept_entries) == (4, 2)
    user = root.hot.snapshot().of("user")
    assert [(e.content, e.importance) for e in user] == [
        (dark + " and IDE", "critical"),  # the longest text, the highest importance
        ("User works in UTC", "normal"),
        (pending, "normal"),
    ]
    # The compacted entries take the first user entry's place; the memory entry stays.
    assert [e.target for e in root.hot.snapshot().entries] == ["user", "user", "memory", "user"]
    assert insight_contents(ports) == {}  # the profile never reached long-term memory


def test_builtin_compactor_declines_when_merging_cannot_fit() -> None:
    root, ports = open_root()
    seed(ports, [("user", f"Distinct preference {i} " + "p" * 300, "normal") for i in range(12)])
    root = reopen(ports)
    before = world(ports)
    with pytest.raises(MaintenanceRejected) as caught:
        root.hot.add("user", "One more preference " * 20)
    assert caught.value.rule == "declined"
    assert "budget" in caught.value.message
    assert world(ports) == before


def merge_everything(request: WorkerRequest) -> dict[str, Any]:
    """A valid compaction: every snapshot entry merged into one critical entry."""
    n = len(request.data["snapshot"])
    entry = {"content": "Merged", "importance": "critical", "sourceIndexes": list(range(1, n + 1))}
    return {"summary": "merged", "action": "compacted", "compactedEntries": [entry]}


def test_user_compaction_conflict_keeps_the_other_writers_entry() -> None:
    ports_box: list[Ports] = []

    def compactor(request: WorkerRequest, tools: ToolBox) -> object:
        other = reopen(ports_box[0])  # another process commits while the worker runs
        other.hot.add("user", "Written meanwhile", maintenance=False)
        return merge_everything(request)

    root, ports = open_root(ScriptedWorkers({"compact": compactor}))
    ports_box.append(ports)
    seed(ports, [("user", f"Pref {i} " + "q" * 900, "normal") for i in range(4)])
    root = reopen(ports)
    with pytest.raises(RevisionConflict) as caught:
        root.hot.add("user", "New preference " * 40)
    assert caught.value.expected != caught.value.actual
    contents = [e.content for e in root.hot.snapshot().of("user")]
    assert contents[-1] == "Written meanwhile" and len(contents) == 5


def test_another_thread_commits_while_the_worker_runs_and_the_compaction_is_refused() -> None:
    """The root's mutex is not held while a worker runs: another thread's add proceeds (and
    the stale compaction then fails its revision check)."""
    roots: list[MemoryRoot] = []
    finished: list[bool] = []
    blocked: list[bool] = []  # asserted after the flow returns, never inside the worker

    def compactor(request: WorkerRequest, tools: ToolBox) -> object:
        other = threading.Thread(
            target=lambda: finished.append(
                roots[0].hot.add("user", "From another thread", maintenance=False).success
            )
        )
        other.start()
        other.join(timeout=10)
        blocked.append(other.is_alive())
        return merge_everything(request)

    root, ports = open_root(ScriptedWorkers({"compact": compactor}))
    seed(ports, [("user", f"Pref {i} " + "q" * 900, "normal") for i in range(4)])
    roots.append(root := reopen(ports))
    with pytest.raises(RevisionConflict):
        root.hot.add("user", "New preference " * 40)
    assert blocked == [False], "the other thread was blocked by the running worker"
    assert finished == [True]
    assert root.hot.snapshot().of("user")[-1].content == "From another thread"


# -- MEMORY.md archive-then-compact ----------------------------------------------------------


def test_builtin_archive_of_a_full_memory_md_lands_the_add_and_every_entry_is_recallable() -> None:
    root, ports = open_root()
    facts = memory_facts(49)
    seed(ports, facts)
    root = reopen(ports)
    receipt = root.hot.add("memory", "New durable fact: deploys need two approvals.")
    block = receipt.maintenance
    assert block is not None and block.kind == "long-term-archive"
    assert block.memory_body_ids == ("default",)
    assert block.source_entries == 49
    assert root.long_term.spaces()[0].name == "Working memory archive"
    kept = root.hot.snapshot().of("memory")
    assert kept[-1].content == "New durable fact: deploys need two approvals."
    assert all(e.importance != "low" for e in kept)
    assert root.hot.snapshot().usage["memory"][0] <= budget(10240, 45) + 4 + 45
    for _, content, _ in facts:  # through the recall worker, as an agent would
        found = root.long_term.recall(content, mode="basic").results
        assert [item["content"] for item in found] == [content]
    assert sorted(insight_contents(ports)["default"]) == sorted(c for _, c, _ in facts)
    assert ports.files.read(JOURNAL_PATH) is not None
    assert Journal(ports.files, ports.locks, 1000).read() == []  # settled after the commit


@pytest.mark.parametrize(
    ("claimed_id", "claimed_space"),
    [
        ("11111111-2222-3333-4444-555555555555", "default"),  # no such insight
        ("pending-99", "default"),  # no remember of this run returned it
        ("11111111-2222-3333-4444-555555555555", "nowhere"),  # no such space
    ],
)
def test_archive_to_an_unknown_insight_is_refused_before_any_write(
    claimed_id: str, claimed_space: str
) -> None:
    def archiver(request: WorkerRequest, tools: ToolBox) -> object:
        entries = request.data["snapshot"]
        archived = [{"sourceIndex": 1, "memoryBodyId": claimed_space, "id": claimed_id}]
        for e in entries[1:]:
            receipt = tools.call(
                "mnemon_remember", {"content": e["content"], "memoryBodyId": "default"}
            )
            archived.append(
                {"sourceIndex": e["index"], "memoryBodyId": "default", "id": receipt["id"]}
            )
        return {
            "summary": "archived",
            "action": "archived",
            "memoryBodyIds": [],
            "archived": archived,
            "compactedEntries": [],
        }

    root, ports = open_root(ScriptedWorkers({"archive": archiver}))
    root.long_term.create_space("Build", "Build facts", active=True)
    seed(ports, memory_facts(49))
    root = reopen(ports)
    before = world(ports)
    with pytest.raises(MaintenanceRejected) as caught:
        root.hot.add("memory", "Another fact " * 10)
    assert caught.value.rule == "archive-unknown"
    assert world(ports) == before


def test_archive_may_point_at_an_insight_already_stored() -> None:
    root, ports = open_root()
    root.long_term.create_space("Build", "Project facts about the build", active=True)
    facts = memory_facts(49)
    root.long_term.service.remember(facts[0][1], space_id="default")
    seed(ports, facts)
    root = reopen(ports)
    receipt = root.hot.add("memory", "Another durable fact " * 5)
    assert receipt.maintenance is not None
    assert sorted(insight_contents(ports)["default"]) == sorted(c for _, c, _ in facts)


def test_a_worker_that_calls_a_tool_outside_its_grants_writes_nothing() -> None:
    seen: list[tuple[str, ...]] = []

    def archiver(request: WorkerRequest, tools: ToolBox) -> object:
        seen.append(request.tools)
        tools.call("mnemon_remember", {"content": "x", "memoryBodyId": "default"})
        with pytest.raises(ToolRefused):  # swallowed by the worker, remembered by the box
            tools.call("mnemon_forget", {"id": "x", "memoryBodyId": "default"})
        return {}

    root, ports = open_root(ScriptedWorkers({"archive": archiver}))
    root.long_term.create_space("Build", "Build facts", active=True)
    seed(ports, memory_facts(49))
    root = reopen(ports)
    before = world(ports)
    with pytest.raises(WorkerFailed, match="not granted: mnemon_forget"):
        root.hot.add("memory", "Another fact " * 10)
    assert seen == [ARCHIVE_GRANTS]
    assert world(ports) == before


def test_archive_conflict_journals_writes_and_the_retry_reuses_them() -> None:
    ports_box: list[Ports] = []
    rounds: list[int] = []

    def during() -> None:
        if not rounds:
            reopen(ports_box[0]).hot.add("user", "Written meanwhile", maintenance=False)
        rounds.append(1)

    workers = ScriptedWorkers({"archive": archive_script("default", during=during)})
    root, ports = open_root(workers)
    ports_box.append(ports)
    root.long_term.create_space("Build", "Build facts", active=True)
    facts = memory_facts(49)
    seed(ports, facts)
    root = reopen(ports)
    with pytest.raises(RevisionConflict):
        root.hot.add("memory", "Another fact " * 10)
    journal = Journal(ports.files, ports.locks, 1000)
    assert len(journal.read()) == 49  # the writes made before the conflict
    assert len(insight_contents(ports)["default"]) == 49
    assert [e.content for e in root.hot.snapshot().of("memory")] == [c for _, c, _ in facts]

    log_before = len([c for c in ports.long_term.log.calls if c.name == "long_term.remember"])
    receipt = root.hot.add("memory", "Another fact " * 10)
    assert receipt.maintenance is not None
    remembers = [c for c in ports.long_term.log.calls if c.name == "long_term.remember"]
    assert len(remembers) == log_before  # every insight was reused from the journal
    assert sorted(insight_contents(ports)["default"]) == sorted(c for _, c, _ in facts)
    assert journal.read() == []


def test_a_corrupt_journal_fails_the_archive_and_changes_no_hot_memory() -> None:
    root, ports = open_root()
    seed(ports, memory_facts(49))
    ports.files.put(JOURNAL_PATH, b"{not json")  # type: ignore[attr-defined]
    root = reopen(ports)  # opening still works
    hot_before = {k: v for k, v in world(ports)[0].items() if k.startswith("runtime/")}
    with pytest.raises(CorruptStore, match=r"maintenance-journal\.json"):
        root.hot.add("memory", "Another fact " * 10)
    assert {k: v for k, v in world(ports)[0].items() if k.startswith("runtime/")} == hot_before


# -- port calls per state --------------------------------------------------------------------

FLOW = "hot_memory_maintenance"


def leave_journal_debris(ports: Ports) -> str:
    """What a crashed journal writer leaves (a temporary file, returned) and a journal of 3
    records, one past the limit :func:`reopen_pruning` sets: opening removes the one and
    prunes the other."""
    stale = "state/.maintenance-journal.json.1.2.ab.tmp"
    ports.files.put(stale, b"left by a crashed writer")  # type: ignore[attr-defined]
    writes = [
        {"contentSha256": f"{i:064x}", "memoryBodyId": "gone", "id": f"ins-{i}"}
        | {"runId": "mnt-1-abc", "at": "2026-12-01T10:00:00.000Z"}
        for i in range(3)
    ]
    doc = json.dumps({"version": 1, "writes": writes}).encode() + b"\n"
    ports.files.put(JOURNAL_PATH, doc)  # type: ignore[attr-defined]
    return stale


def reopen_pruning(ports: Ports, monkeypatch: pytest.MonkeyPatch) -> MemoryRoot:
    """:func:`reopen` with the journal's record limit lowered to 2 while the root opens."""
    with monkeypatch.context() as patch:
        patch.setattr(journal_module, "MAX_RECORDS", 2)
        return reopen(ports)


def probing_archiver(request: WorkerRequest, tools: ToolBox) -> object:
    """An archiver that uses every tool it is granted: it lists the spaces (registering a store
    found on disk), recalls the insight already holding the first entry and maps that entry
    to it, and remembers every other entry in the space "Archive", which it creates unless it
    is listed; the hot target is emptied."""
    entries = request.data["snapshot"]
    listed = tools.call("mnemon_memory_bodies", {})
    query = {"query": entries[0]["content"], "mode": "basic", "memoryBodyIds": ["default"]}
    stored = tools.call("mnemon_recall", query)["results"][0]
    space = next((s["id"] for s in listed if s["name"] == "Archive"), None)
    if space is None:
        create = {"name": "Archive", "description": "Archived working memory", "active": True}
        space = tools.call("mnemon_memory_body_create", create)["memoryBodyId"]
    archived = [{"sourceIndex": 1, "memoryBodyId": "default", "id": stored["id"]}]
    for e in entries[1:]:
        receipt = tools.call("mnemon_remember", {"content": e["content"], "memoryBodyId": space})
        archived.append({"sourceIndex": e["index"], "memoryBodyId": space, "id": receipt["id"]})
    return {
        "summary": "archived",
        "action": "archived",
        "memoryBodyIds": ["default", space],
        "archived": archived,
        "compactedEntries": [],
    }


def test_port_calls_in_each_state_are_the_ones_the_spec_declares(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Observed calls per state equal the declared ones, rest states included: none
    undeclared, none unused. Opening recovers the journal (a stale temporary file, a record
    past the limit); an archiver's tool calls are made while delegating (its listing registers
    a store found on disk: catalog writes; its writes are only staged); archiving confirms an
    insight already stored, creates a space, remembers and journals; committing settles the
    journal (the compaction itself is the hot-memory flow's ``compact`` event: its calls are
    that flow's). A disk failing each of the three atomic replacements (the catalog's while
    delegating, the journal's while archiving and while committing) removes its temporary
    file in that state. A compaction the worker declines and an opted-out overflow call
    nothing."""
    inner, log = memory_ports()
    files = FailingFiles(inner.files)
    workers = ScriptedWorkers({"archive": probing_archiver, "compact": BuiltinWorkers().run}, log)
    ports = attrs.evolve(inner, files=files, workers=workers)
    root = MemoryRoot.open("/unused", CONFIG, ports=ports)
    root.long_term.create_space("Build", "Build facts", active=True)
    facts = [*memory_facts(49), *[("user", f"Pref {i} " + "q" * 900, "normal") for i in range(4)]]
    root.long_term.service.remember(facts[0][1], space_id="default")
    seed(inner, facts)
    leave_journal_debris(inner)
    inner.long_term.create_space("found")  # type: ignore[union-attr]
    flows: list[MaintenanceFlow] = []
    log.probe = flow_probe(lambda: flows)
    log.clear()
    root = reopen_pruning(ports, monkeypatch)
    flows.append(root._maintenance)
    add = functools.partial(root.hot.add, "memory", "New durable fact: " + "n" * 200)
    files.fail("rename", lambda target: target == CATALOG_PATH)  # registering a found store
    with pytest.raises(WorkerFailed):
        add()
    files.fail("rename", lambda target: target == JOURNAL_PATH)  # journaling the archive's writes
    with pytest.raises(StorageError):
        add()
    # dropping the journal records of an archive that committed: harmless
    files.fail("rename", lambda target: target == JOURNAL_PATH and flows[0].state == "committing")
    assert add().maintenance is not None  # archives everything
    files.heal()
    seed(inner, facts)  # full again: this archive reuses the insights the journal still holds
    before = len(log.calls)
    assert add().maintenance is not None
    assert "long_term.remember" not in {c.name for c in log.calls[before:]}
    assert insight_contents(ports)["default"] == [facts[0][1]]  # confirmed, not written again
    with pytest.raises(MaintenanceRejected):  # nothing to merge: the compactor declines
        root.hot.add("user", "New preference " * 40)
    with pytest.raises(CapacityExceeded):
        root.hot.add("user", "New preference " * 40, maintenance=False)
    observed = calls_by_state(log.calls)
    gaps = port_gaps(observed, [FLOW])
    assert gaps == {}, f"(undeclared, unused) per state: {gaps}"
    assert {"long_term.remember", "long_term.create_space"} <= observed[(FLOW, "archiving")]
    assert "long_term.remember" not in observed[(FLOW, "delegating")]  # writes are only staged
    # the history, appended by the hot-memory flow's compaction commit under the same lock
    assert "files.append" in observed[("hot_memory_mutation", "committed")]


def test_opening_recovers_the_journal_and_declares_its_port_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Journal recovery is the maintenance spec's opening state: a stale temporary file is
    removed and old records are pruned under the journal lock, with exactly the calls
    ``opening`` declares; a read-only root opens without touching the journal."""
    ports, log = memory_ports()
    root = MemoryRoot.open("/unused", CONFIG, ports=ports)
    stale = leave_journal_debris(ports)
    log.probe = flow_probe(lambda: [])
    log.clear()
    MemoryRoot.open("/unused", Config(write_enabled=False), ports=ports)
    assert (FLOW, "opening") not in calls_by_state(log.calls)  # read-only: nothing at all
    root = reopen_pruning(ports, monkeypatch)
    assert root._maintenance.state == "idle"
    assert stale not in ports.files.files  # type: ignore[attr-defined]
    assert len(Journal(ports.files, ports.locks, 1000).read()) == 2
    observed = calls_by_state(log.calls)
    calls = observed[(FLOW, "opening")]
    assert {"files.list", "locks.acquire", "files.remove", "locks.release"} <= calls
    gap = port_gaps(observed, [FLOW]).get(f"{FLOW}.opening")
    assert gap is None, f"opening (undeclared, unused): {gap}"
