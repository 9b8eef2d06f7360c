"""Stateful test: a real storage root against the reference model, one request at a time.

A ``RuleBasedStateMachine`` opens ``MemoryRoot`` on a temporary directory (real file system,
``durability="off"`` for speed) and sends generated add / replace / remove requests, valid and
invalid, often sized to land on a capacity edge. Every receipt and every typed error is
compared with :mod:`property_tests.model`. Other rules reopen the root (a new ``MemoryRoot``
on the same directory, older instances stay usable), render the per-turn context, read a
snapshot, and overwrite a projection behind the library's back, which the next open or render
must repair.

Checked after every rule: the source parses and matches the model (INV-HOT-1), no target is
over its limit (INV-HOT-5), entries are unique and normalized (INV-HOT-6) and the lock is free
(INV-HOT-8); after a rejected request every file under ``runtime/`` is byte-identical
(INV-HOT-4); after opening or rendering each projection equals its rendering (INV-HOT-3).
"""

from __future__ import annotations

import itertools
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import Phase, event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from mnemon_sm.adapters.postgres import PgBackend
from mnemon_sm.adapters.real import RealFiles, RealLocks, real_ports
from mnemon_sm.config import Config
from mnemon_sm.errors import CorruptStore, LockTimeout
from mnemon_sm.flows.hot.context_text import render_runtime_memory
from mnemon_sm.flows.hot.invariants import check
from mnemon_sm.flows.hot.model import (
    LOCK_NAME,
    SOURCE_PATH,
    HotEntry,
    HotStore,
    parse_source,
    projection_path,
)
from mnemon_sm.ports import Files, Locks
from mnemon_sm.root import MemoryRoot
from mnemon_sm.testing.faults import Fault, FaultInjector, SimulatedCrash, faulty_ports
from mnemon_sm.testing.pg_cluster import Cluster
from mnemon_sm.testing.strategies import hot_stores, mutation_requests
from property_tests.model import TARGETS, HotModel, entries_of, mismatch

UNTOUCHED = "INV-HOT-4"  # a rejected request leaves every file under runtime/ byte-identical
LOCK_FREE = "INV-HOT-8"  # the lock is never held between operations
LOCK_FILE = LOCK_NAME.rpartition("/")[2]
PROJECTION_NAMES = {"user": "USER.md", "memory": "MEMORY.md"}
LIMITS = st.one_of(
    st.none(), st.tuples(st.integers(256, 700), st.integers(256, 1600)), st.just((256, 256))
)


def runtime_files(files: Files) -> dict[str, bytes | None]:
    """Every file under ``runtime/`` (the reference's lock file excepted) with its bytes."""
    return {
        name: files.read(f"runtime/{name}") for name in files.list("runtime") if name != LOCK_FILE
    }


def rendering(contents: list[str]) -> bytes:
    """What a projection must hold for these contents (reference 8.2)."""
    return ("\n§\n".join(contents) + "\n").encode("utf-8") if contents else b""


def quoted(text: str) -> str:
    """How the context quotes file text: no closing wrapper tag, everything else as it is."""
    return re.sub(r"</(runtime-memory-file)", r"<\\/\1", text, flags=re.IGNORECASE)


def context_problems(
    text: str, contents: dict[str, list[str]], limits: dict[str, int]
) -> list[str]:
    """Differences between a rendered context and the files it must quote."""
    problems = []
    for target, name in PROJECTION_NAMES.items():
        mine = contents[target]
        used = len("\n§\n".join(mine).encode("utf-8"))
        if f"; {used}/{limits[target]} UTF-8 bytes)" not in text:
            problems.append(f"{name}: usage header {used}/{limits[target]} missing")
        body = quoted("\n§\n".join(mine)) if mine else "(empty)"
        block = f'<runtime-memory-file name="{name}">\n{body}\n</runtime-memory-file>'
        if block not in text:
            problems.append(f"{name}: the context does not quote {mine!r} exactly")
    return problems


