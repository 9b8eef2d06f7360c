"""How far a caller's value travels inside the library (prints JSON).

Two journeys, each from the command line to the store, on a fresh embedded root:

- ``hot add``: the entry's text, from ``mnemon-sm hot add`` to the commit of
  ``runtime/memories.json``;
- ``recall``: the query, from ``mnemon-sm recall`` (built-in workers) to the
  long-term store's ``recall``.

A *hop* is a call of a library function that receives the value (or its normalised form: the
same text with whitespace collapsed) as an argument; *layers* are the distinct packages those
functions live in (``cli``, ``root``, ``flows/hot``, ``engine``, ``ports``, ``adapters``, ...);
*checks* are the hops that validate it (a ``check_*`` function, or one of ``inputs``,
``ports/long_term/checks``). Counted with ``sys.setprofile`` over one run of each command;
the counts are exact and do not depend on the machine.

Usage: python benchmarks/hops.py [--dir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

from mnemon_sm.text import collapse_whitespace

try:
    from mnemon_sm.cli.main import main as cli
except ImportError:  # the layout before the packages (to measure a baseline)
    from mnemon_sm.cli import main as cli  # type: ignore[no-redef]

PACKAGE = "mnemon_sm"
CHECK_MODULES = {"mnemon_sm.inputs", "mnemon_sm.ports.long_term.checks"}


def layer(module: str) -> str:
    """``mnemon_sm.flows.hot.rules`` -> ``flows/hot``; a top-level module is ``base``."""
    parts = module.split(".")[1:]
    if len(parts) <= 1:
        return "base"
    if parts[0] in ("flows", "ports", "adapters") and len(parts) > 2:
        return "/".join(parts[:2])
    return parts[0]


def holds(value: object, wanted: set[str], depth: int) -> bool:
    """Whether ``value`` is one of the wanted texts, or holds one in a dict, list or tuple
    (``depth`` levels down: an event's keyword arguments hold the request)."""
    if isinstance(value, str):
        return value in wanted
    if depth == 0:
        return False
    if isinstance(value, dict):
        return any(holds(v, wanted, depth - 1) for v in value.values())
    if isinstance(value, list | tuple):
        return any(holds(v, wanted, depth - 1) for v in value)
    return False


def journey(argv: list[str], value: str) -> dict[str, Any]:
    wanted = {value, collapse_whitespace(value)}
    hops: list[tuple[str, str]] = []  # (module, function)
    checks: list[str] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith(PACKAGE):
            return
        code = frame.f_code
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        values = [frame.f_locals.get(n) for n in names]
        carried = any(holds(v, wanted, 3) for v in values)
        if carried:
            name = f"{module}.{code.co_qualname}"
            hops.append((module, name))
            if code.co_name.startswith("check") or module in CHECK_MODULES:
                checks.append(name)

    sys.setprofile(profile)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            cli(argv)
    finally:
        sys.setprofile(None)
    layers = sorted({layer(module) for module, _ in hops})
    return {
        "hops": len(hops),
        "layers": len(layers),
        "layerNames": layers,
        "checks": len(checks),
        "checkNames": checks,
        "path": [name for _, name in hops],
    }


def run(directory: Path) -> dict[str, Any]:
    root = str(directory / "root")
    text = "The deploy script lives in tools/deploy.sh"
    with contextlib.redirect_stdout(io.StringIO()):
        cli(["--root", root, "remember", text])  # a space and a fact to recall
    hot = journey(["--root", root, "hot", "add", "--target", "memory", text], text)
    query = "where is the deploy script"
    recall = journey(["--root", root, "recall", query], query)
    return {"benchmark": "hops", "python": sys.version.split()[0], "hotAdd": hot, "recall": recall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="where to create the root (default: a temp dir)")
    args = parser.parse_args()
    if args.dir:
        print(json.dumps(run(args.dir), indent=2))
        return
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(run(Path(tmp)), indent=2))


if __name__ == "__main__":
    main()
