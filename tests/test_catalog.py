"""The Memory Space catalog (``data/.dsh-memory-bodies.json``) over in-memory fakes.

Checked against the reference (section 7.3): ids (``default`` first, then ``new_id``, never
model text), name and description rules, discovery of stores found on disk, which spaces a
read or a write may use, activation, deletion and the default-store pointer, corrupt files,
the exact file format, and that every change is lock, re-read, atomic replace, unlock.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest

from mnemon_sm.errors import (
    CorruptStore,
    InactiveSpace,
    InvalidInput,
    LockTimeout,
    UnknownSpace,
)
from mnemon_sm.flows.long_term.catalog import CATALOG_LOCK, CATALOG_PATH, Catalog, Space
from mnemon_sm.ports import Ports
from mnemon_sm.testing.longterm import MemoryLongTermStore
from mnemon_sm.testing.memory import CallLog, MemoryFiles, MemoryLocks, memory_ports

DISCOVERED = "Existing Mnemon Store discovered on disk."
NOW = "2026-08-13T08:00:00.000Z"  # FakeClock's start


@attrs.define
class Setup:
    catalog: Catalog
    ports: Ports
    log: CallLog

    @property
    def files(self) -> MemoryFiles:
        assert isinstance(self.ports.files, MemoryFiles)
        return self.ports.files

    @property
    def store(self) -> MemoryLongTermStore:
        assert isinstance(self.ports.long_term, MemoryLongTermStore)
        return self.ports.long_term

    @property
    def locks(self) -> MemoryLocks:
        assert isinstance(self.ports.locks, MemoryLocks)
        return self.ports.locks

    def catalog_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.files.files[CATALOG_PATH])
        return doc

    def ids(self) -> list[str]:
        return [s.id for s in self.catalog.list()]


def counting_ids() -> Callable[[], str]:
    numbers: Iterator[int] = itertools.count(1)
    return lambda: f"space-{next(numbers)}"


def make(
    *, new_id: Callable[[], str] | None = None, default_store: str | None = None, **kw: bool
) -> Setup:
    ports, log = memory_ports(**kw)  # type: ignore[arg-type]
    assert ports.long_term is not None
    catalog = Catalog(
        ports.files,
        ports.locks,
        ports.clock,
        ports.long_term,
        new_id=new_id or counting_ids(),
        default_store=default_store,
    )
    return Setup(catalog, ports, log)


@pytest.fixture
def s() -> Setup:
    return make()


def body(space_id: str, *, active: object = True, **extra: object) -> dict[str, object]:
    return {
        "id": space_id,
        "name": f"name of {space_id}",
        "description": f"description of {space_id}",
        "active": active,
        "createdAt": NOW,
        "updatedAt": NOW,
        **extra,
    }


def put_catalog(s: Setup, *bodies: dict[str, object]) -> None:
    """A catalog on disk with ``bodies``, each with its store."""
    for b in bodies:
        s.store.create_space(str(b["id"]))
    doc = {"version": 1, "bodies": list(bodies)}
    s.files.put(CATALOG_PATH, (json.dumps(doc, indent=2) + "\n").encode())


# -- ids --------------------------------------------------------------------------------------


def test_the_first_space_of_an_empty_root_is_default_and_later_ones_use_new_id(s: Setup) -> None:
    first = s.catalog.create("Work", "Work facts")
    second = s.catalog.create("Home", "Home facts")
    third = s.catalog.create("Trips", "Travel plans")
    assert (first.id, second.id, third.id) == ("default", "space-1", "space-2")
    assert s.store.spaces() == ("default", "space-1", "space-2")


def test_an_id_is_never_taken_from_the_name_or_description(s: Setup) -> None:
    s.catalog.create("default", "default")
    created = s.catalog.create("space-7", "use id space-7 please")
    assert created.id == "space-1"
    assert created.name == "space-7"


def test_a_new_id_that_is_taken_or_breaks_the_pattern_is_drawn_again() -> None:
    drawn = iter(["default", "bad id!", "", "-leading-dash", "good_id-2"])
    s = make(new_id=lambda: next(drawn))
    s.catalog.create("Work", "Work facts")
    assert s.catalog.create("Home", "Home facts").id == "good_id-2"


def test_the_first_created_space_is_not_default_when_a_store_already_exists(s: Setup) -> None:
    s.store.create_space("abc")
    created = s.catalog.create("Work", "Work facts")
    assert created.id == "space-1"
    assert s.ids() == ["abc", "space-1"]


def test_a_creation_adopts_a_twin_another_writer_made_since_the_caller_looked(
    s: Setup,
) -> None:
    """Two writers saw an empty root and both create the general space: the second one,
    re-reading under the lock, finds the first one's and writes nothing."""
    other = Catalog(s.ports.files, s.ports.locks, s.ports.clock, s.store, new_id=lambda: "x")
    made = other.create("General memory", "Durable facts", active=True, seen=())
    before = dict(s.files.files)
    adopted = s.catalog.create("General memory", "Durable facts", active=True, seen=())
    assert (made.id, adopted) == ("default", made)
    assert s.files.files == before
    assert s.store.spaces() == ("default",)


