"""Stories of the long-term flows on the recording fakes: every outcome edge, and the port
calls each state makes against what its spec declares."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

import mnemon_sm
from mnemon_sm import (
    Config,
    CorruptStore,
    IllegalEvent,
    InactiveSpace,
    InvalidInput,
    MemoryRoot,
    ReadOnly,
    UnknownInsight,
    UnknownSpace,
    WorkerFailed,
)
from mnemon_sm.adapters.sqlite.store import EmbeddedStore
from mnemon_sm.adapters.workers.builtin import BuiltinWorkers
from mnemon_sm.adapters.workers.routing import choose_space, merge_target
from mnemon_sm.errors import MnemonError
from mnemon_sm.flows.long_term.catalog import CATALOG_PATH
from mnemon_sm.flows.long_term.recall import RecallRun, SearchRun
from mnemon_sm.flows.long_term.write import WriteRun
from mnemon_sm.ports import Ports
from mnemon_sm.ports.workers import ToolBox, WorkerRequest
from mnemon_sm.testing.calls import CallLog
from mnemon_sm.testing.embed import FakeEmbedder
from mnemon_sm.testing.longterm import ScriptedWorkers
from mnemon_sm.testing.maintenance import held_run_data
from mnemon_sm.testing.memory import memory_ports
from mnemon_sm.testing.snapshot import files_state
from mnemon_sm.testing.wrap import RecordedPort

from ._flow_probe import assert_pure, calls_by_state, flow_probe, port_gaps

Script = Callable[[WorkerRequest, ToolBox], object]


def scripted(scripts: dict[str, Script], log: CallLog | None = None) -> ScriptedWorkers:
    """Workers that run ``scripts`` where given and the built-in workers elsewhere (each run
    recorded into ``log`` as ``workers.run``)."""
    builtin = BuiltinWorkers()
    kinds = ("recall", "write", "answer")
    return ScriptedWorkers({k: scripts.get(k, builtin.run) for k in kinds}, log)


def seeded(
    scripts: dict[str, Script] | None = None,
    config: Config | None = None,
    *,
    ports: tuple[Ports, CallLog] | None = None,
):
    """A root with a "default" space holding three facts and an inactive second space,
    seeded with the built-in workers, then reopened with ``scripts`` and ``config``; on
    ``ports`` and their call log (default: :func:`memory_ports`)."""
    ports, log = ports or memory_ports()
    lt = MemoryRoot.open("/unused", Config(), ports=ports).long_term
    lt.remember("The deploy script lives in tools/deploy.sh", space="default")
    lt.remember("Releases are cut every second Tuesday", space="default")
    lt.remember("The staging database runs on port 5433", space="default")
    lt.create_space("Design notes", "Architecture decisions and trade-offs")
    if scripts is not None:
        ports = attrs.evolve(ports, workers=scripted(scripts, log))
    return MemoryRoot.open("/unused", config or Config(), ports=ports), ports, log


def snapshot(ports: Any) -> tuple[Any, ...]:
    store = ports.long_term
    data = {k: (dict(v.insights), dict(v.deleted), dict(v.edges)) for k, v in store.data.items()}
    return files_state(ports.files.files), data


# -- recall ------------------------------------------------------------------------------


def test_recall_returns_checked_evidence_and_rests_in_idle() -> None:
    root, _, _ = seeded()
    answer = root.long_term.recall("where is the deploy script")
    assert [r["content"] for r in answer.results] == ["The deploy script lives in tools/deploy.sh"]
    item = answer.results[0]
    assert (item["memoryBodyId"], item["memoryBodyName"]) == ("default", "General memory")
    assert item["relevanceTier"] in ("high", "medium")
    assert root.long_term._recall.state == "idle"


def test_recall_takes_content_from_the_tools_not_from_the_worker() -> None:
    def lying(request: WorkerRequest, tools: ToolBox) -> object:
        found = tools.call("mnemon_recall", {"query": "deploy"})
        hit = found["results"][0]
        return {
            "summary": "found",
            "selectedMemoryBodyIds": ["default"],
            "results": [{"id": hit["id"], "memoryBodyId": hit["memoryBodyId"]}],
        }

    root, _, _ = seeded({"recall": lying})
    (item,) = root.long_term.recall("deploy").results
    assert item["content"] == "The deploy script lives in tools/deploy.sh"


def test_recall_rejects_evidence_no_tool_returned() -> None:
    def inventing(request: WorkerRequest, tools: ToolBox) -> object:
        return {
            "summary": "",
            "selectedMemoryBodyIds": [],
            "results": [{"id": "made-up", "memoryBodyId": "default"}],
        }

    root, _, _ = seeded({"recall": inventing})
    with pytest.raises(WorkerFailed, match="no tool of its run returned"):
        root.long_term.recall("deploy")
    assert root.long_term._recall.state == "idle"


@pytest.mark.parametrize(
    "script",
    [
        lambda r, t: (_ for _ in ()).throw(TimeoutError("model timed out")),
        lambda r, t: None,
        lambda r, t: {"summary": "x", "selectedMemoryBodyIds": [], "results": [], "extra": 1},
        lambda r, t: t.call("mnemon_remember", {"content": "sneaky"}),
    ],
    ids=["raises", "no-result", "extra-key", "ungranted-tool"],
)
def test_recall_worker_failures_take_the_worker_failed_edge(script: Script) -> None:
    root, ports, _ = seeded({"recall": script})
    before = snapshot(ports)
    with pytest.raises(WorkerFailed):
        root.long_term.recall("deploy")
    assert snapshot(ports) == before
    assert root.long_term._recall.state == "idle"


def test_recall_refuses_bad_requests_before_any_worker_runs() -> None:
    root, ports, _ = seeded()
    workers_before = len(ports.workers.requests) if hasattr(ports.workers, "requests") else 0
    with pytest.raises(InvalidInput):
        root.long_term.recall("   ")
    inactive = next(s.id for s in root.long_term.spaces() if not s.active)
    with pytest.raises(InactiveSpace):
        root.long_term.recall("deploy", spaces=[inactive])
    with pytest.raises(UnknownSpace):
        root.long_term.recall("deploy", spaces=["nope"])
    assert workers_before == 0


# -- searches ----------------------------------------------------------------------------


def test_direct_search_done_and_failed() -> None:
    root, _, _ = seeded()
    found = root.long_term.search("staging database port")
    assert found.hits[0].insight.content == "The staging database runs on port 5433"
    with pytest.raises(UnknownSpace):
        root.long_term.search("port", spaces=["missing"])
    assert root.long_term._direct.state == "idle"


def test_agent_search_answers_and_drops_citations_it_did_not_show() -> None:
    def answer(request: WorkerRequest, tools: ToolBox) -> object:
        label = request.data["evidence"][0]["label"]
        return {"answer": "On port 5433.", "citations": [label, "default/invented", label]}

    root, _, _ = seeded({"answer": answer})
    result = root.long_term.ask("which port does the staging database use")
    assert result.answer == "On port 5433."
    assert len(result.citations) == 1
    assert result.citations[0].startswith("default/")


def test_agent_search_without_evidence_runs_no_worker() -> None:
    calls: list[str] = []

    def answer(request: WorkerRequest, tools: ToolBox) -> object:
        calls.append("ran")
        return {"answer": "x", "citations": []}

    root, _, _ = seeded({"answer": answer})
    result = root.long_term.ask("zebra quantum banana")
    assert (result.answer, result.citations, calls) == ("", (), [])


def test_agent_search_failures() -> None:
    root, _, _ = seeded({"answer": lambda r, t: {"answer": 42, "citations": []}})
    with pytest.raises(WorkerFailed):
        root.long_term.ask("deploy script")
    with pytest.raises(UnknownSpace):
        root.long_term.ask("deploy script", spaces=["missing"])


# -- writes ------------------------------------------------------------------------------


def test_remember_into_an_inactive_space_activates_it() -> None:
    root, _, _ = seeded()
    inactive = next(s for s in root.long_term.spaces() if not s.active)
    receipt = root.long_term.remember("Prefer composition over inheritance", space=inactive.id)
    assert (receipt.action, receipt.memory_body_ids) == ("stored", (inactive.id,))
    assert next(s for s in root.long_term.spaces() if s.id == inactive.id).active


def test_a_duplicate_is_skipped_with_nothing_applied() -> None:
    root, ports, _ = seeded()
    before = snapshot(ports)
    receipt = root.long_term.remember(
        "The deploy script lives in tools/deploy.sh", space="default"
    )
    assert (receipt.action, receipt.memory_body_ids, receipt.writes) == ("skipped", (), ())
    assert snapshot(ports) == before


def test_failed_receipts_are_returned_not_raised_and_staged_writes_dropped() -> None:
    def gives_up(request: WorkerRequest, tools: ToolBox) -> object:
        tools.call("mnemon_remember", {"content": "half done", "memoryBodyId": "default"})
        return {"summary": "Could not decide.", "action": "failed", "memoryBodyIds": []}

    root, ports, _ = seeded({"write": gives_up})
    before = snapshot(ports)
    receipt = root.long_term.remember("anything")
    assert (receipt.action, receipt.summary) == ("failed", "Could not decide.")
    assert snapshot(ports) == before


@pytest.mark.parametrize(
    ("script", "message"),
    [
        (
            lambda r, t: (
                t.call("mnemon_remember", {"content": "x", "memoryBodyId": "default"}),
                {"summary": "", "action": "linked", "memoryBodyIds": ["default"]},
            )[1],
            "matches no staged write",
        ),
        (
            lambda r, t: (
                t.call("mnemon_remember", {"content": "x", "memoryBodyId": "default"}),
                {"summary": "", "action": "stored", "memoryBodyIds": ["elsewhere"]},
            )[1],
            "no staged write touches",
        ),
        (
            lambda r, t: (
                t.call("mnemon_remember", {"content": "x", "memoryBodyId": "default"}),
                {"summary": "", "action": "skipped", "memoryBodyIds": []},
            )[1],
            "says skipped but staged",
        ),
    ],
    ids=["wrong-action", "stray-space", "skipped-with-writes"],
)
def test_inconsistent_receipts_are_rejected_and_nothing_is_written(script, message) -> None:
    root, ports, _ = seeded({"write": script})
    before = snapshot(ports)
    with pytest.raises(WorkerFailed, match=message):
        root.long_term.remember("x")
    assert snapshot(ports) == before
    assert root.long_term._write.state == "idle"


def test_write_worker_failure_writes_nothing() -> None:
    def crashes(request: WorkerRequest, tools: ToolBox) -> object:
        tools.call("mnemon_remember", {"content": "staged only", "memoryBodyId": "default"})
        raise RuntimeError("connection reset")

    root, ports, _ = seeded({"write": crashes})
    before = snapshot(ports)
    with pytest.raises(WorkerFailed, match="connection reset"):
        root.long_term.remember("staged only")
    assert snapshot(ports) == before


def test_a_write_that_fails_when_applied_is_raised() -> None:
    root, _, _ = seeded()
    with pytest.raises(UnknownInsight):
        root.long_term.forget("no-such-insight", space="default")
    assert root.long_term._write.state == "idle"


def test_read_only_roots_refuse_writes_before_any_worker_runs() -> None:
    root, _, _ = seeded(config=Config(write_enabled=False))
    with pytest.raises(ReadOnly):
        root.long_term.remember("x")
    with pytest.raises(ReadOnly):
        root.long_term.merge("default", ["other"])
    assert root.long_term.recall("deploy").results  # reads still work


def test_link_and_forget_through_the_worker() -> None:
    root, ports, _ = seeded()
    ids = [i.id for i in ports.long_term.list("default")]
    linked = root.long_term.link(ids[0], ids[1], space="default", reason="both about releases")
    assert linked.action == "linked"
    assert root.long_term.related(ids[0], space="default")[0].hit.insight.id == ids[1]
    assert root.long_term.forget(ids[1], space="default").action == "forgotten"
    assert root.long_term.related(ids[0], space="default") == ()


# -- merge -------------------------------------------------------------------------------


def test_merge_copies_sources_and_deactivates_them() -> None:
    root, ports, _ = seeded()
    design = next(s for s in root.long_term.spaces() if s.id != "default")
    root.long_term.remember("Event sourcing was rejected for billing", space=design.id)
    report = root.long_term.merge("default", [design.id]).to_json()
    assert (report["memoryBodyId"], report["imported"]) == ("default", 1)
    assert not next(s for s in root.long_term.spaces() if s.id == design.id).active
    assert len(ports.long_term.list(design.id)) == 1  # the source keeps its data
    with pytest.raises(UnknownSpace):
        root.long_term.merge("default", ["missing"])
    with pytest.raises(InvalidInput):
        root.long_term.merge("default", ["default"])


def test_merge_records_where_each_source_went_and_reactivation_clears_it() -> None:
    root, _, _ = seeded()
    lt = root.long_term
    design = next(s for s in lt.spaces() if s.id != "default")
    scratch = lt.create_space("Scratch", "Temporary notes", active=True)
    lt.merge("default", [design.id, scratch.id])
    after = {s.id: s for s in lt.spaces()}
    assert [(after[i].active, after[i].merged_into) for i in (design.id, scratch.id)] == [
        (False, "default"),
        (False, "default"),
    ]
    assert after["default"].merged_into is None
    assert lt.update_space(design.id, active=True).merged_into is None
    kept = lt.create_space("Kept", "Still in use", active=True)
    lt.merge("default", [kept.id], deactivate_sources=False)
    assert next(s for s in lt.spaces() if s.id == kept.id).merged_into is None


# -- built-in routing ----------------------------------------------------------------------

BILLING = ("Billing", "Invoices, tax rules and payment providers")
INVOICE_FACT = "Invoices to EU customers carry the reverse-charge tax rules note"


def routed_root(*, merge_into_general: bool) -> tuple[MemoryRoot, Any, str, str]:
    """A root with the general space (``default``), an active "Tax office" space sharing one
    word with :data:`INVOICE_FACT` and a Billing space sharing three, which is inactive:
    merged into ``default``, or deactivated by hand. Returns the root, its ports and the ids
    of Billing and Tax office."""
    ports, _ = memory_ports()
    root = MemoryRoot.open("/unused", Config(), ports=ports)
    lt = root.long_term
    lt.remember("The deploy script lives in tools/deploy.sh")  # creates "General memory"
    decoy = lt.create_space("Tax office", "Letters from the tax office", active=True)
    billing = lt.create_space(*BILLING, active=True)
    lt.remember("Card payments go through the payment providers", space=billing.id)
    if merge_into_general:
        lt.merge("default", [billing.id])
    else:
        lt.update_space(billing.id, active=False)
    return root, ports, billing.id, decoy.id


@pytest.mark.parametrize("merged", [True, False], ids=["merged", "deactivated"])
def test_built_in_routing_never_writes_to_an_inactive_space(merged: bool) -> None:
    """Billing matches best but is inactive: its merge target takes its place when it was
    merged; otherwise the best active space (Tax office) does."""
    root, ports, billing, decoy = routed_root(merge_into_general=merged)
    before = dict(ports.long_term.data[billing].insights)
    receipt = root.long_term.remember(INVOICE_FACT)
    expected = "default" if merged else decoy
    assert (receipt.action, receipt.memory_body_ids) == ("stored", (expected,))
    assert INVOICE_FACT in [i.content for i in ports.long_term.list(expected)]
    assert dict(ports.long_term.data[billing].insights) == before
    assert not next(s for s in root.long_term.spaces() if s.id == billing).active


def test_built_in_routing_follows_merges_of_merges_to_an_active_space() -> None:
    root, ports, billing, _ = routed_root(merge_into_general=False)
    lt = root.long_term
    finance = lt.create_space("Finance", "Budgets and forecasts", active=True)
    archive = lt.create_space("Archive", "Old material", active=True)
    lt.update_space(billing, active=True)
    lt.merge(finance.id, [billing])  # Billing -> Finance -> Archive (the only live one)
    lt.merge(archive.id, [finance.id])
    receipt = lt.remember(INVOICE_FACT)
    assert receipt.memory_body_ids == (archive.id,)
    assert INVOICE_FACT in [i.content for i in ports.long_term.list(archive.id)]


def test_merge_targets_that_lead_nowhere_fall_back_to_the_best_active_space() -> None:
    spaces = [
        {"id": "a", "name": "Billing invoices", "description": "x", "active": False,
         "mergedInto": "b"},
        {"id": "b", "name": "Old", "description": "y", "active": False, "mergedInto": "a"},
        {"id": "c", "name": "Gone", "description": "z", "active": False, "mergedInto": "nope"},
        {"id": "d", "name": "General", "description": "w", "active": True},
        {"id": "e", "name": "Invoices", "description": "v", "active": True},
    ]  # fmt: skip
    assert merge_target(spaces[0], spaces) is None  # a loop
    assert merge_target(spaces[2], spaces) is None  # an unknown target
    assert choose_space("billing invoices", spaces) == "e"
    assert choose_space("billing invoices", [s for s in spaces if not s["active"]]) is None


def test_a_root_whose_spaces_are_all_inactive_gets_a_general_space() -> None:
    root, _, billing, decoy = routed_root(merge_into_general=False)
    old = ("default", billing, decoy)
    for space in ("default", decoy):
        root.long_term.update_space(space, active=False)
    receipt = root.long_term.remember(INVOICE_FACT)
    (created,) = [s for s in root.long_term.spaces() if s.id not in old]
    assert (created.name, created.active) == ("General memory", True)
    assert receipt.memory_body_ids == (created.id,)
    assert [s.active for s in root.long_term.spaces() if s.id in old] == [False] * 3


# -- space management and the deterministic reads ---------------------------------------


def test_space_management_takes_each_outcome_edge_and_rests_in_idle() -> None:
    root, ports, _ = seeded()
    lt = root.long_term
    scratch = lt.create_space("Scratch", "Temporary notes", active=True)
    assert (scratch.name, scratch.active) == ("Scratch", True)
    assert scratch.id in [s.id for s in lt.spaces()]
    renamed = lt.update_space(scratch.id, name="Scratchpad", active=False)
    assert (renamed.id, renamed.name, renamed.active) == (scratch.id, "Scratchpad", False)
    lt.delete_space(scratch.id)
    assert scratch.id not in [s.id for s in lt.spaces()]
    assert scratch.id not in ports.long_term.spaces()  # the store went with it
    refusals: list[tuple[type[MnemonError], Callable[[], object]]] = [
        (InvalidInput, lambda: lt.create_space("", "no name")),
        (UnknownSpace, lambda: lt.update_space("missing", name="x")),
        (InvalidInput, lambda: lt.update_space("default", active="yes")),  # type: ignore[arg-type]
        (UnknownSpace, lambda: lt.delete_space("missing")),
    ]
    for error, call in refusals:
        before = snapshot(ports)
        with pytest.raises(error):
            call()
        assert snapshot(ports) == before and lt._spaces.state == "idle"
    for other in [s.id for s in lt.spaces() if s.id != "default"]:
        lt.delete_space(other)
    with pytest.raises(InvalidInput, match="last Memory Space"):
        lt.delete_space("default")
    assert [s.id for s in lt.spaces()] == ["default"]
    ports.files.put(CATALOG_PATH, b"not json")
    with pytest.raises(CorruptStore):
        lt.spaces()
    assert lt._spaces.state == "idle"


def test_a_read_only_root_refuses_space_changes_before_any_port_call() -> None:
    _, ports, log = seeded()
    lt = MemoryRoot.open("/unused", Config(write_enabled=False), ports=ports).long_term
    before = snapshot(ports)
    for call in (
        lambda: lt.create_space("Scratch", "Temporary notes"),
        lambda: lt.update_space("default", active=False),
        lambda: lt.delete_space("default"),
    ):
        log.clear()
        with pytest.raises(ReadOnly):
            call()
        assert log.calls == [] and lt._spaces.state == "idle"
    assert snapshot(ports) == before
    assert len(lt.spaces()) == 2  # reads still work


def test_related_and_status_take_each_outcome_edge_and_rest_in_idle() -> None:
    root, ports, _ = seeded()
    lt = root.long_term
    first, second = (i.id for i in ports.long_term.list("default")[:2])
    root.long_term.link(first, second, space="default", type="causal")
    rows = [item.to_json() for item in lt.related(first, space="default")]
    assert second in [r["id"] for r in rows]
    assert {(r["memoryBodyId"], r["memoryBodyName"]) for r in rows} == {
        ("default", "General memory")
    }
    assert lt.status("default").total_insights == 3
    inactive = next(s.id for s in lt.spaces() if not s.active)
    assert lt.status(inactive).total_insights == 0  # an inactive space has a status too
    failures: list[tuple[type[MnemonError], Callable[[], object]]] = [
        (UnknownInsight, lambda: lt.related("missing", space="default")),
        (InactiveSpace, lambda: lt.related(first, space=inactive)),
        (UnknownSpace, lambda: lt.related(first, space="missing")),
        (InvalidInput, lambda: lt.related(first, space="default", depth=99)),
        (UnknownSpace, lambda: lt.status("missing")),
    ]
    for error, call in failures:
        with pytest.raises(error):
            call()
        assert lt._direct.state == "idle"


# -- port calls per state ----------------------------------------------------------------


def embedded_ports(path: Path) -> tuple[Ports, CallLog, EmbeddedStore]:
    """The recording fakes with the embedded store (relevance recall with a fake embedder)
    in place of the memory store; the store and the embedder record into the same log. The
    store itself is returned too: what it does directly is not recorded (another process)."""
    ports, log = memory_ports()
    embedder = RecordedPort("embedder", FakeEmbedder(), log)
    store = EmbeddedStore(path, ports.clock, embedder=embedder)
    return attrs.evolve(ports, long_term=RecordedPort("long_term", store, log)), log, store


def _looks_first(store: EmbeddedStore) -> Script:
    """A recall or write worker that looks around before it answers as the built-in worker
    does: the spaces, a relevance recall of its query or content, the neighbours of the
    first hit. A remember that names no space is staged for the only active space, and a
    store appears on disk meanwhile (so the host's catalog read while verifying registers
    it)."""
    builtin = BuiltinWorkers()

    def work(request: WorkerRequest, tools: ToolBox) -> object:
        data = request.data
        if "mnemon_recall" in tools.names:
            tools.call("mnemon_memory_bodies", {})
            query = data.get("query") or data.get("content") or "deploy"
            for hit in tools.call("mnemon_recall", {"query": query})["results"][:1]:
                tools.call(
                    "mnemon_related", {"memoryBodyId": hit["memoryBodyId"], "id": hit["id"]}
                )
        if data.get("operation") == "remember" and "memoryBodyId" not in data:
            tools.call("mnemon_remember", {"content": data["content"]})
            store.create_space("appeared-while-writing")
            return {"summary": "Stored.", "action": "stored", "memoryBodyIds": ["default"]}
        return builtin.run(request, tools)

    return work


#: The long-term flows, each state of which the story below checks.
LONG_TERM_FLOWS = (
    "recall",
    "direct_search",
    "agent_search",
    "long_term_write",
    "merge_spaces",
    "memory_spaces",
)


def test_each_long_term_state_makes_exactly_the_port_calls_its_spec_declares(
    tmp_path: Path,
) -> None:
    """Every port call of the long-term flows is made in a state of a flow (none by a facade
    itself, none in a rest state) that declares it, and every state makes every call it
    declares: on the embedded store with an embedder (relevance recall embeds the query),
    with workers that call their tools, and with a store found on disk before each operation
    (its first catalog read registers it: a catalog write under the catalog's lock)."""
    ports, log, store = embedded_ports(tmp_path / "stores")
    look = _looks_first(store)
    root, ports, log = seeded({"recall": look, "write": look}, ports=(ports, log))
    lt = root.long_term
    first, second, third = (i.id for i in ports.long_term.list("default"))
    scratch = lt.create_space("Scratch", "Temporary notes")  # a source to merge
    lt.remember("Scratch notes are wiped every Friday", space=scratch.id)
    lt.update_space(scratch.id, active=False)  # "default" is the only active space again
    log.probe = flow_probe(
        lambda: [lt._recall, lt._direct, lt._agent, lt._write, lt._merge, lt._spaces]
    )
    created: list[str] = []
    operations: list[Callable[[], object]] = [
        lambda: lt.recall("deploy script", spaces=["default"]),  # scoping reads the catalog
        lambda: lt.recall("release schedule"),  # the worker's tools read it
        lambda: lt.search("staging database port"),
        lambda: lt.related(first, space="default"),
        lambda: lt.status("default"),
        lambda: lt.ask("where does the deploy script live"),
        lambda: lt.remember("Deploys need a green build first"),  # staged for no space
        lambda: lt.link(first, second, space="default"),
        lambda: lt.forget(third, space="default"),
        # The write flow's other operations (no facade method; the built-in worker does them)
        lambda: lt._write.perform(
            "write", request={"operation": "create", "name": "Runbooks", "description": "How to"}
        ),
        lambda: lt._write.perform(
            "write",
            request={"operation": "merge", "targetId": "default", "sourceIds": [scratch.id]},
        ),
        lambda: lt.merge("default", [scratch.id]),
        lambda: lt.spaces(),
        lambda: created.append(lt.create_space("Doomed", "Deleted below").id),
        lambda: lt.update_space("default", description="Facts of the project"),
        lambda: lt.delete_space(created[0]),
    ]
    observed: dict[tuple[str, str], set[str]] = {}
    for number, operation in enumerate(operations):
        store.create_space(f"found-{number}")  # registered by the operation's first read
        log.clear()
        operation()
        untagged = [c.name for c in log.calls if c.state is None]
        assert untagged == [], f"operation {number} made calls in no state: {untagged}"
        for key, calls in calls_by_state(log.calls).items():
            observed.setdefault(key, set()).update(calls)
    store.close()
    gaps = port_gaps(observed, LONG_TERM_FLOWS)
    assert gaps == {}, "\n".join(
        f"{state}: undeclared {sorted(extra)}, never reached {sorted(unused)}"
        for state, (extra, unused) in gaps.items()
    )


def test_no_module_reaches_through_the_service_to_its_catalog_or_store() -> None:
    """Callers use the service's named operations: only the service itself touches its
    catalog and its store (tests may look inside)."""
    package = Path(mnemon_sm.__file__).parent
    service = package / "flows" / "long_term" / "service.py"
    pattern = re.compile(r"\bservice\.(catalog|store)\b|getattr\([^)]*\.store\b")
    found = [
        f"{path.relative_to(package)}:{number}: {line.strip()}"
        for path in sorted(package.rglob("*.py"))
        if path != service
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []


def test_the_validators_are_pure() -> None:
    """A validator reads its arguments and the configuration only: no port call (not even a
    catalog read that would register a store found on disk) and nothing stored on the flow."""
    root, ports, log = seeded()
    lt = root.long_term
    ports.long_term.create_space("found-on-disk")
    search = {"query": "deploy", "space_ids": ["default", "found-on-disk"], "limit": 3}
    write = {"operation": "remember", "content": "A fact", "memoryBodyId": "default"}
    merge = {"target": "default", "sources": ["found-on-disk"]}
    checks: list[tuple[object, Callable[[], None]]] = [
        (lt._write, lt._write.check_writable),
        (lt._merge, lt._merge.check_writable),
        (lt._spaces, lt._spaces.check_writable),
    ]
    for context, requests in (
        (lt._recall, [search, {"query": "x", "space_ids": ["nope"]}, {"query": " "}]),
        (lt._direct, [search, {"query": "x", "bogus": 1}]),
        (lt._agent, [search, {}]),
        (lt._write, [write, {"operation": "remember", "content": ""}, {"operation": "x"}]),
        (lt._merge, [merge, {"target": "default", "sources": []}]),
    ):
        for request in requests:
            checks.append((context, functools.partial(context.check_request, request)))
    assert_pure(checks, log)
    assert "found-on-disk" not in [s["id"] for s in _catalog(ports)]


def _catalog(ports: Any) -> list[dict[str, Any]]:
    data = ports.files.files.get(CATALOG_PATH)
    return json.loads(data)["bodies"] if data else []


def test_recall_resolves_the_named_spaces_in_a_state_of_its_own() -> None:
    """Named spaces are resolved in ``scoping``: reading the catalog there registers a store
    found on disk; an unknown or inactive one is refused there, before any worker runs."""
    root, ports, _ = seeded()
    lt = root.long_term
    ports.long_term.create_space("found-on-disk")
    seen: list[str | None] = []
    catalog = lt.service.catalog
    original = catalog.readable

    def readable(ids: Any = None) -> Any:
        seen.append(lt._recall.state)
        return original(ids)

    catalog.readable = readable  # type: ignore[method-assign]
    assert "found-on-disk" not in [s["id"] for s in _catalog(ports)]
    answer = lt.recall("deploy script", spaces=["default"])
    assert answer.results and seen[0] == "scoping"
    assert "found-on-disk" in [s["id"] for s in _catalog(ports)]  # registered while scoping
    seen.clear()
    with pytest.raises(UnknownSpace, match="nope"):
        lt.recall("deploy script", spaces=["nope"])
    assert seen == ["scoping"] and lt._recall.state == "idle"


def test_closing_the_root_closes_every_long_term_flow() -> None:
    root, _, _ = seeded()
    lt = root.long_term
    root.close()
    for call in (
        lambda: lt.recall("deploy"),
        lambda: lt.search("deploy"),
        lambda: lt.ask("deploy"),
        lambda: lt.remember("x"),
        lambda: lt.merge("default", ["x"]),
        lambda: lt.spaces(),
        lambda: lt.create_space("Scratch", "Temporary notes"),
        lambda: lt.update_space("default", active=False),
        lambda: lt.delete_space("default"),
        lambda: lt.status("default"),
        lambda: lt.related("x", space="default"),
    ):
        with pytest.raises(IllegalEvent):
            call()


# -- run data --------------------------------------------------------------------------------


def _interrupt(exc: BaseException) -> Callable[..., Any]:
    def raising(*args: Any, **kwargs: Any) -> Any:
        raise exc

    return raising


def _answer_first(request: WorkerRequest, tools: ToolBox) -> object:
    return {"answer": "On port 5433.", "citations": [request.data["evidence"][0]["label"]]}


def _stray_receipt(request: WorkerRequest, tools: ToolBox) -> object:
    tools.call("mnemon_remember", {"content": "x", "memoryBodyId": "default"})
    return {"summary": "", "action": "stored", "memoryBodyIds": ["elsewhere"]}


def _invented_evidence(request: WorkerRequest, tools: ToolBox) -> object:
    return {
        "summary": "",
        "selectedMemoryBodyIds": [],
        "results": [{"id": "made-up", "memoryBodyId": "default"}],
    }


# kind: (worker scripts, port method made to raise (and what), the request, its error)
RUN_KINDS: dict[str, tuple[dict[str, Script], tuple[str, BaseException] | None, Any, Any]] = {
    "recall": ({}, None, lambda lt: lt.recall("deploy script"), None),
    "recall refused by its validator": ({}, None, lambda lt: lt.recall("  "), InvalidInput),
    "recall of an unknown space": (
        {},
        None,
        lambda lt: lt.recall("deploy", spaces=["nope"]),
        UnknownSpace,
    ),
    "recall of invented evidence": (
        {"recall": _invented_evidence},
        None,
        lambda lt: lt.recall("deploy"),
        WorkerFailed,
    ),
    "recall interrupted in its worker": (
        {"recall": _interrupt(KeyboardInterrupt())},
        None,
        lambda lt: lt.recall("deploy"),
        KeyboardInterrupt,
    ),
    "search": ({}, None, lambda lt: lt.search("staging database port"), None),
    "search of an unknown space": (
        {},
        None,
        lambda lt: lt.search("port", spaces=["missing"]),
        UnknownSpace,
    ),
    "search interrupted by its store": (
        {},
        ("recall", RuntimeError("bug")),
        lambda lt: lt.search("port"),
        RuntimeError,
    ),
    "ask": ({"answer": _answer_first}, None, lambda lt: lt.ask("staging database port"), None),
    "ask with no evidence": ({}, None, lambda lt: lt.ask("zebra quantum banana"), None),
    "ask interrupted in its worker": (
        {"answer": _interrupt(KeyboardInterrupt())},
        None,
        lambda lt: lt.ask("staging database port"),
        KeyboardInterrupt,
    ),
    "remember": ({}, None, lambda lt: lt.remember("Prefer composition", space="default"), None),
    "remember of a duplicate": (
        {},
        None,
        lambda lt: lt.remember("The deploy script lives in tools/deploy.sh", space="default"),
        None,
    ),
    "remember refused by its validator": ({}, None, lambda lt: lt.remember(" "), InvalidInput),
    "remember with a stray receipt": (
        {"write": _stray_receipt},
        None,
        lambda lt: lt.remember("x"),
        WorkerFailed,
    ),
    "forget failing when applied": (
        {},
        None,
        lambda lt: lt.forget("no-such-insight", space="default"),
        UnknownInsight,
    ),
    "remember interrupted while applying": (
        {},
        ("remember", RuntimeError("bug")),
        lambda lt: lt.remember("Prefer composition", space="default"),
        RuntimeError,
    ),
    "merge": ({}, None, lambda lt: lt.merge("default", [_other(lt)]), None),
    "merge of an unknown space": (
        {},
        None,
        lambda lt: lt.merge("default", ["nope"]),
        UnknownSpace,
    ),
}


def _other(lt: Any) -> str:
    return next(s.id for s in lt.spaces() if s.id != "default")


@pytest.mark.parametrize("kind", list(RUN_KINDS))
def test_nothing_of_a_request_stays_on_the_flow(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search's, a recall's and a write's data travel with their flow's events, so once a
    request ended, whatever its end (a result, a refusal by a validator or a step, an
    exception from a port or a worker), the long-term flows hold exactly what they held right
    after opening (their state apart), and no run and no worker's tool box is reachable from
    the root."""
    scripts, raising, request, error = RUN_KINDS[kind]
    root, ports, _ = seeded(scripts)
    lt = root.long_term
    contexts = (lt._recall, lt._direct, lt._agent, lt._write, lt._merge)
    opened = [{k: v for k, v in vars(c).items() if k != "state"} for c in contexts]
    if raising is not None:
        method, exc = raising
        monkeypatch.setattr(ports.long_term, method, _interrupt(exc))
    if error is None:
        request(lt)
    else:
        with pytest.raises(error) as caught:
            request(lt)
        # The exception keeps the frames it went through: let go of them, as a caller that
        # handled it would.
        caught.value.with_traceback(None)
    for context, before in zip(contexts, opened, strict=True):
        after = {k: v for k, v in vars(context).items() if k != "state"}
        assert after.keys() == before.keys(), kind
        assert all(after[k] is before[k] for k in before), kind
        assert context.state == "idle", kind
    assert held_run_data(root, (RecallRun, SearchRun, WriteRun)) == [], kind


@pytest.mark.parametrize(
    "options",
    [
        {"mode": "bogus"},
        {"category": "zzz"},
        {"source": 5},
        {"intent": "zz"},
        {"limit": 0},
        {"limit": True},
        {"query": "x" * 2001},
        {"query": "  "},
    ],
    ids=repr,
)
def test_a_search_request_is_checked_by_one_rule_set_before_any_port_call(
    options: dict[str, Any],
) -> None:
    """A search's and an agent search's validators and the service's search (a worker's
    recall tool) refuse a bad request with the same error, by the same rules
    (``search_query``); the flows refuse it before leaving ``idle``, with no port call (not
    even a catalog read)."""
    root, _, log = seeded()
    lt = root.long_term
    request = {"query": "deploy script", **options}
    query = request.pop("query")
    with pytest.raises(InvalidInput) as by_service:
        lt.service.search(query, **request)
    for context, call in ((lt._direct, lt.search), (lt._agent, lt.ask)):
        with pytest.raises(InvalidInput) as by_validator:
            context.check_request({"query": query, **request})
        log.clear()
        with pytest.raises(InvalidInput) as by_flow:
            call(query, **request)
        assert str(by_flow.value) == str(by_validator.value) == str(by_service.value)
        assert log.calls == []
        assert context.state == "idle"
