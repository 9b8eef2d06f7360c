"""The Memory Space catalog: ``data/.dsh-memory-bodies.json``, compatible with dsh-mnemon.

Theory of operation
-------------------
Each native Memory Space is one store of the ``LongTermStore`` port (``data/<id>/mnemon.db``);
the catalog adds a name, a routing description and an ``active`` flag. Rules kept here:

- ids match ``[a-zA-Z0-9][a-zA-Z0-9_-]*`` and are never derived from model text: the first
  space of a root with no store on disk is ``default``, later ones are random UUIDs;
- a name (≤ 100 characters) and a description (≤ 1000) are required;
- stores found on disk but not registered are added on every read (named after their id,
  active only when the catalog was empty or the store is Mnemon's default store); a
  read-only catalog (``write_enabled`` false) lists them so without writing; the store
  lists them first, so a layout it refuses (a symlinked ``data/``) fails before any read;
- reads of explicitly named spaces require them to be active; a write may target an inactive
  space and activates it once it succeeded;
- a creation may say which spaces its caller saw when it decided to create (``seen``): a
  space with the same name and description that another writer created since (so not
  among them) is then returned instead of a twin. Read under the lock, this is what makes
  concurrent first writes of a fresh root agree on one "General memory" space;
- a merge deactivates its sources and records ``mergedInto`` on each, so routing can send
  what would have gone to a merged space to the space that holds its memories now; making a
  space active again clears the record;
- the last space cannot be deleted;
- every change is lock, re-read, change, atomic write (temp file, fsync, rename, directory
  fsync), unlock, so concurrent processes never lose a catalog change.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Collection, Sequence
from typing import Any

import attrs

from mnemon_sm import inputs
from mnemon_sm.convert import StructureFailed, converter, register_camel_case, structure
from mnemon_sm.errors import CorruptStore, InactiveSpace, InvalidInput, UnknownSpace
from mnemon_sm.ports import Clock, Files, Locks
from mnemon_sm.ports.long_term.port import LongTermStore
from mnemon_sm.ports.storage import replace_file
from mnemon_sm.text import iso_ms, strip_whitespace, utf16_len

__all__ = ["CATALOG_PATH", "Catalog", "Space"]

CATALOG_PATH = "data/.dsh-memory-bodies.json"
CATALOG_LOCK = "data/.dsh-memory-bodies.lock"
DEFAULT_POINTER = "active"  # Mnemon's own default-store pointer file at the root
SPACE_ID = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_-]*$")
NAME_MAX, DESCRIPTION_MAX = 100, 1000  # characters (UTF-16 code units, as the reference)
DISCOVERED = "Existing Mnemon Store discovered on disk."


@attrs.frozen
class Space:
    """A Memory Space as the catalog records it."""

    id: str
    name: str
    description: str
    active: bool
    created_at: str
    updated_at: str
    placement: dict[str, Any] | None = None
    merged_into: str | None = None  # the merge target of a deactivated merge source

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = converter.unstructure(self)
        for optional in ("placement", "mergedInto"):
            if data.get(optional) is None:
                data.pop(optional, None)
        return data


@attrs.frozen
class _CatalogDoc:
    version: int
    bodies: list[Space]


register_camel_case(Space)


def check_space_id(space: object) -> str:
    """The id itself, or ``InvalidInput`` when it breaks the id pattern."""
    if not isinstance(space, str) or not SPACE_ID.match(space):
        raise InvalidInput(f"memoryBodyId must match {SPACE_ID.pattern}: {space!r}")
    return space


def check_space_fields(name: object, description: object) -> tuple[str, str]:
    """A space's name and description, cleaned, or ``InvalidInput``."""
    return _text(name, "name", NAME_MAX), _text(description, "description", DESCRIPTION_MAX)


def _text(value: object, field: str, limit: int) -> str:
    text = strip_whitespace(inputs.text(value, field))  # trimmed; inner lines are kept
    if not text:
        raise InvalidInput(f"{field} is required")
    if utf16_len(text) > limit:
        raise InvalidInput(f"{field} is too long (max {limit} characters)")
    return text


