"""Embedded long-term store: recall latency as one space grows, and remember cost.

Prints one JSON document. One space is grown step by step to 1k, 10k and 100k insights; at each
size it measures:

- recall latency, p50 and p95, of relevance recall (the default mode: FTS5 and normalised BM25)
  and of Mnemon's smart recall, side by side: the same queries, both modes per query in
  alternating order so machine noise hits both; ``readonly=False``, so every call also counts
  access and writes the oplog, as a real recall does;
- ``remember`` (every automatic edge, one transaction each): the throughput at the default
  durability (``full``) and, through a second store object on the same files with
  ``durability="off"``, p50 and mean ms per call (target: at most 5 ms at 10k).

With ``--embeddings`` a second space holding the same insights lives in a store with
``SentenceTransformerEmbedder()`` (the bundled all-MiniLM-L6-v2, on CPU). At each size its new
insights are embedded with ``embed_missing`` (timed: texts and texts/s), then relevance recall
with dense retrieval is timed per query twice: cold (a query the store has never seen, so its
vector is computed inside the call: the honest figure) and repeated (the same query again at
once, its vector from the store's query cache). Every cold query is distinct across the run.

Embedding 100k texts takes about half an hour on a small CPU. ``--real-vectors N`` embeds the
first N insights with the model and gives the rest seeded random unit vectors (through
``embed_missing`` of a second store object on the same files, whose embedder answers with the
model's id): the store's work per recall does not depend on the vectors' values, and every
timed query is still embedded by the model. The output counts the random vectors.

Ratios are p50 at each size over p50 at the smallest, per system. Targets: p50 at the largest
size at most 3x p50 at the smallest for relevance recall, without and with embeddings.

The data is synthetic but shaped like an agent's memories: about 60 topics with their own
words and entities, a shared vocabulary, Zipf-like topic popularity, tags, five categories,
three sources, importance mostly 3, creation times rising steadily over six months (imported
and remembered insights share one timeline). The space is filled through ``import_draft`` (the
bulk path: the normal write path per insight with entity and causal edges and a per-source
temporal backbone, but no proximity edges); the output says so. A fake clock drives every
timestamp the store writes. A full run takes a few minutes and about 1 GB of disk; with
``--embeddings`` embedding 100k insights adds about ten minutes on a small CPU and another
1 GB. Progress goes to stderr.

Usage: python benchmarks/long_term.py [--sizes 1000,10000,100000] [--queries N]
       [--remembers N] [--embeddings [--real-vectors N]] [--dir DIR]
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
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy

from mnemon_sm.adapters.sqlite import EmbeddedStore
from mnemon_sm.ports.embedder import Embedder, Vectors
from mnemon_sm.ports.long_term.values import DraftInsight, ImportDraft

SPACE = "bench"
DAY_MS = 86_400_000
START_MS = 1_770_000_000_000  # early February 2026
SPAN_DAYS = 180
CHUNK = 5_000  # insights per import_draft call
WARM = 10  # untimed readonly recalls per mode before timing
_SYLLABLE_TEXT = "ka lo mi ne ru sa te vo zi bra cle dro fen gal hum jor kes lin mar nol pex"
SYLLABLES = tuple(_SYLLABLE_TEXT.split())
CUES = ("", "", "", "why did we ", "when did we ", "what is ", "how does ")
CATEGORIES = ("fact", "decision", "preference", "insight", "context")
SOURCES = ("user", "agent", "external")
MODES = ("relevance", "smart")
TARGET_RATIO = 3.0
TARGET_REMEMBER_MS = 5.0  # remember at durability off, p50 at 10k insights

Row = dict[str, float | None]


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

    def wait(self, event: threading.Event, timeout_ms: int) -> bool:
        """The ``Clock`` port's wait (the store never waits): real time, then the fake."""
        found = event.wait(timeout_ms / 1000)
        if not found:
            self.ms += timeout_ms
        return found


def word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(syllables))


