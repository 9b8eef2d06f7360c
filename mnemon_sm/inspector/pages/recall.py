"""Recall: the deterministic search over the spaces, with each result's score, relevance tier
and why it ranked. The inspector's root is read-only, so a search counts no access."""

from __future__ import annotations

from collections.abc import Mapping

from mnemon_sm.errors import MnemonError
from mnemon_sm.flows.long_term.service import SearchHit
from mnemon_sm.inspector.html import Html, count, esc, join, table, tag
from mnemon_sm.inspector.pages import Page
from mnemon_sm.inspector.pages.spaces import related_href
from mnemon_sm.root import MemoryRoot

__all__ = ["view"]

LIMITS = (5, 12, 25, 50)


def _why(hit: SearchHit) -> str:
    h = hit.hit
    parts = [f"tier {hit.tier}"]
    if h.matched_via:
        parts.append(f"matched via {h.matched_via}")
    if h.intent:
        parts.append(f"intent {h.intent}")
    if h.confidence is not None:
        parts.append(f"confidence {h.confidence}")
    parts.append(f"importance {h.insight.importance}")
    return "; ".join(parts)


def _related_link(hit: SearchHit) -> Html:
    href = related_href(hit.space_id, hit.insight.id)
    return tag("a", "related", href=href, aria_label=f"Related to insight {hit.insight.id}")


def view(root: MemoryRoot, params: Mapping[str, str]) -> Page:
    query = params.get("q", "").strip()
    chosen = params.get("space", "")
    try:
        limit = int(params.get("limit", "12"))
    except ValueError:
        limit = 12
    limit = limit if limit in LIMITS else 12
    spaces = root.long_term.spaces()
    options = [tag("option", "Every active space", value="")] + [
        tag(
            "option",
            f"{s.name} ({s.id})" + ("" if s.active else ", inactive"),
            value=s.id,
            selected="selected" if s.id == chosen else None,
        )
        for s in spaces
    ]
    limits = [
        tag("option", n, value=n, selected="selected" if n == limit else None) for n in LIMITS
    ]
    form = Html(
        '<form method="get" action="/recall" role="search" class="query">'
        '<label for="q">Query</label>'
        f'<input id="q" name="q" type="search" value="{esc(query)}" required '
        'autocomplete="off" placeholder="what to recall">'
        f'<label for="space">Space</label><select id="space" name="space">{join(options)}'
        "</select>"
        f'<label for="limit">Results</label><select id="limit" name="limit">{join(limits)}'
        "</select>"
        '<button type="submit">Recall</button></form>'
        '<p class="meta">The deterministic search (no model), exactly as the agent\'s recall '
        "retrieves and ranks; an inspector's search counts no access.</p>"
    )
    if not query:
        return Page("Recall", form)
    try:
        result = root.long_term.search(query, spaces=[chosen] if chosen else None, limit=limit)
    except MnemonError as exc:
        return Page("Recall", join([form, tag("p", f"Refused: {exc}", class_="error")]))
    rows = (
        (
            rank,
            "" if h.hit.score is None else f"{h.hit.score:.3f}",
            tag("span", h.tier, class_=f"tier tier-{h.tier}"),
            h.insight.content,
            f"{h.space_name} ({h.space_id})",
            h.insight.category,
            _why(h),
            _related_link(h),
        )
        for rank, h in enumerate(result.hits, 1)
    )
    sources = (
        (
            f"{s.space_name} ({s.space_id})",
            s.status,
            s.item_count,
            s.quality.fetched,
            s.quality.selected,
            s.quality.dropped_low_score + s.quality.dropped_non_positive_score,
            s.reason or s.hint or "",
        )
        for s in result.sources
    )
    body = join(
        [
            form,
            tag("h2", f"{count(len(result.hits), 'result')} for “{query}” ({result.mode})"),
            tag("p", f"Hint: {result.hint}", class_="meta") if result.hint else Html(""),
            table(
                "Results, best first",
                ("#", "Score", "Tier", "Insight", "Space", "Category", "Why it ranked", "Links"),
                rows,
                empty="Nothing relevant was found.",
            ),
            tag("h2", "Spaces searched"),
            table(
                "What each space returned",
                ("Space", "Status", "Insights", "Fetched", "Selected", "Dropped", "Note"),
                sources,
                empty="No space was searched.",
            ),
        ]
    )
    return Page("Recall", body)
