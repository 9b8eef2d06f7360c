"""How the built-in workers route content to a Memory Space and spot verbatim copies.

Shared by the write worker and the maintenance archiver, through their tool boxes only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..text import words
from .port import ToolBox

__all__ = ["choose_space", "create_space", "overlap", "stored_id"]


def overlap(text: str, space: Mapping[str, Any]) -> int:
    """Words ``text`` shares with a space's name and description."""
    return len(words(text) & words(f"{space['name']} {space['description']}"))


def choose_space(content: str, spaces: Sequence[Mapping[str, Any]]) -> str | None:
    """The space sharing the most words with ``content`` (active first, then by id)."""
    if not spaces:
        return None
    best = max(spaces, key=lambda s: (overlap(content, s), s["active"], s["id"]))
    return str(best["id"])


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