class Corpus:
    """Deterministic synthetic memories and queries. ``stream`` draws them from another
    random stream over the same vocabulary (the main stream stays as it is)."""

    def __init__(self, seed: int = 7, stream: int | None = None) -> None:
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
        if stream is not None:
            self.rng = random.Random(stream)

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

    def fresh_queries(self, count: int, seen: set[str]) -> list[str]:
        """``count`` queries none of which is in ``seen`` (which they join)."""
        out: list[str] = []
        while len(out) < count:
            query = self.query()
            if query not in seen:
                seen.add(query)
                out.append(query)
        return out


def grow(
    stores: list[EmbeddedStore], corpus: Corpus, start: int, stop: int, clock: FakeClock
) -> list[float]:
    """Import insights ``start`` to ``stop`` into every store; seconds spent per store."""
    spent = [0.0] * len(stores)
    for first in range(start, stop, CHUNK):
        last = min(stop, first + CHUNK)
        items = tuple(corpus.insight(i, clock.tick()) for i in range(first, last))
        for n, store in enumerate(stores):
            began = time.perf_counter()
            store.import_draft(SPACE, ImportDraft(insights=items))
            spent[n] += time.perf_counter() - began
    return spent


def ms_since(began: float) -> float:
    return (time.perf_counter() - began) * 1000


def recall_times(
    store: EmbeddedStore, queries: list[str], clock: FakeClock
) -> dict[str, list[float]]:
    """Per mode, ms per recall; both modes run each query, in alternating order."""
    for mode in MODES:
        for query in queries[:WARM]:  # warm the page cache, the entity cache, the FTS pages
            store.recall(SPACE, query, mode=mode, readonly=True)
    out: dict[str, list[float]] = {mode: [] for mode in MODES}
    for n, query in enumerate(queries):
        for mode in MODES if n % 2 == 0 else MODES[::-1]:
            clock.tick()
            began = time.perf_counter()
            store.recall(SPACE, query, mode=mode, limit=10)
            out[mode].append(ms_since(began))
    return out


def dense_recall_times(
    store: EmbeddedStore, warm: list[str], queries: list[str], clock: FakeClock
) -> tuple[list[float], list[float]]:
    """Relevance recall with embeddings: ms per cold query (never seen by the store) and per
    the same query repeated at once (its vector cached)."""
    for query in warm:  # loads the vector matrix and warms the caches
        store.recall(SPACE, query, readonly=True)
    cold: list[float] = []
    repeated: list[float] = []
    for query in queries:
        for bucket in (cold, repeated):
            clock.tick()
            began = time.perf_counter()
            store.recall(SPACE, query, limit=10)
            bucket.append(ms_since(began))
    return cold, repeated


def remember_times(
    store: EmbeddedStore, items: list[DraftInsight], clock: FakeClock
) -> list[float]:
    out = []
    for item in items:
        clock.tick()
        began = time.perf_counter()
        store.remember(
            SPACE,
            item.content,
            category=item.category,
            importance=item.importance,
            tags=item.tags,
            entities=item.entities,
            source=str(item.source),
        )
        out.append(ms_since(began))
    return out


def backfill(store: EmbeddedStore, size: int) -> tuple[int, float]:
    """Embed every insight without a vector; (texts embedded, seconds)."""
    step = [0]

    def progress(done: int, total: int) -> None:
        if done >= step[0] or done == total:
            log(f"  {size}: embedded {done}/{total}")
            step[0] = done + 5_000

    began = time.perf_counter()
    count = store.embed_missing(SPACE, progress=progress)
    return count, time.perf_counter() - began


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class PartlyRandom:
    """An embedder answering as ``model`` for its first ``real`` texts and with seeded random
    unit vectors after them (see ``--real-vectors``)."""

    def __init__(self, model: Embedder, real: int) -> None:
        self.model, self.left, self.random = model, real, 0
        self.model_id, self.dimensions = model.model_id, model.dimensions

    def embed(self, texts: Sequence[str]) -> Vectors:
        if self.left >= len(texts):
            self.left -= len(texts)
            return self.model.embed(texts)
        self.left = 0
        self.random += len(texts)
        rows = [
            numpy.random.default_rng(list(text.encode("utf-8", "surrogatepass"))).standard_normal(
                self.dimensions
            )
            for text in texts
        ]
        matrix = numpy.asarray(rows, dtype=numpy.float32)
        matrix /= numpy.linalg.norm(matrix, axis=1, keepdims=True)
        return matrix


