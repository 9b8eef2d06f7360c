"""Sharing a root with the reference implementation: its writers and ours exclude each other.

The reference locks ``runtime/.memories.lock`` by creating it exclusively (stale after 30 s);
we ``flock`` a sibling file and, while holding it, hold the reference's file by its own rules
(:mod:`mnemon_sm.adapters.real`). Here writer processes of both kinds append to MEMORY.md of one
root at the same time: the reference's protocol is played by ``_reference_writer.py`` (plain
Python, no ``mnemon_sm``), ours by ``MemoryRoot.hot.add``. Every acknowledged entry of either
side must be in ``memories.json`` exactly once (INV-HOT-7 across implementations), and after
one of our writes the reference takes the lock at once (nothing of ours is left for it to
wait 30 s on).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from mnemon_sm import Config, MemoryRoot

sys.path.insert(0, str(Path(__file__).parent))
import _reference_writer as reference

REPO = Path(__file__).resolve().parents[1]
REFERENCE_WRITER = Path(__file__).with_name("_reference_writer.py")
PER_WRITER = 40  # entries each writer appends

# One of our writer processes: same start barrier and acknowledgement lines as the reference's.
OURS = """
import sys
from mnemon_sm import Config, MemoryRoot
root, prefix, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
with MemoryRoot.open(root, Config(durability="off")) as opened:
    print("ready", flush=True)
    sys.stdin.readline()
    for n in range(count):
        content = f"{prefix}-{n}"
        opened.hot.add("memory", content, maintenance=False)
        print(content, flush=True)
"""


def _spawn(args: list[str]) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _sources(root: Path) -> list[str]:
    data = json.loads((root / "runtime" / "memories.json").read_text(encoding="utf-8"))
    return [e["content"] for e in data["entries"]]


def test_reference_writers_and_ours_lose_no_entry(tmp_path: Path) -> None:
    root = tmp_path / "root"
    MemoryRoot.open(root, Config(durability="off")).close()
    writers = [
        _spawn([str(REFERENCE_WRITER), str(root), f"ref{n}", str(PER_WRITER)]) for n in range(2)
    ] + [_spawn(["-c", OURS, str(root), f"ours{n}", str(PER_WRITER)]) for n in range(2)]
    for writer in writers:  # the start barrier: every writer is up before any writes
        assert writer.stdout is not None and writer.stdout.readline() == "ready\n", (
            writer.communicate()[1]
        )
    for writer in writers:
        assert writer.stdin is not None
        writer.stdin.write("go\n")
        writer.stdin.flush()
    acknowledged: list[str] = []
    for writer in writers:
        out, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err
        acknowledged += out.split()

    assert len(acknowledged) == 4 * PER_WRITER
    found = Counter(_sources(root))
    assert found == Counter(acknowledged), "an acknowledged entry was lost or doubled"
    assert not (root / "runtime" / ".memories.lock").exists()
    expected = "\n§\n".join(_sources(root)) + "\n"
    assert (root / "runtime" / "MEMORY.md").read_text(encoding="utf-8") == expected


def test_the_reference_takes_the_lock_at_once_after_our_write(tmp_path: Path) -> None:
    root = tmp_path / "root"
    with MemoryRoot.open(root) as opened:
        opened.hot.add("memory", "Our fact")
        started = time.monotonic()
        reference.append_entry(str(root), "memory", "Their fact")
        waited = time.monotonic() - started
        assert waited < 1.0, f"the reference waited {waited:.1f} s for our lock"
        assert [e.content for e in opened.hot.snapshot().entries] == ["Our fact", "Their fact"]
        opened.hot.add("memory", "Our second fact")  # and we take it after the reference
    assert _sources(root) == ["Our fact", "Their fact", "Our second fact"]