@pytest.mark.parametrize(
    ("seen", "name", "description", "twin_active"),
    [
        (None, "General memory", "Durable facts", True),  # no view given: always a creation
        ({"default"}, "General memory", "Durable facts", True),  # the caller knew it
        ((), "Other name", "Durable facts", True),
        ((), "General memory", "Other description", True),
        ((), "General memory", "Durable facts", False),  # an active space is asked for
    ],
    ids=["no-view", "seen", "name", "description", "inactive-twin"],
)
def test_a_creation_makes_a_new_space_unless_an_unseen_exact_twin_exists(
    s: Setup, seen: set[str] | None, name: str, description: str, twin_active: bool
) -> None:
    s.catalog.create("General memory", "Durable facts", active=twin_active)
    created = s.catalog.create(name, description, active=True, seen=seen)
    assert created.id == "space-1"
    assert s.ids() == ["default", "space-1"]


def test_a_new_space_is_inactive_unless_asked_otherwise(s: Setup) -> None:
    assert s.catalog.create("Work", "Work facts").active is False
    assert s.catalog.create("Home", "Home facts", active=True).active is True


def test_name_and_description_are_trimmed(s: Setup) -> None:
    created = s.catalog.create("  Work \n", "\tWork facts  ")
    assert (created.name, created.description) == ("Work", "Work facts")


# -- name and description rules ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "description"),
    [
        ("n" * 100, "d"),
        ("n", "d" * 1000),
        ("é" * 100, "語" * 1000),
    ],
)
def test_a_name_up_to_100_and_a_description_up_to_1000_characters_are_accepted(
    s: Setup, name: str, description: str
) -> None:
    created = s.catalog.create(name, description)
    assert (created.name, created.description) == (name, description)


@pytest.mark.parametrize(
    ("name", "description"),
    [
        ("n" * 101, "d"),
        ("n", "d" * 1001),
        ("😀" * 51, "d"),  # 102 UTF-16 code units, as JavaScript counts them
        ("", "d"),
        ("n", ""),
        (" \t\n ", "d"),
        ("n", "\u3000 \n"),
        (None, "d"),
        ("n", None),
        (7, "d"),
    ],
)
def test_a_bad_name_or_description_is_refused_and_nothing_is_written(
    s: Setup, name: object, description: object
) -> None:
    with pytest.raises(InvalidInput):
        s.catalog.create(name, description)  # type: ignore[arg-type]
    assert s.files.files == {}
    assert s.store.spaces() == ()
    assert "locks.acquire" not in s.log.names()


@pytest.mark.parametrize(
    "change", [{"name": "n" * 101}, {"description": " "}, {"name": ""}, {"active": "yes"}]
)
def test_a_bad_update_is_refused_and_the_file_is_unchanged(
    s: Setup, change: dict[str, object]
) -> None:
    s.catalog.create("Work", "Work facts")
    before = s.files.files[CATALOG_PATH]
    with pytest.raises(InvalidInput):
        s.catalog.update("default", **change)  # type: ignore[arg-type]
    assert s.files.files[CATALOG_PATH] == before


# -- discovery --------------------------------------------------------------------------------


def test_stores_found_on_disk_are_registered_and_only_the_first_is_active(s: Setup) -> None:
    s.store.create_space("xyz")
    s.store.create_space("abc")
    spaces = s.catalog.list()
    assert [(x.id, x.name, x.description, x.active) for x in spaces] == [
        ("abc", "abc", DISCOVERED, True),
        ("xyz", "xyz", DISCOVERED, False),
    ]
    assert [b["id"] for b in s.catalog_json()["bodies"]] == ["abc", "xyz"]


def test_a_store_discovered_into_a_non_empty_catalog_is_inactive(s: Setup) -> None:
    s.catalog.create("Work", "Work facts", active=True)
    s.store.create_space("late")
    assert s.catalog.get("late").active is False
    assert s.catalog.get("late").description == DISCOVERED


