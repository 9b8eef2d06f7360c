"""``mnemon-sm specs render|check``: generated diagrams and their drift check."""

from __future__ import annotations

from pathlib import Path

from mnemon_sm.engine.lint import lint_flow
from mnemon_sm.engine.render import render_markdown, render_svg
from mnemon_sm.engine.spec import flow_names, load_flow, spec_dir
from mnemon_sm.errors import SpecError

__all__ = ["check_specs", "render_specs"]


def _dir(given: Path | None) -> Path:
    if given is not None:
        return given
    local = Path("specs")
    return local if local.is_dir() else spec_dir()


def render_specs(directory: Path | None = None) -> list[str]:
    """Write ``diagrams/<flow>.md`` (and ``.svg`` when Graphviz is present) for every flow."""
    out = _dir(directory) / "diagrams"
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in flow_names():
        flow = load_flow(name)
        path = out / f"{name}.md"
        path.write_text(render_markdown(flow), encoding="utf-8")
        written.append(f"wrote {path}")
        svg = render_svg(flow.spec)
        if svg is not None:
            (out / f"{name}.svg").write_bytes(svg)
            written.append(f"wrote {out / f'{name}.svg'}")
    return written


def check_specs(directory: Path | None = None, tests: Path | None = None) -> list[str]:
    """Problems: load or lint errors, and rendered diagrams that differ from the files."""
    out = _dir(directory) / "diagrams"
    if tests is None and Path("property_tests").is_dir():
        tests = Path("property_tests")
    problems = []
    for name in flow_names():
        try:
            flow = load_flow(name)
        except SpecError as exc:
            problems.append(str(exc))
            continue
        problems += lint_flow(flow, tests)
        path = out / f"{name}.md"
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current != render_markdown(flow):
            problems.append(f"{path} is missing or stale: run `mnemon-sm specs render`")
    return problems
