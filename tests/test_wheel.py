"""The specs travel inside the wheel: a plain (non-editable) install loads every flow."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PROBE = """
import os
import mnemon_sm
from mnemon_sm.engine.spec import flow_names, load_flow, spec_dir
assert mnemon_sm.__file__.startswith(os.environ["PYTHONPATH"]), mnemon_sm.__file__
assert spec_dir().name == "_specs", spec_dir()
names = flow_names()
assert names == {names!r}, names
for name in names:
    load_flow(name)
from mnemon_sm.flows.workers.requests import persona
assert all(persona(kind).strip() for kind in ("recall", "write", "answer"))
print("loaded", len(names), "flows from", spec_dir())
"""


def test_wheel_contains_and_loads_every_spec(tmp_path: Path) -> None:
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path / "dist"),
            str(REPO),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = (tmp_path / "dist").glob("mnemon_sm-*.whl")
    specs = sorted(p.name for p in (REPO / "specs").glob("*.yaml"))
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        archive.extractall(tmp_path / "site")
    for spec in specs:
        assert f"mnemon_sm/_specs/{spec}" in names
    assert "mnemon_sm/py.typed" in names
    for kind in ("recall", "write", "answer"):
        assert f"mnemon_sm/flows/workers/texts/{kind}.md" in names
    for asset in ("mermaid.min.js", "mermaid.LICENSE.txt", "inspector.js", "style.css"):
        assert f"mnemon_sm/inspector/static/{asset}" in names  # the inspector fetches nothing
    flows = tuple(sorted(s.removesuffix(".yaml") for s in specs))
    run = subprocess.run(
        [sys.executable, "-c", PROBE.replace("{names!r}", repr(flows))],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path / "site")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert f"loaded {len(flows)} flows" in run.stdout
