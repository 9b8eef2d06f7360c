"""Hot memory on PostgreSQL beside the file backend, in one run (prints JSON).

Starts a throwaway PostgreSQL server from the installed binaries (``fsync = on`` and
``synchronous_commit = on``, so a commit costs what it costs in production; Unix socket, same
machine) and measures:

- ``mixed``: add -> replace -> remove rounds on a MEMORY.md pre-filled to 80% with 100-byte
  entries, on a root in a directory at durability ``full`` and on a root on PostgreSQL,
  interleaved in blocks (a ratio is the median of the per-block ratios);
- ``writers``: aggregate ops/s of 1, 4 and 16 writer processes (each with its own pool, as
  separate hosts would be), started together, each on a root of its own (tenants of one
  database) and all on one shared root (which its lock serializes);
- ``documents``: search latency (p50 over interleaved blocks) with 100 and 10,000 active
  documents of ~2 KB (``--doc-sizes``), on a directory root and on a PostgreSQL root holding
  the same files (filled as ``benchmarks/documents.py`` fills a directory, then copied).
- ``recall``: one Memory Space of ``--recall-size`` insights (100,000 by default; the synthetic
  corpus of ``benchmarks/long_term.py``, imported in a directory), copied to PostgreSQL with
  the migration's row capability (timed: rows/s through COPY), loaded into a new host's
  replica (timed: a new host's first call), then relevance recall p50 and p95 on both, the
  same queries alternating between the two: ``readonly`` (the host reads its replica after
  one statement asking the space's change number) and counting access (a write: the space's
  row locked, the access rows sent, the commit waiting for the WAL flush).

Targets (issue "Scale past one machine"): PostgreSQL mixed >= 0.5x the file backend at
``full`` with one writer; 16 writers >= 4x one writer in aggregate.

Usage: python benchmarks/postgres.py [--blocks N] [--ops-per-block N] [--writer-rounds N]
       [--doc-sizes 100,10000] [--searches N] [--recall-size N] [--recall-queries N]
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
import time
from pathlib import Path
from typing import Any

from mnemon_sm import Config, MemoryRoot
from mnemon_sm.testing.pg_cluster import Cluster

sys.path.insert(0, str(Path(__file__).resolve().parent))
from documents import BIG_LIMIT, QUERIES, fill_direct
from hot_memory import mixed_round, prefill, rate
from long_term import DAY_MS, SPACE, SPAN_DAYS, START_MS, Corpus, FakeClock, grow, percentile

from mnemon_sm.adapters.postgres import PgBackend, PgSpaces
from mnemon_sm.adapters.sqlite import EmbeddedStore
from mnemon_sm.ports import Files

_WRITER = r"""
import sys, time
from mnemon_sm import MemoryRoot
url, tag, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
root = MemoryRoot.open(url)
print("ready", flush=True)
sys.stdin.readline()
start = time.perf_counter()
for i in range(rounds):
    a, b = f"{tag} fact {i:05d} " + "x" * 60, f"{tag} fact {i:05d} revised " + "y" * 52
    root.hot.add("memory", a)
    root.hot.replace("memory", a[:24], b)
    root.hot.remove("memory", b[:32])
