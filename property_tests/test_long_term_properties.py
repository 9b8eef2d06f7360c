"""Properties of the long-term flows over generated stores and generated workers.

Every example builds a root over ``memory_ports()``: spaces ``s0``, ``s1``, ... created in the
fake store (so ids are deterministic), registered by the catalog's discovery, then named,
described and (de)activated as generated; each holds generated insights over a small
vocabulary (so queries match) and generated links. Workers are ``ScriptedWorkers`` whose
scripts draw their behaviour from Hypothesis while they run (``st.data()``), so they can react
to what the tools returned.

Checked (spec invariant ids as literals, for the spec lint):
- recall (``specs/recall.yaml``): at most the request's limit (12 by default), each a tool
  result of the run with the store's content and the catalog's space name, strict-v2 tiers
  with relevance recall's 0.15 cut-off; a worker calling a tool it was not granted, or
  selecting evidence no tool returned, fails the run and writes nothing;
- agent search (``specs/agent_search.yaml``): every citation is a label the worker was shown;
- direct search (``specs/direct_search.yaml``): only active spaces, at most the limit, tiered;
- writes (``specs/long_term_write.yaml``): adversarial write workers change no file and no
  store; an accepted write names only spaces its applied writes wrote, and a write into an
  inactive space leaves it active.
"""

from __future__ import annotations

import copy
from typing import Any

import attrs
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from mnemon_sm.adapters.workers.builtin import BuiltinWorkers
from mnemon_sm.config import Config
from mnemon_sm.errors import InactiveSpace, ToolRefused, WorkerFailed
from mnemon_sm.flows.long_term.quality import tier_of
from mnemon_sm.flows.long_term.tools import READ_TOOLS, WRITE_TOOLS
from mnemon_sm.flows.long_term.write import GRANTS
from mnemon_sm.ports import Ports
from mnemon_sm.ports.workers import ToolBox, WorkerRequest
from mnemon_sm.root import MemoryRoot
from mnemon_sm.testing.longterm import MemoryLongTermStore, ScriptedWorkers
from mnemon_sm.testing.memory import MemoryFiles, memory_ports
from mnemon_sm.testing.snapshot import files_state
from property_tests.threads import WorkerData

RECALL_CAP_HOLDS = "INV-REC-1"  # recall never returns more than its limit (12 by default)
RECALL_ITEMS_FROM_TOOLS = "INV-REC-2"  # every item comes from a tool result of the run
RECALL_REFUSAL_CHANGES_NOTHING = "INV-REC-3"  # a non-granted tool fails the run, no change
CITATIONS_WERE_SHOWN = "INV-ASK-1"  # every citation is a label of the evidence shown
SEARCH_ACTIVE_AND_TIERED = "INV-SEA-1"  # direct search: active spaces, limit, tiers
BAD_WRITE_WORKER_CHANGES_NOTHING = "INV-WR-1"  # failed or inconsistent write: no change
RECEIPT_SPACES_WERE_WRITTEN = "INV-WR-2"  # receipt spaces were written; targets activated

RECALL_CAP = 12
VOCAB = ("deploy", "release", "python", "cache")
UNKNOWN_TOOLS = ("mnemon_shell", "mnemon_runtime_memory", "mnemon_document_manage", "rm")
phrases = st.lists(st.sampled_from(VOCAB), min_size=1, max_size=4, unique=True).map(" ".join)
FILLERS = ("alpha", "bravo", "charlie", "delta")  # words no insight holds: low scores
queries = (
    st.sampled_from(VOCAB)  # one word: every insight holding it scores 1 ("high")
    | st.lists(st.sampled_from(VOCAB), min_size=2, max_size=2, unique=True).map(" ".join)
    | st.lists(st.sampled_from(VOCAB + FILLERS), min_size=3, max_size=6, unique=True).map(" ".join)
)
modes = st.sampled_from(("smart", "keyword", "basic"))
limits = st.sampled_from((1, 2, 3, 12, 13, 50)) | st.integers(1, 50)


