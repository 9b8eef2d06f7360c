"""Spaces: the catalog with each space's counts and top entities, and the related graph of
one insight (the links followed breadth-first, drawn with the bundled Mermaid)."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote, urlencode

from mnemon_sm.errors import MnemonError
from mnemon_sm.flows.long_term.service import RelatedItem
from mnemon_sm.inspector.html import Cell, Html, bytes_text, count, esc, join, table, tag
from mnemon_sm.inspector.pages import Page
from mnemon_sm.root import MemoryRoot

__all__ = ["graph_source", "related_href", "related_view", "view"]

LABEL_CHARS = 60  # characters of an insight drawn in a graph node
FANOUT = 24  # first-hop insights whose own links are followed to draw the second hop
DRAWN = 40  # insights drawn in a graph, nearest first
LISTED = 200  # insights listed in the table beside it, nearest first


def related_href(space: str, insight_id: str) -> str:
    """The address of an insight's related graph."""
    return f"/spaces/{quote(space, safe='')}/related/{quote(insight_id, safe='')}"


def _entity_link(space: str, entity: str, count: int) -> Html:
    href = "/recall?" + urlencode({"q": entity, "space": space})
    return tag("a", f"{entity} ({count})", href=href)


def view(root: MemoryRoot, params: Mapping[str, str]) -> Page:
    rows: list[tuple[Cell, ...]] = []
    for space in root.long_term.spaces():
        try:
            status = root.long_term.status(space.id)
        except MnemonError as exc:
            rows.append(
                (
                    space.name,
                    space.id,
                    "yes" if space.active else "no",
                    f"unavailable: {exc}",
                    "",
                    "",
                    "",
                    "",
                    space.description,
                )
            )
            continue
        entities = join(
            [
                _entity_link(space.id, e, c)
                if i == 0
                else Html(", ") + _entity_link(space.id, e, c)
                for i, (e, c) in enumerate(status.top_entities[:8])
            ]
        )
        rows.append(
            (
                space.name,
                space.id,
                "yes"
                if space.active
                else f"no (merged into {space.merged_into})"
                if space.merged_into
                else "no",
                status.total_insights,
                status.deleted_insights,
                status.edge_count,
                bytes_text(status.db_size_bytes),
                entities,
                space.description,
            )
        )
    body = join(
        [
            tag(
                "p",
                "Every Memory Space of the root. An entity opens a recall of it; a recall "
                "result opens the related graph of its insight.",
                class_="meta",
            ),
            table(
                "Memory Spaces",
                (
                    "Name",
                    "Id",
                    "Active",
                    "Insights",
                    "Forgotten",
                    "Links",
                    "Size",
                    "Top entities",
                    "Description",
                ),
                rows,
                empty="The root has no Memory Space yet.",
            ),
        ]
    )
    return Page("Spaces", body)


def _node(ident: str, text: str) -> str:
    """A Mermaid node whose label is ``text`` cut short and escaped for Mermaid (which
    reads ``#quot;``-style entities; the page escapes the whole source once more)."""
    short = text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "\u2026"
    label = "".join(ch if ch.isalnum() or ch in " .,-_()/'" else f"#{ord(ch)};" for ch in short)
    return f'{ident}["{label}"]'


def graph_source(
    center: str,
    center_text: str,
    items: tuple[RelatedItem, ...],
    parents: Mapping[str, tuple[str, str]],
) -> str:
    """The Mermaid flowchart of ``center`` and what ``related`` reached from it (the nearest
    :data:`DRAWN`): a first-hop item hangs from the center, a farther one from the item
    ``parents`` names (id, edge type), else from the center with a dotted line."""
    items = tuple(sorted(items, key=lambda i: i.hit.depth))[:DRAWN]
    ids = {center: "n0"}
    lines = ["flowchart LR", f"    {_node('n0', center_text)}", "    class n0 center"]
    for i, item in enumerate(items, 1):
        ids[item.hit.insight.id] = f"n{i}"
        lines.append(f"    {_node(f'n{i}', item.hit.insight.content)}")
    for item in items:
        me = ids[item.hit.insight.id]
        edge = "".join(c for c in item.hit.via_edge_type if c.isalnum() or c == "_")
        parent = parents.get(item.hit.insight.id)
        if item.hit.depth <= 1:
            lines.append(f"    n0 -->|{edge}| {me}")
        elif parent is not None and parent[0] in ids:
            edge = "".join(c for c in parent[1] if c.isalnum() or c == "_")
            lines.append(f"    {ids[parent[0]]} -->|{edge}| {me}")
        else:
            lines.append(f"    n0 -.->|{edge}| {me}")
    lines.append("    classDef center stroke-width:3px")
    return "\n".join(lines)


def related_view(root: MemoryRoot, params: Mapping[str, str]) -> Page:
    """The related graph of insight ``params["insight"]`` in space ``params["space"]``."""
    space, insight_id = params["space"], params["insight"]
    lt = root.long_term
    title = f"Related to {insight_id}"
    reached = lt.related(insight_id, space=space, depth=2)  # refused: the app's error page
    items = tuple(sorted(reached, key=lambda i: i.hit.depth))  # nearest first
    first = [i for i in items if i.hit.depth <= 1]
    farther = {i.hit.insight.id for i in items if i.hit.depth > 1}
    parents: dict[str, tuple[str, str]] = {}
    center_text = insight_id  # links are undirected: a first hop's neighbours hold the center
    for hop in first[:FANOUT]:
        for nxt in lt.related(hop.hit.insight.id, space=space, depth=1):
            found = nxt.hit.insight
            if found.id == insight_id:
                center_text = found.content
            elif found.id in farther:
                parents.setdefault(found.id, (hop.hit.insight.id, nxt.hit.via_edge_type))
    rows = (
        (
            i.hit.depth,
            i.hit.via_edge_type,
            i.hit.insight.content,
            i.hit.insight.category,
            tag(
                "a",
                i.hit.insight.id,
                href=related_href(space, i.hit.insight.id),
            ),
        )
        for i in items[:LISTED]
    )
    body = join(
        [
            tag(
                "p",
                f"Space {space}: the {count(len(items), 'insight')} reached by following links, "
                f"two hops at most (the nearest {DRAWN} drawn, {LISTED} listed).",
                class_="meta",
            ),
            Html('<figure><pre class="mermaid">')
            + esc(graph_source(insight_id, center_text, items, parents))
            + Html(
                "</pre><figcaption>The related graph; the table below lists the same "
                "insights.</figcaption></figure>"
            ),
            table(
                "Related insights",
                ("Hops", "Link", "Insight", "Category", "Id"),
                rows,
                empty="Nothing is linked to this insight.",
            ),
        ]
    )
    return Page(title, body, diagrams=True)