class Catalog:
    """Registry of the Memory Spaces of one root."""

    def __init__(
        self,
        files: Files,
        locks: Locks,
        clock: Clock,
        store: LongTermStore,
        *,
        lock_timeout_ms: int = 5000,
        default_store: str | None = None,
        new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
        write_enabled: bool = True,
    ) -> None:
        self._files, self._locks, self._clock, self._store = files, locks, clock, store
        self._timeout, self._new_id = lock_timeout_ms, new_id
        self._default_store = default_store
        self._write_enabled = write_enabled

    # -- reads -----------------------------------------------------------------------------

    def list(self) -> tuple[Space, ...]:
        """Every space, stores found on disk included (registering them if needed)."""
        stores = set(self._store.spaces())
        spaces = self._read()
        if stores - {s.id for s in spaces}:
            if not self._write_enabled:
                return self._discover(spaces)
            spaces = self._change(lambda current: current)
        return spaces

    def get(self, space: str) -> Space:
        found = {s.id: s for s in self.list()}.get(check_space_id(space))
        if found is None:
            raise UnknownSpace(f"unknown memory body: {space}")
        return found

    def readable(self, ids: Sequence[str] | None = None) -> tuple[Space, ...]:
        """The spaces a read may use: all active ones, or the named ones, each active."""
        spaces = self.list()
        if not ids:
            return tuple(s for s in spaces if s.active)
        by_id, chosen = {s.id: s for s in spaces}, []
        for space in dict.fromkeys(i.strip() if isinstance(i, str) else i for i in ids):
            found = by_id.get(check_space_id(space))
            if found is None:
                raise UnknownSpace(f"unknown memory body: {space}")
            if not found.active:
                raise InactiveSpace(f"memory body is not active for reading: {space}")
            chosen.append(found)
        return tuple(chosen)

    def writable(self, space: str | None) -> Space:
        """The space a write goes to: the named one (active or not), else the only active."""
        if space is not None:
            return self.get(space)
        active = [s for s in self.list() if s.active]
        if len(active) != 1:
            raise InvalidInput(
                "memoryBodyId is required when the number of active memory bodies is not "
                "exactly one"
            )
        return active[0]

    # -- changes ---------------------------------------------------------------------------

    def create(
        self,
        name: str,
        description: str,
        *,
        active: bool = False,
        seen: Collection[str] | None = None,
    ) -> Space:
        """Register a new space and create its store; the id is chosen here, never given.

        ``seen``: the ids of the spaces the caller saw when it decided to create this one. A
        space not among them with the same name and description (and active, if this one is
        to be) was created by another writer meanwhile: it is returned and nothing is written.
        """
        return self.create_or_adopt(name, description, active=active, seen=seen)[0]

    def create_or_adopt(
        self,
        name: str,
        description: str,
        *,
        active: bool = False,
        seen: Collection[str] | None = None,
    ) -> tuple[Space, bool]:
        """:meth:`create`, also saying whether the space was created (False: adopted)."""
        clean_name, clean_description = check_space_fields(name, description)
        created: list[Space] = []
        adopted: list[bool] = []

        def twin(current: tuple[Space, ...]) -> Space | None:
            if seen is None:
                return None
            return next(
                (
                    s
                    for s in current
                    if s.id not in seen
                    and (s.name, s.description) == (clean_name, clean_description)
                    and (s.active or not active)
                ),
                None,
            )

        def add(current: tuple[Space, ...]) -> tuple[Space, ...]:
            created.clear()
            adopted.clear()
            found = twin(current)
            if found is not None:
                created.append(found)
                adopted.append(True)
                return current
            taken = {s.id for s in current} | set(self._store.spaces())
            space_id = "default" if not taken else self._new_id()
            while space_id in taken or not SPACE_ID.match(space_id):
                space_id = self._new_id()
            now = iso_ms(self._clock.now_ms())
            self._store.create_space(space_id)
            space = Space(space_id, clean_name, clean_description, active, now, now)
            created.append(space)
            return (*current, space)

        self._change(add)
        return created[0], not adopted

    def update(
        self,
        space: str,
        *,
        name: str | None = None,
        description: str | None = None,
        active: bool | None = None,
    ) -> Space:
        """Change a space's name, description or active flag."""
        check_space_id(space)
        changes: dict[str, Any] = {}
        if name is not None:
            changes["name"] = _text(name, "name", NAME_MAX)
        if description is not None:
            changes["description"] = _text(description, "description", DESCRIPTION_MAX)
        if active is not None:
            if not isinstance(active, bool):
                raise InvalidInput("active must be true or false")
            changes["active"] = active
            if active:
                changes["merged_into"] = None  # live again: no longer stands for its target
        updated: list[Space] = []

        def edit(current: tuple[Space, ...]) -> tuple[Space, ...]:
            out = []
            for s in current:
                if s.id == space:
                    s = attrs.evolve(s, **changes, updated_at=iso_ms(self._clock.now_ms()))
                    updated.append(s)
                out.append(s)
            if not updated:
                raise UnknownSpace(f"unknown memory body: {space}")
            return tuple(out)

        self._change(edit)
        return updated[0]

    def activate(self, space: str) -> Space:
        """Mark a space active (after a successful write to it); a no-op when it already is."""
        found = self.get(space)
        return found if found.active else self.update(space, active=True)

    def merged(self, target: str, sources: Sequence[str]) -> None:
        """After a merge: deactivate ``sources`` and record ``target`` as where their memories
        are now (``mergedInto``), in one change."""
        ids = {check_space_id(s) for s in sources}

        def retire(current: tuple[Space, ...]) -> tuple[Space, ...]:
            missing = ids - {s.id for s in current}
            if missing:
                raise UnknownSpace(f"unknown memory body: {sorted(missing)[0]}")
            now = iso_ms(self._clock.now_ms())
            return tuple(
                attrs.evolve(s, active=False, merged_into=target, updated_at=now)
                if s.id in ids
                else s
                for s in current
            )

        self._change(retire)

    def delete(self, space: str) -> None:
        """Delete a space and its store; the last space cannot be deleted."""
        check_space_id(space)

        def drop(current: tuple[Space, ...]) -> tuple[Space, ...]:
            if space not in {s.id for s in current}:
                raise UnknownSpace(f"unknown memory body: {space}")
            rest = tuple(s for s in current if s.id != space)
            if not rest:
                raise InvalidInput(
                    "the last Memory Space cannot be deleted; deactivate it or create another "
                    "first"
                )
            if self._pointer() == space:
                replacement = sorted(rest, key=lambda s: (not s.active, s.id))[0]
                pointer = f"{replacement.id}\n".encode()
                replace_file(self._files, DEFAULT_POINTER, pointer, sync=True, sync_dir=True)
            self._store.delete_space(space)
            return rest

        self._change(drop)

    # -- mechanics -------------------------------------------------------------------------

    def _pointer(self) -> str:
        data = self._files.read(DEFAULT_POINTER)
        text = data.decode("utf-8", "replace").strip() if data else ""
        return text if SPACE_ID.match(text) else "default"

    def _read(self) -> tuple[Space, ...]:
        data = self._files.read(CATALOG_PATH)
        if data is None:
            return ()
        try:
            raw = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise CorruptStore(f"{CATALOG_PATH} is unreadable: {exc}", path=CATALOG_PATH) from None
        try:
            doc = structure(raw, _CatalogDoc)
        except StructureFailed as exc:
            raise CorruptStore(
                f"{CATALOG_PATH} is invalid: {'; '.join(exc.problems)}", path=CATALOG_PATH
            ) from None
        if doc.version != 1 or any(not SPACE_ID.match(s.id) for s in doc.bodies):
            raise CorruptStore(
                f"{CATALOG_PATH} must use version 1 and valid ids", path=CATALOG_PATH
            )
        return tuple(doc.bodies)

    def _discover(self, current: tuple[Space, ...]) -> tuple[Space, ...]:
        known = {s.id for s in current}
        default = self._default_store or self._pointer()
        added = list(current)
        for store in self._store.spaces():
            if store not in known:
                now = iso_ms(self._clock.now_ms())
                active = not added or store == default  # the first into an empty catalog
                added.append(Space(store, store, DISCOVERED, active, now, now))
        return tuple(added)

    def _change(self, edit: Callable[[tuple[Space, ...]], tuple[Space, ...]]) -> tuple[Space, ...]:
        self._files.ensure_dir("data")
        self._locks.acquire(CATALOG_LOCK, self._timeout)
        try:
            before = self._read()
            after = edit(self._discover(before))
            if after != before:
                doc = {"version": 1, "bodies": [s.to_json() for s in after]}
                data = (json.dumps(doc, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
                replace_file(self._files, CATALOG_PATH, data, sync=True, sync_dir=True)
            return after
        finally:
            self._locks.release(CATALOG_LOCK)
