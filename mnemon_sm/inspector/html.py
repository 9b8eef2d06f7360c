"""The inspector's HTML: escaping, the page frame and the few pieces every page uses.

Everything that came from the root (entries, queries, names) goes through :func:`esc`;
:class:`Html` marks what is already markup, so nothing is escaped twice and nothing is
forgotten: the helpers take ``str | Html`` and escape the plain strings.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

__all__ = ["NAV", "Cell", "Html", "bytes_text", "count", "esc", "page", "table", "usage", "when"]

#: The pages, in the navigation's order: (path, title).
NAV = (
    ("/", "Hot memory"),
    ("/recall", "Recall"),
    ("/spaces", "Spaces"),
    ("/documents", "Documents"),
    ("/agents", "Agents"),
    ("/flows", "Live flows"),
)


class Html(str):
    """Markup, safe as it is; adding text to it escapes the text."""

    def __add__(self, other: str) -> Html:
        return Html(str.__add__(self, esc(other)))

    def __radd__(self, other: str) -> Html:
        return Html(str.__add__(esc(other), self))


Cell = str | int | float | None | Html


def esc(value: Cell) -> Html:
    """``value`` as text in HTML (markup is kept as it is; None is empty)."""
    if isinstance(value, Html):
        return value
    if value is None:
        return Html("")
    return Html(html.escape(str(value), quote=True))


def join(parts: Iterable[Cell]) -> Html:
    return Html("".join(esc(p) for p in parts))


def tag(name: str, content: Cell = None, **attributes: str | int | None) -> Html:
    """``<name attributes>content</name>``; an attribute ``class_`` is ``class``; one whose
    value is None is left out."""
    attrs_ = "".join(
        f' {key.rstrip("_").replace("_", "-")}="{esc(value)}"'
        for key, value in attributes.items()
        if value is not None
    )
    return Html(f"<{name}{attrs_}>{esc(content)}</{name}>")


def table(
    caption: str, headers: Sequence[str], rows: Iterable[Sequence[Cell]], *, empty: str
) -> Html:
    """A table with a caption and column headers; ``empty`` is said when there is no row."""
    body = ["<tr>" + "".join(f"<td>{esc(cell)}</td>" for cell in row) + "</tr>" for row in rows]
    if not body:
        return tag("p", empty, class_="empty")
    head = "".join(f'<th scope="col">{esc(h)}</th>' for h in headers)
    return Html(
        f"<table><caption>{esc(caption)}</caption><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def when(iso: str | None) -> Html:
    """An ISO-8601 time, kept on one line."""
    return Html("") if not iso else tag("time", iso.replace("T", " "), datetime=iso)


def count(n: int, one: str, many: str | None = None) -> str:
    """``n`` things, in the singular for one."""
    return f"{n} {one if n == 1 else many or one + 's'}"


def bytes_text(n: int) -> str:
    """``n`` bytes for people (B, KiB, MiB)."""
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / (1024 * 1024):.1f} MiB"


def usage(label: str, used: int, limit: int) -> Html:
    """A labelled bar of ``used`` against ``limit`` bytes (a native ``<meter>``), with the
    numbers written out."""
    share = used / limit if limit else 0.0
    ident = "u-" + "".join(c if c.isalnum() else "-" for c in label.lower())
    return Html(
        f'<div class="usage"><label for="{ident}">{esc(label)}</label> '
        f'<meter id="{ident}" min="0" max="{limit}" low="{int(limit * 0.8)}" '
        f'high="{int(limit * 0.95)}" optimum="0" value="{used}">{used} / {limit}</meter> '
        f"<span>{esc(bytes_text(used))} of {esc(bytes_text(limit))} "
        f"({share:.0%})</span></div>"
    )


def page(
    title: str,
    path: str,
    body: Html,
    *,
    location: str,
    refresh: int | None = None,
    diagrams: bool = False,
) -> str:
    """A whole page: the navigation (``path`` marked current), ``title`` and ``body``;
    ``diagrams`` loads the bundled Mermaid to draw the page's ``pre.mermaid`` blocks."""
    links = "".join(
        f'<li><a href="{href}"'
        + (' aria-current="page"' if href == path else "")
        + f">{esc(name)}</a></li>"
        for href, name in NAV
    )
    meta = f'<meta http-equiv="refresh" content="{refresh}">' if refresh else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"{meta}<title>{esc(title)} · mnemon-sm inspector</title>"
        '<link rel="stylesheet" href="/static/style.css">'
        '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">'
        + (
            '<script src="/static/mermaid.min.js" defer></script>'
            '<script src="/static/inspector.js" defer></script>'
            if diagrams
            else ""
        )
        + "</head><body>"
        '<header><p class="brand">mnemon-sm inspector <span class="ro">read-only</span></p>'
        f'<p class="where">Root: <code>{esc(location)}</code></p>'
        f'<nav aria-label="Pages"><ul>{links}</ul></nav></header>'
        f"<main><h1>{esc(title)}</h1>{body}</main></body></html>"
    )
