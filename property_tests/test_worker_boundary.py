"""Any exception, BaseException included, leaves every flow at rest and usable.

Enumerated, not sampled:

1. Every flow that runs a worker x every exception type (``KeyboardInterrupt``, ``SystemExit``,
   ``GeneratorExit``, ``asyncio.CancelledError`` and an ordinary ``RuntimeError``). The worker
   stages writes where its tools allow, then raises. A ``BaseException`` comes out of the
   public call unchanged (the very object), an ``Exception`` as ``WorkerFailed``; nothing is
   written (every file and every long-term record is byte-identical), no lock is held, the
   flow rests, and the same operation then works. A background review that raises fails
   (recorded, activity kept, nothing written) and the agent keeps working.
2. Every state a spec gives an ``abort`` transition x ``KeyboardInterrupt``: the state's entry
   action raises once; the exception propagates unchanged, the machine is back at rest, no
   lock is held, and the same operation then works.
3. Every port call of a hot add, replace and remove, and of a maintenance round (by the state
   it is made in) x every exception type plus ``KeyError``: an error the library does not
   expect propagates unchanged (never a receipt), hot memory is unchanged, no lock is held,
   the flows rest, and the same operation then works.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from typing import Any

import attrs
import pytest

from mnemon_sm import Config, MemoryRoot, WorkerFailed
from mnemon_sm.adapters.workers.builtin import BuiltinWorkers
from mnemon_sm.engine.spec import ABORT, flow_names, load_flow
from mnemon_sm.flows.hot.model import SOURCE_PATH
from mnemon_sm.ports import Ports
from mnemon_sm.ports.workers import ToolBox, WorkerRequest
from mnemon_sm.testing.embed import FakeEmbedder
from mnemon_sm.testing.faults import RaisingPort
from mnemon_sm.testing.flows import flow_contexts, migration_flow, retarget
from mnemon_sm.testing.maintenance import seed, world
from mnemon_sm.testing.memory import memory_ports

AT_REST = {
    "recall": "INV-REC-4",
    "direct_search": "INV-SEA-2",
    "agent_search": "INV-ASK-2",
    "merge_spaces": "INV-MRG-2",
    "memory_spaces": "INV-SPC-1",
    "document_search": "INV-DSR-2",
    "long_term_write": "INV-WR-3",
    "document_mutation": "INV-DOC-6",
    "hot_memory_maintenance": "INV-MNT-8",
    "agent_lifecycle": "INV-LIF-8",
    "hot_memory_mutation": "INV-HOT-9",
    "store_upkeep": "INV-UPK-3",
    "root_migration": "INV-MIG-3",
}
CONFIG = Config(durability="off", user_limit=512, memory_limit=1024, documents_active_limit=2048)
ERRORS: list[Callable[[], BaseException]] = [
    lambda: KeyboardInterrupt(),
    lambda: SystemExit(3),
    lambda: GeneratorExit(),
    lambda: asyncio.CancelledError(),
    lambda: RuntimeError("model unavailable"),
]
ERROR_IDS = ["KeyboardInterrupt", "SystemExit", "GeneratorExit", "CancelledError", "RuntimeError"]


class Once:
    """Workers whose ``kind`` raises ``error`` once (after ``before`` staged what it could);
    the built-in workers answer every other run."""

    def __init__(self, kind: str, error: BaseException, before: Callable[..., object]) -> None:
        self.kind, self.error, self.before = kind, error, before
        self.builtin, self.armed, self.fired = BuiltinWorkers(), False, False

    def run(self, request: WorkerRequest, tools: ToolBox) -> object:
        if request.kind == self.kind and self.armed and not self.fired:
            self.fired = True
            self.before(request, tools)
            raise self.error
        return self.builtin.run(request, tools)


def _nothing(request: WorkerRequest, tools: ToolBox) -> None:
    pass


def _stage_remember(request: WorkerRequest, tools: ToolBox) -> None:
    spaces = tools.call("mnemon_memory_bodies", {})
    tools.call(
        "mnemon_remember", {"content": "staged, never written", "memoryBodyId": spaces[0]["id"]}
    )


def _open(ports: Ports) -> MemoryRoot:
    return MemoryRoot.open("/r", CONFIG, ports=ports)


def _memory_facts(ports: Ports) -> None:
    seed(ports, [("memory", f"Fact {i}: " + "m" * 140, "normal") for i in range(6)])


def _user_facts(ports: Ports) -> None:
    base = "User prefers concise answers " + "c" * 70
    seed(
        ports,
        [("user", base, "normal"), ("user", base.upper(), "low"), ("user", base + "!", "normal")],
    )


def _with_space(root: MemoryRoot) -> None:
    root.long_term.create_space("Work", "Project facts and decisions", active=True)
    root.long_term.remember("The deploy script lives in tools/deploy.sh", space="default")


@attrs.frozen
class Case:
    """One flow that runs a worker: how to prepare a root and run its operation."""

    flow: str
    kind: str
    stage: Callable[[WorkerRequest, ToolBox], None]
    prepare: Callable[[MemoryRoot, Ports], None]
    operation: Callable[[MemoryRoot], object]
    context: Callable[[MemoryRoot], Any]
    searches_first: bool = False  # its deterministic search counts access before the worker


def _writes(ports: Ports, *, ignore_access: bool) -> Any:
    """Every file and long-term record (access counts left out when a search may move them)."""
    files, long_term = world(ports)
    if ignore_access:
        long_term = {
            space: ({k: attrs.evolve(i, access_count=0) for k, i in insights.items()}, *rest)
            for space, (insights, *rest) in long_term.items()
        }
    return files, long_term


WORKER_CASES = [
    Case(
        "recall",
        "recall",
        _nothing,  # a recall's reads count access: it raises before any
        lambda root, ports: _with_space(root),
        lambda root: root.long_term.recall("deploy script"),
        lambda root: root.long_term._recall,
    ),
    Case(
        "agent_search",
        "answer",
        _nothing,
        lambda root, ports: _with_space(root),
        lambda root: root.long_term.ask("where is the deploy script"),
        lambda root: root.long_term._agent,
        searches_first=True,
    ),
    Case(
        "long_term_write",
        "write",
        _stage_remember,
        lambda root, ports: _with_space(root),
        lambda root: root.long_term.remember("Releases happen on Fridays", space="default"),
        lambda root: root.long_term._write,
    ),
    Case(
        "hot_memory_maintenance",
        "compact",
        _nothing,  # the compactor has no tools
        lambda root, ports: _user_facts(ports),
        lambda root: root.hot.add("user", "User collects old maps " + "m" * 190),
        lambda root: root._maintenance,
    ),
    Case(
        "hot_memory_maintenance",
        "archive",
        _stage_remember,
        lambda root, ports: (_with_space(root), _memory_facts(ports)),
        lambda root: root.hot.add("memory", "A new fact that does not fit " + "x" * 200),
        lambda root: root._maintenance,
    ),
    Case(
        "document_mutation",
        "document_archive",
        _stage_remember,
        lambda root, ports: (_with_space(root), root.documents.create("First", "a" * 1200)),
        lambda root: root.documents.create("Second", "b" * 1200),
        lambda root: root.documents._flow,
    ),
]


@pytest.mark.parametrize("error", ERRORS, ids=ERROR_IDS)
@pytest.mark.parametrize("case", WORKER_CASES, ids=[f"{c.flow}-{c.kind}" for c in WORKER_CASES])
def test_a_worker_exception_leaves_the_flow_at_rest_and_usable(
    case: Case, error: Callable[[], BaseException]
) -> None:
    raised = error()
    workers = Once(case.kind, raised, case.stage)
    ports, _ = memory_ports()
    ports = attrs.evolve(ports, workers=workers)
    case.prepare(_open(ports), ports)
    workers.armed = True
    root = _open(ports)
    before = _writes(ports, ignore_access=case.searches_first)
    expected = WorkerFailed if isinstance(raised, Exception) else type(raised)
    with pytest.raises(expected) as caught:
        case.operation(root)
    invariant = AT_REST[case.flow]
    assert workers.fired, invariant
    if not isinstance(raised, Exception):
        assert caught.value is raised, invariant  # re-raised unchanged
    after = _writes(ports, ignore_access=case.searches_first)
    assert after == before, invariant  # staged writes dropped, nothing written
    assert not ports.locks.held, invariant  # type: ignore[attr-defined]
    assert case.context(root).state == "idle", invariant
    case.operation(root)  # the same operation now works
    assert case.context(root).state == "idle", invariant


@pytest.mark.parametrize("error", ERRORS, ids=ERROR_IDS)
def test_a_review_worker_exception_fails_the_review_and_the_agent_goes_on(
    error: Callable[[], BaseException],
) -> None:
    raised = error()

    def stage_hot(request: WorkerRequest, tools: ToolBox) -> None:
        tools.call("mnemon_runtime_memory", {"action": "add", "target": "user", "content": "X"})

    workers = Once("review", raised, stage_hot)
    workers.armed = True
    ports, _ = memory_ports()
    root = _open(attrs.evolve(ports, workers=workers))
    agent = root.lifecycle("main")

    def eligible_turn(turn: int) -> None:
        text = "remember that the staging port is 8443 " + "p" * 200
        message = {"id": f"m{turn}", "role": "user", "content": [{"type": "text", "text": text}]}
        agent.pre_step(turn, 1, [{**message, "source": {"kind": "user"}}])
        agent.turn_stopping(turn, [{"type": "tool/result", "turn": turn}] * 5)
        agent.turn_ended(turn)

    eligible_turn(1)
    agent.tick(ports.clock.now_ms() + CONFIG.idle_review_ms)
    assert agent.join(30)
    status = agent.status()
    invariant = "INV-LIF-6"
    assert workers.fired and status["lastReview"]["action"] == "failed", invariant
    assert status["activity"]["turns"] == 1 and root.hot.snapshot().entries == (), invariant
    eligible_turn(2)  # usable: the next eligible turn arms, and the review now works
    agent.tick(ports.clock.now_ms() + 2 * CONFIG.idle_review_ms)
    assert agent.join(30) and agent.status()["lastReview"]["action"] == "stored", invariant
    assert [e.content for e in root.hot.snapshot().entries] == [
        "The staging port is 8443 " + "p" * 200
    ]


# -- every abort transition ---------------------------------------------------------------------


def _abortable() -> list[tuple[str, str]]:
    pairs = []
    for flow in flow_names():
        spec = load_flow(flow).spec
        pairs += sorted({(flow, t.source) for t in spec.transitions if t.event == ABORT})
    return pairs


def _prepare_long_term(root: MemoryRoot, ports: Ports) -> None:
    _with_space(root)


def _prepare_merge(root: MemoryRoot, ports: Ports) -> None:
    _with_space(root)
    other = root.long_term.create_space("Old notes", "Notes from the old wiki", active=True)
    root.long_term.remember("The wiki moved in 2024", space=other.id)


DRIVERS: dict[
    str, tuple[Callable[[MemoryRoot, Ports], object], Callable[[MemoryRoot], object]]
] = {
    "recall": (_prepare_long_term, lambda root: root.long_term.recall("deploy script")),
    "direct_search": (_prepare_long_term, lambda root: root.long_term.search("deploy script")),
    "agent_search": (_prepare_long_term, lambda root: root.long_term.ask("where is deploy")),
    "long_term_write": (_prepare_long_term, lambda root: root.long_term.remember("Fridays")),
    "merge_spaces": (
        _prepare_merge,
        lambda root: root.long_term.merge(
            "default", [s.id for s in root.long_term.spaces() if s.id != "default"]
        ),
    ),
    "memory_spaces": (_prepare_long_term, lambda root: root.long_term.spaces()),
    "document_search": (
        lambda root, ports: root.documents.create("Runbook", "deploy steps"),
        lambda root: root.documents.search("deploy"),
    ),
    "document_mutation": (
        lambda root, ports: (_with_space(root), root.documents.create("First", "a" * 1200)),
        lambda root: root.documents.create("Second", "b" * 1200),
    ),
    "root_migration": (  # the root's files and a space, into a new empty target each time
        lambda root, ports: None,
        lambda root: retarget(migration_flow(root)).perform("migrate", batch=2),
    ),
    "hot_memory_maintenance": (
        lambda root, ports: (_with_space(root), _memory_facts(ports)),
        lambda root: root.hot.add("memory", "A new fact that does not fit " + "x" * 200),
    ),
    "hot_memory_mutation": (
        lambda root, ports: root.hot.add("user", "User prefers black tea"),
        lambda root: root.hot.add("user", "User drinks it without sugar"),
    ),
    "store_upkeep": (  # preparing and importing
        _prepare_long_term,
        lambda root: root.long_term.remember_many(["Kiwis ripen in May"], space="default"),
    ),
}


def _an_insight(root: MemoryRoot) -> str:
    return root.long_term.search("deploy script").hits[0].insight.id


def _another_space(root: MemoryRoot) -> str:
    return next(s.id for s in root.long_term.spaces() if s.id != "default")


# The states of a flow with several operations that its driver above does not reach.
STATE_DRIVERS: dict[
    tuple[str, str],
    tuple[Callable[[MemoryRoot, Ports], object], Callable[[MemoryRoot], object]],
] = {
    ("direct_search", "relating"): (
        _prepare_long_term,
        lambda root: root.long_term.related(_an_insight(root), space="default"),
    ),
    ("direct_search", "reporting"): (
        _prepare_long_term,
        lambda root: root.long_term.status("default"),
    ),
    ("memory_spaces", "creating"): (
        _prepare_long_term,
        lambda root: root.long_term.create_space("Scratch", "Temporary notes"),
    ),
    ("memory_spaces", "updating"): (
        _prepare_long_term,
        lambda root: root.long_term.update_space("default", description="Facts of the project"),
    ),
    ("hot_memory_mutation", "repairing"): (  # a render that finds USER.md edited by hand
        lambda root, ports: root.hot.add("user", "User prefers black tea"),
        lambda root: (
            root._ports.files.put("runtime/USER.md", b"edited by hand\n"),  # type: ignore[attr-defined]
            root.context.runtime_memory(),
        ),
    ),
    ("memory_spaces", "deleting"): (
        _prepare_merge,
        lambda root: root.long_term.delete_space(_another_space(root)),
    ),
    ("store_upkeep", "embedding"): (
        _prepare_long_term,
        lambda root: root.long_term.embed_missing(),
    ),
    ("store_upkeep", "indexing"): (
        _prepare_long_term,
        lambda root: root.long_term.rebuild_index(),
    ),
    # Closing ends in the final state either way: "usable" is closing again being a no-op.
    ("document_mutation", "closing"): (
        lambda root, ports: root.documents.create("Runbook", "Deploy steps"),
        lambda root: _close_documents(root),
    ),
}


def _close_documents(root: MemoryRoot) -> None:
    if root.documents._flow.state != "closed":
        root.documents._flow.close()


@pytest.mark.parametrize(("flow", "state"), [p for p in _abortable() if p[0] in DRIVERS])
def test_an_exception_in_any_abortable_state_brings_the_flow_back_to_rest(
    flow: str, state: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded = load_flow(flow)
    # The last entry action: whatever the earlier ones took (a lock) must be given back.
    action = loaded.spec.state_defs[state]["enter"][-1]
    original = getattr(loaded.context_class, action)
    interrupt = KeyboardInterrupt(f"in {flow}.{state}")
    fired: list[str] = []

    @functools.wraps(original)  # the engine passes what the original's signature asks for
    def once(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not fired and self.state == state:  # the action may serve other states too
            fired.append(state)
            raise interrupt
        return original(self, *args, **kwargs)

    ports, _ = memory_ports(embedder=FakeEmbedder())  # a store that can backfill and reindex
    prepare, operation = STATE_DRIVERS.get((flow, state), DRIVERS[flow])
    prepare(_open(ports), ports)
    monkeypatch.setattr(loaded.context_class, action, once)  # machines built from now on
    root = _open(ports)
    with pytest.raises(KeyboardInterrupt) as caught:
        operation(root)
    invariant = AT_REST[flow]
    assert caught.value is interrupt and fired == [state], invariant
    context = flow_contexts(root)[flow]()
    assert context.state in loaded.spec.resting, invariant
    assert not ports.locks.held, invariant  # type: ignore[attr-defined]
    operation(root)  # usable: the same operation works now
    assert context.state in loaded.spec.resting, invariant


def test_the_lifecycle_states_that_abort_are_the_review_states() -> None:
    assert [s for f, s in _abortable() if f == "agent_lifecycle"] == ["applying", "reviewing"]
    assert {f for f, _ in _abortable()} == set(DRIVERS) | {"agent_lifecycle"}


def _reviewing_agent(root: MemoryRoot, ports: Ports) -> Any:
    agent = root.lifecycle("main")
    text = "remember that the staging port is 8443 " + "p" * 200
    message = {"id": "m1", "role": "user", "content": [{"type": "text", "text": text}]}
    agent.pre_step(1, 1, [{**message, "source": {"kind": "user"}}])
    agent.turn_stopping(1, [{"type": "tool/result", "turn": 1}] * 5)
    agent.turn_ended(1)
    return agent


def test_an_exception_starting_a_review_leaves_the_agent_idle_and_usable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mnemon_sm.flows.lifecycle.agent import LifecycleFlow

    original = LifecycleFlow.start_review
    interrupt = KeyboardInterrupt("starting the review")
    calls: list[int] = []

    def once(self: LifecycleFlow, now: int) -> None:
        calls.append(now)
        if len(calls) == 1:
            raise interrupt
        original(self, now)

    monkeypatch.setattr(LifecycleFlow, "start_review", once)
    ports, _ = memory_ports()
    root = _open(ports)
    agent = _reviewing_agent(root, ports)
    due = ports.clock.now_ms() + CONFIG.idle_review_ms
    with pytest.raises(KeyboardInterrupt) as caught:
        agent.tick(due)
    assert caught.value is interrupt and agent.state == "idle", AT_REST["agent_lifecycle"]
    assert agent.score.turns == 1 and agent.status()["lastReview"] is None
    _reviewing_agent(root, ports)  # the next eligible turn re-arms and the review runs
    agent.tick(due + CONFIG.idle_review_ms)
    assert agent.join(30) and agent.status()["lastReview"]["action"] == "stored"


def test_an_exception_applying_a_review_leaves_the_agent_idle_and_usable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mnemon_sm.flows.lifecycle.agent import LifecycleFlow

    original = LifecycleFlow.apply_review
    calls: list[int] = []

    @functools.wraps(original)
    def once(self: LifecycleFlow, *args: Any, **kwargs: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt("applying the review")
        original(self, *args, **kwargs)

    uncaught: list[BaseException | None] = []
    monkeypatch.setattr(LifecycleFlow, "apply_review", once)
    monkeypatch.setattr(threading, "excepthook", lambda args: uncaught.append(args.exc_value))
    ports, _ = memory_ports()
    root = _open(ports)
    agent = _reviewing_agent(root, ports)
    due = ports.clock.now_ms() + CONFIG.idle_review_ms
    agent.tick(due)
    assert agent.join(30) and agent.state == "idle", AT_REST["agent_lifecycle"]
    # the review's own thread had no caller to hand it to: it reached the thread's hook
    assert [type(e) for e in uncaught] == [KeyboardInterrupt]
    assert agent.status()["lastReview"] is None and root.hot.snapshot().entries == ()
    _reviewing_agent(root, ports)
    agent.tick(due + CONFIG.idle_review_ms)
    assert agent.join(30) and agent.status()["lastReview"]["action"] == "stored"


# -- an exception from a port, in the middle of hot memory and of maintenance ----------------
#
# The library turns only its own expected failures (a ``StorageError``, a rejection) into
# typed errors; anything else a port raises (a ``RuntimeError``, a ``KeyError``, a
# ``BaseException``) is a bug or an interruption and must reach the caller unchanged. An engine
# built with ``catch_errors_as_events=True`` would swallow it and carry on: an add whose commit
# raised would then return a success receipt with nothing written.

FULL = attrs.evolve(CONFIG, durability="full")  # so a commit fsyncs: every port method is met
UNEXPECTED = [*ERRORS, lambda: KeyError("slot")]
UNEXPECTED_IDS = [*ERROR_IDS, "KeyError"]
HOT_PORT_CALLS = [
    ("locks", "acquire"),
    ("files", "read"),
    ("clock", "now_ms"),
    ("files", "write_temp"),
    ("files", "fsync"),
    ("files", "rename"),
]
HOT_OPERATIONS: dict[str, Callable[[MemoryRoot], Any]] = {
    "add": lambda root: root.hot.add("user", "User prefers green tea"),
    "replace": lambda root: root.hot.replace("user", "black tea", "User prefers coffee"),
    "remove": lambda root: root.hot.remove("user", "black tea"),
}


def _raising_root(
    port: str, method: str, error: BaseException, **kwargs: Any
) -> tuple[MemoryRoot, Ports, RaisingPort]:
    """A root whose ``port`` raises ``error`` from ``method`` once armed (``kwargs``: when);
    the plain ports come back too, to look at what was written."""
    ports, _ = memory_ports()
    raising = RaisingPort(getattr(ports, port), method, error, **kwargs)
    root = MemoryRoot.open("/r", FULL, ports=attrs.evolve(ports, **{port: raising}))
    return root, ports, raising


def _raises_unchanged(operation: Callable[[], object], raising: RaisingPort) -> None:
    """``operation`` raises the very error the port raised: no receipt, no wrapper."""
    raising.armed = True
    with pytest.raises(type(raising.error)) as caught:  # a receipt: "DID NOT RAISE"
        operation()
    assert raising.fired and caught.value is raising.error


@pytest.mark.parametrize("error", UNEXPECTED, ids=UNEXPECTED_IDS)
@pytest.mark.parametrize(
    ("port", "method"), HOT_PORT_CALLS, ids=[".".join(c) for c in HOT_PORT_CALLS]
)
@pytest.mark.parametrize("operation", sorted(HOT_OPERATIONS))
def test_an_unexpected_port_error_in_a_hot_mutation_propagates_and_the_root_stays_usable(
    operation: str, port: str, method: str, error: Callable[[], BaseException]
) -> None:
    root, ports, raising = _raising_root(port, method, error())
    root.hot.add("user", "User prefers black tea")
    source, entries = ports.files.read(SOURCE_PATH), root.hot.snapshot().entries
    _raises_unchanged(lambda: HOT_OPERATIONS[operation](root), raising)
    invariant = AT_REST["hot_memory_mutation"]
    assert ports.files.read(SOURCE_PATH) == source, invariant
    assert root.hot.snapshot().entries == entries, invariant
    assert not ports.locks.held, invariant  # type: ignore[attr-defined]
    assert root._flow.state in load_flow("hot_memory_mutation").spec.resting, invariant
    receipt = HOT_OPERATIONS[operation](root)  # the same operation now works
    assert receipt.success and root.hot.snapshot().entries != entries, invariant


#: Port calls of a maintenance round, by the state they are made in: (state, port, method).
MAINTENANCE_PORT_CALLS = [
    ("snapshotting", "files", "read_if_changed"),
    ("snapshotting", "clock", "now_ms"),
    ("archiving", "long_term", "remember"),
    ("archiving", "files", "rename"),  # the journal's update
    ("committing", "locks", "acquire"),
    ("committing", "files", "append"),  # the hot-memory history
    ("committing", "files", "rename"),
]
ROUNDS: dict[str, tuple[Callable[[MemoryRoot, Ports], object], Callable[[MemoryRoot], Any]]] = {
    "compact": (
        lambda root, ports: _user_facts(ports),
        lambda root: root.hot.add("user", "User collects old maps " + "m" * 190),
    ),
    "archive": (
        lambda root, ports: (_with_space(root), _memory_facts(ports)),
        lambda root: root.hot.add("memory", "A new fact that does not fit " + "x" * 200),
    ),
}


def _round_calls() -> list[tuple[str, str, str, str]]:
    """Every (round, state, port, method) that round makes (a compaction archives nothing)."""
    return [
        (kind, *call)
        for kind in ROUNDS
        for call in MAINTENANCE_PORT_CALLS
        if kind == "archive" or call[0] != "archiving"
    ]


@pytest.mark.parametrize(
    "error",
    [UNEXPECTED[0], *UNEXPECTED[-2:]],
    ids=["KeyboardInterrupt", "RuntimeError", "KeyError"],
)
@pytest.mark.parametrize(
    ("kind", "state", "port", "method"), _round_calls(), ids=["-".join(c) for c in _round_calls()]
)
def test_an_unexpected_port_error_in_a_maintenance_round_propagates_and_the_root_stays_usable(
    kind: str, state: str, port: str, method: str, error: Callable[[], BaseException]
) -> None:
    reopened: list[MemoryRoot] = []  # the root whose maintenance state picks the call
    first, ports, raising = _raising_root(
        port, method, error(), when=lambda: reopened[0]._maintenance.state == state
    )
    prepare, operation = ROUNDS[kind]
    prepare(first, ports)
    reopened.append(root := MemoryRoot.open("/r", FULL, ports=first._ports))  # sees the seed
    source, entries = ports.files.read(SOURCE_PATH), root.hot.snapshot().entries
    _raises_unchanged(lambda: operation(root), raising)
    invariant = AT_REST["hot_memory_maintenance"]
    assert ports.files.read(SOURCE_PATH) == source, invariant
    assert root.hot.snapshot().entries == entries, invariant
    assert not ports.locks.held, invariant  # type: ignore[attr-defined]
    assert root._maintenance.state == "idle", invariant
    assert root._flow.state in load_flow("hot_memory_mutation").spec.resting, invariant
    receipt = operation(root)  # the same round now runs to the end
    assert receipt.maintenance is not None and receipt.maintenance.kind == (
        "local-compaction" if kind == "compact" else "long-term-archive"
    ), invariant