def make_embedder() -> Embedder:
    """``SentenceTransformerEmbedder()``, imported only when asked for (its model needs the
    ``[embeddings]`` extra)."""
    from mnemon_sm.adapters.sentence import SentenceTransformerEmbedder
    from mnemon_sm.errors import InvalidConfig

    try:
        return SentenceTransformerEmbedder()
    except InvalidConfig as exc:
        sys.exit(f"--embeddings: {exc}")


def ratios(rows: list[Row], key: str) -> list[float] | None:
    """``key`` at each size over ``key`` at the smallest (None when a row lacks it)."""
    values = [row.get(key) for row in rows]
    known = [value for value in values if value is not None and value > 0]
    if len(known) != len(values):
        return None
    return [round(value / known[0], 2) for value in known]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--remembers", type=int, default=200)
    parser.add_argument(
        "--embeddings",
        action="store_true",
        help="also time relevance recall with SentenceTransformerEmbedder (needs the extra)",
    )
    parser.add_argument(
        "--real-vectors",
        type=int,
        default=None,
        help="with --embeddings: embed only the first N insights with the model, the rest"
        " with random unit vectors (the timed queries always use the model)",
    )
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    if sizes != sorted(set(sizes)) or sizes[0] < 1:
        parser.error("--sizes must be positive and strictly increasing")
    if args.queries < WARM or args.remembers < 1:
        parser.error(f"--queries must be at least {WARM} and --remembers at least 1")
    if args.real_vectors is not None and (not args.embeddings or args.real_vectors < 0):
        parser.error("--real-vectors needs --embeddings and a count of at least 0")
    embedder = make_embedder() if args.embeddings else None
    workdir = Path(args.dir or tempfile.mkdtemp(prefix="lt-bench-"))
    per_size = 2 * args.remembers + 2 * args.queries + (4 * args.remembers if embedder else 0)
    planned = sizes[-1] + len(sizes) * per_size
    clock = FakeClock(START_MS, SPAN_DAYS * DAY_MS // planned)
    store = EmbeddedStore(workdir, clock)
    store.create_space(SPACE)
    stores = [store]
    dense: EmbeddedStore | None = None
    filler: EmbeddedStore | None = None  # backfills the dense space (see --real-vectors)
    partly: PartlyRandom | None = None
    if embedder is not None:
        dense = EmbeddedStore(workdir / "embedded", clock, embedder=embedder)
        dense.create_space(SPACE)
        stores.append(dense)
        filler = dense
        if args.real_vectors is not None:
            partly = PartlyRandom(embedder, args.real_vectors)
            filler = EmbeddedStore(workdir / "embedded", clock, embedder=partly)
    corpus = Corpus()
    queries = [corpus.query() for _ in range(args.queries)]
    extra = Corpus(stream=13)  # insights remembered at durability off
    probe = Corpus(stream=11)  # the distinct queries of the embedded store
    seen = set(queries)
    rows: list[Row] = []
    built = 0
    for size in sizes:
        seconds = grow(stores, corpus, built, size, clock)
        log(f"{size}: built in {[round(s, 1) for s in seconds]} s")
        built = size
        row: Row = {"insights": size, "build_seconds": round(seconds[0], 2)}
        times = recall_times(store, queries, clock)
        smart, relevance = times["smart"], times["relevance"]
        row["recall_p50_ms"] = round(statistics.median(smart), 2)
        row["recall_p95_ms"] = round(percentile(smart, 0.95), 2)
        row["relevance_p50_ms"] = round(statistics.median(relevance), 2)
        row["relevance_p95_ms"] = round(percentile(relevance, 0.95), 2)
        log(f"{size}: relevance p50 {row['relevance_p50_ms']} ms, smart {row['recall_p50_ms']} ms")
        if dense is not None:
            assert filler is not None
            embedded, spent = backfill(filler, size)
            warm = probe.fresh_queries(WARM, seen)
            cold, repeated = dense_recall_times(
                dense, warm, probe.fresh_queries(args.queries, seen), clock
            )
            row["emb_build_seconds"] = round(seconds[1], 2)
            row["emb_backfill_texts"] = embedded
            row["emb_backfill_seconds"] = round(spent, 2)
            row["emb_backfill_texts_per_s"] = round(embedded / spent, 1) if spent else None
            row["emb_cold_p50_ms"] = round(statistics.median(cold), 2)
            row["emb_cold_p95_ms"] = round(percentile(cold, 0.95), 2)
            row["emb_repeated_p50_ms"] = round(statistics.median(repeated), 2)
            row["emb_repeated_p95_ms"] = round(percentile(repeated, 0.95), 2)
            log(f"{size}: embeddings cold p50 {row['emb_cold_p50_ms']} ms")
        full_items = [corpus.insight(10_000_000 + i, 0) for i in range(args.remembers)]
        full = remember_times(store, full_items, clock)
        row["remember_ops_per_s"] = round(len(full) / (sum(full) / 1000), 1)
        row["remember_p50_ms"] = round(statistics.median(full), 2)
        off_items = [extra.insight(20_000_000 + built + i, 0) for i in range(args.remembers)]
        with EmbeddedStore(workdir, clock, durability="off") as fast:
            fast.recall(SPACE, queries[0], readonly=True)  # opens and syncs its handle, untimed
            off = remember_times(fast, off_items, clock)
        row["remember_off_p50_ms"] = round(statistics.median(off), 2)
        row["remember_off_mean_ms"] = round(statistics.fmean(off), 2)
        log(f"{size}: remember off p50 {row['remember_off_p50_ms']} ms")
        if dense is not None:  # the same insights, embedded at the next size
            remember_times(dense, full_items + off_items, clock)
        built += 2 * args.remembers  # the remembered insights stay in the space
        rows.append(row)
    status = store.status(SPACE)
    store.close()
    if dense is not None:
        dense.close()
    if filler is not None:
        filler.close()
    systems = {
        "relevance": "relevance_p50_ms",
        "smart": "recall_p50_ms",
        "relevance_embeddings_cold": "emb_cold_p50_ms",
        "relevance_embeddings_repeated": "emb_repeated_p50_ms",
        "remember_off": "remember_off_p50_ms",
    }
    p50_ratios = {name: ratios(rows, key) for name, key in systems.items()}
    targets: dict[str, dict[str, float | bool]] = {}
    for name in ("relevance", "relevance_embeddings_cold"):
        found = p50_ratios[name]
        if found is not None:
            targets[f"{name}_p50_ratio"] = {
                "value": found[-1],
                "max": TARGET_RATIO,
                "met": found[-1] <= TARGET_RATIO,
            }
    for row in rows:
        value = row["remember_off_p50_ms"]
        if row["insights"] == 10_000 and value is not None:
            targets["remember_off_p50_ms_at_10k"] = {
                "value": value,
                "max": TARGET_REMEMBER_MS,
                "met": value <= TARGET_REMEMBER_MS,
            }
    smart_ratio = p50_ratios["smart"]
    print(
        json.dumps(
            {
                "build_path": f"import_draft in chunks of {CHUNK} (bulk path; no proximity edges)",
                "recall": (
                    "limit 10, readonly=False (access counting + oplog); recall_* is smart"
                    " mode, relevance_* relevance mode without embeddings, same queries,"
                    " interleaved per query"
                ),
                "remember": (
                    f"{args.remembers} calls per durability per size; remember_ops_per_s and"
                    " remember_p50_ms at durability full, remember_off_* at durability off"
                ),
                "embeddings": (
                    None
                    if embedder is None
                    else (
                        f"{embedder.model_id}, cpu; emb_backfill_* is"
                        " embed_missing over the insights added since the previous size;"
                        " emb_cold_* a query never seen (its vector computed in the call),"
                        " emb_repeated_* the same query again (its vector cached)"
                    )
                ),
                "random_vectors": None if partly is None else partly.random,
                "queries": len(queries),
                "table": rows,
                "p50_ratios_to_smallest": p50_ratios,
                "targets": targets,
                "p50_ratio_largest_to_smallest": None if smart_ratio is None else smart_ratio[-1],
                "target_ratio": TARGET_RATIO,
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