def test_the_store_named_by_the_default_pointer_file_is_discovered_active(s: Setup) -> None:
    s.files.put("active", b"xyz\n")
    s.store.create_space("abc")
    s.store.create_space("xyz")
    s.store.create_space("zzz")
    assert {x.id: x.active for x in s.catalog.list()} == {"abc": True, "xyz": True, "zzz": False}


def test_the_configured_default_store_is_discovered_active() -> None:
    s = make(default_store="zzz")
    s.files.put("active", b"xyz\n")  # the configured store wins over the pointer file
    for space in ("abc", "xyz", "zzz"):
        s.store.create_space(space)
    assert {x.id: x.active for x in s.catalog.list()} == {"abc": True, "xyz": False, "zzz": True}


def test_a_store_named_default_is_discovered_active_when_no_pointer_names_another(
    s: Setup,
) -> None:
    s.store.create_space("abc")
    s.catalog.list()
    s.store.create_space("default")
    assert s.catalog.get("default").active is True


def test_discovery_runs_on_every_read_and_keeps_registered_spaces(s: Setup) -> None:
    s.catalog.create("Work", "Work facts", active=True)
    s.store.create_space("found")
    assert [x.id for x in s.catalog.readable()] == ["default"]
    assert s.ids() == ["default", "found"]
    assert s.catalog.get("default").name == "Work"


def test_an_empty_root_stays_at_zero_spaces(s: Setup) -> None:
    assert s.catalog.list() == ()
    assert s.catalog.readable() == ()
    assert s.files.files == {}


# -- readable and writable --------------------------------------------------------------------


@pytest.fixture
def three(s: Setup) -> Setup:
    """Spaces a (active), b (inactive), c (active)."""
    put_catalog(s, body("a"), body("b", active=False), body("c"))
    return s


def test_a_read_without_ids_uses_every_active_space(three: Setup) -> None:
    assert [x.id for x in three.catalog.readable()] == ["a", "c"]
    assert [x.id for x in three.catalog.readable([])] == ["a", "c"]


def test_a_read_of_an_unknown_space_is_refused(three: Setup) -> None:
    with pytest.raises(UnknownSpace, match="unknown memory body: nope"):
        three.catalog.readable(["a", "nope"])


def test_a_read_of_an_inactive_space_is_refused(three: Setup) -> None:
    with pytest.raises(InactiveSpace, match="not active for reading: b"):
        three.catalog.readable(["b"])


def test_a_read_with_an_id_breaking_the_pattern_is_refused(three: Setup) -> None:
    with pytest.raises(InvalidInput, match="memoryBodyId must match"):
        three.catalog.readable(["../a"])


def test_a_read_removes_duplicate_and_padded_ids_keeping_order(three: Setup) -> None:
    assert [x.id for x in three.catalog.readable(["c", " a ", "c", "a"])] == ["c", "a"]


def test_a_write_may_name_an_inactive_space(three: Setup) -> None:
    chosen = three.catalog.writable("b")
    assert (chosen.id, chosen.active) == ("b", False)


def test_a_write_naming_an_unknown_space_is_refused(three: Setup) -> None:
    with pytest.raises(UnknownSpace):
        three.catalog.writable("nope")


def test_a_write_without_an_id_needs_exactly_one_active_space(three: Setup) -> None:
    with pytest.raises(InvalidInput, match="exactly one"):
        three.catalog.writable(None)
    three.catalog.update("c", active=False)
    assert three.catalog.writable(None).id == "a"
    three.catalog.update("a", active=False)
    with pytest.raises(InvalidInput, match="exactly one"):
        three.catalog.writable(None)


# -- activate and update ----------------------------------------------------------------------


def test_activate_marks_an_inactive_space_active_and_stamps_it(three: Setup) -> None:
    three.ports.clock.advance(1500)  # type: ignore[attr-defined]
    activated = three.catalog.activate("b")
    assert (activated.active, activated.created_at) == (True, NOW)
    assert activated.updated_at == "2026-08-13T08:00:01.500Z"
    assert three.catalog_json()["bodies"][1]["active"] is True


def test_activating_an_active_space_writes_nothing(three: Setup) -> None:
    three.log.clear()
    assert three.catalog.activate("a").active is True
    assert "files.write_temp" not in three.log.names()
    assert "locks.acquire" not in three.log.names()


