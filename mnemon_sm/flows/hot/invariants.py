"""The hot-memory invariants as checkable predicates, by ID (``INV-HOT-n`` in the spec).

Each function returns a list of violations (empty when the invariant holds) over what is on
disk, read through a ``Files`` port, so the same checks run on the real file system and on
the in-memory fake. Property tests call them after every step, crash and reopen; the spec lint
requires every ID of the spec to be named by at least one property test.
"""

from __future__ import annotations

from collections.abc import Callable

from mnemon_sm.config import Config
from mnemon_sm.errors import CorruptStore
from mnemon_sm.flows.hot.model import (
    SOURCE_PATH,
    TARGETS,
    HotStore,
    normalize,
    parse_source,
    projection_path,
)
from mnemon_sm.ports import Files

__all__ = ["INVARIANTS", "check", "source_of"]

Check = Callable[[Files, Config], list[str]]


def source_of(files: Files) -> HotStore | None:
    """The parsed source, or None when it does not parse."""
    try:
        return parse_source(files.read(SOURCE_PATH))
    except CorruptStore:
        return None


def parses(files: Files, _: Config) -> list[str]:
    """INV-HOT-1: memories.json parses as a version-1 document."""
    try:
        parse_source(files.read(SOURCE_PATH))
    except CorruptStore as exc:
        return [f"INV-HOT-1: {exc.message}"]
    return []


def projections_match(files: Files, _: Config) -> list[str]:
    """INV-HOT-3: each projection equals the rendering of its target (after open/render)."""
    store = source_of(files)
    if store is None:
        return []
    return [
        f"INV-HOT-3: {projection_path(t)} differs from memories.json"
        for t in TARGETS
        if files.read(projection_path(t)) != store.projection(t)
    ]


def within_limits(files: Files, config: Config) -> list[str]:
    """INV-HOT-5: no target is beyond its byte limit."""
    store = source_of(files)
    if store is None:
        return []
    return [
        f"INV-HOT-5: {t} uses {store.used(t)} bytes, limit {config.limit(t)}"
        for t in TARGETS
        if store.used(t) > config.limit(t)
    ]


def entries_well_formed(files: Files, _: Config) -> list[str]:
    """INV-HOT-6: entries of a target are unique, normalized, non-empty and §-free."""
    store = source_of(files)
    if store is None:
        return []
    problems = []
    for t in TARGETS:
        contents = [e.content for e in store.of(t)]
        if len(set(contents)) != len(contents):
            problems.append(f"INV-HOT-6: {t} has duplicate entries")
        for c in contents:
            if normalize(c, "content") != c:
                problems.append(f"INV-HOT-6: {t} entry {c!r} is not normalized")
    return problems


INVARIANTS: dict[str, Check] = {
    "INV-HOT-1": parses,
    "INV-HOT-3": projections_match,
    "INV-HOT-5": within_limits,
    "INV-HOT-6": entries_well_formed,
}


def check(files: Files, config: Config, *ids: str) -> list[str]:
    """Run the named on-disk invariants (all of them when none is named)."""
    chosen = ids or tuple(INVARIANTS)
    return [problem for i in chosen for problem in INVARIANTS[i](files, config)]
