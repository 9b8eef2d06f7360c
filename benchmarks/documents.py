"""Project Documents throughput and search latency (prints JSON).

- create and update ops/s on a root whose active set has room (no archive step), and creates
  on a root kept full, so that every create archives the least recently used document first
  (cold reference through the built-in worker into the embedded long-term store, then the
  move), measured side by side in one run;
- search latency (p50, p95) over 1,000 active documents of ~2 KB each, for a few queries.

Usage: python benchmarks/documents.py [--docs N] [--ops N] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mnemon_sm import Config, MemoryRoot

TOPICS = ("deploy", "billing", "search", "auth", "cache", "ingest", "export", "tax")


def body(i: int) -> str:
    topic = TOPICS[i % len(TOPICS)]
    return f"# {topic.title()} note {i}\n\n" + f"The {topic} service keeps state {i}. " * 50


def rate(n: int, fn: object) -> float:
    start = time.perf_counter()
    for i in range(n):
        fn(i)  # type: ignore[operator]
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--ops", type=int, default=60)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        base = Path(tmp)
        roomy = MemoryRoot.open(base / "roomy", Config(long_term_store="embedded"))
        created: list[str] = []
        create = rate(
            args.ops,
            lambda i: created.append(roomy.documents.create(f"Note {i}", body(i)).document.id),
        )
        update = rate(args.ops, lambda i: roomy.documents.update(created[i], content=body(i + 1)))
        size = roomy.documents.get(created[0])[0].size_bytes
        full = MemoryRoot.open(
            base / "full",
            Config(long_term_store="embedded", documents_active_limit=size * 10 + size // 2),
        )
        for i in range(10):
            full.documents.create(f"Seed {i}", body(i))
        archiving = rate(args.ops, lambda i: full.documents.create(f"Evicting {i}", body(i)))

        big = MemoryRoot.open(base / "big", Config(durability="off"))
        for i in range(args.docs):
            big.documents.create(f"{TOPICS[i % len(TOPICS)].title()} note {i}", body(i))
        latencies = []
        for i in range(100):
            query = ("deploy state", "billing note 42", "service keeps", "zzz")[i % 4]
            start = time.perf_counter()
            big.documents.search(query)
            latencies.append(time.perf_counter() - start)
        latencies.sort()
        result = {
            "python": platform.python_version(),
            "create_ops_per_s": round(create, 1),
            "update_ops_per_s": round(update, 1),
            "create_with_archive_ops_per_s": round(archiving, 1),
            "archive_step_slowdown": round(create / archiving, 1),
            "document_bytes": size,
            "search_active_documents": args.docs,
            "search_p50_ms": round(statistics.median(latencies) * 1e3, 1),
            "search_p95_ms": round(latencies[94] * 1e3, 1),
        }
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
