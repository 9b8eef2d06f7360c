"""Several hosts share one root on PostgreSQL, and the server restarts while they write.

Four host processes (``property_tests/_pg_host.py``, each with its own pool) play 100 rounds
of add / replace / remove on entries of their own, 1,100 operations in all, on one root; when
about a third of them are done the server is stopped the hard way (``pg_ctl stop -m
immediate``: no checkpoint, as a crash would) and started again, and the hosts carry on.

The oracle is a model written here from the hot-memory rules: for each round, the set of
states (which of its two contents are present) the acknowledgements allow. An acknowledged
add makes its content present, a replace swaps it, a remove takes it out; ``NoMatch`` says
the entry was absent; an operation that failed with an uncertain ``StorageError`` may or may
not have committed, so both states stay possible. At the end every round's actual state
must be one the model allows (no acknowledged write lost, none applied twice), every entry
must belong to a round, and no content may appear twice.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from mnemon_sm import MemoryRoot
from mnemon_sm.testing.pg_cluster import Cluster

HOST = Path(__file__).with_name("_pg_host.py")
HOSTS, ROUNDS = 4, 100
OPERATIONS = HOSTS * (ROUNDS * 3 - ROUNDS // 4)  # 1,100

State = frozenset[str]


def allowed(proc: str, lines: list[dict[str, object]]) -> dict[int, set[State]]:
    """The states each round of ``proc`` may end in, from its acknowledgements."""
    from _pg_host import contents

    rounds: dict[int, set[State]] = {}
    for line in lines:
        i = int(str(line["i"]))
        a, b = contents(proc, i)
        states = rounds.setdefault(i, {frozenset()})
        op, outcome = line["op"], line["outcome"]
        old, new = {"add": (None, a), "replace": (a, b), "remove": (b, None)}[str(op)]
        if outcome == "ok":
            after = {_apply(s, old, new) for s in states if old is None or old in s}
            assert after, f"{proc} round {i}: {op} acknowledged from no possible state"
            states = after
        elif outcome == "NoMatch":
            states = {s for s in states if old not in s}
            assert states, f"{proc} round {i}: NoMatch from no possible state"
        elif outcome == "uncertain":
            states = states | {_apply(s, old, new) for s in states if old is None or old in s}
        else:  # a typed refusal before anything was written
            assert outcome in ("LockTimeout", "DuplicateEntry"), f"unexpected {outcome}"
        rounds[i] = states
    return rounds


def _apply(state: State, old: str | None, new: str | None) -> State:
    after = set(state)
    if old is not None:
        after.discard(old)
    if new is not None:
        after.add(new)
    return frozenset(after)


def test_four_hosts_and_a_server_restart_lose_and_double_nothing(
    postgres_cluster: Cluster, tmp_path: Path
) -> None:
    url = postgres_cluster.url(f"hosts-{tmp_path.name}")
    MemoryRoot.open(url).close()  # the schema exists before the hosts race to open
    procs = [f"p{k}" for k in range(HOSTS)]
    outs = {proc: tmp_path / f"{proc}.jsonl" for proc in procs}
    running = {}
    for proc in procs:
        with open(outs[proc], "wb") as out, open(outs[proc].with_suffix(".err"), "wb") as err:
            args = [sys.executable, str(HOST), "--root", url, "--proc", proc, "--rounds"]
            running[proc] = subprocess.Popen([*args, str(ROUNDS)], stdout=out, stderr=err)
    try:
        deadline = time.monotonic() + 120
        while sum(_count(outs[p]) for p in procs) < OPERATIONS // 3:
            assert all(p.poll() is None for p in running.values()), _errors(outs)
            assert time.monotonic() < deadline, "the hosts did not get going"
            time.sleep(0.005)
        restarted_at = sum(_count(outs[p]) for p in procs)
        postgres_cluster.restart(immediate=True)
        for proc in procs:
            assert running[proc].wait(timeout=300) == 0, _errors(outs)
    finally:
        for p in running.values():
            if p.poll() is None:
                p.kill()
                p.wait()

    lines = {proc: _lines(outs[proc]) for proc in procs}
    assert sum(len(v) for v in lines.values()) == OPERATIONS
    outcomes = Counter(str(line["outcome"]) for v in lines.values() for line in v)
    assert outcomes["uncertain"] > 0, f"the restart hit no operation: {outcomes}"
    assert restarted_at < OPERATIONS * 0.9, "the restart came too late to matter"
    after_restart = [v[-1] for v in lines.values()]
    assert all(line["outcome"] == "ok" for line in after_restart), "hosts did not recover"

    root = MemoryRoot.open(url)
    try:
        entries = [e.content for e in root.hot.snapshot().entries]
    finally:
        root.close()
    counts = Counter(entries)
    assert [c for c, n in counts.items() if n > 1] == [], "an entry is there twice"
    from _pg_host import contents

    owned = set()
    for proc in procs:
        for i, states in allowed(proc, lines[proc]).items():
            a, b = contents(proc, i)
            owned |= {a, b}
            actual = frozenset(c for c in (a, b) if c in counts)
            assert actual in states, f"{proc} round {i}: {set(actual)} not in {states}"
    assert set(counts) <= owned, f"entries nobody wrote: {set(counts) - owned}"
    kept = sum(1 for proc in procs for i in range(ROUNDS) if i % 4 == 0)
    assert len(entries) >= kept - outcomes["uncertain"], "acknowledged keepers went missing"


def _count(path: Path) -> int:
    return path.read_bytes().count(b'"op"') if path.exists() else 0


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in path.read_text().splitlines() if '"op"' in x]


def _errors(outs: dict[str, Path]) -> str:
    return "\n".join(p.with_suffix(".err").read_text() for p in outs.values())
