"""One capacity-maintenance round, this tree against another commit, side by side (prints JSON).

A round is what ``benchmarks/hot_memory.py`` times: a full target (durability ``full``,
embedded long-term store, built-in workers), one add that overflows it, timed until its
receipt (USER.md: local compaction; MEMORY.md: every entry archived into a Memory Space, then
compacted). Two cases per target: the *first* maintenance of a root (a copy of a root that
never had one: a tree may create its ``state/`` files then) and a *later* round (a copy of a
root on which one round already ran, refilled to the same entries). Both trees run the same
script in child processes, alternating block by block (so disk and CPU noise hit both alike);
each block times ``--rounds`` rounds per case on fresh copies and reports the median. The
result is each tree's median over blocks and the median of the per-block ratios ``this tree /
baseline``.

The baseline is checked out with ``git worktree`` into a temporary directory (removed
afterwards) and imported from there; nothing is installed.

Usage: python benchmarks/maintenance.py --baseline REF [--blocks N] [--rounds N] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
CASES = ("user_first", "user_later", "memory_first", "memory_later")

# Runs in a child process with the tree to measure first on sys.path; prints one JSON line.
CHILD = r"""
import json, shutil, statistics, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from mnemon_sm import Config, MemoryRoot
try:
    from mnemon_sm.flows.hot.model import HotEntry, HotStore
except ImportError:  # a baseline from before the one-package-per-domain layout
    from mnemon_sm.hot.model import HotEntry, HotStore

rounds = int(sys.argv[2])
base = Path(tempfile.mkdtemp(dir=sys.argv[3] or None))
config = Config(durability="full", long_term_store="embedded")
stamp = "2026-01-01T00:00:00.000Z"

def full_target(target):
    if target == "memory":
        return [(f"Fact {i:03d} about the build: " + "d" * 172, "normal") for i in range(50)]
    out = []
    for i in range(14):
        b = f"User preference {i:02d}: " + "p" * 67
        out += [(b, "normal"), (b.upper(), "low"), (b + " always", "critical")]
    return out

result = {"module": __import__("mnemon_sm").__file__}
PENDING = "A new durable entry that does not fit any more " * 4

def one_round(template, path):
    shutil.copytree(template, path)
    root = MemoryRoot.open(path, config)
    start = time.perf_counter()
    receipt = root.hot.add(template.name.split("-")[1], PENDING)
    took = time.perf_counter() - start
    assert receipt.maintenance is not None
    root.close()
    return took

try:
    for target in ("user", "memory"):
        entries = tuple(HotEntry(c, stamp, stamp, target, i) for c, i in full_target(target))
        source = HotStore(entries).encode()
        first = base / f"first-{target}"
        (first / "runtime").mkdir(parents=True)
        (first / "runtime" / "memories.json").write_bytes(source)
        later = base / f"later-{target}"
        one_round(first, later)  # a root that had its first round; then refilled
        (later / "runtime" / "memories.json").write_bytes(source)
        for name in ("USER.md", "MEMORY.md"):
            (later / "runtime" / name).unlink(missing_ok=True)  # repaired when opened
        for case, template in (("first", first), ("later", later)):
            times = [one_round(template, base / f"{case}-{target}-{n}") for n in range(rounds)]
            result[f"{target}_{case}"] = statistics.median(times) * 1e3
finally:
    shutil.rmtree(base, ignore_errors=True)
print(json.dumps(result))
"""


def _block(tree: Path, rounds: int, where: str) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tree), str(rounds), where],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),  # never import the checkout by accident
    )
    out: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    assert str(out.pop("module")).startswith(str(tree)), "imported the wrong tree"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="git ref to compare with")
    parser.add_argument("--blocks", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", default="", help="where to create the roots (default: temp)")
    args = parser.parse_args()
    worktree = Path(tempfile.mkdtemp(prefix="mnemon-baseline-"))
    subprocess.run(
        ["git", "-C", str(HERE), "worktree", "add", "--detach", str(worktree), args.baseline],
        check=True,
        capture_output=True,
    )
    try:
        series: dict[str, dict[str, list[float]]] = {"this": {}, "baseline": {}}
        ratios: dict[str, list[float]] = {}
        for _ in range(args.blocks):
            now = _block(HERE, args.rounds, args.dir)
            then = _block(worktree, args.rounds, args.dir)
            for case in CASES:
                series["this"].setdefault(case, []).append(now[case])
                series["baseline"].setdefault(case, []).append(then[case])
                ratios.setdefault(case, []).append(now[case] / then[case])
    finally:
        subprocess.run(
            ["git", "-C", str(HERE), "worktree", "remove", "--force", str(worktree)],
            check=False,
            capture_output=True,
        )
    result = {
        "python": platform.python_version(),
        "baseline": args.baseline,
        "blocks": args.blocks,
        "rounds_per_block": args.rounds,
        "round_ms": {
            case: {
                "this": round(statistics.median(series["this"][case]), 2),
                "baseline": round(statistics.median(series["baseline"][case]), 2),
                "ratio": round(statistics.median(ratios[case]), 3),
            }
            for case in CASES
        },
    }
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
