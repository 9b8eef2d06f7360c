"""Documents: active ones against the capacity plan, in the order overflow would archive them
(least recently used first), and archived ones with their cold reference."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlencode

from mnemon_sm.flows.documents.model import DocumentRecord
from mnemon_sm.flows.documents.rules import lru
from mnemon_sm.inspector.html import Html, bytes_text, join, table, tag, usage, when
from mnemon_sm.inspector.pages import Page
from mnemon_sm.root import MemoryRoot

__all__ = ["ROWS", "view"]

ROWS = 500  # documents listed per table; the counts and the plan cover them all


def _references(record: DocumentRecord) -> Html:
    """Each space holding the document's cold reference, as a recall of its title there."""
    links = (
        tag("a", space, href="/recall?" + urlencode({"q": record.title, "space": space}))
        for space in record.memory_body_ids
    )
    return Html(", ".join(links))  # each link is escaped markup


def _cut(n: int) -> Html:
    if n <= ROWS:
        return Html("")
    return tag("p", f"The first {ROWS} of {n}; `mnemon-sm docs search` finds any.", class_="meta")


def view(root: MemoryRoot, params: Mapping[str, str]) -> Page:
    records = root.documents.records()
    ordered = lru(records)
    used = sum(r.size_bytes for r in ordered)
    limit = root.config.documents_active_limit
    archived = sorted(
        (r for r in records if r.status == "archived"),
        key=lambda r: r.archived_at or "",
        reverse=True,
    )
    body = join(
        [
            tag("h2", f"Active ({len(ordered)})"),
            _cut(len(ordered)),
            usage("Active documents against the plan", used, limit),
            tag(
                "p",
                "Least recently used first: when a change does not fit, the first ones here "
                "are archived to cold storage, each after a verified reference is written to "
                "long-term memory.",
                class_="meta",
            ),
            table(
                "Active documents, next to archive first",
                ("#", "Title", "Id", "Size", "Last used", "Updated", "Revision", "Path"),
                (
                    (
                        i,
                        r.title,
                        r.id,
                        bytes_text(r.size_bytes),
                        when(r.last_accessed_at),
                        when(r.updated_at),
                        r.revision,
                        r.relative_path,
                    )
                    for i, r in enumerate(ordered[:ROWS], 1)
                ),
                empty="No active document.",
            ),
            tag("h2", f"Archived ({len(archived)})"),
            _cut(len(archived)),
            table(
                "Archived documents, newest first, with their cold reference",
                ("Title", "Id", "Size", "Archived", "Cold path", "Reference in spaces", "Summary"),
                (
                    (
                        r.title,
                        r.id,
                        bytes_text(r.size_bytes),
                        when(r.archived_at),
                        r.relative_path,
                        _references(r),
                        r.archive_summary,
                    )
                    for r in archived[:ROWS]
                ),
                empty="No archived document.",
            ),
        ]
    )
    return Page("Documents", body)