@attrs.frozen
class SpaceSpec:
    name: str
    description: str
    active: bool
    insights: list[tuple[str, int]]
    links: list[tuple[int, int]]


space_specs = st.builds(
    SpaceSpec,
    name=phrases,
    description=phrases,
    active=st.booleans(),
    insights=st.integers(0, 30).flatmap(  # dense spaces, so a query often has over 12 hits
        lambda n: st.lists(st.tuples(phrases, st.integers(1, 5)), min_size=n, max_size=n)
    ),
    links=st.lists(st.tuples(st.integers(0, 29), st.integers(0, 29)), max_size=8),
)
worlds = st.tuples(st.lists(space_specs, min_size=1, max_size=3), st.integers(0, 5)).map(
    # s0 is active unless the second draw is 1, so reads usually have somewhere to look
    lambda t: [attrs.evolve(t[0][0], active=t[0][0].active or t[1] != 1), *t[0][1:]]
)


@attrs.define
class World:
    root: MemoryRoot
    ports: Ports
    workers: ScriptedWorkers

    @property
    def store(self) -> MemoryLongTermStore:
        assert isinstance(self.ports.long_term, MemoryLongTermStore)
        return self.ports.long_term

    @property
    def files(self) -> MemoryFiles:
        assert isinstance(self.ports.files, MemoryFiles)
        return self.ports.files

    def names(self) -> dict[str, str]:
        return {s.id: s.name for s in self.root.long_term.spaces()}

    def active(self) -> list[str]:
        return [s.id for s in self.root.long_term.spaces() if s.active]

    def snapshot(self, *, access_counts: bool = True) -> tuple[object, ...]:
        """Every file's bytes (the audit log's apart) and the fake store's whole state
        (optionally without the access counts a read adds)."""
        data = copy.deepcopy(self.store.data)
        if not access_counts:
            for space in data.values():
                space.insights = {
                    k: attrs.evolve(i, access_count=0) for k, i in space.insights.items()
                }
        return files_state(self.files.files), data

    def all_keys(self) -> set[tuple[str, str]]:
        return {(s, i) for s, space in self.store.data.items() for i in space.insights}


def build(spec: list[SpaceSpec]) -> World:
    ports, _ = memory_ports()
    workers = ScriptedWorkers({})
    ports = attrs.evolve(ports, workers=workers)
    store = ports.long_term
    assert isinstance(store, MemoryLongTermStore)
    for n, space in enumerate(spec):
        sid = f"s{n}"
        store.create_space(sid)
        for content, importance in space.insights:
            store.remember(sid, content, importance=importance)
        ids = list(store.data[sid].insights)
        for a, b in space.links:
            if len(ids) > 1 and a % len(ids) != b % len(ids):
                store.link(sid, ids[a % len(ids)], ids[b % len(ids)])
    root = MemoryRoot.open("/unused", Config(), ports=ports)
    for n, space in enumerate(spec):
        root.long_term.update_space(
            f"s{n}", name=space.name, description=space.description, active=space.active
        )
    return World(root, ports, workers)


def key(item: dict[str, Any]) -> tuple[str, str]:
    return item["memoryBodyId"], item["id"]


# -- recall -----------------------------------------------------------------------------------


@attrs.define
class Run:
    """What a scripted recall worker's tools returned, in order (the host's ledger)."""

    ledger: dict[tuple[str, str], dict[str, Any]] = attrs.Factory(dict)
    picked: list[tuple[str, str]] = attrs.Factory(list)


