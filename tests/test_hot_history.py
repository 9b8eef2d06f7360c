"""The hot-memory history store (``state/hot-history.jsonl``): its exact format, what a
compaction preserves, durability (the paths an append leaves to its caller to fsync), torn-tail
repair, strict reading, the size bound, failures, the real adapter's modes and symlink refusal,
and concurrent appends serialized by the hot-memory lock, as the commits that write it are."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemon_sm.adapters.real import real_ports
from mnemon_sm.errors import (
    CorruptStore,
    InvalidInput,
    StorageError,
    UnknownHistoryEntry,
)
from mnemon_sm.flows.hot import history
from mnemon_sm.flows.hot.history import (
    HISTORY_PATH,
    HistoryRound,
    HotHistory,
    PreservedEntry,
    encode_round,
    preserved_round,
)
from mnemon_sm.flows.hot.maintenance_values import Candidate
from mnemon_sm.flows.hot.model import LOCK_NAME, HotEntry, Importance, Target
from mnemon_sm.ports import Ports
from mnemon_sm.testing.faults import Fault, FaultInjector, faulty_ports
from mnemon_sm.testing.memory import CallLog, MemoryFiles, MemoryLocks, memory_ports

from .test_real_adapter import mode, umask_zero  # noqa: F401  (a fixture)

CREATED = "2026-08-01T00:00:00.000Z"
UPDATED = "2026-08-02T00:00:00.000Z"
AT = "2026-08-13T08:00:00.000Z"
REVISION = "0a1b2c3d" + "e" * 56


def make_round(
    run: str, contents: list[str] | None = None, *, target: Target = "user"
) -> HistoryRound:
    entries = [
        PreservedEntry(f"{run}-{i}", i, content, "normal", CREATED, UPDATED, "removed")
        for i, content in enumerate(contents or [f"fact of {run}"], start=1)
    ]
    return HistoryRound(1, run, AT, target, "local-compaction", REVISION, entries)


def fake() -> tuple[Ports, CallLog, MemoryFiles, MemoryLocks, HotHistory]:
    ports, log = memory_ports()
    assert isinstance(ports.files, MemoryFiles) and isinstance(ports.locks, MemoryLocks)
    return ports, log, ports.files, ports.locks, HotHistory(ports.files)


# -- format --------------------------------------------------------------------------------

GOLDEN = (
    '{"version":1,"id":"mnt-1786608000000-0a1b2c3d","at":"2026-08-13T08:00:00.000Z",'
    '"target":"user","kind":"local-compaction","revision":"' + REVISION + '",'
    '"entries":[{"id":"mnt-1786608000000-0a1b2c3d-2","index":2,'
    '"content":"Prefers café ☕, says \\"hi\\"","importance":"critical",'
    '"createdAt":"2026-08-01T00:00:00.000Z","updatedAt":"2026-08-02T00:00:00.000Z",'
    '"fate":"rewritten"}]}\n'
).encode("utf-8")


def golden_round() -> HistoryRound:
    run = "mnt-1786608000000-0a1b2c3d"
    entry = PreservedEntry(
        id=f"{run}-2",
        index=2,
        content='Prefers café ☕, says "hi"',
        importance="critical",
        created_at=CREATED,
        updated_at=UPDATED,
        fate="rewritten",
    )
    return HistoryRound(1, run, AT, "user", "local-compaction", REVISION, [entry])


def test_one_round_is_one_exact_line_with_camel_case_keys() -> None:
    _, _, files, _, store = fake()
    store.append(golden_round(), durability="full")
    assert files.files[HISTORY_PATH] == GOLDEN
    assert encode_round(golden_round()) == GOLDEN
    assert store.rounds() == [golden_round()]
    assert files.modes[HISTORY_PATH] == 0o600


def test_a_round_without_entries_writes_nothing() -> None:
    _, log, files, _, store = fake()
    empty = HistoryRound(1, "mnt-1-a", AT, "user", "local-compaction", REVISION, [])
    store.append(empty, durability="full")
    assert log.calls == [] and files.files == {}
    assert store.rounds() == [] and store.entries() == []


# -- what a compaction preserves -----------------------------------------------------------

SNAPSHOT = [
    HotEntry("Alpha", "2026-01-01T00:00:00.000Z", "2026-01-01T00:00:01.000Z", "user", "critical"),
    HotEntry("Bravo", "2026-01-02T00:00:00.000Z", "2026-01-02T00:00:01.000Z", "user", "normal"),
    HotEntry("Charlie", "2026-01-03T00:00:00.000Z", "2026-01-03T00:00:01.000Z", "user", "low"),
    HotEntry("Delta", "2026-01-04T00:00:00.000Z", "2026-01-04T00:00:01.000Z", "user", "normal"),
    HotEntry("Echo", "2026-01-05T00:00:00.000Z", "2026-01-05T00:00:01.000Z", "user", "low"),
]


def cand(content: str, *sources: int, importance: Importance = "normal") -> Candidate:
    return Candidate(content, importance, tuple(sources))


# (case, candidates, kept, expected [(index, fate)] in snapshot order)
PRESERVATION_CASES = [
    ("nothing kept: every entry removed", [cand("Alpha", 1)], [],
     [(1, "removed"), (2, "removed"), (3, "removed"), (4, "removed"), (5, "removed")]),
    ("all kept verbatim: nothing preserved",
     [cand(e.content, i) for i, e in enumerate(SNAPSHOT, start=1)], [0, 1, 2, 3, 4], []),
    ("merged sources are rewritten, uncovered entries removed",
     [cand("Alpha", 1), cand("Bravo and Charlie", 2, 3)], [0, 1],
     [(2, "rewritten"), (3, "rewritten"), (4, "removed"), (5, "removed")]),
    ("sources of a candidate packing dropped are removed",
     [cand("Alpha", 1), cand("Bravo and Charlie", 2, 3)], [0],
     [(2, "removed"), (3, "removed"), (4, "removed"), (5, "removed")]),
    ("a verbatim candidate packing dropped does not protect its entry",
     [cand("Alpha", 1), cand("Delta", 4)], [0],
     [(2, "removed"), (3, "removed"), (4, "removed"), (5, "removed")]),
    ("an entry equal to a kept merge is kept, its co-sources rewritten",
     [cand("Delta", 4, 5)], [0],
     [(1, "removed"), (2, "removed"), (3, "removed"), (5, "rewritten")]),
    ("equal content protects an entry even when it is not a source",
     [cand("Echo", 1)], [0],
     [(1, "rewritten"), (2, "removed"), (3, "removed"), (4, "removed")]),
    ("a source of a kept and a dropped candidate is rewritten",
     [cand("Alpha and Bravo", 1, 2), cand("Bravo and Delta", 2, 4)], [1],
     [(1, "removed"), (2, "rewritten"), (3, "removed"), (4, "rewritten"), (5, "removed")]),
    ("an importance raise still keeps a verbatim entry",
     [cand("Charlie", 3, importance="critical")], [0],
     [(1, "removed"), (2, "removed"), (4, "removed"), (5, "removed")]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("candidates", "kept", "expected"),
    [pytest.param(c, k, e, id=name) for name, c, k, e in PRESERVATION_CASES],
)
def test_preserved_round(
    candidates: list[Candidate], kept: list[int], expected: list[tuple[int, str]]
) -> None:
    run = "mnt-1786608000000-0a1b2c3d"
    got = preserved_round(
        run, AT, "user", "local-compaction", REVISION, SNAPSHOT, candidates, kept
    )
    assert (got.version, got.id, got.at, got.target, got.kind, got.revision) == (
        1, run, AT, "user", "local-compaction", REVISION,
    )  # fmt: skip
    assert [(e.index, e.fate) for e in got.entries] == expected
    for e in got.entries:
        source = SNAPSHOT[e.index - 1]
        assert e.id == f"{run}-{e.index}"
        assert (e.content, e.importance, e.created_at, e.updated_at) == (
            source.content, source.importance, source.created_at, source.updated_at,
        )  # fmt: skip


def test_preserved_round_of_an_archive_and_of_an_unknown_kind() -> None:
    got = preserved_round(
        "mnt-1-a", AT, "memory", "long-term-archive", REVISION, SNAPSHOT[:1], [], []
    )
    assert got.kind == "long-term-archive" and got.target == "memory"
    assert [e.fate for e in got.entries] == ["removed"]
    with pytest.raises(ValueError, match="compaction"):
        preserved_round("mnt-1-a", AT, "user", "compaction", REVISION, SNAPSHOT, [], [])


# -- durability ----------------------------------------------------------------------------


def history_calls(log: CallLog) -> list[tuple[str, object]]:
    return [(c.name, c.args[0] if c.args else None) for c in log.calls]


@pytest.mark.parametrize("existing", [False, True], ids=["new file", "existing file"])
@pytest.mark.parametrize("durability", ["full", "normal", "off"])
def test_append_fsyncs_as_the_durability_asks(durability: str, existing: bool) -> None:
    _, log, _, _, store = fake()
    if existing:
        store.append(make_round("mnt-0-a"), durability="off")
        log.clear()
    to_sync = store.append(make_round("mnt-1-a"), durability=durability)
    assert history_calls(log) == [
        ("files.ensure_dir", "state"),
        ("files.read", HISTORY_PATH),
        ("files.append", HISTORY_PATH),
    ]  # the fsyncs are the committing caller's, with its own file, before its commit point
    expected: tuple[str, ...] = () if durability == "off" else (HISTORY_PATH,)
    if durability == "full" and not existing:  # the new file's name in its directory
        expected = (HISTORY_PATH, "state")
    assert to_sync == expected
    assert [r.id for r in store.rounds()] == (["mnt-0-a"] if existing else []) + ["mnt-1-a"]


@pytest.mark.parametrize("durability", ["full", "normal", "off"])
def test_a_rewrite_is_atomic_and_fsyncs_as_the_durability_asks(durability: str) -> None:
    _, log, files, _, store = fake()
    files.put(HISTORY_PATH, b'{"version":1,"id":"to')  # a torn line: the file is rewritten
    assert store.append(make_round("mnt-1-a"), durability=durability) == ()  # synced itself
    names = [name for name, _ in history_calls(log)]
    assert "files.append" not in names
    assert names.index("files.write_temp") < names.index("files.rename")
    assert (names.count("files.fsync"), ("files.fsync", "state") in history_calls(log)) == {
        "full": (2, True), "normal": (1, False), "off": (0, False),
    }[durability]  # fmt: skip


@pytest.mark.parametrize("torn", [False, True], ids=["new file", "rewrite of a torn file"])
def test_full_durability_survives_a_power_loss(torn: bool) -> None:
    ports, _ = memory_ports(track_durability=True)
    files = ports.files
    assert isinstance(files, MemoryFiles)
    store = HotHistory(files)
    old = [make_round("mnt-0-a")] if torn else []
    if torn:
        files.put(HISTORY_PATH, encode_round(old[0]) + b'{"version"')
    for path in store.append(make_round("mnt-1-a"), durability="full"):
        files.fsync(path)  # what the committing caller does before its commit point
    files.lose_power()
    assert store.rounds() == [*old, make_round("mnt-1-a")]


def test_an_append_to_an_existing_file_is_durable_once_the_file_is_fsynced() -> None:
    ports, _ = memory_ports(track_durability=True)
    files = ports.files
    assert isinstance(files, MemoryFiles)
    store = HotHistory(files)
    first, second, third = (make_round(f"mnt-{i}-a") for i in range(3))
    for path in store.append(first, durability="full"):
        files.fsync(path)
    assert store.append(second, durability="full") == (HISTORY_PATH,)  # the name is durable
    files.fsync(HISTORY_PATH)
    store.append(third, durability="full")  # never fsynced: lost with the power
    files.lose_power()
    assert store.rounds() == [first, second]


# -- torn tails ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "torn",
    [b'{"version":1,"id":"mnt-9', b"{", encode_round(make_round("mnt-9-z"))[:-1]],
    ids=["half a line", "one byte", "all but the newline"],
)
@pytest.mark.parametrize("before", [0, 2], ids=["alone", "after two rounds"])
def test_a_torn_last_line_is_ignored_and_repaired_by_the_next_append(
    torn: bytes, before: int
) -> None:
    _, log, files, _, store = fake()
    old = [make_round(f"mnt-{i}-a") for i in range(before)]
    files.put(HISTORY_PATH, b"".join(encode_round(r) for r in old) + torn)
    assert store.rounds() == old
    assert [e.id for _, e in store.entries()] == [f"mnt-{i}-a-1" for i in reversed(range(before))]
    with pytest.raises(UnknownHistoryEntry):
        store.find("mnt-9-z-1")
    new = make_round("mnt-10-a")
    store.append(new, durability="normal")
    assert files.files[HISTORY_PATH] == b"".join(encode_round(r) for r in [*old, new])
    assert store.rounds() == [*old, new]
    assert "files.rename" in log.names() and "files.append" not in log.names()
    log.clear()
    store.append(make_round("mnt-11-a"), durability="normal")  # repaired: a plain append again
    assert "files.append" in log.names() and "files.rename" not in log.names()


# -- strict reading ------------------------------------------------------------------------

GOOD = encode_round(make_round("mnt-1-a")).decode()
CORRUPT_LINES = {
    "not json": b"not json",
    "blank": b"",
    "an array": b"[1]",
    "invalid utf-8": b'{"version":1,"id":"\xff"}',
    "version 2": GOOD.replace('"version":1', '"version":2').encode()[:-1],
    "unknown key": GOOD.replace('"version":1', '"version":1,"extra":0').encode()[:-1],
    "snake case key": GOOD.replace('"createdAt"', '"created_at"').encode()[:-1],
    "missing key": GOOD.replace('"at":"' + AT + '",', "").encode()[:-1],
    "index a string": GOOD.replace('"index":1', '"index":"1"').encode()[:-1],
    "unknown fate": GOOD.replace('"fate":"removed"', '"fate":"lost"').encode()[:-1],
    "unknown target": GOOD.replace('"target":"user"', '"target":"agent"').encode()[:-1],
    "unknown kind": GOOD.replace('"local-compaction"', '"merge"').encode()[:-1],
    "bad importance": GOOD.replace('"normal"', '"high"').encode()[:-1],
}


@pytest.mark.parametrize("bad", list(CORRUPT_LINES.values()), ids=list(CORRUPT_LINES))
def test_a_corrupt_line_fails_reads_but_never_blocks_appends(bad: bytes) -> None:
    _, _, files, _, store = fake()
    before = GOOD.encode() + bad + b"\n"
    files.put(HISTORY_PATH, before)
    for read in (store.rounds, store.entries, lambda: store.find("mnt-1-a-1")):
        with pytest.raises(CorruptStore) as caught:
            read()
        assert caught.value.path == HISTORY_PATH
    new = make_round("mnt-2-a")
    store.append(new, durability="full")
    assert files.files[HISTORY_PATH] == before + encode_round(new)


def test_a_corrupt_line_is_kept_raw_by_a_compaction(monkeypatch: pytest.MonkeyPatch) -> None:
    _, _, files, _, store = fake()
    bad = b'{"version":1,"id":"\xff"}\n'
    files.put(HISTORY_PATH, GOOD.encode() + bad)
    new = make_round("mnt-2-a")
    monkeypatch.setattr(history, "MAX_BYTES", len(GOOD) + len(bad))  # the new line overflows
    monkeypatch.setattr(history, "KEEP_ROUNDS", 2)
    store.append(new, durability="full")
    assert files.files[HISTORY_PATH] == bad + encode_round(new)


# -- the bound -----------------------------------------------------------------------------


def content_of(i: int, size: int) -> str:
    return f"fact {i} " + "é" * ((i * 37) % size)


@pytest.mark.parametrize(
    ("max_bytes", "keep", "size", "budget_wins", "floor_wins"),
    [
        (8192, 4, 100, True, False),  # small rounds: the byte budget decides
        (8192, 3, 600, True, True),  # either rule decides, depending on the sizes
        (2048, 3, 1200, False, True),  # rounds mostly bigger than the budget: the floor wins
        (1024, 1, 1200, False, True),  # a floor of the new round alone
    ],
)
def test_the_file_stays_bounded_and_keeps_the_newest_rounds(
    monkeypatch: pytest.MonkeyPatch,
    max_bytes: int,
    keep: int,
    size: int,
    budget_wins: bool,
    floor_wins: bool,
) -> None:
    monkeypatch.setattr(history, "MAX_BYTES", max_bytes)
    monkeypatch.setattr(history, "KEEP_ROUNDS", keep)
    _, log, files, _, store = fake()
    budget = max_bytes // 2
    ids: list[str] = []
    won = {"budget": False, "floor": False}
    for i in range(150):
        r = make_round(f"mnt-{i}-a", [content_of(i, size), content_of(i + 1, size // 2)])
        before = files.files.get(HISTORY_PATH, b"").splitlines(keepends=True)
        log.clear()
        store.append(r, durability="off")
        ids.append(r.id)
        data, line = files.files[HISTORY_PATH], encode_round(r)
        got = [x.id for x in store.rounds()]
        assert got == ids[-len(got) :], "the rounds are the newest ones, in order"
        assert len(got) >= min(len(ids), keep), "the newest KEEP_ROUNDS rounds are there"
        assert len(data) <= max_bytes or len(got) <= keep, "the bound, unless the floor wins"
        if "files.rename" not in log.names():  # a plain append, within the bound
            assert data == b"".join(before) + line and len(data) <= max_bytes
            continue
        assert len(b"".join(before)) + len(line) > max_bytes, "compacted only past the bound"
        kept = len(got) - 1
        assert data == b"".join(before[len(before) - kept :]) + line
        if kept > keep - 1:  # more than the floor: all within the budget
            assert len(data) <= budget
            won["budget"] = True
        if kept < len(before):  # the next older line did not fit, or the floor allowed it
            assert kept == keep - 1 or len(data) + len(before[-kept - 1]) > budget
            won["floor"] = won["floor"] or len(data) > budget
    assert won == {"budget": budget_wins, "floor": floor_wins}


def test_the_floor_wins_over_the_byte_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(history, "MAX_BYTES", 512)
    monkeypatch.setattr(history, "KEEP_ROUNDS", 3)
    _, _, files, _, store = fake()
    rounds = [make_round(f"mnt-{i}-a", ["x" * 600]) for i in range(6)]
    for n, r in enumerate(rounds, start=1):
        store.append(r, durability="off")
        assert store.rounds() == rounds[max(0, n - 3) : n]
    assert len(files.files[HISTORY_PATH]) > 3 * 600


@pytest.mark.parametrize(
    ("slack", "compacted"), [(0, False), (-1, True)], ids=["exactly full", "one byte over"]
)
def test_a_compaction_keeps_the_newest_lines_that_fit_half_the_bound(
    monkeypatch: pytest.MonkeyPatch, slack: int, compacted: bool
) -> None:
    _, _, files, _, store = fake()
    old = [make_round(f"mnt-{i}-a", ["y" * 100]) for i in range(10, 20)]
    files.put(HISTORY_PATH, b"".join(encode_round(r) for r in old))
    line = len(encode_round(old[0]))  # every line has this size
    new = make_round("mnt-20-a", ["y" * 100])
    # 11 lines fill the bound exactly; one byte less and 5 lines fit in half of it
    monkeypatch.setattr(history, "MAX_BYTES", 11 * line + slack)
    monkeypatch.setattr(history, "KEEP_ROUNDS", 2)
    store.append(new, durability="full")
    assert store.rounds() == ([*old[-4:], new] if compacted else [*old, new])


def test_a_compaction_keeps_lines_that_fill_half_the_bound_exactly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, _, files, _, store = fake()
    old = [make_round(f"mnt-{i}-a", ["y" * 100]) for i in range(10, 20)]
    files.put(HISTORY_PATH, b"".join(encode_round(r) for r in old))
    line = len(encode_round(old[0]))
    new = make_round("mnt-20-a", ["y" * 100])
    monkeypatch.setattr(history, "MAX_BYTES", 10 * line + 1)  # half: 5 lines and a half byte
    monkeypatch.setattr(history, "KEEP_ROUNDS", 2)
    store.append(new, durability="full")
    assert store.rounds() == [*old[-4:], new]
    assert len(files.files[HISTORY_PATH]) == 5 * line == history.MAX_BYTES // 2


# -- entries and find ----------------------------------------------------------------------


def test_entries_are_newest_round_first_and_filter_by_target() -> None:
    _, _, _, _, store = fake()
    r1 = make_round("mnt-1-a", ["u1", "u2"])
    r2 = make_round("mnt-2-a", ["m1"], target="memory")
    r3 = make_round("mnt-3-a", ["u3", "u4", "u5"])
    for r in (r1, r2, r3):
        store.append(r, durability="off")
    assert [(r.id, e.id) for r, e in store.entries()] == [
        ("mnt-3-a", "mnt-3-a-1"), ("mnt-3-a", "mnt-3-a-2"), ("mnt-3-a", "mnt-3-a-3"),
        ("mnt-2-a", "mnt-2-a-1"),
        ("mnt-1-a", "mnt-1-a-1"), ("mnt-1-a", "mnt-1-a-2"),
    ]  # fmt: skip
    assert [e.content for _, e in store.entries("user")] == ["u3", "u4", "u5", "u1", "u2"]
    assert [e.content for _, e in store.entries(target="memory")] == ["m1"]
    with pytest.raises(InvalidInput):
        store.entries("agent")
    assert store.find("mnt-2-a-1") == (r2, r2.entries[0])
    assert store.find("mnt-3-a-3") == (r3, r3.entries[2])


def test_find_of_an_unknown_id_and_of_a_repeated_one() -> None:
    _, _, files, _, store = fake()
    with pytest.raises(UnknownHistoryEntry, match="mnt-1-a-1"):
        store.find("mnt-1-a-1")  # no file at all
    older = make_round("mnt-1-a", ["older"])
    newer = make_round("mnt-1-a", ["newer"])
    files.put(HISTORY_PATH, encode_round(older) + encode_round(newer))
    assert store.find("mnt-1-a-1") == (newer, newer.entries[0])
    with pytest.raises(UnknownHistoryEntry, match="mnt-1-a-2") as caught:
        store.find("mnt-1-a-2")
    assert isinstance(caught.value, LookupError)


# -- failures ------------------------------------------------------------------------------


def faulty_store(old: bytes, faults: list[Fault]) -> tuple[HotHistory, Ports, FaultInjector]:
    inner, _ = memory_ports()
    assert isinstance(inner.files, MemoryFiles)
    inner.files.put(HISTORY_PATH, old)
    injector = FaultInjector(faults)
    ports = faulty_ports(inner, injector)
    return HotHistory(ports.files), inner, injector


@pytest.mark.parametrize("torn", [False, True], ids=["append", "rewrite"])
def test_every_failing_port_call_propagates_and_leaves_no_temporary_file(torn: bool) -> None:
    first, new = make_round("mnt-1-a"), make_round("mnt-2-a")
    old = encode_round(first) + (b'{"ver' if torn else b"")
    written = encode_round(first) + encode_round(new)
    store, _, counter = faulty_store(old, [])
    store.append(new, durability="full")
    assert ("files.write_temp" in counter.names) is torn
    for at, name in enumerate(counter.names):
        store, inner, _ = faulty_store(old, [Fault(at, "fail")])
        assert isinstance(inner.files, MemoryFiles) and isinstance(inner.locks, MemoryLocks)
        with pytest.raises(StorageError, match="injected"):
            store.append(new, durability="full")
        assert inner.files.files[HISTORY_PATH] in (old, written), name
        assert list(inner.files.files) == [HISTORY_PATH], f"{name}: a temporary file is left"


# -- the real adapter ----------------------------------------------------------------------


@pytest.mark.usefixtures("umask_zero")
def test_real_files_are_0600_in_a_0700_directory(tmp_path: Path) -> None:
    ports = real_ports(tmp_path)
    store = HotHistory(ports.files)
    store.append(make_round("mnt-1-a"), durability="full")
    path = tmp_path / HISTORY_PATH
    assert mode(path) == 0o600 and mode(tmp_path / "state") == 0o700
    with path.open("ab") as handle:  # a torn line: the next append rewrites the file
        handle.write(b'{"version":1')
    store.append(make_round("mnt-2-a"), durability="full")
    assert mode(path) == 0o600
    assert [r.id for r in store.rounds()] == ["mnt-1-a", "mnt-2-a"]
    assert sorted(os.listdir(tmp_path / "state")) == ["hot-history.jsonl"]


@pytest.mark.parametrize("dangling", [False, True], ids=["existing target", "dangling"])
def test_a_symlinked_history_file_is_never_followed(tmp_path: Path, dangling: bool) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside.jsonl"
    original = encode_round(make_round("mnt-0-outside"))
    if not dangling:
        outside.write_bytes(original)
    (root / "state").mkdir(parents=True)
    (root / HISTORY_PATH).symlink_to(outside)
    ports = real_ports(root)
    store = HotHistory(ports.files)
    with pytest.raises(StorageError, match="symbolic link"):
        store.append(make_round("mnt-1-a"), durability="full")
    with pytest.raises(StorageError, match="symbolic link"):
        store.rounds()
    if dangling:
        assert not outside.exists()
    else:
        assert outside.read_bytes() == original
    assert (root / HISTORY_PATH).is_symlink()


def symlinked_state(tmp_path: Path) -> tuple[Path, Path, bytes]:
    root, outside = tmp_path / "root", tmp_path / "elsewhere"
    outside.mkdir()
    original = encode_round(make_round("mnt-0-outside"))
    (outside / "hot-history.jsonl").write_bytes(original)
    root.mkdir()
    (root / "state").symlink_to(outside, target_is_directory=True)
    return root, outside, original


def test_an_append_never_goes_through_a_symlinked_state_directory(tmp_path: Path) -> None:
    root, outside, original = symlinked_state(tmp_path)
    ports = real_ports(root)
    with pytest.raises(StorageError, match="symbolic link"):
        HotHistory(ports.files).append(make_round("x"), durability="full")
    assert os.listdir(outside) == ["hot-history.jsonl"]
    assert (outside / "hot-history.jsonl").read_bytes() == original


def test_a_read_never_goes_through_a_symlinked_state_directory(tmp_path: Path) -> None:
    root, _, _ = symlinked_state(tmp_path)
    ports = real_ports(root)
    with pytest.raises(StorageError, match="symbolic link"):
        HotHistory(ports.files).rounds()


@pytest.mark.parametrize("compacting", [False, True], ids=["appends", "appends and rewrites"])
def test_two_threads_appending_lose_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compacting: bool
) -> None:
    if compacting:  # past 2 KiB every append rewrites the file (the floor keeps them all)
        monkeypatch.setattr(history, "MAX_BYTES", 2048)
        monkeypatch.setattr(history, "KEEP_ROUNDS", 1000)
    errors: list[BaseException] = []

    def run(name: str) -> None:
        ports = real_ports(tmp_path)  # its own adapters, as another process would have
        store = HotHistory(ports.files)
        try:
            for i in range(50):
                ports.locks.acquire(LOCK_NAME, 10_000)  # a commit holds the hot-memory lock
                try:
                    round_ = make_round(f"mnt-{name}-{i}", [f"{name} {i}"])
                    for path in store.append(round_, durability="normal"):
                        ports.files.fsync(path)
                finally:
                    ports.locks.release(LOCK_NAME)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    real_ports(tmp_path).files.ensure_dir("runtime")  # where the hot-memory lock lives
    threads = [threading.Thread(target=run, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    ports = real_ports(tmp_path)
    ids = [r.id for r in HotHistory(ports.files).rounds()]
    assert len(ids) == 100
    for name in ("a", "b"):
        assert [i for i in ids if i.startswith(f"mnt-{name}-")] == [
            f"mnt-{name}-{i}" for i in range(50)
        ]


@given(
    st.lists(
        st.tuples(
            st.text(min_size=1, max_size=30),
            st.sampled_from(["critical", "normal", "low"]),
            st.sampled_from(["removed", "rewritten"]),
        ),
        max_size=4,
    ),
    st.sampled_from(["user", "memory"]),
)
def test_the_hand_written_encoder_equals_the_converter(
    items: list[tuple[str, Importance, str]], target: Target
) -> None:
    from mnemon_sm.convert import converter

    entries = [
        PreservedEntry(f"r-{i}", i, c, imp, CREATED, UPDATED, fate)  # type: ignore[arg-type]
        for i, (c, imp, fate) in enumerate(items, 1)
    ]
    round_ = HistoryRound(1, "r", AT, target, "local-compaction", REVISION, entries)
    expected = json.dumps(converter.unstructure(round_), ensure_ascii=False, separators=(",", ":"))
    assert encode_round(round_) == (expected + "\n").encode("utf-8")