print(time.perf_counter() - start, flush=True)
root.close()
"""


def _cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / tick, sum(fields[:8]) / tick


BUSY: dict[str, float] = {}  # share of the machine's CPU each writers() run kept busy


def writers(cluster: Cluster, count: int, rounds: int, shared: bool, tag: str) -> float:
    """Aggregate ops/s of ``count`` writer processes started together; the share of the
    machine's CPU the run kept busy (writers and server together) goes to :data:`BUSY`."""
    urls = [cluster.url(f"{tag}-shared" if shared else f"{tag}-{count}-{k}") for k in range(count)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, url, f"w{k}", str(rounds)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for k, url in enumerate(urls)
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    start = time.perf_counter()
    busy_before, total_before = _cpu()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        assert p.wait(timeout=600) == 0
    elapsed = time.perf_counter() - start
    busy_after, total_after = _cpu()
    BUSY[f"{tag}-{count}"] = (busy_after - busy_before) / max(1e-9, total_after - total_before)
    return count * rounds * 3 / elapsed


def copy_tree(directory: Path, files: Files) -> int:
    """Every file under ``directory`` written through ``files`` (a fill); returns how many."""
    count = 0
    for current, _, names in os.walk(directory):
        relative = Path(current).relative_to(directory).as_posix()
        if relative != ".":
            files.ensure_dir(relative)
        for name in names:
            path = name if relative == "." else f"{relative}/{name}"
            files.rename(files.write_temp(path, (Path(current) / name).read_bytes()), path)
            count += 1
    files.fsync("")
    return count


def document_search(
    cluster: Cluster, base: Path, sizes: list[int], blocks: int, searches: int, index: str
) -> dict[str, Any]:
    """Search p50 (ms) by backend and number of documents, interleaved in blocks, with the
    documents index ``index`` (``Config.documents_index``)."""
    config = Config(durability="off", documents_active_limit=BIG_LIMIT, documents_index=index)
    roots: dict[tuple[str, int], MemoryRoot] = {}
    for n in sizes:
        directory = base / f"docs-{index}-{n}"
        fill_direct(directory, n)
        url = cluster.url(f"docs-{index}-{n}")
        backend = PgBackend(url)
        copy_tree(directory, backend.files)
        backend.close()
        roots[("file", n)] = MemoryRoot.open(directory, config)
        roots[("postgres", n)] = MemoryRoot.open(url, config)
    p50s: dict[tuple[str, int], list[float]] = {key: [] for key in roots}
    for block in range(blocks):
        for key in roots if block % 2 == 0 else reversed(list(roots)):
            latencies = []
            for i in range(searches):
                started = time.perf_counter()
                roots[key].documents.search(QUERIES[i % len(QUERIES)])
                latencies.append(time.perf_counter() - started)
            p50s[key].append(statistics.median(latencies))
    for root in roots.values():
        root.close()
    ms = {key: statistics.median(v) * 1e3 for key, v in p50s.items()}
    small, large = min(sizes), max(sizes)
    return {
        "search_p50_ms": {f"{b}-{n}": round(v, 2) for (b, n), v in ms.items()},
        "postgres_vs_file_at_largest": round(ms[("postgres", large)] / ms[("file", large)], 2),
        "postgres_largest_vs_smallest": round(
            ms[("postgres", large)] / ms[("postgres", small)], 2
        ),
    }


def recall_series(cluster: Cluster, base: Path, size: int, queries: int) -> dict[str, Any]:
    """Relevance recall at ``size`` insights in a directory and on PostgreSQL (see above)."""
    clock = FakeClock(START_MS, SPAN_DAYS * DAY_MS // size)
    local = EmbeddedStore(base / "dir", clock)
    local.create_space(SPACE)
    corpus = Corpus()
    grow([local], corpus, 0, size, clock)
    backend = PgBackend(cluster.url("recall"))
    host = PgSpaces(backend, clock, cache=base / "cache-a")
    began = time.perf_counter()
    host.import_rows(SPACE, local.export_rows(SPACE))
    copy_s = time.perf_counter() - began
    rows = sum(local.space_digest(SPACE).counts.values())
    began = time.perf_counter()
    host.status(SPACE)  # a new host's first call: the replica loaded in full
    load_s = time.perf_counter() - began
    asked = [corpus.query() for _ in range(queries)]
    for query in asked[:10]:  # warm both
        local.recall(SPACE, query, readonly=True)
        host.recall(SPACE, query, readonly=True)
    times: dict[str, list[float]] = {
        f"{where}_{kind}": [] for where in ("file", "postgres") for kind in ("readonly", "counted")
    }
    for n, query in enumerate(asked):
        order = [("file", local), ("postgres", host)]
        for where, store in order if n % 2 == 0 else order[::-1]:
            for kind in ("readonly", "counted"):
                clock.tick()
                began = time.perf_counter()
                store.recall(SPACE, query, limit=10, readonly=kind == "readonly")
                times[f"{where}_{kind}"].append((time.perf_counter() - began) * 1000)
    host.close()
    backend.close()
    local.close()
    p50 = {key: round(percentile(values, 0.5), 2) for key, values in times.items()}
    return {
        "insights": size,
        "rows_copied": rows,
        "copy_rows_per_s": round(rows / copy_s),
        "new_host_first_call_s": round(load_s, 1),
        "p50_ms": p50,
        "p95_ms": {key: round(percentile(values, 0.95), 2) for key, values in times.items()},
        "postgres_vs_file_p50": {
            kind: round(p50[f"postgres_{kind}"] / p50[f"file_{kind}"], 2)
            for kind in ("readonly", "counted")
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=9)
    parser.add_argument("--ops-per-block", type=int, default=90)
    parser.add_argument("--writer-rounds", type=int, default=60)
    parser.add_argument("--doc-sizes", default="100,10000")
    parser.add_argument("--searches", type=int, default=20)
    parser.add_argument("--recall-size", type=int, default=100_000)
    parser.add_argument("--recall-queries", type=int, default=200)
    args = parser.parse_args()
    cluster = Cluster.start(fsync=True)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            config = Config(durability="full")
            on_disk = MemoryRoot.open(Path(tmp) / "root", config)
            on_pg = MemoryRoot.open(cluster.url("bench"), config)
            prefill(on_disk, config.memory_limit)
            prefill(on_pg, config.memory_limit)
            counter = iter(range(10**9))
            rounds = max(1, args.ops_per_block // 3)
            series: dict[str, list[float]] = {"file": [], "postgres": []}
            for _ in range(args.blocks):
                series["file"].append(
                    rate(lambda: mixed_round(on_disk, next(counter)), rounds) * 3
                )
                series["postgres"].append(
                    rate(lambda: mixed_round(on_pg, next(counter)), rounds) * 3
                )
            on_disk.close()
            on_pg.close()
        ratio = statistics.median(
            p / f for p, f in zip(series["postgres"], series["file"], strict=True)
        )
        with tempfile.TemporaryDirectory() as tmp:
            sizes = [int(n) for n in args.doc_sizes.split(",")]
            documents = {
                index: document_search(
                    cluster, Path(tmp), sizes, args.blocks, args.searches, index
                )
                for index in ("file", "journal")
            }
        with tempfile.TemporaryDirectory() as tmp:
            recall = recall_series(cluster, Path(tmp), args.recall_size, args.recall_queries)
        separate = {n: writers(cluster, n, args.writer_rounds, False, "own") for n in (1, 4, 16)}
        shared = {n: writers(cluster, n, args.writer_rounds, True, f"one{n}") for n in (1, 4, 16)}
        result = {
            "python": platform.python_version(),
            "server": cluster.psql("SHOW server_version").strip(),
            "mixed_full": {
                "file_ops_per_s": round(statistics.median(series["file"])),
                "postgres_ops_per_s": round(statistics.median(series["postgres"])),
                "postgres_vs_file": round(ratio, 3),
            },
            "writers_own_roots_ops_per_s": {str(n): round(v) for n, v in separate.items()},
            "writers_own_roots_16_vs_1": round(separate[16] / separate[1], 2),
            # One writer's share of the machine's CPU (its process and the server's) bounds
            # what more writers can add: 16 / 1 can reach 1 / share at most.
            "cpu_cores": os.cpu_count(),
            "one_writer_cpu_share": round(BUSY["own-1"], 2),
            "writers_cpu_bound_16_vs_1": round(1 / max(1e-9, BUSY["own-1"]), 2),
            "writers_16_cpu_share": round(BUSY["own-16"], 2),
            "writers_one_root_ops_per_s": {str(n): round(v) for n, v in shared.items()},
            "writers_one_root_16_vs_1": round(shared[16] / shared[1], 2),
            "documents": documents,
            "recall": recall,
        }
    finally:
        cluster.destroy()
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