def gather(data: st.DataObject, tools: ToolBox, run: Run) -> None:
    """Generated granted reads: catalog, recall with generated arguments, related."""
    bodies = tools.call("mnemon_memory_bodies", {})
    active = [b["id"] for b in bodies if b["active"]]
    steps = st.lists(st.sampled_from(("recall", "recall", "related")), min_size=1, max_size=4)
    for step in data.draw(steps):
        if step == "recall":
            args: dict[str, Any] = {"query": data.draw(queries)}
            name_spaces = data.draw(st.booleans(), label="name spaces")
            if active and name_spaces:
                args["memoryBodyIds"] = data.draw(st.lists(st.sampled_from(active), max_size=3))
            if data.draw(st.booleans()):
                args["mode"] = data.draw(modes)
            if data.draw(st.integers(0, 2)):
                args["limit"] = data.draw(st.sampled_from((50, 20)) | limits)
            found = tools.call("mnemon_recall", args)["results"]
        elif run.ledger:
            space, insight = data.draw(st.sampled_from(sorted(run.ledger)))
            depth = data.draw(st.integers(1, 3))
            found = tools.call(
                "mnemon_related", {"memoryBodyId": space, "id": insight, "depth": depth}
            )
        else:
            continue
        for item in found:
            run.ledger[key(item)] = item


def selection(data: st.DataObject, run: Run) -> list[tuple[str, str]]:
    """Distinct keys drawn from what the tools returned (often over 12), then some repeated."""
    if not run.ledger:
        return []
    distinct = data.draw(st.sampled_from((13, 20, 1, 3, 8, 0)), label="distinct picks")
    shuffled = data.draw(st.permutations(sorted(run.ledger)), label="order")
    picked = shuffled[:distinct]
    if picked:
        repeats = data.draw(st.lists(st.sampled_from(picked), max_size=5), label="repeats")
        for repeat in repeats:
            picked.insert(data.draw(st.integers(0, len(picked))), repeat)
    return picked


def recall_result(picked: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "summary": f"{len(picked)} picked",
        "selectedMemoryBodyIds": sorted({s for s, _ in picked}),
        "results": [{"id": i, "memoryBodyId": s} for s, i in picked],
    }


@given(worlds, queries, st.data())
def test_recall_returns_at_most_12_items_each_from_a_tool_result_of_the_run(
    spec: list[SpaceSpec], query: str, data: st.DataObject
) -> None:
    data = WorkerData(data)  # type: ignore[assignment]  # drawn on the worker's thread
    world, run = build(spec), Run()

    def worker(request: WorkerRequest, tools: ToolBox) -> object:
        gather(data, tools, run)
        run.picked = selection(data, run)
        return recall_result(run.picked)

    world.workers.scripts["recall"] = worker
    asked = data.draw(st.sampled_from((None, 3, 12, 50)), label="limit")
    options = {} if asked is None else {"limit": asked}
    answer = world.root.long_term.recall(query, **options)
    names = world.names()
    cap = RECALL_CAP if asked is None else asked

    event(f"selected {'>cap' if len(run.picked) > cap else '1..cap' if run.picked else 0}")
    event(f"returned {'cap' if len(answer.results) == cap else '<cap'}")
    assert len(answer.results) <= cap, RECALL_CAP_HOLDS
    chosen = list(dict.fromkeys(run.picked))
    low = 0.15  # relevance recall (the default mode) drops scores under 0.15
    tiers = [tier_of(run.ledger[k].get("score"), low) for k in chosen]
    # strict-v2: every high, medium and unknown item, no quota per tier, cut to the limit
    expected = sum(t is not None for t in tiers)
    assert len(answer.results) == min(cap, expected), RECALL_CAP_HOLDS
    assert len({key(item) for item in answer.results}) == len(answer.results)
    for item in answer.results:
        for field in ("id", "content", "memoryBodyId", "memoryBodyName"):
            assert isinstance(item[field], str), RECALL_ITEMS_FROM_TOOLS
        space, insight = key(item)
        assert (space, insight) in chosen, RECALL_ITEMS_FROM_TOOLS
        assert item["content"] == world.store.data[space].insights[insight].content
        assert item["memoryBodyName"] == names[space], RECALL_ITEMS_FROM_TOOLS
        ledger = run.ledger[(space, insight)]
        assert item == {**ledger, "relevanceTier": tier_of(ledger.get("score"), low)}


