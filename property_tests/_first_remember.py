"""A process of the first-remember race test (not a test module).

Run it by path with the virtualenv's python, from anywhere::

    python property_tests/_first_remember.py --proc p0

It serves rounds read from stdin, one line each: a storage root's path. For each it opens a
``MemoryRoot`` there (embedded store, built-in workers), prints ``{"ready": <root>}``, waits
for the line ``go`` (the start barrier all processes pass together), remembers
``"<proc> noted fact <n>"`` without naming a space, so the write worker routes it (and, in a
fresh root, creates the general space), prints ``{"ok": true, "spaces": [...]}`` (the receipt's
space ids) or ``{"ok": false, "error": "<ErrorClass>: <message>"}`` and closes the root. The
end of stdin ends the process. Each line on stdout is flushed at once.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:  # run by path: make the package importable without installing it
    sys.path.insert(0, _REPO)

from mnemon_sm import Config, MemoryRoot  # noqa: E402
from mnemon_sm.errors import MnemonError  # noqa: E402


def _emit(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data) + "\n")
    sys.stdout.flush()


def _round(root_path: str, proc: str, n: int) -> bool:
    root = MemoryRoot.open(root_path, Config(long_term_store="embedded"))
    try:
        _emit({"ready": root_path})
        if sys.stdin.readline().strip() != "go":
            return False
        try:
            receipt = root.long_term.remember(f"{proc} noted fact {n}")
        except MnemonError as exc:
            _emit({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
        else:
            _emit({"ok": True, "spaces": list(receipt.memory_body_ids)})
    finally:
        root.close()
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proc", required=True, help="a tag like p0")
    opts = parser.parse_args(argv)
    for n, line in enumerate(sys.stdin):
        if not _round(line.strip(), opts.proc, n):
            return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
