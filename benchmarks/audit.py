"""What the audit log costs a hot operation (prints JSON).

Three roots in directories, pre-filled like ``benchmarks/hot_memory.py``'s, run the same mixed
rounds (add -> replace -> remove, each operation several transitions and one outcome in the
log) interleaved in blocks, at durability ``full`` (the default) and ``normal``: ``bare``, whose
machines were started without the engine's audit hook (what the library cost before the audit
log existed), ``off`` (the hook there, no log) and ``on`` (the default). A ratio is the median of
the per-block ratios of ops/s over ``bare``; the log's own I/O (one append per 64 lines or per
second) is included, the rotation of its segments too.

Target (issue "A read-only web inspector"): the audit log costs at most 5% of a hot op, that
is ``on / bare >= 0.95``.

Usage: python benchmarks/audit.py [--blocks N] [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hot_memory import mixed_round, prefill, rate

from mnemon_sm import Config, MemoryRoot
from mnemon_sm.engine import flow as engine_flow


class _NoHook:
    """Stands in for the engine's audit listener: a listener with no callbacks."""

    def __init__(self, *args: object) -> None:
        pass


def _open(path: Path, durability: str, setting: str) -> MemoryRoot:
    config = Config(durability=durability, audit="off" if setting == "bare" else setting)
    if setting != "bare":
        return MemoryRoot.open(path, config)
    hook = engine_flow.AuditListener
    engine_flow.AuditListener = _NoHook  # type: ignore[misc,assignment]
    try:
        return MemoryRoot.open(path, config)
    finally:
        engine_flow.AuditListener = hook  # type: ignore[misc]


def series(durability: str, blocks: int, rounds: int, base: Path) -> dict[str, float]:
    settings = ("bare", "off", "on")
    roots = {s: _open(base / f"{durability}-{s}", durability, s) for s in settings}
    for root in roots.values():
        prefill(root, root.config.memory_limit)
    counter = iter(range(10**9))
    rates: dict[str, list[float]] = {s: [] for s in settings}
    for block in range(blocks):
        order = settings if block % 2 == 0 else settings[::-1]
        for setting in order:
            root = roots[setting]
            rates[setting].append(rate(lambda r=root: mixed_round(r, next(counter)), rounds) * 3)
    lines = len(roots["on"].audit_tail(10**6))
    for root in roots.values():
        root.close()

    def ratio(setting: str) -> float:
        pairs = zip(rates[setting], rates["bare"], strict=True)
        return round(statistics.median(a / b for a, b in pairs), 3)

    return {
        **{f"{s}_ops_per_s": round(statistics.median(rates[s])) for s in settings},
        "off_vs_bare": ratio("off"),
        "on_vs_bare": ratio("on"),
        "lines_kept": lines,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = {
            durability: series(durability, args.blocks, args.rounds, Path(tmp))
            for durability in ("full", "normal")
        }
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