FORBIDDEN_IN_RECALL = (*WRITE_TOOLS, *UNKNOWN_TOOLS)


@given(worlds, queries, st.sampled_from(FORBIDDEN_IN_RECALL), st.data())
def test_a_recall_worker_calling_a_tool_it_was_not_granted_fails_and_changes_nothing(
    spec: list[SpaceSpec], query: str, forbidden: str, data: st.DataObject
) -> None:
    data = WorkerData(data)  # type: ignore[assignment]  # drawn on the worker's thread
    world, run = build(spec), Run()
    before = world.snapshot(access_counts=False)
    swallow = data.draw(st.booleans(), label="swallow the refusal")

    def worker(request: WorkerRequest, tools: ToolBox) -> object:
        gather(data, tools, run)
        target = data.draw(st.sampled_from(sorted(world.store.data)))
        arguments = {"content": "stolen write", "memoryBodyId": target}
        try:
            tools.call(forbidden, arguments)
        except ToolRefused:
            if not swallow:
                raise
        gather(data, tools, run)
        return recall_result(selection(data, run))

    world.workers.scripts["recall"] = worker
    with pytest.raises(WorkerFailed, match="not granted"):
        world.root.long_term.recall(query)
    # Reads of the run still count access (Mnemon's recall does); nothing else may change.
    assert world.snapshot(access_counts=False) == before, RECALL_REFUSAL_CHANGES_NOTHING


@given(worlds, queries, st.data())
def test_a_recall_worker_selecting_evidence_no_tool_returned_fails(
    spec: list[SpaceSpec], query: str, data: st.DataObject
) -> None:
    data = WorkerData(data)  # type: ignore[assignment]  # drawn on the worker's thread
    world, run = build(spec), Run()
    before = world.snapshot(access_counts=False)

    def worker(request: WorkerRequest, tools: ToolBox) -> object:
        gather(data, tools, run)
        picked = selection(data, run)
        unseen = sorted(world.all_keys() - set(run.ledger))
        wrong_space = [(s + "x", i) for s, i in run.ledger]
        made_up = st.tuples(st.text(min_size=1, max_size=8), st.text(min_size=1, max_size=8))
        sources = [made_up.filter(lambda k: k not in run.ledger)]
        if unseen:
            sources.append(st.sampled_from(unseen))
        if wrong_space:
            sources.append(st.sampled_from(wrong_space))
        fake = data.draw(st.one_of(sources), label="evidence no tool returned")
        picked.insert(data.draw(st.integers(0, len(picked))), fake)
        return recall_result(picked)

    world.workers.scripts["recall"] = worker
    with pytest.raises(WorkerFailed, match="no tool of its run returned"):
        world.root.long_term.recall(query)
    assert world.snapshot(access_counts=False) == before, RECALL_REFUSAL_CHANGES_NOTHING


# -- agent search and direct search -----------------------------------------------------------


@given(worlds, queries, st.none() | limits, st.data())
def test_every_citation_of_an_answer_is_a_label_of_the_evidence_shown(
    spec: list[SpaceSpec], question: str, limit: int | None, data: st.DataObject
) -> None:
    data = WorkerData(data)  # type: ignore[assignment]  # drawn on the worker's thread
    world = build(spec)
    cited: list[str] = []
    shown: list[str] = []

    def worker(request: WorkerRequest, tools: ToolBox) -> object:
        shown.extend(e["label"] for e in request.data["evidence"])
        stored = sorted(f"{s}/{i}" for s, i in world.all_keys())
        labels = st.sampled_from(shown)
        others = st.text(max_size=12) | st.sampled_from([*stored, "unknown/ins-1", "s0/"])
        cited.extend(data.draw(st.lists(labels | others, max_size=20)))
        return {"answer": "From the evidence.", "citations": cited}

    world.workers.scripts["answer"] = worker
    answer = world.root.long_term.ask(question, limit=limit)

    labels = [h.citation for h in answer.search.hits[:12]]
    event(f"hits {'>12' if len(answer.search.hits) > 12 else '1..12' if labels else 0}")
    event(f"citations kept {'some' if answer.citations else 'none'}")
    if not answer.search.hits:
        assert world.workers.requests == [] and answer.citations == ()
        return
    assert shown == labels, CITATIONS_WERE_SHOWN
    assert set(answer.citations) <= set(labels), CITATIONS_WERE_SHOWN
    assert list(answer.citations) == list(dict.fromkeys(c for c in cited if c in labels))


