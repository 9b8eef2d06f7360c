"""Embedded long-term store: recall latency as one space grows, and remember throughput.

Prints one JSON document. One space is grown to 1k, 10k and 100k insights; at each size it
measures smart recall (``readonly=False``, so every call also counts access and writes the
oplog, as a real recall does) over a fixed set of queries, reporting p50 and p95, then the
throughput of ``remember`` (every automatic edge, one transaction each). Target: p50 at
100k insights at most 3x p50 at 1k.

The data is synthetic but shaped like an agent's memories: about 60 topics with their own
words and entities, a shared vocabulary, Zipf-like topic popularity, tags, five categories,
three sources, importance mostly 3, creation times rising steadily over six months (imported
and remembered insights share one timeline). The space is filled through ``import_draft`` (the
bulk path: the normal write path per insight with entity and causal edges and a per-source
temporal backbone, but no proximity edges); the output says so. A fake clock drives every
timestamp the store writes. A full run takes about two minutes and 700 MB of disk.

Usage: python benchmarks/long_term.py [--sizes 1000,10000,100000] [--queries N]
       [--remembers N] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mnemon_sm.longterm.sqlite import EmbeddedStore
from mnemon_sm.longterm.values import DraftInsight, ImportDraft

SPACE = "bench"
DAY_MS = 86_400_000
START_MS = 1_770_000_000_000  # early February 2026
SPAN_DAYS = 180
CHUNK = 5_000  # insights per import_draft call
_SYLLABLE_TEXT = "ka lo mi ne ru sa te vo zi bra cle dro fen gal hum jor kes lin mar nol pex"
SYLLABLES = tuple(_SYLLABLE_TEXT.split())
CUES = ("", "", "", "why did we ", "when did we ", "what is ", "how does ")
CATEGORIES = ("fact", "decision", "preference", "insight", "context")
SOURCES = ("user", "agent", "external")


class FakeClock:
    """The store's clock and the timeline of the synthetic memories: every insight, imported
    or remembered, is created a little after the previous one."""

    def __init__(self, ms: int, step_ms: int) -> None:
        self.ms = ms
        self.step_ms = step_ms

    def now_ms(self) -> int:
        return self.ms

    def tick(self) -> int:
        self.ms += self.step_ms
        return self.ms


def word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(syllables))


class Corpus:
    """Deterministic synthetic memories and queries."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        rng = self.rng
        self.common = sorted({word(rng, rng.randint(2, 3)) for _ in range(1500)})
        self.topics = []
        for _ in range(60):
            words = sorted({word(rng, 3) for _ in range(15)})
            entities = sorted({word(rng, 2).capitalize() for _ in range(6)})
            self.topics.append((words, entities))
        self.tags = sorted({word(rng, 2) for _ in range(50)})
        self.weights = [1 / (rank + 1) for rank in range(len(self.topics))]

    def topic(self) -> tuple[list[str], list[str]]:
        return self.rng.choices(self.topics, weights=self.weights)[0]

    def insight(self, i: int, when_ms: int) -> DraftInsight:
        rng = self.rng
        words, entities = self.topic()
        chosen = rng.sample(words, rng.randint(3, 6)) + rng.sample(self.common, rng.randint(5, 12))
        rng.shuffle(chosen)
        named = rng.sample(entities, rng.randint(0, 2))
        text = " ".join(chosen[:4] + named + chosen[4:])
        if rng.random() < 0.1:
            text += " because " + " ".join(rng.sample(words, 2))
        return DraftInsight(
            content=f"{text} #{i}",
            category=rng.choice(CATEGORIES),
            importance=rng.choices((1, 2, 3, 4, 5), weights=(1, 2, 6, 2, 1))[0],
            tags=tuple(rng.sample(self.tags, rng.randint(0, 3))),
            entities=tuple(named),
            source=rng.choice(SOURCES),
            created_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when_ms // 1000)),
        )

    def query(self) -> str:
        rng = self.rng
        words, entities = self.topic()
        parts = rng.sample(words, rng.randint(1, 3)) + rng.sample(self.common, rng.randint(0, 1))
        if rng.random() < 0.4:
            parts.append(rng.choice(entities))
        return rng.choice(CUES) + " ".join(parts)


def grow(store: EmbeddedStore, corpus: Corpus, start: int, stop: int, clock: FakeClock) -> float:
    began = time.perf_counter()
    for first in range(start, stop, CHUNK):
        last = min(stop, first + CHUNK)
        items = tuple(corpus.insight(i, clock.tick()) for i in range(first, last))
        store.import_draft(SPACE, ImportDraft(insights=items))
    return time.perf_counter() - began


def recall_times(store: EmbeddedStore, queries: list[str], clock: FakeClock) -> list[float]:
    for query in queries[:10]:  # warm the page cache and the entity cache
        store.recall(SPACE, query, readonly=True)
    out = []
    for query in queries:
        clock.tick()
        began = time.perf_counter()
        store.recall(SPACE, query, limit=10)
        out.append((time.perf_counter() - began) * 1000)
    return out


def remember_rate(store: EmbeddedStore, corpus: Corpus, clock: FakeClock, count: int) -> float:
    items = [corpus.insight(10_000_000 + i, 0) for i in range(count)]
    began = time.perf_counter()
    for item in items:
        clock.tick()
        store.remember(
            SPACE,
            item.content,
            category=item.category,
            importance=item.importance,
            tags=item.tags,
            entities=item.entities,
            source=str(item.source),
        )
    return count / (time.perf_counter() - began)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--remembers", type=int, default=200)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    workdir = Path(args.dir or tempfile.mkdtemp(prefix="lt-bench-"))
    planned = sizes[-1] + len(sizes) * (args.remembers + 2 * args.queries)
    clock = FakeClock(START_MS, SPAN_DAYS * DAY_MS // planned)
    store = EmbeddedStore(workdir, clock)
    store.create_space(SPACE)
    corpus = Corpus()
    queries = [corpus.query() for _ in range(args.queries)]
    rows, built = [], 0
    for size in sizes:
        seconds = grow(store, corpus, built, size, clock)
        built = size
        times = recall_times(store, queries, clock)
        rate = remember_rate(store, corpus, clock, args.remembers)
        built += args.remembers  # the remembered insights stay in the space
        rows.append(
            {
                "insights": size,
                "build_seconds": round(seconds, 2),
                "recall_p50_ms": round(statistics.median(times), 2),
                "recall_p95_ms": round(percentile(times, 0.95), 2),
                "remember_ops_per_s": round(rate, 1),
            }
        )
    status = store.status(SPACE)
    store.close()
    ratio = rows[-1]["recall_p50_ms"] / rows[0]["recall_p50_ms"]
    print(
        json.dumps(
            {
                "build_path": f"import_draft in chunks of {CHUNK} (bulk path; no proximity edges)",
                "recall": "smart mode, limit 10, readonly=False (access counting + oplog)",
                "queries": len(queries),
                "table": rows,
                "p50_ratio_largest_to_smallest": round(ratio, 2),
                "target_ratio": 3.0,
                "final_edges": status.edge_count,
                "python": sys.version.split()[0],
                "sqlite": sqlite3.sqlite_version,
                "machine": platform.machine(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
