"""Spec lint (callbacks, roles, ports, invariant coverage) and diagram drift."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import attrs
import pytest

from mnemon_sm.cli.specs import check_specs
from mnemon_sm.engine import registry, render
from mnemon_sm.engine.lint import lint_flow, port_methods
from mnemon_sm.engine.registry import flow_context
from mnemon_sm.engine.render import mermaid_label_problems, render_dot, render_markdown
from mnemon_sm.engine.spec import (
    LoadedFlow,
    build_machine_class,
    flow_names,
    load_flow,
    parse_spec,
)
from mnemon_sm.errors import SpecError
from mnemon_sm.ports import PORT_PROTOCOLS, Ports

from .test_spec_loader import GOOD, DemoContext, spec_text

REPO = Path(__file__).resolve().parents[1]


def demo_flow(text: str = GOOD, context: type = DemoContext) -> LoadedFlow:
    spec = parse_spec(text, name="demo")
    return LoadedFlow(spec, build_machine_class(spec), context)


@pytest.mark.parametrize("name", flow_names())
def test_shipped_flows_lint_clean(name: str) -> None:
    assert lint_flow(load_flow(name), REPO / "property_tests") == []


def test_lint_finds_missing_callbacks_and_wrong_roles() -> None:
    class Broken:
        def check_ok(self) -> None: ...

        is_ready = True  # not callable

    problems = lint_flow(demo_flow(context=Broken))
    assert any("'do_work' is not a method" in p for p in problems)
    assert any("'is_ready' is not a method" in p for p in problems)
    renamed = GOOD.replace("cond: is_ready", "cond: ready_now").replace(
        "validators: check_ok", "validators: ok_now"
    )
    problems = lint_flow(demo_flow(renamed, DemoContext))
    assert any("guard 'ready_now' should start with is_" in p for p in problems)
    assert any("validator 'ok_now' should start with check_" in p for p in problems)


def test_lint_checks_declared_port_calls() -> None:
    assert "files.read" in port_methods() and "locks.acquire" in port_methods()
    problems = lint_flow(demo_flow(GOOD.replace("[files.read]", "[files.teleport]")))
    assert problems == ["demo: state busy declares unknown port call files.teleport"]


def test_lint_requires_each_invariant_in_a_property_test(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text("# INV-DEMO-1 in a comment does not count\n")
    assert lint_flow(demo_flow(), tmp_path) == [
        "demo: invariant INV-DEMO-1 is not checked by a property test"
    ]
    (tmp_path / "test_x.py").write_text('invariant = "INV-DEMO-1"\n')
    assert lint_flow(demo_flow(), tmp_path) == []


@pytest.mark.parametrize("name", flow_names())
def test_committed_diagram_matches_the_spec(name: str) -> None:
    committed = (REPO / "specs" / "diagrams" / f"{name}.md").read_text(encoding="utf-8")
    assert committed == render_markdown(load_flow(name))


def test_rendering_is_deterministic_and_shows_every_transition() -> None:
    flow = load_flow("hot_memory_mutation")
    text = render_markdown(flow)
    assert text == render_markdown(flow)
    mermaid = text.split("```mermaid\n", 1)[1].split("```", 1)[0]
    assert mermaid.startswith("stateDiagram-v2\n")
    edges = [line for line in mermaid.splitlines() if "-->" in line and "[*]" not in line]
    assert len(edges) == len(flow.spec.transitions)
    assert "deciding --> committed : #1 [can_commit]" in mermaid
    assert "deciding --> ready : #3 [is_rejected] / release_lock" in mermaid
    assert re.search(r"^digraph", render_dot(flow.spec))
    lifecycle = render_markdown(load_flow("agent_lifecycle"))
    assert "idle --> idle : turn_ended (internal)" in lifecycle


def test_specs_check_reports_drift(tmp_path: Path) -> None:
    assert check_specs(REPO / "specs", REPO / "property_tests") == []
    copy = tmp_path / "specs"
    (copy / "diagrams").mkdir(parents=True)
    (copy / "diagrams" / "hot_memory_mutation.md").write_text("stale\n")
    problems = check_specs(copy, REPO / "property_tests")
    assert problems == [
        f"{copy / 'diagrams' / f'{name}.md'} is missing or stale: run `mnemon-sm specs render`"
        for name in flow_names()
    ]


def test_port_protocols_table_covers_every_field_of_the_bundle() -> None:
    hints = typing.get_type_hints(Ports)
    assert list(PORT_PROTOCOLS) == [field.name for field in attrs.fields(Ports)]
    for port, protocol in PORT_PROTOCOLS.items():
        assert protocol is hints[port] or protocol in typing.get_args(hints[port]), port
    assert {"long_term.recall", "workers.run", "embedder.embed"} <= port_methods()


def test_specs_check_reports_a_registered_context_no_spec_uses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(registry, "_contexts", dict(registry.registered()))

    @flow_context("OrphanFlow")
    class OrphanFlow:
        pass

    assert check_specs(REPO / "specs", REPO / "property_tests") == [
        "flow context 'OrphanFlow' (tests.test_spec_lint_and_drift."
        "test_specs_check_reports_a_registered_context_no_spec_uses.<locals>.OrphanFlow) "
        "is registered but no spec uses it"
    ]


# -- edge labels: priority, else, validators, actions --------------------------------------

#: ``busy`` has a guarded ``stop`` and an unguarded one after it: the second is the else.
GUARDED_ELSE = spec_text(
    **{
        "resting: [idle, busy, done]": "resting: [idle, busy, done]",
        "        stop: [{target: done, cond: is_ready}]\n": (
            "        stop:\n"
            "          - {target: done, cond: is_ready, validators: [check_ok, check_more],\n"
            "             before: note, after: [log, tidy, count, close_up]}\n"
            "          - {target: idle, unless: is_ready}\n"
            "          - {target: idle, before: undo}\n"
        ),
    }
)


def mermaid_of(text: str) -> str:
    return render_markdown(demo_flow(text)).split("```mermaid\n", 1)[1].split("```", 1)[0]


def test_edges_on_one_event_are_numbered_in_first_match_order_with_an_else() -> None:
    mermaid = mermaid_of(GUARDED_ELSE)
    assert (
        "    busy --> done : #1 stop [is_ready] ⟨check_ok, check_more⟩ "
        "/ note, log, tidy, … (2 more)\n" in mermaid
    )
    assert "    busy --> idle : #2 stop [!is_ready]\n" in mermaid
    assert "    busy --> idle : #3 stop [else] / undo\n" in mermaid
    assert "    idle --> busy : go ⟨check_ok⟩\n" in mermaid  # alone on its event: no number
    table = render_markdown(demo_flow(GUARDED_ELSE)).split("## Transitions", 1)[1]
    assert "first match wins" in table
    assert "| `busy` | 0 | `stop` | #1 | `is_ready` | `check_ok`, `check_more` " in table
    assert "| `busy` | 1 | `stop` | #2 | `!is_ready` |  |  | `idle` |" in table
    assert "| `busy` | 2 | `stop` | #3 | *else* |  | `undo` | `idle` |" in table
    assert "| `idle` | 0 | `go` |  |  | `check_ok` |  | `busy` |" in table
    dot = render_dot(demo_flow(GUARDED_ELSE).spec)
    assert '"busy" -> "idle" [label="#3 stop [else] / undo"];' in dot


def test_an_unguarded_first_transition_is_not_an_else() -> None:
    text = spec_text(
        **{
            "        stop: [{target: done, cond: is_ready}]\n": (
                "        stop: [{target: done}, {target: idle, cond: is_ready}]\n"
            )
        }
    )
    mermaid = mermaid_of(text)
    assert "    busy --> done : #1 stop\n" in mermaid
    assert "    busy --> idle : #2 stop [is_ready]\n" in mermaid
    assert "else" not in mermaid


#: What Mermaid's state-diagram lexer reads as one transition with a label: the label runs
#: from ``:`` to the end of the line and may hold neither ``:`` nor ``;``.
MERMAID_EDGE = re.compile(r"^    (\[\*\]|[a-z0-9_]+) --> (\[\*\]|[a-z0-9_]+)(?: : ([^:\n;]+))?$")
MERMAID_STATE = re.compile(r"^    [a-z0-9_]+ : ([^:\n;]+)$")


@pytest.mark.parametrize("name", flow_names())
def test_every_diagram_line_is_mermaid_state_diagram_syntax(name: str) -> None:
    mermaid = render_markdown(load_flow(name)).split("```mermaid\n", 1)[1].split("```", 1)[0]
    head, *body = mermaid.splitlines()
    assert head == "stateDiagram-v2" and body[0] == "    direction LR"
    for line in body[1:]:
        found = MERMAID_EDGE.match(line) or MERMAID_STATE.match(line)
        assert found, line
        label = found.groups()[-1]
        assert label is None or mermaid_label_problems(label) == [], line


@pytest.mark.parametrize(
    "label",
    ["a : b", "a ; b", "a %% b", "go / set direction LR", "#59; x", "a <b> c", "x & y"],
)
def test_labels_mermaid_would_misread_are_caught(label: str) -> None:
    assert mermaid_label_problems(label)


def test_a_label_mermaid_would_misread_is_a_spec_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(render, "edge_label", lambda t, priority: "go; now")
    with pytest.raises(SpecError, match="cannot draw"):
        render_markdown(demo_flow())