@given(worlds, queries, st.none() | limits, modes, st.data())
def test_direct_search_returns_tiered_hits_of_active_spaces_within_the_limit(
    spec: list[SpaceSpec], query: str, limit: int | None, mode: str, data: st.DataObject
) -> None:
    data = WorkerData(data)  # type: ignore[assignment]  # drawn on the worker's thread
    world = build(spec)
    names, active = world.names(), world.active()
    inactive = sorted(set(names) - set(active))
    spaces: list[str] | None = None
    name_spaces = data.draw(st.booleans(), label="name spaces")
    if active and name_spaces:
        spaces = data.draw(st.lists(st.sampled_from(active), min_size=1, max_size=3))
    if inactive and data.draw(st.integers(0, 3), label="name an inactive space") == 0:
        spaces = [*(spaces or []), data.draw(st.sampled_from(inactive))]
        before = world.snapshot()
        with pytest.raises(InactiveSpace):
            world.root.long_term.search(query, spaces=spaces, limit=limit, mode=mode)
        assert world.snapshot() == before, SEARCH_ACTIVE_AND_TIERED
        return
    result = world.root.long_term.search(query, spaces=spaces, limit=limit, mode=mode)
    event(f"hits {'some' if result.hits else 'none'}; at the limit {len(result.hits) == limit}")

    assert len(result.hits) <= (10 if limit is None else limit), SEARCH_ACTIVE_AND_TIERED
    for hit in result.hits:
        assert hit.space_id in (spaces or active), SEARCH_ACTIVE_AND_TIERED
        assert hit.tier in ("high", "medium", "unknown"), SEARCH_ACTIVE_AND_TIERED
        assert hit.space_name == names[hit.space_id]
        stored = world.store.data[hit.space_id].insights[hit.insight.id]
        assert hit.insight.content == stored.content
    assert [s.space_id for s in result.sources] == list(dict.fromkeys(spaces or active))


# -- writes -----------------------------------------------------------------------------------

ADVERSARIES = (
    "raise_after_staging",
    "invalid_result",
    "non_object_result",
    "unmatched_action",
    "stray_space",
    "forbidden_tool",
    "skipped_with_writes",
)
_FIELDS = ("summary", "action", "memoryBodyIds")
ACTIONS = ("stored", "linked", "forgotten", "created", "updated", "merged", "skipped", "failed")
invalid_results: st.SearchStrategy[object] = st.one_of(
    st.fixed_dictionaries(
        {"summary": st.text(max_size=5), "action": st.just("stored")},
        optional={"memoryBodyIds": st.just(["s0"]), "extra": st.integers()},
    ).filter(lambda d: set(d) != set(_FIELDS)),
    st.fixed_dictionaries(
        {
            "summary": st.integers() | st.none(),
            "action": st.just("stored"),
            "memoryBodyIds": st.just([]),
        }
    ),
    st.fixed_dictionaries(
        {
            "summary": st.just("s"),
            "action": st.text(max_size=9).filter(lambda a: a not in ACTIONS),
            "memoryBodyIds": st.just([]),
        }
    ),
    st.fixed_dictionaries(
        {
            "summary": st.just("s"),
            "action": st.just("stored"),
            "memoryBodyIds": st.just("s0") | st.lists(st.integers(), min_size=1, max_size=2),
        }
    ),
    st.just(None),
)
non_objects = st.one_of(  # JSON a model may emit instead of the result object
    st.text(max_size=10),
    # text holding more than the one result object (text alone holding it is read as it)
    st.just('Result: {"summary": "s", "action": "stored", "memoryBodyIds": []}'),
    st.just('```json\n{"summary": "s", "action": "stored", "memoryBodyIds": []}\n```\nDone.'),
    st.lists(st.integers(), max_size=2),
    st.integers(),
    st.booleans(),
)
OPERATION_ACTIONS = {"remember": "stored", "link": "linked", "forget": "forgotten"}
OPERATIONS = st.sampled_from(sorted(OPERATION_ACTIONS))