def test_update_changes_only_the_given_fields(three: Setup) -> None:
    three.ports.clock.advance(60_000)  # type: ignore[attr-defined]
    updated = three.catalog.update("a", description="  Only facts  ")
    assert updated.name == "name of a"
    assert updated.description == "Only facts"
    assert updated.active is True
    assert (updated.created_at, updated.updated_at) == (NOW, "2026-08-13T08:01:00.000Z")
    assert three.catalog.get("a") == updated


def test_update_of_an_unknown_space_is_refused_and_releases_the_lock(three: Setup) -> None:
    before = three.files.files[CATALOG_PATH]
    with pytest.raises(UnknownSpace):
        three.catalog.update("nope", name="x")
    assert three.files.files[CATALOG_PATH] == before
    assert three.locks.held == set()


def test_every_space_may_be_inactive(three: Setup) -> None:
    three.catalog.update("a", active=False)
    three.catalog.update("c", active=False)
    assert three.catalog.readable() == ()
    assert len(three.catalog.list()) == 3


# -- delete -----------------------------------------------------------------------------------


def test_deleting_the_last_space_is_refused_and_keeps_it(s: Setup) -> None:
    s.catalog.create("Work", "Work facts")
    before = s.files.files[CATALOG_PATH]
    with pytest.raises(InvalidInput, match="last Memory Space"):
        s.catalog.delete("default")
    assert s.files.files[CATALOG_PATH] == before
    assert s.store.spaces() == ("default",)


def test_delete_removes_the_space_and_its_store(three: Setup) -> None:
    three.catalog.delete("c")
    assert three.ids() == ["a", "b"]
    assert three.store.spaces() == ("a", "b")


def test_deleting_an_unknown_space_is_refused(three: Setup) -> None:
    with pytest.raises(UnknownSpace):
        three.catalog.delete("nope")
    assert three.store.spaces() == ("a", "b", "c")


@pytest.mark.parametrize(
    ("spaces", "deleted", "replacement"),
    [
        ((("a", True), ("b", False), ("c", True)), "a", "c"),  # an active one first
        ((("a", False), ("b", False), ("c", True)), "c", "a"),  # none active: by id
        ((("m", True), ("b", False), ("z", True)), "m", "z"),
        ((("m", False), ("z", False), ("b", False)), "m", "b"),
    ],
)
def test_deleting_the_space_the_pointer_names_switches_the_pointer(
    s: Setup, spaces: tuple[tuple[str, bool], ...], deleted: str, replacement: str
) -> None:
    put_catalog(s, *(body(i, active=a) for i, a in spaces))
    s.files.put("active", f"{deleted}\n".encode())
    s.catalog.delete(deleted)
    assert s.files.files["active"] == f"{replacement}\n".encode()
    assert deleted not in s.ids()


def test_deleting_default_without_a_pointer_file_writes_a_pointer(s: Setup) -> None:
    put_catalog(s, body("default"), body("work", active=False))
    s.catalog.delete("default")
    assert s.files.files["active"] == b"work\n"


def test_deleting_another_space_leaves_the_pointer_alone(three: Setup) -> None:
    three.files.put("active", b"a\n")
    three.catalog.delete("c")
    assert three.files.files["active"] == b"a\n"


def test_the_switched_pointer_survives_a_power_loss() -> None:
    # Regression: the pointer is replaced by a rename whose directory is never fsynced, so
    # after a power loss it names the store that was deleted.
    s = make(track_durability=True)
    put_catalog(s, body("default"), body("work"))
    s.catalog.delete("default")
    s.files.lose_power()
    assert s.files.files.get("active") == b"work\n"
    assert [b["id"] for b in json.loads(s.files.files[CATALOG_PATH])["bodies"]] == ["work"]


# -- corrupt catalog --------------------------------------------------------------------------

CORRUPT = {
    "bad json": b'{"version": 1, "bodies": [',
    "not utf-8": b'{"version": 1, "bodies": [], "x": "\xff"}',
    "wrong version": json.dumps({"version": 2, "bodies": [body("a")]}).encode(),
    "version as text": json.dumps({"version": "1", "bodies": []}).encode(),
    "no bodies": json.dumps({"version": 1}).encode(),
    "unknown top-level key": json.dumps({"version": 1, "bodies": [], "extra": 1}).encode(),
    "unknown body key": json.dumps({"version": 1, "bodies": [body("a", color="red")]}).encode(),
    "bad id pattern": json.dumps({"version": 1, "bodies": [body("../a")]}).encode(),
    "empty id": json.dumps({"version": 1, "bodies": [body("")]}).encode(),
    "active as text": json.dumps({"version": 1, "bodies": [body("a", active="true")]}).encode(),
    "missing name": json.dumps(
        {"version": 1, "bodies": [{k: v for k, v in body("a").items() if k != "name"}]}
    ).encode(),
}


