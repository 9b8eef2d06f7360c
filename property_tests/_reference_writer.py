"""A writer that follows the reference implementation's protocol, and nothing of ours.

Plain Python that never imports ``mnemon_sm``: it stands for the reference implementation
sharing a storage root with us (reference behaviour, section 8.5). Per write it

1. takes ``runtime/.memories.lock`` by creating it exclusively (``O_CREAT|O_EXCL``, mode
   0600); when it exists: deleted and retried at once if its mtime is more than 30 s old,
   retried at once if it vanished, else retried every 20 ms, giving up 5 s after the first
   attempt;
2. reads ``runtime/memories.json``, appends one entry in the reference's format, and persists
   the three files through temporary files renamed in the order USER.md, MEMORY.md,
   memories.json (the commit point; no fsync, as the reference);
3. deletes the lock file.

Run as a program: ``_reference_writer.py ROOT PREFIX COUNT`` prints ``ready``, waits for a
line on stdin (the start barrier), then appends ``COUNT`` entries ``<PREFIX>-<n>`` to MEMORY.md
and prints each one's content once it is committed (its acknowledgement), flushing every
line. The test module imports the functions too.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import sys
import time
from datetime import UTC, datetime

__all__ = ["LockTimedOut", "acquire", "append_entry", "main", "release"]

LOCK = "runtime/.memories.lock"
SOURCE = "runtime/memories.json"
PROJECTIONS = {"user": "runtime/USER.md", "memory": "runtime/MEMORY.md"}
STALE_S = 30.0
TIMEOUT_S = 5.0
RETRY_S = 0.020


class LockTimedOut(Exception):
    """timed out waiting for the runtime memory controller lock"""


def acquire(root: str) -> int:
    """Take the lock (step 1); returns the open file descriptor."""
    path = os.path.join(root, LOCK)
    first = time.monotonic()
    while True:
        try:
            return os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            pass
        try:
            mtime = os.stat(path).st_mtime
        except OSError:
            continue  # vanished
        if time.time() - mtime > STALE_S:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            continue
        if time.monotonic() - first > TIMEOUT_S:
            raise LockTimedOut(LockTimedOut.__doc__)
        time.sleep(RETRY_S)


def release(root: str, fd: int) -> None:
    """Close and delete the lock (step 3)."""
    os.close(fd)
    os.unlink(os.path.join(root, LOCK))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _persist(root: str, doc: dict[str, object]) -> None:
    entries = doc["entries"]
    assert isinstance(entries, list)
    nonce = f"{os.getpid()}.{int(time.time() * 1000)}.{secrets.token_hex(4)}"
    outputs = [
        (path, "\n§\n".join(e["content"] for e in entries if e["target"] == target))
        for target, path in PROJECTIONS.items()
    ]
    outputs = [(p, text + "\n" if text else "") for p, text in outputs]
    outputs.append((SOURCE, json.dumps(doc, indent=2, ensure_ascii=False) + "\n"))
    for path, text in outputs:
        directory, name = os.path.split(os.path.join(root, path))
        temp = os.path.join(directory, f".{name}.{nonce}.tmp")
        fd = os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.rename(temp, os.path.join(directory, name))


def append_entry(root: str, target: str, content: str) -> None:
    """One whole write (steps 1 to 3) appending ``content`` to ``target``."""
    fd = acquire(root)
    try:
        try:
            with open(os.path.join(root, SOURCE), encoding="utf-8") as handle:
                doc = json.load(handle)
        except FileNotFoundError:
            doc = {"version": 1, "entries": []}
        now = _now()
        doc["entries"].append(
            {
                "content": content,
                "created_at": now,
                "updated_at": now,
                "target": target,
                "importance": "normal",
            }
        )
        _persist(root, doc)
    finally:
        release(root, fd)


def main(argv: list[str]) -> int:
    root, prefix, count = argv[0], argv[1], int(argv[2])
    print("ready", flush=True)
    sys.stdin.readline()
    for n in range(count):
        content = f"{prefix}-{n}"
        append_entry(root, "memory", content)
        print(content, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
