"""Hot-memory throughput against the I/O floors, measured side by side in one run.

Prints one JSON document. For each durability level it runs mixed add -> replace -> remove
rounds on a MEMORY.md pre-filled to 80% of its limit with 100-byte entries, and, interleaved
with those rounds (so disk noise hits every series alike), floors with the same byte sizes:

- raw floor: write an 8 KiB temporary file, fsync it, ``os.replace`` it, fsync the directory;
- protocol floor: the bare I/O of our commit with the same file sizes: take and release the
  lock (the real adapter's, the reference's lock file included), write and rename the
  projection, write, fsync and rename ``memories.json``, fsync the directory (no parsing, no
  validation, no machine);
- reload floor: the protocol floor plus reading ``memories.json`` back under the lock, which
  every operation does (ours and the reference's), so that a change by another process is
  never overwritten;
- rules only: the engine-free bound (:class:`RulesOnly`): our request check, reload, rules,
  encoding and commit protocol through the real adapters, with no state machine, group
  commit, events or facade. Beside the floor it shows what the rules and the encoding cost;
  beside ``mixed``, what everything else does;
- source-only floor: the protocol floor without the projection, what a commit with
  ``projections = "lazy"`` must do (beside the same mix on a lazy root);
- with ``--hermes``: Hermes Agent's ``MemoryStore`` 0.19.0 on the same mix (installed with
  ``--no-deps`` into the scratch directory; it writes one fsynced file per change).

Throughputs are medians over blocks; a ratio is the median of the per-block ratios of two
series that ran back to back. Targets (see the README): mixed ops >= 0.9x the protocol floor
at ``full``; at ``normal`` >= 1.0x Hermes; the dispatcher's share of an operation's CPU <= 20%
(``engine_share_of_op_cpu``, cProfile with in-memory ports); rendering context for an
unchanged store <= 0.05x one add. ``group_commit`` reports ops/s of one root with
``--threads`` threads (4) against one. For scale it also prints the dispatcher the flows ran
on (``engine``: ``MNEMON_SM_ENGINE``, compiled by default), one event on a three-state machine
with python-statemachine and with the compiled dispatcher, and the CPU cost of one mixed
operation with in-memory ports (no I/O at all).

Maintenance: one round with the built-in workers at each limit (durability ``full``, embedded
long-term store), each on a fresh copy of a full target: USER.md (4096 bytes, entries that
fold into each other, compacted locally) and MEMORY.md (10240 bytes of 200-byte entries, every
one archived into a Memory Space, then compacted). Reported beside a plain add on the same
root once it has room again.

Usage: python benchmarks/hot_memory.py [--blocks N] [--ops-per-block N] [--threads N]
       [--hermes] [--dir DIR]
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
from collections.abc import Callable
from pathlib import Path

from mnemon_sm import Config, MemoryRoot
from mnemon_sm.adapters.real import RealFiles, RealLocks
from mnemon_sm.engine.flow import engine
from mnemon_sm.flows.hot.model import LOCK_NAME, SOURCE_PATH
from mnemon_sm.flows.hot.rules import Commit, check_request, plan_mutation
from mnemon_sm.flows.hot.store import SourceCache, commit
from mnemon_sm.text import iso_ms

ENTRY_BYTES = 100
FILL = 0.8


def entry(tag: str, i: int) -> str:
    text = f"{tag} fact {i:06d} "
    return (text + "x" * ENTRY_BYTES)[:ENTRY_BYTES]


def prefill(root: MemoryRoot, limit: int) -> None:
    i = 0
    while root.hot.snapshot().usage["memory"][0] + 4 + ENTRY_BYTES <= FILL * limit:
        root.hot.add("memory", entry("base", i))
        i += 1


def mixed_round(root: MemoryRoot, i: int) -> None:
    a, b = entry("new", i), entry("alt", i)
    root.hot.add("memory", a)
    root.hot.replace("memory", a[:16], b)
    root.hot.remove("memory", b[:16])


class Floors:
    """The floors' bare I/O, with the byte sizes of the real files."""

    def __init__(self, directory: Path, projection: bytes, source: bytes) -> None:
        self.dir = directory / "runtime"  # same depth as a root's runtime/ directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.projection, self.source = projection, source
        self.raw_data = b"r" * 8192
        self.locks = RealLocks(directory)

    def _write(self, name: str, data: bytes, sync: bool) -> None:
        temp = self.dir / f".{name}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, data)
        if sync:
            os.fsync(fd)
        os.close(fd)
        os.replace(temp, self.dir / name)

    def _fsync_dir(self) -> None:
        fd = os.open(self.dir, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)

    def raw(self) -> None:
        self._write("raw", self.raw_data, True)
        self._fsync_dir()

    def protocol(self) -> None:
        self.locks.acquire(LOCK_NAME, 5000)
        try:
            self._write("MEMORY.md", self.projection, False)
            self._write("memories.json", self.source, True)
            self._fsync_dir()
        finally:
            self.locks.release(LOCK_NAME)

    def protocol_with_reload(self) -> None:
        """The protocol floor plus the reload every operation makes under the lock (the
        reference's too): ``memories.json`` read back before the writes."""
        self.locks.acquire(LOCK_NAME, 5000)
        try:
            fd = os.open(self.dir / "memories.json", os.O_RDONLY)
            try:
                os.read(fd, len(self.source) + 1)
            finally:
                os.close(fd)
            self._write("MEMORY.md", self.projection, False)
            self._write("memories.json", self.source, True)
            self._fsync_dir()
        finally:
            self.locks.release(LOCK_NAME)

    def source_only(self) -> None:
        """The protocol floor of ``projections = "lazy"``: the source alone."""
        self.locks.acquire(LOCK_NAME, 5000)
        try:
            self._write("memories.json", self.source, True)
            self._fsync_dir()
        finally:
            self.locks.release(LOCK_NAME)