class HotMemoryMachine(RuleBasedStateMachine):
    """One storage root on disk, several ``MemoryRoot`` instances, one reference model."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="mnemon-stateful-"))
        self.location: str | Path = self.dir  # what MemoryRoot.open is given
        self.files: Files = RealFiles(self.dir)
        self.config = Config(durability="off")
        self.model = HotModel({t: self.config.limit(t) for t in TARGETS})
        self.roots: list[MemoryRoot] = []
        self.edited: set[str] = set()  # projections overwritten since the last repair

    # -- helpers ---------------------------------------------------------------------------

    def expected_projections(self) -> dict[str, bytes]:
        return {
            projection_path(t): rendering([e.content for e in self.model.of(t)]) for t in TARGETS
        }

    def assert_repaired(self, when: str) -> None:
        """INV-HOT-3 after opening or rendering, by the library's check and by the model."""
        problems = check(self.files, self.config, "INV-HOT-3")
        for path, expected in self.expected_projections().items():
            if self.files.read(path) != expected:
                problems.append(f"INV-HOT-3: {path} is not the rendering of the model")
        assert not problems, f"after {when} (edited: {sorted(self.edited)}): {problems}"
        self.edited.clear()

    def root(self, which: int) -> MemoryRoot:
        return self.roots[which % len(self.roots)]

    # -- rules -----------------------------------------------------------------------------

    @initialize(limits=LIMITS)
    def open_root(self, limits: tuple[int, int] | None) -> None:
        if limits is not None:
            self.config = Config(durability="off", user_limit=limits[0], memory_limit=limits[1])
        self.model = HotModel({t: self.config.limit(t) for t in TARGETS})
        self.roots.append(MemoryRoot.open(self.location, self.config))
        self.assert_repaired("opening")

    @rule(data=st.data(), which=st.integers(0, 3))
    def mutate(self, data: st.DataObject, which: int) -> None:
        request = data.draw(mutation_requests(self.model.contents(), self.model.limits))
        prediction = self.model.predict(**request.kwargs())
        event(f"{request.action}: {prediction.error or prediction.message}")
        before = runtime_files(self.files)
        outcome = request.send(self.root(which).hot)
        problem = mismatch(prediction, outcome)
        assert problem is None, f"{request}: {problem}"
        if not prediction.writes:
            # INV-HOT-4 (rejections) and the duplicate add: nothing under runtime/ changed.
            assert runtime_files(self.files) == before, f"{UNTOUCHED}: {request} changed files"
        self.model.apply(prediction)
        # The commit protocol keeps every projection nobody edited behind our back in step.
        for path, expected in self.expected_projections().items():
            if path not in self.edited:
                assert self.files.read(path) == expected, f"{path} out of step after {request}"

    @rule()
    def reopen(self) -> None:
        self.roots.append(MemoryRoot.open(self.location, self.config))
        del self.roots[:-3]  # keep the last three instances in play
        self.assert_repaired("reopening")

    @rule(which=st.integers(0, 3))
    def render_context(self, which: int) -> None:
        text = self.root(which).context.runtime_memory()
        contents = {t: [e.content for e in self.model.of(t)] for t in TARGETS}
        problems = context_problems(text, contents, self.model.limits)
        assert not problems, problems
        self.assert_repaired("rendering the context")

    @rule(which=st.integers(0, 3))
    def read_snapshot(self, which: int) -> None:
        snap = self.root(which).hot.snapshot()
        assert entries_of(snap.entries) == self.model.entries
        for t in TARGETS:
            assert snap.usage[t] == (self.model.used(t), self.model.limits[t])
        assert snap.revision == parse_source(self.files.read(SOURCE_PATH)).revision()

    @rule(
        which_file=st.sampled_from(("user", "user", "memory")),
        data=st.one_of(
            st.binary(max_size=40),
            st.text(max_size=20).map(lambda s: s.encode("utf-8", "surrogatepass")),
            st.just(b""),
        ),
    )
    def edit_projection_externally(self, which_file: str, data: bytes) -> None:
        path = projection_path(which_file)
        self.write_behind_the_librarys_back(path, data)
        if data != self.expected_projections()[path]:
            self.edited.add(path)

    def write_behind_the_librarys_back(self, path: str, data: bytes) -> None:
        (self.dir / path).write_bytes(data)  # in place, as an editor may

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def source_is_valid_and_matches_the_model(self) -> None:
        problems = check(self.files, self.config, "INV-HOT-1", "INV-HOT-5", "INV-HOT-6")
        assert not problems, problems
        store = parse_source(self.files.read(SOURCE_PATH))
        assert entries_of(store.entries) == self.model.entries, "source differs from the model"

    def lock_probe(self) -> Locks:
        return RealLocks(self.dir)

    @invariant()
    def lock_is_free(self) -> None:
        probe = self.lock_probe()
        try:
            probe.acquire(LOCK_NAME, 100)
        except LockTimeout:
            raise AssertionError(f"{LOCK_FREE}: the lock is held between operations") from None
        probe.release(LOCK_NAME)

    def teardown(self) -> None:
        for root in self.roots:
            root.close()
        shutil.rmtree(self.dir, ignore_errors=True)


