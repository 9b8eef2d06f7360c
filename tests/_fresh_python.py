"""Run a snippet in a fresh interpreter on this checkout, optionally with packages hidden.

For tests about what importing does (lazy SDK imports, deprecation shims, the test kit
without Hypothesis): a new process is the only place where nothing is imported yet.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent

_HIDE = (
    "import sys\n"
    "class _Hide:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] in {hidden!r}:\n"
    "            raise ModuleNotFoundError(name)\n"
    "sys.meta_path.insert(0, _Hide())\n"
)


def python_lines(code: str, *, without: Sequence[str] = ()) -> list[str]:
    """The lines ``code`` prints, run by ``python -c`` with this checkout first on the path;
    the top-level packages named in ``without`` cannot be imported there (as if not
    installed). A failing snippet fails the test (``CalledProcessError``)."""
    preamble = _HIDE.format(hidden=tuple(without)) if without else ""
    proc = subprocess.run(
        [sys.executable, "-c", preamble + code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(BASE)},
        timeout=120,
        check=True,
    )
    return proc.stdout.splitlines()