class RulesOnly:
    """The engine-free bound: the same request check, reload, rules, encoding and commit
    protocol (``flows.hot.store.commit``) through the real adapters under the same lock, and
    nothing else (no state machine, group commit, events or facade). No dispatcher can make
    an operation faster than this; what separates it from the protocol floor is the cost of
    the rules and the encoding themselves."""

    def __init__(self, directory: Path, source: bytes, durability: str, limit: int) -> None:
        (directory / "runtime").mkdir(parents=True, exist_ok=True)
        (directory / SOURCE_PATH).write_bytes(source)
        self.files, self.locks = RealFiles(directory), RealLocks(directory)
        self.cache, self.durability, self.limit = SourceCache(), durability, limit

    def op(self, action: str, **fields: str) -> None:
        mutation = check_request(action=action, target="memory", **fields)
        self.locks.acquire(LOCK_NAME, 5000)
        try:
            before = self.cache.load(self.files.read(SOURCE_PATH))
            now = iso_ms(time.time_ns() // 1_000_000)
            outcome = plan_mutation(before, mutation, now, self.limit)
            assert isinstance(outcome, Commit)
            after = outcome.store
            data = commit(self.files, before, after, self.durability, (mutation.target,))
            self.cache.remember(data, after, mutation.target)
        finally:
            self.locks.release(LOCK_NAME)

    def mixed_round(self, i: int) -> None:
        a, b = entry("new", i), entry("alt", i)
        self.op("add", content=a)
        self.op("replace", old_text=a[:16], content=b)
        self.op("remove", old_text=b[:16])


def rate(fn: Callable[[], None], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return n / (time.perf_counter() - start)


class Hermes:
    """Hermes Agent's ``MemoryStore`` (hermes-agent 0.19.0, installed with ``--no-deps`` into
    a scratch directory by ``--hermes``) doing the same mix on its own home directory. It
    writes each target's Markdown file (fsynced, renamed; no directory fsync) under a lock."""

    VERSION = "0.19.0"

    def __init__(self, site: Path, home: Path) -> None:
        os.environ["HERMES_HOME"] = str(home)
        sys.path.insert(0, str(site))
        from tools.memory_tool import MemoryStore  # type: ignore[import-not-found]

        self.store = MemoryStore(memory_char_limit=10240, user_char_limit=4096)
        self.store.load_from_disk()
        i = 0
        while len("\n§\n".join(self.store.memory_entries)) + ENTRY_BYTES + 3 <= FILL * 10240:
            self.store.add("memory", entry("base", i))
            i += 1

    def mixed_round(self, i: int) -> None:
        a, b = entry("new", i), entry("alt", i)
        for reply in (
            self.store.add("memory", a),
            self.store.replace("memory", a[:16], b),
            self.store.remove("memory", b[:16]),
        ):
            assert reply.get("success"), reply

    @staticmethod
    def install(base: Path) -> Path:
        """``pip install --no-deps`` the pinned release into ``base``; returns the directory."""
        import subprocess

        site = base / "hermes-site"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--target",
                str(site),
                f"hermes-agent=={Hermes.VERSION}",
            ],
            check=True,
        )
        return site


