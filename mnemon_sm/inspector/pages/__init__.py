"""One module per page of the inspector; each turns what the root's public API answers into
a :class:`Page` and never writes."""

from __future__ import annotations

import attrs

from mnemon_sm.inspector.html import Html

__all__ = ["Page"]


@attrs.frozen
class Page:
    """A page's title and body; ``diagrams`` when it has Mermaid blocks to draw, ``refresh``
    seconds when it reloads itself."""

    title: str
    body: Html
    diagrams: bool = False
    refresh: int | None = None