@pytest.mark.parametrize(
    "operation",
    [
        lambda c: c.list(),
        lambda c: c.readable(),
        lambda c: c.writable(None),
        lambda c: c.create("Work", "Work facts"),
        lambda c: c.update("a", name="x"),
        lambda c: c.activate("a"),
        lambda c: c.delete("a"),
    ],
    ids=["list", "readable", "writable", "create", "update", "activate", "delete"],
)
@pytest.mark.parametrize("content", list(CORRUPT.values()), ids=list(CORRUPT))
def test_a_corrupt_catalog_raises_corrupt_store_and_is_left_untouched(
    s: Setup, operation: Callable[[Catalog], object], content: bytes
) -> None:
    s.store.create_space("a")
    s.store.create_space("b")
    s.files.put(CATALOG_PATH, content)
    with pytest.raises(CorruptStore) as caught:
        operation(s.catalog)
    assert caught.value.path == CATALOG_PATH
    assert s.files.files == {CATALOG_PATH: content}
    assert s.store.spaces() == ("a", "b")
    assert s.locks.held == set()


@pytest.mark.parametrize("content", [b"[]", b'[{"version": 1}]', b'"text"', b"3", b"null"])
def test_a_catalog_that_is_not_a_json_object_raises_corrupt_store(
    s: Setup, content: bytes
) -> None:
    # Regression: structuring a non-object let AttributeError escape instead of CorruptStore.
    s.store.create_space("a")
    s.files.put(CATALOG_PATH, content)
    for operation in (s.catalog.list, lambda: s.catalog.create("Work", "Work facts")):
        with pytest.raises(CorruptStore):
            operation()
    assert s.files.files == {CATALOG_PATH: content}
    assert s.locks.held == set()


# -- file format ------------------------------------------------------------------------------


def test_the_file_is_version_1_with_two_space_json_and_a_final_newline(s: Setup) -> None:
    s.catalog.create("Work ✓", "Work facts", active=True)
    s.ports.clock.advance(1)  # type: ignore[attr-defined]
    s.catalog.create("Home", "Home facts")
    expected = (
        "{\n"
        '  "version": 1,\n'
        '  "bodies": [\n'
        "    {\n"
        '      "id": "default",\n'
        '      "name": "Work ✓",\n'
        '      "description": "Work facts",\n'
        '      "active": true,\n'
        '      "createdAt": "2026-08-13T08:00:00.000Z",\n'
        '      "updatedAt": "2026-08-13T08:00:00.000Z"\n'
        "    },\n"
        "    {\n"
        '      "id": "space-1",\n'
        '      "name": "Home",\n'
        '      "description": "Home facts",\n'
        '      "active": false,\n'
        '      "createdAt": "2026-08-13T08:00:00.001Z",\n'
        '      "updatedAt": "2026-08-13T08:00:00.001Z"\n'
        "    }\n"
        "  ]\n"
        "}\n"
    )
    assert s.files.files[CATALOG_PATH].decode("utf-8") == expected


def test_a_catalog_written_by_dsh_mnemon_reads_back_as_spaces(s: Setup) -> None:
    put_catalog(s, body("default"), body("b", active=False))
    assert s.catalog.list() == (
        Space("default", "name of default", "description of default", True, NOW, NOW),
        Space("b", "name of b", "description of b", False, NOW, NOW),
    )


def test_a_placement_record_is_kept_across_writes(s: Setup) -> None:
    placement = {"strategy": "automatic", "score": 0.75, "reasons": ["topic"], "by": None}
    put_catalog(s, body("a", placement=placement), body("b"))
    s.catalog.update("a", name="Renamed")
    s.catalog.update("b", active=False)
    s.catalog.create("New", "New space")
    bodies = s.catalog_json()["bodies"]
    assert bodies[0]["placement"] == placement
    assert bodies[0]["name"] == "Renamed"
    assert "placement" not in bodies[1] and "placement" not in bodies[2]
    assert s.catalog.get("a").placement == placement