# Three times the profile's examples, twice its steps: runs are cheap (durability off) and
# long request sequences are what fill targets up to their limits. No explain phase: its
# line tracing of every step would dominate the time of a failing run.
HotMemoryMachine.TestCase.settings = settings(
    max_examples=3 * settings().max_examples,
    stateful_step_count=2 * settings().stateful_step_count,
    phases=[p for p in settings().phases if p is not Phase.explain],
)
TestHotMemoryStateful = HotMemoryMachine.TestCase


_CLUSTER: list[Cluster] = []  # the session's PostgreSQL server, handed over by the fixture below
_pg_roots = itertools.count()


@pytest.fixture(autouse=True)
def _postgres_for_the_stateful_machine(request: pytest.FixtureRequest) -> None:
    if request.cls is TestPostgresHotMemoryStateful and not _CLUSTER:
        _CLUSTER.append(request.getfixturevalue("postgres_cluster"))


class PostgresHotMemoryMachine(HotMemoryMachine):
    """The same machine on a root on PostgreSQL (a new root of one database per run); the
    external edit is a write through the Files port, the lock probe another host's."""

    def __init__(self) -> None:
        super().__init__()
        self.location = _CLUSTER[0].url(f"stateful-{next(_pg_roots)}")
        self.backend = PgBackend(self.location)
        self.probe_backend = PgBackend(self.location)
        self.files = self.backend.files

    def write_behind_the_librarys_back(self, path: str, data: bytes) -> None:
        temp = self.files.write_temp(path, data)
        self.files.rename(temp, path)

    def lock_probe(self) -> Locks:
        return self.probe_backend.locks

    def teardown(self) -> None:
        super().teardown()
        self.probe_backend.close()
        self.backend.close()


PostgresHotMemoryMachine.TestCase.settings = settings(
    max_examples=settings().max_examples,
    stateful_step_count=2 * settings().stateful_step_count,
    phases=[p for p in settings().phases if p is not Phase.explain],
)
TestPostgresHotMemoryStateful = PostgresHotMemoryMachine.TestCase


# -- focused examples ----------------------------------------------------------------------


def test_render_repairs_an_externally_edited_projection() -> None:
    """INV-HOT-3: rendering the context repairs a projection edited behind the root's back
    (reference 8.5: "manual edits to USER.md/MEMORY.md are overwritten by repair")."""
    with tempfile.TemporaryDirectory() as tmp:
        config = Config(durability="off")
        root = MemoryRoot.open(tmp, config)
        root.hot.add("user", "User prefers concise replies")
        (Path(tmp) / "runtime" / "USER.md").write_bytes(b"edited by hand\n")
        root.context.runtime_memory()
        assert check(RealFiles(tmp), config, "INV-HOT-3") == []


