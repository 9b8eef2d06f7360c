"""Host checks of maintenance results, over generated worker results.

- Packing (pure): the kept set fits the budget, keeps original order, truncates nothing and
  respects importance priority (every skipped candidate did not fit when its turn came).
- Adversarial results (USER.md compactions and MEMORY.md archives with one generated defect:
  omitted, duplicated, out-of-range and non-integer indexes, empty sources, lowered importance,
  over-budget or duplicate content, bad content, a declined or wrong action, extra or missing
  keys, unknown or mismatched archive ids, stray writes): every one is rejected with the rule
  its defect breaks, and every file of the root and every long-term record is unchanged. Every
  defect kind, and every value a kind may use (each bad index, content, action, key), is a
  test case of its own, so each is exercised on every run; Hypothesis draws the rest.
- Valid results: accepted; the compacted target holds the packed candidates then the pending
  add, within the budget, in original order, and every archived entry is an active insight.
- INV-MNT-10: an overflow maintenance does not apply to (the caller opted out, or the root is
  read-only) runs no worker, writes nothing and is reported as the very error the hot-memory
  flow gave, whatever the target and its entries.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from mnemon_sm import Config, MemoryRoot
from mnemon_sm.errors import CapacityExceeded, MaintenanceRejected
from mnemon_sm.flows.hot.model import normalize
from mnemon_sm.flows.hot.packing import RANK, budget, joined_size, pack
from mnemon_sm.ports import Ports
from mnemon_sm.ports.workers import ToolBox, WorkerRequest
from mnemon_sm.testing.longterm import ScriptedWorkers
from mnemon_sm.testing.maintenance import archive_script, insight_contents, seed, world
from mnemon_sm.testing.memory import memory_ports
from property_tests.threads import WorkerData

UNCHANGED = "INV-MNT-1"  # a refused maintenance leaves every file byte-identical
COVERED = "INV-MNT-2"  # a committed compaction covers / archives every snapshot entry
PACKED = "INV-MNT-3"  # importance kept, budget met, original order kept
DECLINED = "INV-MNT-10"  # no maintenance where it does not apply: the overflow as it was
CONFIG = Config(durability="off", user_limit=512, memory_limit=1024)
LEVELS = ("critical", "normal", "low")
levels = st.sampled_from(LEVELS)

# -- packing -----------------------------------------------------------------------------------

candidates = st.lists(
    st.tuples(st.text(st.characters(codec="utf-8"), min_size=1, max_size=40), levels),
    max_size=12,
)


@given(candidates, st.integers(0, 300))
@example(
    [
        ("normal candidate that cannot join the critical one", "normal"),
        ("critical rule", "critical"),
        ("low detail", "low"),
    ],
    28,
)
def test_packing_fits_keeps_order_and_priority(items: list[tuple[str, str]], limit: int) -> None:
    kept = pack(items, limit)
    assert list(kept) == sorted(set(kept)), PACKED
    assert joined_size([items[i][0] for i in kept]) <= limit, PACKED
    priority = sorted(range(len(items)), key=lambda i: (-RANK[items[i][1]], i))
    for skipped in set(range(len(items))) - set(kept):
        before = [i for i in priority[: priority.index(skipped)] if i in kept]
        assert joined_size([items[i][0] for i in [*before, skipped]]) > limit, PACKED
    if items == [
        ("normal candidate that cannot join the critical one", "normal"),
        ("critical rule", "critical"),
        ("low detail", "low"),
    ]:
        assert kept == (1, 2)


@given(st.integers(256, 1_048_576), st.integers(0, 9000))
def test_budget_leaves_room_for_the_pending_add(limit: int, pending: int) -> None:
    room = budget(limit, pending)
    assert room >= 0
    if room > 0:
        assert room + 4 + pending <= limit  # the compacted target plus the add fits


# -- generated snapshots and results -------------------------------------------------------------


@attrs.frozen
class Case:
    target: str
    entries: list[tuple[str, str]]  # (content, importance)
    pending: str
    result: Any  # the raw result (USER.md) or the compacted entries (MEMORY.md)
    defect: str | None


def _entries(draw: Any, target: str, total: int) -> list[tuple[str, str]]:
    n = draw(st.integers(2, 6))
    size = total // n
    out = []
    for i in range(n):
        head = f"{target} fact {i}: "
        out.append((head + "abcdefghij"[i] * (size - len(head)), draw(levels)))
    return out


def _groups(draw: Any, n: int, *, cover_all: bool) -> list[list[int]]:
    order = draw(st.permutations(range(1, n + 1)))
    if not cover_all:
        order = order[: draw(st.integers(0, n))]
    groups: list[list[int]] = []
    for index in order:
        if groups and draw(st.booleans()):
            groups[-1].append(index)
        else:
            groups.append([index])
    return groups


def _compacted(draw: Any, entries: list[tuple[str, str]], groups: list[list[int]]) -> list[Any]:
    out = []
    for k, group in enumerate(groups):
        floor = max(RANK[entries[i - 1][1]] for i in group)
        importance = draw(st.sampled_from([lv for lv in LEVELS if RANK[lv] >= floor]))
        out.append({"content": f"merged {k}", "importance": importance, "sourceIndexes": group})
    return out


USER_DEFECTS = {
    "omit": "source-omitted",
    "duplicate-index": "source-duplicate",
    "out-of-range": "source-range",
    "non-integer": "schema",
    "empty-sources": "source-missing",
    "lowered": "importance-lowered",
    "lowered-merged": "importance-lowered",  # below the highest source, above the lowest
    "over-budget": "budget",
    "duplicate-content": "duplicate-content",
    "bad-content": "content",
    "declined": "declined",
    "wrong-action": "schema",
    "extra-key": "schema",
    "missing-key": "schema",
    "not-an-object": "schema",
}


#: The values a compaction defect kind uses, each one a test case ("n+1": one past the last
#: entry; "<where>:<key>": the key removed from the result or from its first entry).
VARIANTS: dict[str, list[Any]] = {
    "out-of-range": [0, -1, "n+1", 10**9],
    "non-integer": [1.0, "1", True, None, [1]],
    "bad-content": ["", "   ", "a § b", "x" * 8193],
    "wrong-action": ["archived", "compact", "", "COMPACTED"],
    "extra-key": ["result", "entry"],
    "missing-key": [
        "result:summary",
        "result:action",
        "result:compactedEntries",
        "entry:content",
        "entry:importance",
        "entry:sourceIndexes",
    ],
    "not-an-object": [[], "compacted", 42, "NoneType"],
}


def cases(defects: dict[str, str], variants: dict[str, list[Any]]) -> list[Any]:
    """One ``(defect, variant)`` test case per kind and value (``None``: a kind of one)."""
    return [
        pytest.param(defect, variant, id=f"{defect}-{i}" if defect in variants else defect)
        for defect in sorted(defects)
        for i, variant in enumerate(variants.get(defect, [None]))
    ]


def _where(result: dict[str, Any], first: dict[str, Any], variant: str) -> tuple[Any, str]:
    """The mapping a ``<where>:<key>`` variant names, and the key."""
    scope, _, key = variant.partition(":")
    return (result if scope == "result" else first), key


def _break(
    draw: Any, defect: str, result: dict[str, Any], n: int, room: int, variant: Any = None
) -> Any:
    """Apply one defect to a valid compaction result (entries under compactedEntries);
    ``variant`` is the value the defect uses (see :data:`VARIANTS`)."""
    entries = result["compactedEntries"]
    if defect == "omit":
        group = entries[-1]["sourceIndexes"]
        if len(group) > 1:
            group.pop()
        else:
            entries.pop()
    elif defect == "duplicate-index":  # the repeat is met before that entry's importance
        entries[-1]["sourceIndexes"].append(entries[0]["sourceIndexes"][0])
    elif defect == "out-of-range":
        entries[0]["sourceIndexes"].append(n + 1 if variant == "n+1" else variant)
    elif defect == "non-integer":
        entries[0]["sourceIndexes"][0] = variant
    elif defect == "empty-sources":
        entries.append({"content": "an extra entry", "importance": "low", "sourceIndexes": []})
    elif defect == "lowered":
        entries[0]["importance"] = "low"  # entry 1 is critical and in the first group
    elif defect == "lowered-merged":  # entries 1 (critical) and 2 (low) share the first group
        entries[0]["importance"] = "normal"
    elif defect == "over-budget":
        entries[0]["content"] = "w" * (room + 1)
    elif defect == "duplicate-content":
        if len(entries) == 1:
            used = entries[0]["sourceIndexes"]
            free = [i for i in range(1, n + 1) if i not in used]
            spare = used.pop() if len(used) > 1 or not free else free[0]
            entries.append({"content": "x", "importance": "critical", "sourceIndexes": [spare]})
        entries[1]["content"] = "  " + entries[0]["content"].replace(" ", "\t ") + " "
        entries[1]["importance"] = "critical"
    elif defect == "bad-content":
        entries[0]["content"] = variant
    elif defect == "declined":
        result["action"] = "failed"
    elif defect == "wrong-action":
        result["action"] = variant
    elif defect == "extra-key":
        (result if variant == "result" else entries[0])["note"] = "unexpected"
    elif defect == "missing-key":
        where, key = _where(result, entries[0], variant)
        del where[key]
    elif defect == "not-an-object":
        return variant
    return result


@st.composite
def user_cases(draw: Any, defect: st.SearchStrategy[str | None], variant: Any = None) -> Case:
    chosen = draw(defect)
    entries = _entries(draw, "user", 420)
    if chosen in ("lowered", "lowered-merged"):
        entries[0] = (entries[0][0], "critical")
    if chosen == "lowered-merged":
        entries[1] = (entries[1][0], "low")
    groups = _groups(draw, len(entries), cover_all=True)
    if chosen == "lowered-merged":
        groups = [[1, 2], *([i] for i in range(3, len(entries) + 1))]
    if chosen == "lowered":
        groups.sort(key=lambda g: 1 not in g)
    result = {"summary": "merged", "action": "compacted"}
    result["compactedEntries"] = _compacted(draw, entries, groups)  # type: ignore[assignment]
    pending = "pending " + "p" * 112
    room = budget(512, len(pending))
    if chosen is not None:
        broken = _break(draw, chosen, result, len(entries), room, variant)
        return Case("user", entries, pending, broken, chosen)
    return Case("user", entries, pending, result, None)


def _open(case: Case, workers: ScriptedWorkers) -> tuple[MemoryRoot, Ports]:
    ports, _ = memory_ports()
    ports = attrs.evolve(ports, workers=workers)
    root = MemoryRoot.open("/unused", CONFIG, ports=ports)
    root.long_term.create_space("Build", "Build facts", active=True)
    seed(ports, [(case.target, c, i) for c, i in case.entries])  # type: ignore[misc]
    return MemoryRoot.open("/unused", CONFIG, ports=ports), ports


def _refused(
    case: Case, workers: ScriptedWorkers, unrelated: list[str] | None = None
) -> MaintenanceRejected:
    root, ports = _open(case, workers)
    if unrelated is not None:  # an insight of other text, which a defect may point at
        with root.long_term.mutex:
            receipt = root.long_term.service.remember(UNRELATED, space_id="default")
        unrelated.append(str(receipt["id"]))
    before = world(ports)
    try:
        root.hot.add(case.target, case.pending)
    except MaintenanceRejected as exc:
        assert world(ports) == before, UNCHANGED
        return exc
    raise AssertionError(f"a result with defect {case.defect!r} was accepted")


# A few examples per case: the cases (about 80 of them) are what covers the kinds.
PER_KIND = settings(max_examples=max(3, settings().max_examples // 15))


@pytest.mark.parametrize(("defect", "variant"), cases(USER_DEFECTS, VARIANTS))
@PER_KIND
@given(data=st.data())
def test_every_defective_compaction_is_rejected_and_changes_nothing(
    defect: str, variant: Any, data: st.DataObject
) -> None:
    case = data.draw(user_cases(st.just(defect), variant), label="case")
    workers = ScriptedWorkers({"compact": lambda _r, _t: copy.deepcopy(case.result)})
    error = _refused(case, workers)
    assert case.defect is not None
    assert error.rule == USER_DEFECTS[case.defect], (case.defect, error.message)


def _check_packed(root: MemoryRoot, case: Case, proposed: list[dict[str, Any]]) -> None:
    hot = root.hot.snapshot().of(case.target)  # type: ignore[arg-type]
    assert hot[-1].content == case.pending
    kept = [(e.content, e.importance) for e in hot[:-1]]
    items = [(normalize(c["content"], "content"), c["importance"]) for c in proposed]
    room = budget(root.config.limit(case.target), len(case.pending))
    assert joined_size([c for c, _ in kept]) <= room, PACKED
    positions = [items.index(k) for k in kept]
    assert positions == sorted(positions), PACKED
    priority = sorted(range(len(items)), key=lambda i: (-RANK[items[i][1]], i))
    for skipped in set(range(len(items))) - set(positions):
        before = [i for i in priority[: priority.index(skipped)] if i in positions]
        assert joined_size([items[i][0] for i in [*before, skipped]]) > room, PACKED


@given(user_cases(st.none()))
def test_every_valid_compaction_is_accepted_and_packed(case: Case) -> None:
    workers = ScriptedWorkers({"compact": lambda _r, _t: copy.deepcopy(case.result)})
    root, ports = _open(case, workers)
    receipt = root.hot.add(case.target, case.pending)
    assert receipt.maintenance is not None and receipt.maintenance.kind == "local-compaction"
    proposed = case.result["compactedEntries"]
    covered = sorted(i for c in proposed for i in c["sourceIndexes"])
    assert covered == list(range(1, len(case.entries) + 1)), COVERED
    _check_packed(root, case, proposed)
    assert insight_contents(ports) == {"default": []}


# -- archives ----------------------------------------------------------------------------------

ARCHIVE_DEFECTS = {
    "omit-row": "archive-omitted",
    "duplicate-row": "archive-duplicate",
    "range-row": "archive-range",
    "non-integer-row": "schema",
    "unknown-pending": "archive-unknown",
    "space-as-insight": "archive-unknown",
    "mismatch": "archive-mismatch",
    "stray-remember": "archive-stray-write",
    "stray-space": "archive-stray-write",
    "claimed-space": "archive-spaces",
    "lowered": "importance-lowered",
    "out-of-range": "source-range",
    "duplicate-index": "source-duplicate",
    "empty-sources": "source-missing",
    "duplicate-content": "duplicate-content",
    "bad-content": "content",
    "declined": "declined",
    "wrong-action": "schema",
    "extra-key": "schema",
    "missing-key": "schema",
    "paraphrase": "archive-content",  # a remember that does not hold its entry's text
    "unnamed-remember": "archive-mismatch",  # a remember naming no space
    "unrelated-insight": "archive-content",  # an existing insight holding other text
}
UNRELATED = "Unrelated: the office plant needs water"
COMPACTED_DEFECTS = {
    "lowered",
    "out-of-range",
    "duplicate-index",
    "empty-sources",
    "duplicate-content",
    "bad-content",
}
#: The values an archive defect kind uses (the compaction defects' own, and the archive's).
ARCHIVE_VARIANTS: dict[str, list[Any]] = {
    **{defect: VARIANTS[defect] for defect in sorted(COMPACTED_DEFECTS) if defect in VARIANTS},
    "range-row": [0, "n+1", -3],
    "non-integer-row": ["1", 1.5, None],
    "extra-key": ["result", "row"],
    "missing-key": [
        "result:summary",
        "result:action",
        "result:memoryBodyIds",
        "result:archived",
        "result:compactedEntries",
        "row:sourceIndex",
        "row:memoryBodyId",
        "row:id",
    ],
}


@st.composite
def memory_cases(draw: Any, defect: st.SearchStrategy[str | None]) -> Case:
    chosen = draw(defect)
    entries = _entries(draw, "memory", 900)
    entries[0] = (entries[0][0], "critical")
    groups = _groups(draw, len(entries), cover_all=False)
    if chosen in COMPACTED_DEFECTS and not any(1 in g for g in groups):
        groups.insert(0, [1])  # the defects edit the first entry, whose source 1 is critical
    groups.sort(key=lambda g: 1 not in g)
    compacted = _compacted(draw, entries, groups)
    for c in compacted:  # long enough that packing has to choose
        c["content"] += " " + "k" * draw(st.integers(0, 300))
    return Case("memory", entries, "pending " + "p" * 192, compacted, chosen)


def _archive_defect(
    draw: Any, case: Case, unrelated: list[str], variant: Any = None
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """(corrupt, extra) for the archive script (``unrelated``: ids of insights holding other
    text; ``variant``: the value the defect uses, see :data:`ARCHIVE_VARIANTS`)."""
    defect, n = case.defect, len(case.entries)

    def corrupt(result: dict[str, Any]) -> dict[str, Any]:
        rows = result["archived"]
        if defect in COMPACTED_DEFECTS:
            wrapped = {"compactedEntries": result["compactedEntries"]}
            _break(draw, defect, wrapped, n, 0, variant)
        elif defect == "omit-row":
            rows.pop(draw(st.integers(0, n - 1)))
        elif defect == "duplicate-row":
            rows.append(dict(rows[0]))
        elif defect == "range-row":
            rows[0]["sourceIndex"] = n + 1 if variant == "n+1" else variant
        elif defect == "non-integer-row":
            rows[0]["sourceIndex"] = variant
        elif defect == "unknown-pending":
            rows[0]["id"] = "pending-999"
        elif defect == "space-as-insight":
            rows[0]["id"] = "pending-space-1"
        elif defect == "mismatch":
            rows[0]["memoryBodyId"] = "other"
        elif defect in ("paraphrase", "unnamed-remember"):
            rows[0]["id"] = f"pending-{n + 1}"  # the remember ``extra`` stages
        elif defect == "unrelated-insight":
            rows[0]["id"] = unrelated[0]
        elif defect == "claimed-space":
            result["memoryBodyIds"].append("elsewhere")
        elif defect == "declined":
            result["action"] = "failed"
        elif defect == "wrong-action":
            result["action"] = "compacted"
        elif defect == "extra-key":
            (result if variant == "result" else rows[0])["note"] = 1
        elif defect == "missing-key":
            where, key = _where(result, rows[0], variant)
            del where[key]
        return result

    def extra(tools: ToolBox) -> None:
        first = case.entries[0][0]
        if defect == "paraphrase":
            words = first.split()
            tools.call(
                "mnemon_remember", {"content": " ".join(words[:3]), "memoryBodyId": "default"}
            )
        elif defect == "unnamed-remember":
            tools.call("mnemon_remember", {"content": first})
        if defect == "stray-remember":
            tools.call("mnemon_remember", {"content": case.pending, "memoryBodyId": "default"})
        elif defect == "stray-space":
            tools.call("mnemon_memory_body_create", {"name": "Empty", "description": "unused"})

    return corrupt, extra


@pytest.mark.parametrize(("defect", "variant"), cases(ARCHIVE_DEFECTS, ARCHIVE_VARIANTS))
@PER_KIND
@given(data=st.data())
def test_every_defective_archive_is_rejected_and_writes_nothing(
    defect: str, variant: Any, data: st.DataObject
) -> None:
    case = data.draw(memory_cases(st.just(defect)), label="case")
    unrelated: list[str] = []
    # drawn on the worker's thread
    corrupt, extra = _archive_defect(WorkerData(data).draw, case, unrelated, variant)
    script = archive_script(
        "default",
        keep=lambda _: copy.deepcopy(case.result),
        corrupt=corrupt,
        extra=extra,
        skip=(1,) if defect == "unrelated-insight" else (),  # row 1 points elsewhere
    )
    error = _refused(case, ScriptedWorkers({"archive": script}), unrelated)
    assert case.defect is not None
    assert error.rule == ARCHIVE_DEFECTS[case.defect], (case.defect, error.message)


@given(memory_cases(st.none()))
def test_every_valid_archive_is_accepted_packed_and_recallable(case: Case) -> None:
    seen: list[WorkerRequest] = []

    def script(request: WorkerRequest, tools: ToolBox) -> object:
        seen.append(request)
        return archive_script("default", keep=lambda _: copy.deepcopy(case.result))(request, tools)

    root, ports = _open(case, ScriptedWorkers({"archive": script}))
    assume(root.hot.snapshot().usage["memory"][0] + 4 + len(case.pending) > 1024)
    receipt = root.hot.add(case.target, case.pending)
    assert receipt.maintenance is not None and receipt.maintenance.kind == "long-term-archive"
    assert receipt.maintenance.memory_body_ids == ("default",)
    stored = insight_contents(ports)["default"]
    assert sorted(stored) == sorted(c for c, _ in case.entries), COVERED
    _check_packed(root, case, case.result)


# -- where maintenance does not apply -------------------------------------------------------------


@given(
    case=st.one_of(user_cases(st.none()), memory_cases(st.none())),
    importance=st.none() | levels,
    read_only=st.booleans(),
)
def test_an_overflow_maintenance_does_not_apply_to_is_reported_unchanged(
    case: Case, importance: str | None, read_only: bool
) -> None:
    workers = ScriptedWorkers({})  # any worker run would be recorded (and fail)
    root, ports = _open(case, workers)
    try:
        root.hot.preview("add", case.target, content=case.pending, importance=importance)
    except CapacityExceeded as exc:
        overflow = exc
    else:
        assume(False)  # the generated entries left room for the add
    before = world(ports)
    if read_only:  # a public add is refused as ReadOnly first: the flow's own guard is shown
        ro = MemoryRoot.open("/unused", attrs.evolve(CONFIG, write_enabled=False), ports=ports)
        flow = ro._maintenance
        request = {"target": case.target, "content": case.pending, "importance": importance}
        with pytest.raises(CapacityExceeded) as caught:
            flow.perform("overflowed", request=request, overflow=overflow, maintenance=True)
        assert caught.value is overflow, DECLINED
    else:
        flow = root._maintenance
        with pytest.raises(CapacityExceeded) as caught:
            root.hot.add(case.target, case.pending, importance, maintenance=False)
        reported = caught.value
        assert (reported.message, reported.target, reported.used) == (
            overflow.message,
            overflow.target,
            overflow.used,
        ), DECLINED
        assert (reported.projected, reported.limit) == (overflow.projected, overflow.limit)
    assert workers.requests == [] and world(ports) == before, DECLINED
    assert flow.state == "idle", DECLINED


def test_every_variant_belongs_to_a_defect_kind() -> None:
    """A misspelt kind in a variant table would quietly run that kind once, with no value."""
    assert set(VARIANTS) <= set(USER_DEFECTS)
    assert set(ARCHIVE_VARIANTS) <= set(ARCHIVE_DEFECTS)
