"""One host of the multi-host PostgreSQL test (not a test module).

Run it by path with the virtualenv's python::

    python property_tests/_pg_host.py --root URL --proc p0 --rounds 100

It opens the root (its own pool: another host as far as the server knows) and plays
``--rounds`` rounds of hot-memory writes on entries of its own: round ``i`` adds
``"<proc> fact <i>"``, replaces it with ``"<proc> fact <i> revised"`` and, unless ``i`` is a
multiple of 4, removes that. After each operation it prints one JSON line and flushes it:
``{"i": i, "op": "add" | "replace" | "remove", "outcome": OUTCOME}`` where ``OUTCOME`` is
``ok`` (acknowledged), the error's class for a typed refusal that changed nothing
(``NoMatch``, ``LockTimeout``...), or ``uncertain`` for any other ``StorageError`` (the
server went away: the operation may or may not have committed). After an uncertain outcome it
waits 50 ms, so a server restart does not use up its rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:  # run by path: make the package importable without installing it
    sys.path.insert(0, _REPO)

from mnemon_sm.config import Config  # noqa: E402
from mnemon_sm.errors import LockTimeout, MnemonError, StorageError  # noqa: E402
from mnemon_sm.root import MemoryRoot  # noqa: E402


def contents(proc: str, i: int) -> tuple[str, str]:
    first = f"{proc} fact {i:04d}"
    return first, f"{first} revised"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--proc", required=True)
    parser.add_argument("--rounds", type=int, required=True)
    opts = parser.parse_args(argv)
    root = MemoryRoot.open(opts.root, Config(lock_timeout_ms=30_000))
    print(json.dumps({"ready": True}), flush=True)
    hot = root.hot
    for i in range(opts.rounds):
        a, b = contents(opts.proc, i)
        steps = [
            ("add", lambda a=a: hot.add("memory", a, maintenance=False)),
            ("replace", lambda a=a, b=b: hot.replace("memory", a, b)),
        ]
        if i % 4:
            steps.append(("remove", lambda b=b: hot.remove("memory", b)))
        for op, call in steps:
            try:
                call()
                outcome = "ok"
            except LockTimeout:
                outcome = "LockTimeout"  # never took the lock: nothing happened
            except StorageError:
                outcome = "uncertain"
            except MnemonError as exc:
                outcome = type(exc).__name__
            print(json.dumps({"i": i, "op": op, "outcome": outcome}), flush=True)
            if outcome == "uncertain":
                time.sleep(0.05)
    root.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