def test_render_repairs_a_projection_left_by_a_crashed_writer() -> None:
    """INV-HOT-3 with two roots on one directory (two processes): the second dies in its
    commit after renaming USER.md but before writing memories.json. The uncommitted entry is
    gone from the source; the first root's next render must repair USER.md (reference 8.5:
    "projections may already show the uncommitted state until the next startup or prompt
    assembly repairs them")."""
    with tempfile.TemporaryDirectory() as tmp:
        config = Config(durability="off")
        survivor = MemoryRoot.open(tmp, config)
        survivor.hot.add("user", "User prefers concise replies")
        survivor.context.runtime_memory()
        # Find the call that starts writing memories.json in the other process's add.
        with tempfile.TemporaryDirectory() as dry:
            MemoryRoot.open(dry, config).hot.add("user", "User prefers concise replies")
            counter = FaultInjector()
            dry_root = MemoryRoot.open(dry, config, ports=faulty_ports(real_ports(dry), counter))
            dry_root.hot.add("user", "Never commit this")
            renames = [i for i, n in enumerate(counter.names) if n == "files.rename"]
            crash_at = renames[-1] - 1  # the source's write_temp follows USER.md's rename
            assert counter.names[crash_at] == "files.write_temp"
        inner = real_ports(tmp)
        injector = FaultInjector([Fault(crash_at, "crash_before")])
        doomed = MemoryRoot.open(tmp, config, ports=faulty_ports(inner, injector))
        with pytest.raises(SimulatedCrash):
            doomed.hot.add("user", "Never commit this")
        assert isinstance(inner.locks, RealLocks)
        inner.locks.release_all()
        assert b"Never commit this" in (Path(tmp) / "runtime" / "USER.md").read_bytes()
        survivor.context.runtime_memory()
        assert check(RealFiles(tmp), config, "INV-HOT-3") == []


def test_reopen_repairs_an_externally_edited_projection() -> None:
    """INV-HOT-3 after opening (the same edit as above, repaired by a new root)."""
    with tempfile.TemporaryDirectory() as tmp:
        config = Config(durability="off")
        MemoryRoot.open(tmp, config).hot.add("memory", "Release checks run with pnpm verify")
        (Path(tmp) / "runtime" / "MEMORY.md").write_bytes(b"")
        MemoryRoot.open(tmp, config)
        assert check(RealFiles(tmp), config, "INV-HOT-3") == []
        expected = b"Release checks run with pnpm verify\n"
        assert (Path(tmp) / "runtime" / "MEMORY.md").read_bytes() == expected


def test_a_source_with_a_lone_surrogate_timestamp_is_reported_as_corrupt() -> None:
    """``"created_at": "\\ud800"`` is valid JSON but cannot be stored as UTF-8. Per
    ``MemoryRoot.open``, a corrupt source does not prevent opening and every operation then
    raises ``CorruptStore``; the lock must stay free (INV-HOT-8)."""
    with tempfile.TemporaryDirectory() as tmp:
        runtime = Path(tmp) / "runtime"
        runtime.mkdir()
        entry = '{"content": "a", "created_at": "\\ud800", "updated_at": "x", '
        entry += '"target": "user", "importance": "normal"}'
        (runtime / "memories.json").write_bytes(
            ('{"version": 1, "entries": [' + entry + "]}").encode()
        )
        root = MemoryRoot.open(tmp, Config(durability="off"))
        with pytest.raises(CorruptStore):
            root.hot.add("user", "b")
        probe = RealLocks(tmp)
        probe.acquire(LOCK_NAME, 100)
        probe.release(LOCK_NAME)


@st.composite
def _stores_with_odd_edges(draw: st.DrawFn) -> HotStore:
    store = draw(hot_stores(max_entries=4))
    odd = draw(st.sampled_from(("\x1c", "\x1d", "\x1e", "\x1f", "\x85", "\u200b")))
    entries = list(store.entries)
    entries.append(HotEntry(f"note{odd}", "t", "t", draw(st.sampled_from(TARGETS))))
    return HotStore(tuple(entries))


@given(_stores_with_odd_edges())
def test_context_quotes_every_entry_exactly(store: HotStore) -> None:
    """The rendered context quotes each file's text exactly; characters that are whitespace to
    Python but not to JavaScript (U+001C..U+001F, U+0085) are content and must survive."""
    text = render_runtime_memory(store, 4096, 10240)
    contents = {t: [e.content for e in store.of(t)] for t in TARGETS}
    problems = context_problems(text, contents, {"user": 4096, "memory": 10240})
    assert not problems, problems
