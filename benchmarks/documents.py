"""Project Documents throughput and search latency by the number of active documents (prints JSON).

- At each scale (``--scales``, default 100, 1,000 and 10,000 active documents of ~2 KB each)
  and in each index mode (``--modes``, default ``file`` and ``journal``: ``Config.
  documents_index``): create and update ops/s at durability ``full`` (the default) on one root,
  and search latency (p50, p95) on another root holding the same documents (durability
  ``off``, as the figures before it were taken), so that neither root's figures include
  re-reading what the other wrote. The roots are filled with the files and the index a fill
  through the API writes, written at once with the library's pure functions (``--fill api``
  creates them through ``documents.create`` at durability ``off`` instead, and reports how
  long that took). Modes and scales are measured in interleaved blocks (the order alternates
  from block to block) and each figure is the median over the blocks; the creates of a block
  add to its root (``--ops`` creates and as many updates per block: enough that journal roots
  fold their journal during the run, which ``journal_compactions`` counts).
- The ratios the acceptance reads, per mode: ``create_10k_vs_100`` and ``update_10k_vs_100``
  (ops/s at the largest scale over the smallest; target >= 0.5) and ``search_p50_10k_vs_100``
  (target <= 10); the keys name the largest and smallest scales measured.
- The archive figures: create and update ops/s on a root whose active set has room, and
  creates on a root kept full, so that every create archives the least recently used document
  first (cold reference through the built-in worker into the embedded long-term store, then
  the move), measured side by side.

Usage: python benchmarks/documents.py [--scales 100,1000,10000] [--modes file,journal]
       [--blocks N] [--ops N] [--searches N] [--fill api|direct] [--archive-ops N] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mnemon_sm import Config, MemoryRoot
from mnemon_sm.flows.documents.journal import JOURNAL_MAX

TOPICS = ("deploy", "billing", "search", "auth", "cache", "ingest", "export", "tax")
QUERIES = ("deploy state", "billing note 42", "service keeps", "zzz")
BIG_LIMIT = 1024 * 1024 * 1024  # the largest active limit a root may have: no archiving


def body(i: int) -> str:
    topic = TOPICS[i % len(TOPICS)]
    return f"# {topic.title()} note {i}\n\n" + f"The {topic} service keeps state {i}. " * 50


def title(i: int) -> str:
    return f"{TOPICS[i % len(TOPICS)].title()} note {i}"


def rate(n: int, fn: Callable[[int], object]) -> float:
    start = time.perf_counter()
    for i in range(n):
        fn(i)
    return n / (time.perf_counter() - start)


def fill_api(path: Path, n: int) -> list[str]:
    root = MemoryRoot.open(path, Config(durability="off", documents_active_limit=BIG_LIMIT))
    try:
        return [root.documents.create(title(i), body(i)).document.id for i in range(n)]
    finally:
        root.close()


def fill_direct(path: Path, n: int) -> list[str]:
    """The files and the index a fill through the API writes, written at once (no fsync)."""
    from mnemon_sm.flows.documents import model, rules
    from mnemon_sm.text import iso_ms

    docs = path / "documents"
    (docs / "active").mkdir(parents=True, exist_ok=True)
    (docs / "archived").mkdir(parents=True, exist_ok=True)
    start = int(time.time() * 1000) - n
    records = []
    for i in range(n):
        request = {"title": title(i), "content": body(i)}
        draft = rules.draft_create(request, str(uuid.uuid4()), iso_ms(start + i), str(path))
        (path / draft.record.relative_path).write_bytes(draft.data)
        records.append(draft.record)
    (path / model.INDEX_PATH).write_bytes(model.encode_index(records))
    return [r.id for r in records]


def scale_block(
    roots: tuple[MemoryRoot, MemoryRoot], ids: list[str], block: int, args: Any
) -> dict[str, Any]:
    """One block at one scale: creates and updates on the ``full`` root, then searches on the
    ``off`` one (a root of its own holding the same documents, so that neither root's figures
    include re-reading what the other one wrote: one writer and one searcher, each alone)."""
    writer, searcher = roots
    base = 1_000_000 * (block + 1)
    create = rate(args.ops, lambda i: writer.documents.create(title(base + i), body(base + i)))
    offset = block * args.ops
    update = rate(
        args.ops,
        lambda i: writer.documents.update(
            ids[(offset + i) % len(ids)], content=body(base + i + 7)
        ),
    )
    latencies = []
    for i in range(args.searches):
        started = time.perf_counter()
        searcher.documents.search(QUERIES[i % len(QUERIES)])
        latencies.append(time.perf_counter() - started)
    latencies.sort()
    return {
        "create": create,
        "update": update,
        "p50": statistics.median(latencies),
        "p95": latencies[min(len(latencies) - 1, round(0.95 * (len(latencies) - 1)))],
    }


def scales(args: Any, base: Path) -> dict[str, dict[str, Any]]:
    """Per index mode, per scale: the medians over the blocks (modes and scales interleaved
    in every block)."""
    fill = fill_api if args.fill == "api" else fill_direct
    opened: dict[tuple[str, int], tuple[MemoryRoot, MemoryRoot]] = {}
    ids: dict[tuple[str, int], list[str]] = {}
    fill_s: dict[tuple[str, int], float] = {}
    for mode in args.modes:
        for n in args.scales:
            key, path = (mode, n), base / f"{mode}-{n}"
            started = time.perf_counter()
            ids[key] = fill(path, n)
            fill_s[key] = time.perf_counter() - started
            fill(base / f"{mode}-{n}-search", n)  # the same documents, searched on their own
            limit = BIG_LIMIT
            opened[key] = (
                MemoryRoot.open(path, Config(documents_active_limit=limit, documents_index=mode)),
                MemoryRoot.open(
                    base / f"{mode}-{n}-search",
                    Config(durability="off", documents_active_limit=limit, documents_index=mode),
                ),
            )
    blocks: dict[tuple[str, int], list[dict[str, Any]]] = {key: [] for key in opened}
    compactions = _count_compactions()
    keys = list(opened)
    for block in range(args.blocks):
        for key in keys if block % 2 == 0 else reversed(keys):
            blocks[key].append(scale_block(opened[key], ids[key], block, args))
    for writer, searcher in opened.values():
        writer.close()
        searcher.close()
    out: dict[str, dict[str, Any]] = {mode: {} for mode in args.modes}
    for (mode, n), runs in blocks.items():
        key = (mode, n)
        out[mode][str(n)] = {
            "fill_s": round(fill_s[key], 1),
            "journal_compactions": compactions.get(str(base / f"{mode}-{n}"), 0),
            "create_ops_per_s": round(statistics.median(r["create"] for r in runs), 1),
            "update_ops_per_s": round(statistics.median(r["update"] for r in runs), 1),
            "search_p50_ms": round(statistics.median(r["p50"] for r in runs) * 1e3, 2),
            "search_p95_ms": round(statistics.median(r["p95"] for r in runs) * 1e3, 2),
        }
    return out


def _count_compactions() -> dict[str, int]:
    """Counts, per root path, the journal compactions made while blocks run (informational:
    they are part of what the writes cost, and the block must be long enough to include them).
    """
    from mnemon_sm.flows.documents.cache import IndexCache

    counts: dict[str, int] = {}
    real = IndexCache.compact

    def counting(self: IndexCache, files: Any, durability: str, *, due_only: bool = True) -> bool:
        done = real(self, files, durability, due_only=due_only)
        if done and due_only:
            root = str(getattr(files, "root", "?"))
            counts[root] = counts.get(root, 0) + 1
        return done

    IndexCache.compact = counting  # type: ignore[method-assign]
    return counts


def ratios(measured: dict[str, Any], small: int, large: int) -> dict[str, float]:
    lo, hi = measured[str(small)], measured[str(large)]
    tag = f"{_short(large)}_vs_{_short(small)}"
    return {
        f"create_{tag}": round(hi["create_ops_per_s"] / lo["create_ops_per_s"], 2),
        f"update_{tag}": round(hi["update_ops_per_s"] / lo["update_ops_per_s"], 2),
        f"search_p50_{tag}": round(hi["search_p50_ms"] / lo["search_p50_ms"], 2),
    }


def _short(n: int) -> str:
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


def archive_figures(args: Any, base: Path) -> dict[str, Any]:
    roomy = MemoryRoot.open(base / "roomy", Config(long_term_store="embedded"))
    created: list[str] = []
    create = rate(
        args.archive_ops,
        lambda i: created.append(roomy.documents.create(f"Note {i}", body(i)).document.id),
    )
    update = rate(
        args.archive_ops, lambda i: roomy.documents.update(created[i], content=body(i + 1))
    )
    size = roomy.documents.get(created[0])[0].size_bytes
    full = MemoryRoot.open(
        base / "full",
        Config(long_term_store="embedded", documents_active_limit=size * 10 + size // 2),
    )
    for i in range(10):
        full.documents.create(f"Seed {i}", body(i))
    archiving = rate(args.archive_ops, lambda i: full.documents.create(f"Evicting {i}", body(i)))
    roomy.close()
    full.close()
    return {
        "create_ops_per_s": round(create, 1),
        "update_ops_per_s": round(update, 1),
        "create_with_archive_ops_per_s": round(archiving, 1),
        "archive_step_slowdown": round(create / archiving, 1),
        "document_bytes": size,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--scales", type=lambda s: [int(x) for x in s.split(",")], default=[100, 1000, 10000]
    )
    parser.add_argument("--blocks", type=int, default=5, help="interleaved blocks per scale")
    parser.add_argument(
        "--ops", type=int, default=150, help="creates and updates per block (each)"
    )
    parser.add_argument(
        "--modes",
        type=lambda s: s.split(","),
        default=["file", "journal"],
        help="documents_index modes measured side by side",
    )
    parser.add_argument("--searches", type=int, default=40, help="searches per block")
    parser.add_argument("--fill", choices=("api", "direct"), default="direct")
    parser.add_argument("--archive-ops", type=int, default=60)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    args.scales = sorted(set(args.scales))
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        base = Path(tmp)
        measured = scales(args, base)
        result: dict[str, Any] = {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "fill": args.fill,
            "blocks": args.blocks,
            "ops_per_block": args.ops,
            "searches_per_block": args.searches,
            "write_durability": "full",
            "search_durability": "off",
            "journal_max_bytes": JOURNAL_MAX,
            "scales": measured,
        }
        if len(args.scales) > 1:
            result["ratios"] = {
                mode: ratios(measured[mode], args.scales[0], args.scales[-1])
                for mode in args.modes
            }
        if args.archive_ops > 0:
            result["archive"] = archive_figures(args, base)
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
