"""How the built-in workers route content to a Memory Space and spot verbatim copies.

Shared by the write worker and the maintenance archiver, through their tool boxes only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mnemon_sm.ports.workers import ToolBox
from mnemon_sm.text import words

__all__ = ["choose_space", "create_space", "merge_target", "overlap", "stored_id"]


def overlap(text: str, space: Mapping[str, Any]) -> int:
    """Words ``text`` shares with a space's name and description."""
    return len(words(text) & words(f"{space['name']} {space['description']}"))


def choose_space(content: str, spaces: Sequence[Mapping[str, Any]]) -> str | None:
    """The active space for ``content``; None when no space is active.

    The space sharing the most words with ``content`` wins (active first, then by id). A
    routed write never goes to an inactive space (the write would reactivate it): when the
    winner is inactive and was merged into a space that is active (following merges of
    merges), that space takes its place; otherwise the best active space does.
    """
    active = [s for s in spaces if s["active"]]
    if not active:
        return None
    best = max(spaces, key=lambda s: (overlap(content, s), s["active"], s["id"]))
    if not best["active"]:
        target = merge_target(best, spaces)
        best = target or max(active, key=lambda s: (overlap(content, s), s["id"]))
    return str(best["id"])


def merge_target(
    space: Mapping[str, Any], spaces: Sequence[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The active space an inactive ``space`` was merged into, following ``mergedInto``
    through spaces merged in turn; None when the chain ends elsewhere (unknown, inactive and
    not merged, or a loop)."""
    by_id = {s["id"]: s for s in spaces}
    visited = {space["id"]}
    found = by_id.get(space.get("mergedInto"))
    while found is not None and not found["active"] and found["id"] not in visited:
        visited.add(found["id"])
        found = by_id.get(found.get("mergedInto"))
    return found if found is not None and found["active"] else None


def create_space(tools: ToolBox, name: str, description: str) -> str:
    """Create an active space through the tool box; its (provisional) id."""
    created = tools.call(
        "mnemon_memory_body_create", {"name": name, "description": description, "active": True}
    )
    return str(created["memoryBodyId"])


def stored_id(
    content: str, space_id: str, spaces: Sequence[Mapping[str, Any]], tools: ToolBox
) -> str | None:
    """The id of an insight of the (active) space holding ``content`` verbatim, if any."""
    if not any(s["id"] == space_id and s["active"] for s in spaces):
        return None
    found = tools.call(
        "mnemon_recall",
        {"query": content[:2000], "mode": "basic", "limit": 50, "memoryBodyIds": [space_id]},
    )
    wanted = content.strip()
    return next((str(h["id"]) for h in found["results"] if h["content"] == wanted), None)
