"""Spec lint (callbacks, roles, ports, invariant coverage) and diagram drift."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mnemon_sm.cli.specs import check_specs
from mnemon_sm.engine.lint import lint_flow, port_methods
from mnemon_sm.engine.render import render_dot, render_markdown
from mnemon_sm.engine.spec import (
    LoadedFlow,
    build_machine_class,
    flow_names,
    load_flow,
    parse_spec,
)

from .test_spec_loader import GOOD, DemoContext

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
    assert "committed --> ready : request_rejected" in mermaid
    assert "committed --> committed : add (internal)" in mermaid
    assert re.search(r"^digraph", render_dot(flow.spec))


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
