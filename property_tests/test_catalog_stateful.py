"""The Memory Space catalog keeps its invariants after any sequence of operations.

A ``RuleBasedStateMachine`` drives a ``Catalog`` over the in-memory fakes with creates,
updates, activations, deletions and stores appearing on disk behind its back, against a small
model. After every step: the catalog file parses; ids are unique and match the id pattern;
the catalog and the stores agree (every store is registered, every registered space has a
store); the first space of an empty root was ``default``; the last space was never deleted;
active flags equal the model's.
"""

from __future__ import annotations

import itertools
import json

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from mnemon_sm.errors import InvalidInput, UnknownSpace
from mnemon_sm.flows.long_term.catalog import CATALOG_PATH, SPACE_ID, Catalog
from mnemon_sm.testing.memory import memory_ports

INVARIANT = "INV-CAT-1"  # catalog invariants hold after any sequence (see the module docstring)
names = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=30)


class CatalogMachine(RuleBasedStateMachine):
    @initialize()
    def open(self) -> None:
        self.ports, _ = memory_ports()
        counter = itertools.count(1)
        self.catalog = Catalog(
            self.ports.files,
            self.ports.locks,
            self.ports.clock,
            self.ports.long_term,
            new_id=lambda: f"space-{next(counter)}",
        )
        self.active: dict[str, bool] = {}  # the model: id -> active
        self.first: str | None = None

    def _sync(self) -> None:
        spaces = self.catalog.list()
        for space in spaces:
            self.active.setdefault(space.id, space.active)
        if self.first is None and spaces:
            self.first = spaces[0].id

    @rule(name=names, active=st.booleans())
    def create(self, name: str, active: bool) -> None:
        was_empty = not self.active and not self.ports.long_term.spaces()
        try:
            space = self.catalog.create(name, f"About {name}", active=active)
        except InvalidInput:
            assert not name.strip() or len(name.strip()) > 100
            return
        assert space.id == "default" if was_empty else space.id != "default"
        self.active[space.id] = active
        self._sync()

    @rule(store=st.sampled_from(["found-a", "found-b", "default"]))
    def store_appears_on_disk(self, store: str) -> None:
        if store in self.ports.long_term.spaces():
            return
        self.ports.long_term.create_space(store)
        was_empty = not self.active
        pointer = (self.ports.files.read("active") or b"default").decode().strip()
        self._sync()
        # active only when discovered into an empty catalog or named by Mnemon's pointer
        assert self.active[store] == (was_empty or store == pointer)

    @precondition(lambda self: bool(self.active))
    @rule(data=st.data(), active=st.booleans())
    def set_active(self, data: st.DataObject, active: bool) -> None:
        space = data.draw(st.sampled_from(sorted(self.active)))
        assert self.catalog.update(space, active=active).active == active
        self.active[space] = active

    @precondition(lambda self: bool(self.active))
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        space = data.draw(st.sampled_from(sorted(self.active)))
        if len(self.active) == 1:
            try:
                self.catalog.delete(space)
            except InvalidInput:
                return
            raise AssertionError("the last space was deleted")
        self.catalog.delete(space)
        del self.active[space]
        assert space not in self.ports.long_term.spaces()

    @rule(space=st.sampled_from(["nope", "space-99", "bad id!"]))
    def unknown_spaces_are_refused(self, space: str) -> None:
        try:
            self.catalog.get(space)
        except (UnknownSpace, InvalidInput):
            return
        raise AssertionError(f"{space} was found")

    @invariant()
    def catalog_is_consistent(self) -> None:
        if not hasattr(self, "catalog"):
            return
        spaces = self.catalog.list()
        ids = [s.id for s in spaces]
        assert len(ids) == len(set(ids)), INVARIANT
        assert all(SPACE_ID.match(i) for i in ids), INVARIANT
        assert set(ids) == set(self.ports.long_term.spaces()), INVARIANT
        assert {s.id: s.active for s in spaces} == self.active, INVARIANT
        if ids:
            assert self.first == "default" or self.first in ("found-a", "found-b"), INVARIANT
            data = self.ports.files.read(CATALOG_PATH)
            assert data is not None and json.loads(data)["version"] == 1, INVARIANT


TestCatalogStateful = CatalogMachine.TestCase