def stage(data: st.DataObject, tools: ToolBox, operation: str, spaces: list[str]) -> set[str]:
    """One to three valid staged writes of ``operation``; the spaces they name."""
    touched: set[str] = set()
    for _ in range(data.draw(st.integers(1, 3))):
        space = data.draw(st.sampled_from(spaces))
        if operation == "remember":
            if data.draw(st.booleans()):
                created = tools.call(
                    "mnemon_memory_body_create", {"name": "New", "description": "New space"}
                )
                space = created["memoryBodyId"]
            content = data.draw(phrases)
            tools.call("mnemon_remember", {"content": content, "memoryBodyId": space})
        elif operation == "link":
            tools.call("mnemon_link", {"sourceId": "a", "targetId": "b", "memoryBodyId": space})
        else:
            tools.call("mnemon_forget", {"id": "ins-1", "memoryBodyId": space})
        touched.add(space)
    return touched


def call_operation(world: World, operation: str) -> object:
    lt = world.root.long_term
    if operation == "remember":
        return lt.remember("a memory to store")
    if operation == "link":
        return lt.link("ins-1", "ins-2")
    return lt.forget("ins-1")


@pytest.mark.parametrize("adversary", ADVERSARIES)
@given(worlds, OPERATIONS, st.data())
def test_an_adversarial_write_worker_changes_no_file_and_no_store(
    adversary: str, spec: list[SpaceSpec], operation: str, data: st.DataObject
) -> None:
    data = WorkerData(data)  # type: ignore[assignment]  # drawn on the worker's thread
    world = build(spec)
    spaces = sorted(world.store.data)
    before = world.snapshot()

    def worker(request: WorkerRequest, tools: ToolBox) -> object:
        tools.call("mnemon_memory_bodies", {})
        touched = stage(data, tools, operation, spaces)
        action = OPERATION_ACTIONS[operation]
        named = data.draw(st.lists(st.sampled_from(sorted(touched)), max_size=3))
        if adversary == "raise_after_staging":
            raise RuntimeError("the model crashed")
        if adversary == "invalid_result":
            return data.draw(invalid_results)
        if adversary == "non_object_result":
            # Regression: a non-object result let AttributeError escape instead of WorkerFailed.
            return data.draw(non_objects)
        if adversary == "unmatched_action":
            staged = {action, "created"} if operation == "remember" else {action}
            other = data.draw(st.sampled_from([a for a in ACTIONS[:6] if a not in staged]))
            return {"summary": "done", "action": other, "memoryBodyIds": named}
        if adversary == "stray_space":
            strays = [s for s in [*spaces, "elsewhere", "pending-space-99"] if s not in touched]
            named.insert(0, data.draw(st.sampled_from(strays)))
            return {"summary": "done", "action": action, "memoryBodyIds": named}
        if adversary == "skipped_with_writes":
            return {"summary": "nothing to do", "action": "skipped", "memoryBodyIds": []}
        forbidden = sorted({*WRITE_TOOLS, *READ_TOOLS, *UNKNOWN_TOOLS} - set(GRANTS[operation]))
        try:
            tools.call(data.draw(st.sampled_from(forbidden)), {"memoryBodyId": spaces[0]})
        except ToolRefused:
            if data.draw(st.booleans(), label="raise the refusal"):
                raise
        return {"summary": "done", "action": action, "memoryBodyIds": named}

    world.workers.scripts["write"] = worker
    event(f"operation {operation}")
    with pytest.raises(WorkerFailed):
        call_operation(world, operation)
    assert world.snapshot() == before, BAD_WRITE_WORKER_CHANGES_NOTHING