def bench_durability(
    base: Path, durability: str, blocks: int, per_block: int, hermes: Path | None
) -> dict[str, float]:
    root = MemoryRoot.open(base / f"root-{durability}", Config(durability=durability))
    lazy = MemoryRoot.open(
        base / f"lazy-{durability}", Config(durability=durability, projections="lazy")
    )
    limit = root.config.memory_limit
    prefill(root, limit)
    prefill(lazy, limit)
    files = base / f"root-{durability}" / "runtime"
    floors = Floors(
        base / f"floor-{durability}",
        (files / "MEMORY.md").read_bytes(),
        (files / "memories.json").read_bytes(),
    )
    bare = RulesOnly(base / f"rules-{durability}", floors.source, durability, limit)
    other = Hermes(hermes, base / f"hermes-{durability}") if hermes is not None else None
    counter = iter(range(10**9))
    rounds = max(1, per_block // 3)
    series: dict[str, list[float]] = {"mixed": [], "lazy": [], "protocol": [], "source": []}
    series.update({"raw": [], "reload": [], "rules": [], **({"hermes": []} if other else {})})
    for _ in range(blocks):  # each compared pair runs back to back
        series["protocol"].append(rate(floors.protocol, per_block))
        series["mixed"].append(rate(lambda: mixed_round(root, next(counter)), rounds) * 3)
        series["rules"].append(rate(lambda: bare.mixed_round(next(counter)), rounds) * 3)
        series["reload"].append(rate(floors.protocol_with_reload, per_block))
        if other is not None:
            series["hermes"].append(rate(lambda: other.mixed_round(next(counter)), rounds) * 3)
        series["lazy"].append(rate(lambda: mixed_round(lazy, next(counter)), rounds) * 3)
        series["source"].append(rate(floors.source_only, per_block))
        series["raw"].append(rate(floors.raw, per_block))
    medians = {k: statistics.median(v) for k, v in series.items()}

    def ratio(a: str, b: str) -> float:
        """The median of the per-block ratios: each block's pair ran back to back, so a
        slow stretch of the disk hits both sides of one ratio alike."""
        return round(
            statistics.median(x / y for x, y in zip(series[a], series[b], strict=True)), 3
        )

    overhead_us = 1e6 / medians["mixed"] - 1e6 / medians["protocol"]
    out = {
        "mixed_ops_per_s": round(medians["mixed"]),
        "protocol_floor_ops_per_s": round(medians["protocol"]),
        "raw_floor_ops_per_s": round(medians["raw"]),
        "mixed_vs_protocol_floor": ratio("mixed", "protocol"),
        "mixed_vs_raw_floor": ratio("mixed", "raw"),
        "overhead_over_protocol_floor_us": round(overhead_us),
        "reload_floor_ops_per_s": round(medians["reload"]),
        "mixed_vs_reload_floor": ratio("mixed", "reload"),
        "rules_only_ops_per_s": round(medians["rules"]),
        "rules_only_vs_protocol_floor": ratio("rules", "protocol"),
        "mixed_vs_rules_only": ratio("mixed", "rules"),
        "lazy_mixed_ops_per_s": round(medians["lazy"]),
        "source_only_floor_ops_per_s": round(medians["source"]),
        "lazy_vs_source_only_floor": ratio("lazy", "source"),
        "lazy_vs_protocol_floor": ratio("lazy", "protocol"),
        "memory_used_bytes": root.hot.snapshot().usage["memory"][0],
    }
    if other is not None:
        out["hermes_ops_per_s"] = round(medians["hermes"])
        out["mixed_vs_hermes"] = ratio("mixed", "hermes")
        out["lazy_vs_hermes"] = ratio("lazy", "hermes")
    return out


def bench_threads(base: Path, blocks: int, per_block: int, threads: int) -> dict[str, float]:
    """Group commit: ops/s of one root at durability ``full`` with ``threads`` threads doing
    the mix at once (each on its own entries) against one thread doing it alone, in
    interleaved blocks of the same number of operations."""
    import threading

    root = MemoryRoot.open(base / "root-threads", Config(durability="full"))
    prefill(root, root.config.memory_limit)
    counter = iter(range(10**9))
    rounds = max(threads, per_block // 3 // threads * threads)

    def together() -> float:
        start = time.perf_counter()
        workers = [
            threading.Thread(
                target=lambda: [mixed_round(root, next(counter)) for _ in range(rounds // threads)]
            )
            for _ in range(threads)
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        return rounds * 3 / (time.perf_counter() - start)

    alone, grouped = [], []
    group = root.hot._group
    for _ in range(blocks):
        alone.append(rate(lambda: mixed_round(root, next(counter)), rounds) * 3)
        batches, batched = group.batches, group.batched
        grouped.append(together())
        batches, batched = group.batches - batches, group.batched - batched
    one, many = statistics.median(alone), statistics.median(grouped)
    ops = rounds * 3  # of the last threaded block
    return {
        "threads": threads,
        "one_thread_ops_per_s": round(one),
        "threads_ops_per_s": round(many),
        "threads_vs_one": round(many / one, 2),
        "ops_per_commit": round(ops / (ops - batched + batches), 2),
    }


def bench_context(base: Path, blocks: int, per_block: int) -> dict[str, float]:
    root = MemoryRoot.open(base / "root-context")
    prefill(root, root.config.memory_limit)
    counter = iter(range(10**9))

    def add_then_remove() -> None:
        text = entry("ctx", next(counter))
        root.hot.add("memory", text)
        root.hot.remove("memory", text[:16])

    render = root.context.runtime_memory
    render()
    time.sleep(0.2)  # let the file's timestamps settle, as between real turns
    renders, adds = [], []
    for _ in range(blocks):
        adds.append(1 / (rate(add_then_remove, max(1, per_block // 2)) * 2))
        render()
        time.sleep(0.2)
        renders.append(1 / rate(render, per_block * 20))
    add_s, render_s = statistics.median(adds), statistics.median(renders)
    return {
        "render_unchanged_us": round(render_s * 1e6, 2),
        "one_add_us": round(add_s * 1e6, 1),
        "render_vs_add": round(render_s / add_s, 4),
    }


def in_memory_op_us(blocks: int, per_block: int) -> float:
    """CPU cost of one mixed operation with in-memory ports (no I/O at all)."""
    from mnemon_sm.testing.memory import memory_ports

    ports, log = memory_ports()
    root = MemoryRoot.open("/in-memory", Config(), ports=ports)
    prefill(root, root.config.memory_limit)
    counter = iter(range(10**9))

    def one_round() -> None:
        mixed_round(root, next(counter))
        log.clear()

    rounds = max(1, per_block // 3)
    return statistics.median(1e6 / (rate(one_round, rounds) * 3) for _ in range(blocks))


def engine_share(blocks: int, per_block: int) -> dict[str, float]:
    """Where one mixed operation's CPU goes, with in-memory ports: the share spent in the
    dispatcher (``mnemon_sm/engine/``, by cProfile's own time per function), the rest being
    the flows' steps, the rules, encoding and the fakes."""
    import cProfile
    import pstats

    from mnemon_sm.testing.memory import memory_ports

    ports, log = memory_ports()
    root = MemoryRoot.open("/in-memory", Config(), ports=ports)
    prefill(root, root.config.memory_limit)
    profile = cProfile.Profile()
    counter = iter(range(10**9))
    profile.enable()
    for _ in range(blocks * max(1, per_block // 3)):
        mixed_round(root, next(counter))
        log.clear()
    profile.disable()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    total = sum(row[2] for row in stats.values())
    engine_dir = os.sep + os.path.join("mnemon_sm", "engine") + os.sep
    in_engine = sum(row[2] for key, row in stats.items() if engine_dir in key[0])
    ports_s = sum(row[2] for key, row in stats.items() if os.sep + "testing" + os.sep in key[0])
    return {
        "engine_share_of_op_cpu": round(in_engine / total, 3),
        "engine_share_without_fakes": round(in_engine / (total - ports_s), 3),
    }


def engine_event_us() -> float:
    """Cost of one python-statemachine event on a three-state machine, for scale."""
    from statemachine.io import create_machine_class_from_definition

    states = {
        "a": {"initial": True, "on": {"go": [{"target": "b"}]}},
        "b": {"on": {"go": [{"target": "c"}]}},
        "c": {"on": {"go": [{"target": "a"}]}},
    }
    machine = create_machine_class_from_definition("Three", states=states)()
    n = 5000
    return 1e6 / rate(lambda: machine.send("go"), n)


_RING = """
flow: ring
summary: Three states in a ring, for scale.
context: Ring
resting: [a, b, c]
states: {a: {description: A.}, b: {description: B.}, c: {description: C.}}
events: {go: Go.}
invariants: {}
statechart:
  states:
    a: {initial: true, "on": {go: [{target: b}]}}
    b: {"on": {go: [{target: c}]}}
    c: {"on": {go: [{target: a}]}}
"""


def compiled_event_us() -> float:
    """Cost of one event of the compiled dispatcher on the same three-state machine."""
    from types import SimpleNamespace

    from mnemon_sm.engine.compiled import CompiledMachine, compile_chart
    from mnemon_sm.engine.spec import build_machine_class, parse_spec

    spec = parse_spec(_RING, name="ring")
    machine = CompiledMachine(compile_chart(spec, build_machine_class(spec)), SimpleNamespace())
    n = 20000
    return 1e6 / rate(lambda: machine.send("go"), n)


def _seeded(path: Path, target: str, contents: list[tuple[str, str]]) -> None:
    from mnemon_sm.flows.hot.model import HotEntry, HotStore

    stamp = "2026-01-01T00:00:00.000Z"
    store = HotStore(tuple(HotEntry(c, stamp, stamp, target, i) for c, i in contents))  # type: ignore[arg-type]
    (path / "runtime").mkdir(parents=True)
    (path / "runtime" / "memories.json").write_bytes(store.encode())


def _full_target(target: str) -> list[tuple[str, str]]:
    if target == "memory":
        return [(f"Fact {i:03d} about the build: " + "d" * 172, "normal") for i in range(50)]
    out = []
    for i in range(14):  # 14 groups of 3 entries that fold into one, ~3.9 KB in all
        base = f"User preference {i:02d}: " + "p" * 67
        out += [(base, "normal"), (base.upper(), "low"), (base + " always", "critical")]
    return out


def bench_maintenance(base: Path, blocks: int) -> dict[str, dict[str, float]]:
    import shutil

    config = Config(durability="full", long_term_store="embedded")
    out: dict[str, dict[str, float]] = {}
    for target in ("user", "memory"):
        template = base / f"maintenance-{target}"
        _seeded(template, target, _full_target(target))
        pending = "A new durable entry that does not fit any more " * 4
        rounds, adds = [], []
        for block in range(blocks):
            path = base / f"maintenance-{target}-{block}"
            shutil.copytree(template, path)
            root = MemoryRoot.open(path, config)
            start = time.perf_counter()
            receipt = root.hot.add(target, pending)
            rounds.append(time.perf_counter() - start)
            assert receipt.maintenance is not None, receipt
            start = time.perf_counter()
            root.hot.add(target, f"A small fact {block}")
            adds.append(time.perf_counter() - start)
            root.close()
        round_s, add_s = statistics.median(rounds), statistics.median(adds)
        out[target] = {
            "limit_bytes": config.limit(target),
            "source_entries": receipt.maintenance.source_entries,
            "kept_entries": receipt.maintenance.kept_entries,
            "maintenance_round_ms": round(round_s * 1e3, 2),
            "plain_add_ms": round(add_s * 1e3, 3),
            "round_vs_plain_add": round(round_s / add_s, 1),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=15)
    parser.add_argument("--ops-per-block", type=int, default=90)
    parser.add_argument("--dir", default=None, help="where to create the roots (default: temp)")
    parser.add_argument("--threads", type=int, default=4, help="threads of the group commit run")
    parser.add_argument(
        "--hermes",
        action="store_true",
        help=f"also run Hermes Agent's MemoryStore {Hermes.VERSION} on the same mix at each "
        "durability (pip-installs it with --no-deps into the scratch directory)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        base = Path(tmp)
        hermes = Hermes.install(base) if args.hermes else None
        blocks, per_block = args.blocks, args.ops_per_block
        result = {
            "python": platform.python_version(),
            "engine": engine(),
            "engine_event_us": round(engine_event_us(), 1),
            "compiled_event_us": round(compiled_event_us(), 2),
            "in_memory_mixed_op_us": round(in_memory_op_us(blocks, per_block), 1),
            **engine_share(blocks, per_block),
            "durability": {
                d: bench_durability(base, d, blocks, per_block, hermes)
                for d in ("full", "normal", "off")
            },
            "group_commit": bench_threads(base, blocks, per_block, args.threads),
            "context": bench_context(base, blocks, per_block),
            "maintenance": bench_maintenance(base, blocks),
        }
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
