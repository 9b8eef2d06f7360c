"""A document writer process for the multi-process property tests (not a test module).

Run it by path with the virtualenv's python, from anywhere::

    python property_tests/_doc_writer.py --root DIR --proc p0 --count 6 --limit 6000

It opens a ``MemoryRoot`` on ``DIR`` (real files, real locks, the embedded long-term store, the
built-in workers), reports ``{"ready": true}``, waits for the line ``go`` on stdin (the start
barrier), then creates ``--count`` documents ``"<proc> doc <n>"`` one after the other, each
large enough that a small ``--limit`` makes creates archive the least recently used documents.
After each create it prints one JSON line, flushed at once: ``{"proc", "n", "ok": true, "id",
"archived": [...]}`` or ``{"proc", "n", "ok": false, "error": "<ErrorClass>", "message"}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:  # run by path: make the package importable without installing it
    sys.path.insert(0, _REPO)

from mnemon_sm.config import Config  # noqa: E402
from mnemon_sm.errors import MnemonError  # noqa: E402
from mnemon_sm.root import MemoryRoot  # noqa: E402

BODY = "# Notes\n\nHow this part of the service is deployed and checked.\n\n" + "Detail. " * 90


def _emit(obj: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--proc", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--limit", type=int, required=True)
    parser.add_argument("--lock-timeout-ms", type=int, default=60_000)
    parser.add_argument("--index", choices=("file", "journal"), default="file")
    opts = parser.parse_args(argv)
    config = Config(
        durability="normal",
        documents_active_limit=opts.limit,
        lock_timeout_ms=opts.lock_timeout_ms,
        documents_index=opts.index,
    )
    root = MemoryRoot.open(opts.root, config)
    _emit({"ready": True, "proc": opts.proc, "pid": os.getpid()})
    if sys.stdin.readline().strip() != "go":
        return 3
    for n in range(opts.count):
        head = {"proc": opts.proc, "n": n}
        try:
            result = root.documents.create(f"{opts.proc} doc {n}", f"{opts.proc} {n}. {BODY}")
        except MnemonError as exc:
            _emit({**head, "ok": False, "error": type(exc).__name__, "message": str(exc)})
        else:
            _emit({**head, "ok": True, "id": result.document.id, "archived": result.archived})
    root.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