@given(worlds, st.data())
def test_an_accepted_write_names_only_written_spaces_and_activates_its_targets(
    spec: list[SpaceSpec], data: st.DataObject
) -> None:
    data = WorkerData(data)  # type: ignore[assignment]  # drawn on the worker's thread
    world = build(spec)
    spaces = sorted(world.store.data)
    was_active = set(world.active())
    remembered: list[tuple[str, str]] = []  # (space or pending id, content)

    def worker(request: WorkerRequest, tools: ToolBox) -> object:
        touched: set[str] = set()
        for _ in range(data.draw(st.integers(1, 3))):
            space = data.draw(st.sampled_from(spaces))
            if data.draw(st.booleans()):
                active = data.draw(st.booleans())
                created = tools.call(
                    "mnemon_memory_body_create",
                    {"name": "Trips", "description": "Travel plans", "active": active},
                )
                space = created["memoryBodyId"]
            content = data.draw(phrases)
            tools.call("mnemon_remember", {"content": content, "memoryBodyId": space})
            remembered.append((space, content))
            touched.add(space)
        named = data.draw(st.lists(st.sampled_from(sorted(touched)), max_size=4))
        return {"summary": "stored", "action": "stored", "memoryBodyIds": named}

    world.workers.scripts["write"] = worker
    receipt = world.root.long_term.remember("a memory to store")
    event(f"wrote into an inactive space: {bool({s for s, _ in remembered} - was_active)}")

    written = {w.space_id for w in receipt.writes}
    assert set(receipt.memory_body_ids) <= written, RECEIPT_SPACES_WERE_WRITTEN
    catalog = {s.id: s for s in world.root.long_term.spaces()}
    remembers = [w for w in receipt.writes if w.tool == "mnemon_remember"]
    assert [w.receipt["content"] for w in remembers] == [c for _, c in remembered]
    for w in remembers:
        insight = world.store.data[w.space_id].insights[w.receipt["id"]]
        assert insight.content == w.receipt["content"], RECEIPT_SPACES_WERE_WRITTEN
        assert catalog[w.space_id].active, RECEIPT_SPACES_WERE_WRITTEN
    targets = {s for s, _ in remembered if not s.startswith("pending-space-")}
    for space in targets - was_active:
        assert catalog[space].active, RECEIPT_SPACES_WERE_WRITTEN


@given(worlds, OPERATIONS, st.data())
def test_a_built_in_write_into_an_inactive_space_activates_it(
    spec: list[SpaceSpec], operation: str, data: st.DataObject
) -> None:
    data = WorkerData(data)  # type: ignore[assignment]  # drawn on the worker's thread
    world = build(spec)
    world.workers.scripts["write"] = BuiltinWorkers().run
    space = data.draw(st.sampled_from(sorted(world.store.data)))
    world.root.long_term.update_space(space, active=False)
    ids = list(world.store.data[space].insights)
    lt = world.root.long_term
    if operation == "link" and len(ids) >= 2:
        a, b = data.draw(st.lists(st.sampled_from(ids), min_size=2, max_size=2, unique=True))
        receipt = lt.link(a, b, space=space)
    elif operation == "forget" and ids:
        receipt = lt.forget(data.draw(st.sampled_from(ids)), space=space)
    else:
        receipt = lt.remember(data.draw(phrases) + " note", space=space)

    assert receipt.memory_body_ids == (space,), RECEIPT_SPACES_WERE_WRITTEN
    assert {w.space_id for w in receipt.writes} == {space}, RECEIPT_SPACES_WERE_WRITTEN
    after = {s.id: s for s in world.root.long_term.spaces()}
    assert after[space].active, RECEIPT_SPACES_WERE_WRITTEN
