"""Where each flow stands, read off the audit log (pure).

A run id is ``<process>-<n>`` (see :class:`~mnemon_sm.flows.audit.AuditLog`): the newest record
of a flow from one process says the state that process's flow is in, as far as the log
knows. A state the spec rests in is *at rest*; any other means a step was in flight when the
log was last written (an operation running now, or a process that died mid-step)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs

from mnemon_sm.flows.audit import AuditRecord

__all__ = ["Standing", "highlighted", "standings"]


@attrs.frozen
class Standing:
    """One process's flow: the state it was last seen in, when, by which run."""

    process: str
    state: str
    at: int
    run: str
    at_rest: bool


def process_of(run: str) -> str:
    return run.rpartition("-")[0] or run


def standings(
    records: Iterable[AuditRecord], resting: Mapping[str, Sequence[str]]
) -> dict[str, list[Standing]]:
    """Per flow, each process's newest state, newest first (``resting``: each flow's resting
    states, from its spec)."""
    newest: dict[tuple[str, str], AuditRecord] = {}
    for record in records:
        key = (record.flow, process_of(record.run))
        found = newest.get(key)
        if found is None or record.at >= found.at:
            newest[key] = record
    out: dict[str, list[Standing]] = {}
    for (flow, process), record in newest.items():
        state = record.target if record.outcome is None else record.state
        if state is None:
            continue
        rest = state in resting.get(flow, ())
        out.setdefault(flow, []).append(Standing(process, state, record.at, record.run, rest))
    for stands in out.values():
        stands.sort(key=lambda s: s.at, reverse=True)
    return out


def highlighted(source: Sequence[str], stands: Sequence[Standing], states: Iterable[str]) -> str:
    """A flow's Mermaid diagram (``source``, its lines) with every state's name drawn above
    its entry actions, and the states its processes stand in marked: ``busy`` where a step is
    in flight, ``resting`` where one rests; only names of the flow's own ``states`` are drawn
    (a record names no other, but the log is input)."""
    known = set(states)
    busy = sorted({s.state for s in stands if not s.at_rest and s.state in known})
    resting = sorted({s.state for s in stands if s.at_rest and s.state in known} - set(busy))
    lines: list[str] = []
    for line in source:  # Mermaid draws a described state by its description: name it first
        name, colon, _ = line.strip().partition(" : ")
        if colon and name in known:
            lines.append(f"    {name} : {name}")
        lines.append(line)
    lines.append("    classDef busy fill:#ffd166,stroke:#7a4b00,stroke-width:3px,color:#1a1a1a")
    lines.append("    classDef resting fill:#cfe8ff,stroke:#0b3d91,stroke-width:3px,color:#1a1a1a")
    if busy:
        lines.append(f"    class {','.join(busy)} busy")
    if resting:
        lines.append(f"    class {','.join(resting)} resting")
    return "\n".join(lines)
