"""Hot memory: USER.md and MEMORY.md entries, their usage against the limits, and what
capacity maintenance took out of them, round by round."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import groupby

from mnemon_sm.flows.hot.model import TARGETS
from mnemon_sm.inspector.html import Html, count, join, table, tag, usage, when
from mnemon_sm.inspector.pages import Page
from mnemon_sm.root import MemoryRoot

__all__ = ["view"]

FILES = {"user": "USER.md", "memory": "MEMORY.md"}
ROUNDS_SHOWN = 20  # maintenance rounds on the page (the history keeps 64 or more)


def view(root: MemoryRoot, params: Mapping[str, str]) -> Page:
    snapshot = root.hot.snapshot()
    parts: list[Html] = [
        tag("p", f"Revision {snapshot.revision} of memories.json.", class_="meta")
    ]
    for target in TARGETS:
        used, limit = snapshot.usage[target]
        entries = snapshot.of(target)
        parts.append(tag("h2", f"{FILES[target]} ({count(len(entries), 'entry', 'entries')})"))
        parts.append(usage(f"{FILES[target]} usage", used, limit))
        parts.append(
            table(
                f"Entries of {FILES[target]}, in the file's order",
                ("#", "Importance", "Entry", "Created", "Updated"),
                (
                    (
                        i,
                        tag("span", e.importance, class_=f"imp imp-{e.importance}"),
                        e.content,
                        when(e.created_at),
                        when(e.updated_at),
                    )
                    for i, e in enumerate(entries, 1)
                ),
                empty=f"{FILES[target]} has no entry.",
            )
        )
    parts.append(tag("h2", "Maintenance rounds"))
    parts.append(
        tag(
            "p",
            "Entries capacity maintenance took out of hot memory, newest round first: removed, "
            "or rewritten into a merged entry that stayed. Every entry not listed was kept.",
            class_="meta",
        )
    )
    history = root.hot.history()
    if not history:
        parts.append(tag("p", "No maintenance round has run.", class_="empty"))
    rounds = [(r, list(g)) for r, g in groupby(history, key=lambda item: item.round_id)]
    if len(rounds) > ROUNDS_SHOWN:
        parts.append(
            tag(
                "p",
                f"The newest {ROUNDS_SHOWN} of {len(rounds)} rounds; "
                "`mnemon-sm hot history` lists them all.",
                class_="meta",
            )
        )
    for round_id, items in rounds[:ROUNDS_SHOWN]:
        first = items[0]
        removed = sum(1 for i in items if i.fate == "removed")
        parts.append(
            tag(
                "h3",
                f"{first.at}: {first.kind} of {FILES.get(first.target, first.target)} "
                f"({removed} removed, {len(items) - removed} rewritten)",
            )
        )
        parts.append(
            table(
                f"Round {round_id}",
                ("Fate", "Importance", "Entry as it was", "Created", "History id"),
                ((i.fate, i.importance, i.content, when(i.created_at), i.id) for i in items),
                empty="",
            )
        )
    return Page("Hot memory", join(parts))