def test_merged_deactivates_the_sources_and_records_the_target_in_one_change(
    three: Setup,
) -> None:
    three.log.clear()
    three.catalog.merged("a", ["b", "c"])
    assert [c.name for c in three.log.calls].count("files.rename") == 1
    bodies = {b["id"]: b for b in three.catalog_json()["bodies"]}
    assert [(bodies[i]["active"], bodies[i].get("mergedInto")) for i in "abc"] == [
        (True, None),
        (False, "a"),
        (False, "a"),
    ]
    assert three.catalog.get("b").merged_into == "a"
    assert three.catalog.activate("b").merged_into is None
    assert "mergedInto" not in three.catalog_json()["bodies"][1]
    assert three.catalog.update("c", name="Still merged").merged_into == "a"


def test_merged_with_an_unknown_source_changes_nothing(three: Setup) -> None:
    before = dict(three.files.files)
    with pytest.raises(UnknownSpace):
        three.catalog.merged("a", ["b", "zzz"])
    with pytest.raises(InvalidInput):
        three.catalog.merged("a", ["bad id!"])
    assert three.files.files == before


def test_a_listing_asks_the_store_before_reading_the_catalog(s: Setup) -> None:
    """A store that refuses its layout (a symlinked ``data/``) fails the listing before the
    catalog is read through it."""
    put_catalog(s, body("a"))

    def refused() -> tuple[str, ...]:
        raise CorruptStore("data is a symbolic link, which is refused", path="data")

    s.store.spaces = refused  # type: ignore[method-assign]
    s.log.clear()
    with pytest.raises(CorruptStore):
        s.catalog.list()
    assert "files.read" not in [c.name for c in s.log.calls]


# -- locking and atomic replacement -----------------------------------------------------------


def discover(s: Setup, space: str) -> object:
    s.store.create_space(space)
    return s.catalog.list()


CHANGES: dict[str, Callable[[Setup], object]] = {
    "create": lambda s: s.catalog.create("New", "New space"),
    "update": lambda s: s.catalog.update("a", name="Renamed"),
    "activate": lambda s: s.catalog.activate("b"),
    "delete": lambda s: s.catalog.delete("b"),
    "discovery": lambda s: discover(s, "found"),
}


@pytest.mark.parametrize("change", list(CHANGES.values()), ids=list(CHANGES))
def test_every_change_is_locked_reread_and_atomically_replaced(
    s: Setup, change: Callable[[Setup], object]
) -> None:
    put_catalog(s, body("a"), body("b", active=False))
    before = s.files.files[CATALOG_PATH]
    s.log.clear()
    change(s)
    calls = s.log.calls
    names = [c.name for c in calls]

    def index(name: str, *args: object) -> int:
        found = [i for i, c in enumerate(calls) if c.name == name and c.args[: len(args)] == args]
        assert len(found) == 1, (name, args, names)
        return found[0]

    acquire = index("locks.acquire", CATALOG_LOCK)
    write = index("files.write_temp", CATALOG_PATH)
    temp = next(
        str(c.args[0]) for c in calls[write:] if c.name == "files.fsync" and c.args[0] != "data"
    )
    assert temp.startswith("data/.") and temp.endswith(".tmp")
    sync_temp = index("files.fsync", temp)
    rename = index("files.rename", temp, CATALOG_PATH)
    sync_dir = index("files.fsync", "data")
    release = index("locks.release", CATALOG_LOCK)
    reread = [
        i
        for i, c in enumerate(calls)
        if c.name == "files.read" and c.args == (CATALOG_PATH,) and acquire < i < write
    ]
    assert reread, names
    assert acquire < write < sync_temp < rename < sync_dir < release
    assert s.files.files[CATALOG_PATH] != before
    assert not [p for p in s.files.files if p.endswith(".tmp")]
    assert s.locks.held == set()


def test_a_change_times_out_and_writes_nothing_when_the_lock_is_held(s: Setup) -> None:
    put_catalog(s, body("a"))
    before = dict(s.files.files)
    s.locks.hold(CATALOG_LOCK)
    with pytest.raises(LockTimeout):
        s.catalog.create("New", "New space")
    assert s.files.files == before
    assert s.store.spaces() == ("a",)


def test_a_change_rereads_the_file_under_the_lock_and_keeps_another_writers_space(
    s: Setup,
) -> None:
    other = Catalog(s.ports.files, s.ports.locks, s.ports.clock, s.store, new_id=lambda: "x")
    s.catalog.create("Work", "Work facts")
    other.create("Theirs", "Made by another process")
    s.catalog.update("default", active=True)
    assert s.ids() == ["default", "x"]
    assert s.catalog.get("x").name == "Theirs"
