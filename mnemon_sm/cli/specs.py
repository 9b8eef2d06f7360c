"""``mnemon-sm specs render|check``: generated diagrams and their drift check.

Specs name their context classes by registered name (:mod:`mnemon_sm.engine.registry`); the
registry is complete here because importing this module first imports the ``mnemon_sm``
package, which imports every flow package. ``check`` also reports a registered context that
no spec uses.

Where ``render`` writes: ``--out`` when given; else ``diagrams/`` beside the specs it reads
(``--dir``, ``./specs``, or the source checkout's ``specs/``). Specs that come from an installed
package (its ``_specs`` directory, see :func:`~mnemon_sm.engine.spec.spec_dir`) are never
written beside: without ``--out`` that is a usage error, so nothing lands in site-packages.
"""

from __future__ import annotations

from pathlib import Path

from mnemon_sm.cli.support import UsageError
from mnemon_sm.engine.lint import lint_flow, string_literals
from mnemon_sm.engine.registry import qualified_name, registered
from mnemon_sm.engine.render import render_markdown, render_svg
from mnemon_sm.engine.spec import flow_names, load_flow, spec_dir
from mnemon_sm.errors import SpecError

__all__ = ["check_specs", "render_specs"]


def _dir(given: Path | None) -> Path:
    if given is not None:
        return given
    local = Path("specs")
    return local if local.is_dir() else spec_dir()


PACKAGED = "_specs"  # the spec directory's name inside an installed package


def _out(directory: Path | None, out: Path | None) -> Path:
    if out is not None:
        return out
    specs = _dir(directory)
    if directory is None and specs.name == PACKAGED:
        raise UsageError(
            f"the specs are the installed package's ({specs}): pass --out DIR to say where"
            " the diagrams go"
        )
    return specs / "diagrams"


def render_specs(directory: Path | None = None, out: Path | None = None) -> list[str]:
    """Write ``<flow>.md`` (and ``.svg`` when Graphviz is present) for every flow into
    ``out`` (default: ``diagrams/`` beside the specs; see the module docstring).

    Raises:
        UsageError: no ``out`` and the specs are an installed package's.
    """
    out = _out(directory, out)
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
    """Problems: load or lint errors, rendered diagrams that differ from the files, and
    registered flow contexts no spec uses."""
    out = _dir(directory) / "diagrams"
    if tests is None and Path("property_tests").is_dir():
        tests = Path("property_tests")
    literals = string_literals(tests) if tests is not None else None  # read once for all flows
    problems = []
    used: set[str] = set()
    loaded_all = True
    for name in flow_names():
        try:
            flow = load_flow(name)
        except SpecError as exc:
            problems.append(str(exc))
            loaded_all = False
            continue
        used.add(flow.spec.context)
        problems += lint_flow(flow, literals)
        path = out / f"{name}.md"
        current = path.read_text(encoding="utf-8") if path.exists() else None
        try:
            rendered = render_markdown(flow)
        except SpecError as exc:  # a name the diagram cannot show
            problems.append(str(exc))
            continue
        if current != rendered:
            problems.append(f"{path} is missing or stale: run `mnemon-sm specs render`")
    # A spec that failed to load says nothing of the context it names: report that alone.
    unused = sorted(set(registered()) - used) if loaded_all else []
    problems += [
        f"flow context {context!r} ({qualified_name(registered()[context])}) is registered "
        "but no spec uses it"
        for context in unused
    ]
    return problems
