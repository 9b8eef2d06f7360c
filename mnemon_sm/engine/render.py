"""Render a loaded flow as an auditable document: Mermaid state diagram plus tables.

The output is a pure function of the loaded spec and machine class, byte for byte, so the
committed ``specs/diagrams/<flow>.md`` can be checked for drift. Every transition appears (two
transitions between the same states are two edges, unlike the engine's own renderer, which
merges them), with its event, guard, validators and actions. SVG is produced with Graphviz
``dot`` when it is installed; it is a convenience and is not checked.

Priority
--------
The engine tries the transitions leaving one state on one event (or the eventless ones) in
document order: for each, its validators run first (one that raises refuses the event and
nothing after it is tried), then its guard; the first whose guard holds fires. So whenever
a state has more than one transition on an event, every such edge is numbered by that
first-match order (``#1``, ``#2``, ...), and an unguarded one that comes after guarded ones
reads ``[else]``: it fires when none of their guards held. :func:`priorities` computes this
once for the diagram, the Graphviz source and the transitions table.

Edge labels
-----------
A Mermaid edge reads ``#n event [guard] (internal) ⟨validators⟩ / actions``, each part only
when present; at most :data:`MAX_EDGE_ACTIONS` actions are named on an edge (the rest are
counted, and the table lists them all). Mermaid reads an edge label up to the end of the
line and rejects ``:`` or ``;`` in it, ``%%`` starts a comment and ``direction`` followed by
a direction keyword is taken for a statement; callback, event and state names are
``[a-z0-9_]`` and the decoration here uses none of those; still, every label drawn is
checked with :func:`mermaid_label_problems` and one that would break is a ``SpecError``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter

import attrs

from mnemon_sm.engine.spec import ENGINE, FlowSpec, LoadedFlow, TransitionDoc
from mnemon_sm.errors import SpecError

__all__ = [
    "MAX_EDGE_ACTIONS",
    "Priority",
    "edge_label",
    "mermaid_label_problems",
    "mermaid_source",
    "priorities",
    "render_dot",
    "render_markdown",
    "render_svg",
]

#: How many actions an edge label names before it only counts the rest.
MAX_EDGE_ACTIONS = 3
ELSE = "else"


@attrs.frozen
class Priority:
    """Where a transition stands among those leaving its state on its event.

    ``rank`` is its first-match position (1-based), None when it is the only one;
    ``is_else`` is true for an unguarded transition that follows guarded ones.
    """

    rank: int | None
    is_else: bool

    @property
    def mark(self) -> str:
        return f"#{self.rank}" if self.rank is not None else ""


def priorities(spec: FlowSpec) -> dict[tuple[str, int], Priority]:
    """The :class:`Priority` of every transition of ``spec``, by transition key."""
    sizes = Counter((t.source, t.event) for t in spec.transitions)
    seen: Counter[tuple[str, str]] = Counter()
    guarded: set[tuple[str, str]] = set()
    found = {}
    for t in spec.transitions:
        group = (t.source, t.event)
        seen[group] += 1
        rank = seen[group] if sizes[group] > 1 else None
        found[t.key] = Priority(rank, is_else=not t.guard and group in guarded)
        if t.guard:
            guarded.add(group)
    return found


def _guard(t: TransitionDoc, priority: Priority) -> str:
    return ELSE if priority.is_else else t.guard


def edge_label(t: TransitionDoc, priority: Priority) -> str:
    """The label of ``t``'s edge (see the module): ``#n event [guard] ⟨validators⟩ / actions``."""
    parts = []
    if priority.mark:
        parts.append(priority.mark)
    if t.event:
        parts.append(t.event)
    guard = _guard(t, priority)
    if guard:
        parts.append(f"[{guard}]")
    if t.target is None:
        parts.append("(internal)")
    if t.validators:
        parts.append(f"⟨{', '.join(t.validators)}⟩")
    if t.actions:
        named = list(t.actions[:MAX_EDGE_ACTIONS])
        rest = len(t.actions) - len(named)
        parts.append("/ " + ", ".join(named) + (f", … ({rest} more)" if rest else ""))
    return " ".join(parts)


_MERMAID_BREAKERS = (
    (re.compile(r"[:;\n]"), "':', ';' or a line break ends or breaks a Mermaid label"),
    (re.compile(r"%%"), "'%%' starts a Mermaid comment"),
    (re.compile(r"direction\s+(?:TB|BT|RL|LR)", re.IGNORECASE), "reads as a direction statement"),
    (re.compile(r"#\w+;"), "reads as an HTML entity"),
    (re.compile(r"[<>&\"`]"), "markup characters are escaped or stripped by the renderer"),
)


def mermaid_label_problems(label: str) -> list[str]:
    """Why ``label`` would not survive as a Mermaid edge label (empty when it would)."""
    return [f"{label!r}: {why}" for rx, why in _MERMAID_BREAKERS if rx.search(label)]


def _cell(items: tuple[str, ...] | list[str]) -> str:
    return ", ".join(f"`{i}`" for i in items) if items else ""


def _checked(spec: FlowSpec, label: str) -> str:
    problems = mermaid_label_problems(label)
    if problems:
        raise SpecError(f"{spec.flow}: cannot draw {'; '.join(problems)}")
    return label


