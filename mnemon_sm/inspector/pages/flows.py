"""Live flows: every spec's diagram with the states its flows stand in highlighted, and a
timeline of the newest transitions and outcomes from the audit log."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from urllib.parse import quote

from mnemon_sm.engine.render import mermaid_source
from mnemon_sm.engine.spec import FlowSpec, flow_names, load_flow
from mnemon_sm.flows.audit import AuditRecord
from mnemon_sm.inspector.html import Html, esc, join, table, tag, when
from mnemon_sm.inspector.live import Standing, highlighted, standings
from mnemon_sm.inspector.pages import Page
from mnemon_sm.root import MemoryRoot
from mnemon_sm.text import iso_ms

__all__ = ["flow_view", "view"]

TIMELINE = 200  # records shown
REFRESH_S = 5


@cache
def _specs() -> dict[str, FlowSpec]:
    return {name: load_flow(name).spec for name in flow_names()}


def _refresh(params: Mapping[str, str]) -> int | None:
    return REFRESH_S if params.get("live") == "1" else None


def _what(r: AuditRecord) -> str:
    if r.outcome is None:
        return f"{r.source} → {r.target} on {r.event}"
    text = f"{r.event} answered {r.outcome}, at rest in {r.state}"
    return text + (f": {r.detail}" if r.detail else "")


def _timeline(records: Sequence[AuditRecord], *, with_flow: bool) -> Html:
    rows = []
    for r in reversed(records):
        row: list[str | Html] = [when(iso_ms(r.at))]
        if with_flow:
            row.append(tag("a", r.flow, href=f"/flows/{quote(r.flow, safe='')}"))
        row += [r.run, _what(r)]
        rows.append(row)
    headers = ("Time", "Flow", "Run", "What") if with_flow else ("Time", "Run", "What")
    return table(
        "Newest first",
        headers,
        rows,
        empty="The audit log is empty: no flow has run with audit on, or it is turned off.",
    )


def _stands(found: Sequence[Standing]) -> str:
    return "; ".join(
        f"{s.state} ({'at rest' if s.at_rest else 'in flight'}, process {s.process})"
        for s in found
    )


def _live_link(path: str, params: Mapping[str, str]) -> Html:
    if _refresh(params):
        return tag(
            "p",
            Html(f"Reloading every {REFRESH_S} s. ") + tag("a", "Stop reloading", href=path),
            class_="meta",
        )
    return tag("p", tag("a", f"Reload every {REFRESH_S} s", href=f"{path}?live=1"), class_="meta")


def view(root: MemoryRoot, params: Mapping[str, str]) -> Page:
    specs = _specs()
    records = root.audit_tail(TIMELINE)
    stand = standings(records, {n: s.resting for n, s in specs.items()})
    rows = (
        (
            tag("a", name, href=f"/flows/{quote(name, safe='')}"),
            len(spec.state_defs),
            len(spec.transitions),
            _stands(stand.get(name, ())) or "not in the newest records",
        )
        for name, spec in specs.items()
    )
    body = join(
        [
            _live_link("/flows", params),
            table(
                "Every flow of the library",
                ("Flow", "States", "Transitions", "Standing"),
                rows,
                empty="",
            ),
            tag("h2", "Timeline"),
            _timeline(records, with_flow=True),
        ]
    )
    return Page("Live flows", body, refresh=_refresh(params))


def flow_view(root: MemoryRoot, params: Mapping[str, str]) -> Page | None:
    """The page of flow ``params["flow"]``; None when there is no such flow."""
    name = params["flow"]
    spec = _specs().get(name)
    if spec is None:
        return None
    records = root.audit_tail(TIMELINE, flow=name)
    found = standings(records, {name: spec.resting}).get(name, [])
    diagram = highlighted(mermaid_source(spec), found, spec.state_defs)
    body = join(
        [
            _live_link(f"/flows/{quote(name, safe='')}", params),
            tag("p", spec.summary, class_="meta"),
            Html('<figure><pre class="mermaid">')
            + esc(diagram)
            + Html(
                "</pre><figcaption>The state diagram of the spec: yellow, a state where a "
                "step was in flight; blue, a state where the flow rests; as the newest audit "
                "records of each process say.</figcaption></figure>"
            ),
            tag("h2", "Where it stands"),
            table(
                "Each process's newest state",
                ("Process", "State", "Since", "Run"),
                (
                    (
                        s.process,
                        f"{s.state} ({'at rest' if s.at_rest else 'in flight'})",
                        when(iso_ms(s.at)),
                        s.run,
                    )
                    for s in found
                ),
                empty="No record of this flow in the audit log's newest records.",
            ),
            tag("h2", "Timeline"),
            _timeline(records, with_flow=False),
        ]
    )
    return Page(f"Flow {name}", body, diagrams=True, refresh=_refresh(params))