def mermaid_source(spec: FlowSpec) -> list[str]:
    """The flow's Mermaid state diagram, a line per statement (no code fence): what the
    committed diagram draws, and what the web inspector renders."""
    lines = ["stateDiagram-v2", "    direction LR"]
    for sid, sdef in spec.state_defs.items():
        if sdef.get("enter"):
            label = _checked(spec, f"entry / {', '.join(sdef['enter'])}")
            lines.append(f"    {sid} : {label}")
    lines.append(f"    [*] --> {spec.initial}")
    ranks = priorities(spec)
    for t in spec.transitions:
        target = t.target or t.source
        label = _checked(spec, edge_label(t, ranks[t.key]))
        lines.append(f"    {t.source} --> {target}" + (f" : {label}" if label else ""))
    for sid, sdef in spec.state_defs.items():
        if sdef.get("final"):
            lines.append(f"    {sid} --> [*]")
    return lines


def _mermaid(spec: FlowSpec) -> list[str]:
    return ["```mermaid", *mermaid_source(spec), "```"]


def render_markdown(flow: LoadedFlow) -> str:
    """The generated document of one flow."""
    spec = flow.spec
    out = [
        f"<!-- Generated by `mnemon-sm specs render` from specs/{spec.flow}.yaml. "
        "Do not edit by hand. -->",
        "",
        f"# Flow `{spec.flow}`",
        "",
        spec.summary,
        "",
        f"Callbacks live on the flow context registered as `{spec.context}`. Engine: "
        f"python-statemachine `StateChart` subclass `{flow.machine_class.__name__}` with "
        "every structural check on; an event with no enabled transition raises `IllegalEvent` "
        "and an exception from a callback propagates. Between caller events the machine rests in "
        + ", ".join(f"`{r}`" for r in spec.resting)
        + "; an exception (BaseException included) escaping a step elsewhere fires `abort`, "
        "which brings it back to rest before the exception goes on.",
        "",
        "An edge reads `#n event [guard] (internal) ⟨validators⟩ / actions`, each part only "
        "when present. Transitions leaving a state on one event (or eventless ones) are tried "
        "in document order, numbered `#1`, `#2`, ...: "
        "each one's validators run first (one that raises refuses the event), then its guard, "
        "and the first whose guard holds fires; `[else]` marks an unguarded transition after "
        f"guarded ones. An edge names at most {MAX_EDGE_ACTIONS} actions; the transitions "
        "table lists them all.",
        "",
        *_mermaid(spec),
        "",
        "## States",
        "",
        "| State | Kind | Description | Entry actions | Port calls |",
        "| --- | --- | --- | --- | --- |",
    ]
    for sid, doc in spec.states.items():
        sdef = spec.state_defs[sid]
        kinds = [k for k in ("initial", "final") if sdef.get(k)]
        kind = ", ".join([*kinds, *(["resting"] if sid in spec.resting else [])])
        out.append(
            f"| `{sid}` | {kind} | {doc.description} | {_cell(sdef.get('enter', []))} "
            f"| {_cell(doc.ports)} |"
        )
    out += [
        "",
        "## Transitions",
        "",
        "In document order within each source state; Index is the transition's position "
        "there. When a state has several transitions on one event (or several eventless "
        "ones), the engine tries them in that order, first match wins: Priority gives the "
        "order (`#1` is tried first); for each, the validators run (one that raises refuses "
        "the event and nothing after it is tried), then the guard, and the first transition "
        "whose guard holds fires. A guard of *else* marks an unguarded transition after "
        "guarded ones: it fires when none of their guards held.",
        "",
        "| Source | Index | Event | Priority | Guard | Validators | Actions | Target |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    ranks = priorities(spec)
    for t in spec.transitions:
        priority = ranks[t.key]
        target = f"`{t.target}`" if t.target else "(internal)"
        event = f"`{t.event}`" if t.event else "(eventless)"
        guard = f"*{ELSE}*" if priority.is_else else f"`{t.guard}`" if t.guard else ""
        out.append(
            f"| `{t.source}` | {t.index} | {event} | {priority.mark} | {guard} "
            f"| {_cell(t.validators)} | {_cell(t.actions)} | {target} |"
        )
    out += ["", "## Events", "", "| Event | Description | Raised by |", "| --- | --- | --- |"]
    for event, event_doc in spec.events.items():
        origin = (
            "the engine, when an exception escapes a step (internal)"
            if event_doc.raised_by == ENGINE
            else f"`{event_doc.raised_by}` (internal)"
            if event_doc.raised_by
            else "caller"
        )
        out.append(f"| `{event}` | {event_doc.description} | {origin} |")
    out += ["", "## Invariants", "", "| ID | Statement |", "| --- | --- |"]
    out += [f"| {i} | {d} |" for i, d in spec.invariants.items()]
    return "\n".join(out) + "\n"


def render_dot(spec: FlowSpec) -> str:
    """Graphviz source of the state diagram (deterministic)."""
    lines = [f'digraph "{spec.flow}" {{', "  rankdir=LR;", "  node [shape=box style=rounded];"]
    lines.append('  "__start" [shape=point];')
    for sid, sdef in spec.state_defs.items():
        peripheries = 2 if sdef.get("final") else 1
        lines.append(f'  "{sid}" [peripheries={peripheries}];')
    lines.append(f'  "__start" -> "{spec.initial}";')
    ranks = priorities(spec)
    for t in spec.transitions:
        target = t.target or t.source
        lines.append(f'  "{t.source}" -> "{target}" [label="{edge_label(t, ranks[t.key])}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_svg(spec: FlowSpec) -> bytes | None:
    """SVG of the diagram via Graphviz ``dot``; None when ``dot`` is not installed."""
    dot = shutil.which("dot")
    if dot is None:
        return None
    done = subprocess.run(
        [dot, "-Tsvg"], input=render_dot(spec).encode(), capture_output=True, check=True
    )
    return done.stdout
