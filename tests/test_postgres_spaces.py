"""Memory Spaces on PostgreSQL under the hostile cases: other hosts, crashes between the two
commits, killed sessions, a restarted server, deleted caches, stale replicas, a read-only
user, and writers racing.

The oracle of every test: what the database holds (read with SQL, not through the library),
what a fresh replica loaded from it answers, and what the embedded store answers to the same
calls in a directory (the twin)."""

from __future__ import annotations

import itertools
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from mnemon_sm.adapters.postgres import PgBackend, PgSpaces
from mnemon_sm.adapters.postgres import spaces as pg_spaces
from mnemon_sm.adapters.sqlite import EmbeddedStore
from mnemon_sm.errors import LockTimeout, MnemonError, StorageError, UnknownSpace
from mnemon_sm.ports.long_term.values import DraftEdge, DraftInsight, ImportDraft
from mnemon_sm.testing.embed import FakeEmbedder
from mnemon_sm.testing.memory import FakeClock
from mnemon_sm.testing.pg_cluster import Cluster

_names = itertools.count()


@pytest.fixture
def url(postgres_cluster: Cluster) -> str:
    return postgres_cluster.url(f"pg-spaces-{next(_names)}")


@pytest.fixture
def backend(url: str) -> Iterator[PgBackend]:
    made = PgBackend(url)
    yield made
    made.close()


def _host(backend: PgBackend, cache: Path, **options: Any) -> PgSpaces:
    return PgSpaces(backend, FakeClock(), cache=cache, **options)


def _db_rows(cluster: Cluster, root: str) -> dict[str, int]:
    """Row counts of the space tables of ``root``, read with SQL."""
    out = {}
    for table in ("insights", "edges", "oplog", "space_deletions"):
        found = cluster.psql(f"SELECT count(*) FROM mnemon_{table} WHERE root = '{root}'")
        out[table] = int(found.strip())
    return out


def _contents(store: PgSpaces | EmbeddedStore, space: str = "s") -> list[str]:
    return sorted(item.content for item in store.list(space))


def test_two_hosts_see_each_others_writes_and_hold_the_same_rows(
    backend: PgBackend, tmp_path: Path
) -> None:
    a, b = _host(backend, tmp_path / "a"), _host(backend, tmp_path / "b")
    a.create_space("s")
    first = a.remember("s", "Alice maintains the billing queue", entities=("Alice",))
    second = b.remember("s", "Alice moved the queue to Kafka because of load", entities=("Alice",))
    assert second.edges_created["entity"] == 1  # b saw a's insight before it wrote
    a.link("s", first.id, second.id, edge_type="semantic", weight=0.4)
    b.forget("s", first.id)
    assert a.graph("s") == b.graph("s")
    assert _contents(a) == _contents(b) == ["Alice moved the queue to Kafka because of load"]
    fresh = _host(backend, tmp_path / "fresh")
    assert fresh.graph("s") == a.graph("s")
    assert fresh.status("s").oplog_count == a.status("s").oplog_count
    for store in (a, b, fresh):
        store.close()


def _twin_calls(store: Any) -> list[object]:
    """The same calls on either store; ids are replaced by their order of appearance."""
    names: dict[str, str] = {}

    def name(value: object) -> object:
        if isinstance(value, str) and len(value) == 36 and value.count("-") == 4:
            return names.setdefault(value, f"id{len(names)}")
        if isinstance(value, dict):
            return {k: name(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [name(v) for v in value]
        return value

    def answer(call: Any) -> object:
        try:
            result = call()
        except MnemonError as exc:
            return type(exc).__name__
        if attrs.has(type(result)):
            return name(attrs.asdict(result))
        if isinstance(result, tuple):
            return name([attrs.asdict(item) for item in result])
        return name(result)

    store.create_space("s")
    ids: list[str] = []
    out: list[object] = []
    facts = [
        ("Redis caches the session tokens", ("Redis",)),
        ("Deploys roll back when the health check fails", ()),
        ("Redis runs on the cache host because of memory limits", ("Redis",)),
        ("Lunch orders go to the billing queue", ()),
        ("Redis caches the session tokens", ("Redis",)),  # a duplicate
    ]
    for content, entities in facts:
        receipt = store.remember("s", content, entities=entities, importance=2 + len(ids) % 3)
        ids.append(receipt.id)
        out.append(name(attrs.asdict(receipt)))
    calls = [
        lambda: store.recall("s", "redis cache"),
        lambda: store.recall("s", "redis", mode="smart"),
        lambda: store.recall("s", "cache", mode="keyword", readonly=True),
        lambda: store.recall("s", "queue", mode="basic"),
        lambda: store.link("s", ids[0], ids[3], edge_type="causal", weight=0.8, reason="r"),
        lambda: store.related("s", ids[0], depth=2),
        lambda: store.forget("s", ids[1]),
        lambda: store.forget("s", ids[1]),  # already forgotten
        lambda: store.import_draft(
            "s",
            ImportDraft(
                insights=(
                    DraftInsight("Kafka replaced the billing queue", entities=("Kafka",)),
                    DraftInsight("Redis caches the session tokens"),
                ),
                edges=(DraftEdge(0, 1, "semantic", 0.5, "same system"),),
            ),
        ),
        lambda: store.list("s"),
        lambda: store.graph("s"),
        lambda: store.insights("s", [ids[0], ids[1], "nope"]),
    ]
    out += [answer(call) for call in calls]
    status = store.status("s")
    out.append((status.total_insights, status.edge_count, status.oplog_count))
    return out


def test_a_space_on_postgres_answers_what_the_embedded_store_answers(
    postgres_cluster: Cluster, url: str, tmp_path: Path
) -> None:
    backend = PgBackend(url)
    try:
        on_pg = _host(backend, tmp_path / "cache")
        in_dir = EmbeddedStore(tmp_path / "dir", FakeClock())
        assert _twin_calls(on_pg) == _twin_calls(in_dir)
        on_pg.close()
        in_dir.close()
    finally:
        backend.close()


def test_a_replica_that_missed_its_own_commit_pulls_it(
    backend: PgBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash after the database committed and before the replica did (any BaseException
    there): the write is in the database, and the host's next call has it, once."""
    a = _host(backend, tmp_path / "a")
    a.create_space("s")
    a.remember("s", "first fact")
    original = pg_spaces.PgUpstream.write

    def committed_then_interrupted(self: Any, space: str, tx: Any, body: Any) -> Any:
        original(self, space, tx, body)
        raise KeyboardInterrupt  # the replica's transaction rolls back

    monkeypatch.setattr(pg_spaces.PgUpstream, "write", committed_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        a.remember("s", "second fact")
    monkeypatch.undo()
    assert _contents(a) == ["first fact", "second fact"]
    again = a.remember("s", "second fact")
    assert again.action == "skipped"  # the replica knew it before allocating anything
    assert a.graph("s") == _host(backend, tmp_path / "fresh").graph("s")
    a.close()


def test_a_write_whose_session_is_killed_changes_neither_side(
    postgres_cluster: Cluster, backend: PgBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = _host(backend, tmp_path / "a")
    a.create_space("s")
    a.remember("s", "kept fact")
    before = _db_rows(postgres_cluster, backend.root)
    original = pg_spaces.replica.captured

    def kill_the_writer(conn: Any) -> Any:
        postgres_cluster.psql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = 'mnemon-sm' AND state LIKE 'idle in transaction%'"
        )
        return original(conn)

    monkeypatch.setattr(pg_spaces.replica, "captured", kill_the_writer)
    with pytest.raises(StorageError):
        a.remember("s", "lost fact")
    monkeypatch.undo()
    assert _db_rows(postgres_cluster, backend.root) == before
    assert _contents(a) == ["kept fact"]  # the replica rolled back too
    a.remember("s", "next fact")  # the next call reconnects
    assert _contents(_host(backend, tmp_path / "fresh")) == ["kept fact", "next fact"]
    a.close()


def test_a_space_deleted_and_created_again_elsewhere_is_loaded_again(
    backend: PgBackend, tmp_path: Path
) -> None:
    a, b = _host(backend, tmp_path / "a"), _host(backend, tmp_path / "b")
    a.create_space("s")
    a.remember("s", "from the first incarnation")
    b.delete_space("s")
    with pytest.raises(UnknownSpace):
        a.list("s")
    assert not (tmp_path / "a" / "data" / "s").exists()  # its replica went with it
    b.create_space("s")
    b.remember("s", "from the second incarnation")
    assert _contents(a) == ["from the second incarnation"]
    for store in (a, b):
        store.close()


def test_a_stale_replica_of_an_earlier_incarnation_is_replaced(
    backend: PgBackend, tmp_path: Path
) -> None:
    a, b = _host(backend, tmp_path / "a"), _host(backend, tmp_path / "b")
    a.create_space("s")
    a.remember("s", "old")
    a.close()  # a is away while b deletes and creates the space again
    b.delete_space("s")
    b.create_space("s")
    b.remember("s", "new")
    back = _host(backend, tmp_path / "a")
    assert _contents(back) == ["new"]
    for store in (back, b):
        store.close()


def test_a_replica_past_the_tombstone_horizon_loads_in_full_and_tombstones_stay_bounded(
    postgres_cluster: Cluster, backend: PgBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_spaces, "TOMBSTONES_KEPT", 6)
    monkeypatch.setattr(pg_spaces, "TOMBSTONE_SWEEP", 2)
    loads: list[str] = []
    load = pg_spaces.PgUpstream._load

    def counted(self: Any, tx: Any, pg: Any, space: str, head: Any) -> None:
        loads.append(space)
        load(self, tx, pg, space, head)

    monkeypatch.setattr(pg_spaces.PgUpstream, "_load", counted)
    a, b = _host(backend, tmp_path / "a"), _host(backend, tmp_path / "b")
    a.create_space("s")
    made = [a.remember("s", f"fact number {i}", entities=("E",)).id for i in range(6)]
    assert len(a.list("s")) == 6 and len(b.list("s")) == 6
    assert len(loads) == 2  # each replica's first load (a new space is loaded as empty)
    b.forget("s", made[0])
    assert len(a.list("s")) == 5 and len(loads) == 2  # one change behind: row by row
    tombstones = _db_rows(postgres_cluster, backend.root)["space_deletions"]
    assert tombstones > 0  # the forgotten insight's edges
    for node in made[1:4]:
        b.forget("s", node)
    for i in range(8):
        b.remember("s", f"later fact {i}")
    assert a.graph("s") == b.graph("s")
    assert len(loads) == 3  # a was past the horizon: loaded in full
    head, horizon = postgres_cluster.psql(
        f"SELECT seq || ' ' || horizon FROM mnemon_spaces WHERE root = '{backend.root}'"
    ).split()
    assert int(horizon) == int(head) - int(head) % 2 - 6
    oldest = postgres_cluster.psql(
        f"SELECT coalesce(min(seq), {head}) FROM mnemon_space_deletions"
        f" WHERE root = '{backend.root}'"
    )
    assert int(oldest) > int(horizon)  # swept: at most KEPT + SWEEP changes' tombstones
    for store in (a, b):
        store.close()


def test_a_deleted_cache_is_loaded_again(backend: PgBackend, tmp_path: Path) -> None:
    a = _host(backend, tmp_path / "a")
    a.create_space("s")
    a.remember("s", "survives its cache")
    graph = a.graph("s")
    a.close()
    shutil.rmtree(tmp_path / "a")
    again = _host(backend, tmp_path / "a")
    assert again.graph("s") == graph
    again.close()


def test_a_read_only_host_reads_and_changes_nothing_in_the_database(
    postgres_cluster: Cluster, backend: PgBackend, tmp_path: Path
) -> None:
    writer = _host(backend, tmp_path / "w")
    writer.create_space("s")
    writer.remember("s", "the only fact")
    before = _db_rows(postgres_cluster, backend.root)
    reader = _host(backend, tmp_path / "r", readonly=True)
    assert [h.insight.content for h in reader.recall("s", "fact", readonly=True).hits] == [
        "the only fact"
    ]
    for write in (
        lambda: reader.remember("s", "refused"),
        lambda: reader.recall("s", "fact"),  # counting an access is a write
        lambda: reader.create_space("t"),
        lambda: reader.delete_space("s"),
    ):
        with pytest.raises(StorageError, match="read-only"):
            write()
    assert _db_rows(postgres_cluster, backend.root) == before
    assert reader.spaces() == ("s",)
    for store in (writer, reader):
        store.close()


def test_hosts_racing_on_one_space_store_every_write_once(
    postgres_cluster: Cluster, url: str, tmp_path: Path
) -> None:
    backends = [PgBackend(url) for _ in range(2)]
    hosts = [_host(b, tmp_path / f"h{i}") for i, b in enumerate(backends)]
    hosts[0].create_space("s")
    errors: list[BaseException] = []

    def writer(host: PgSpaces, tag: str) -> None:
        try:
            for i in range(15):
                host.remember("s", f"{tag} wrote fact {i}", entities=("Shared",))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=writer, args=(hosts[i % 2], f"thread {i}")) for i in range(6)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    expected = sorted(f"thread {t} wrote fact {i}" for t in range(6) for i in range(15))
    assert _contents(hosts[0]) == _contents(hosts[1]) == expected
    assert hosts[0].graph("s") == hosts[1].graph("s")
    root = url.rsplit("root=", 1)[1]
    assert _db_rows(postgres_cluster, root)["insights"] == 90
    for host in hosts:
        host.close()
    for made in backends:
        made.close()


def test_a_space_locked_by_another_host_times_out_and_changes_nothing(
    postgres_cluster: Cluster, backend: PgBackend, tmp_path: Path
) -> None:
    from mnemon_sm.adapters.postgres import backend as driver

    a = _host(backend, tmp_path / "a", lock_timeout_ms=200)
    a.create_space("s")
    a.remember("s", "before the lock")
    before = _db_rows(postgres_cluster, backend.root)
    with driver.psycopg.connect(postgres_cluster.conninfo()) as other:
        other.execute(
            "SELECT 1 FROM mnemon_spaces WHERE root = %s AND space = 's' FOR UPDATE",
            [backend.root],
        )
        with pytest.raises(LockTimeout):
            a.remember("s", "while locked")
        assert [i.content for i in a.list("s")] == ["before the lock"]  # reads go on
    assert _db_rows(postgres_cluster, backend.root) == before
    a.remember("s", "after the lock")
    assert _contents(a) == ["after the lock", "before the lock"]
    a.close()


def test_a_server_restart_between_calls_is_survived(
    postgres_cluster: Cluster, backend: PgBackend, tmp_path: Path
) -> None:
    a = _host(backend, tmp_path / "a")
    a.create_space("s")
    a.remember("s", "before the restart")
    postgres_cluster.restart(immediate=True)
    for attempt in range(3):  # idle pooled connections fail once each, then reconnect
        try:
            a.remember("s", "after the restart")
            break
        except StorageError:
            assert attempt < 2
    assert _contents(_host(backend, tmp_path / "fresh")) == [
        "after the restart",
        "before the restart",
    ]
    a.close()


def test_threads_first_using_a_space_on_a_new_host_share_one_replica(
    backend: PgBackend, tmp_path: Path
) -> None:
    """Regression: a thread making the missing replica used to drop one another thread had
    just made and was opening ("no such file")."""
    _host(backend, tmp_path / "writer").create_space("s")
    for round_ in range(5):
        host = _host(backend, tmp_path / f"new-{round_}")
        start = threading.Barrier(8)
        errors: list[BaseException] = []

        def first_call(
            host: PgSpaces = host,
            start: threading.Barrier = start,
            errors: list[BaseException] = errors,
        ) -> None:
            start.wait()
            try:
                host.list("s")
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=first_call) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        host.close()


def test_vectors_one_host_computed_are_fetched_by_the_others(
    postgres_cluster: Cluster, backend: PgBackend, tmp_path: Path
) -> None:
    """The embedder's vectors are shared through the database: a host embeds a text once,
    the others fetch its vector instead of running their model on it."""
    ours, theirs = FakeEmbedder(), FakeEmbedder()
    a = _host(backend, tmp_path / "a", embedder=ours)
    b = _host(backend, tmp_path / "b", embedder=theirs)
    a.create_space("s")
    for i in range(5):
        a.remember("s", f"deploy note {i}: the canary goes first")
    assert a.embed_missing("s") == 5
    assert b.embed_missing("s") == 0 and theirs.calls == []  # fetched, not computed
    shared = int(
        postgres_cluster.psql(f"SELECT count(*) FROM mnemon_vectors WHERE root = '{backend.root}'")
    )
    assert shared == 5
    asked = b.recall("s", "canary deploy", readonly=True)
    assert theirs.calls == [("canary deploy",)]  # only the query: the insights' vectors came
    assert asked == a.recall("s", "canary deploy", readonly=True)  # the same vectors, ranks
    b.remember("s", "rollbacks need a second reviewer")
    b.recall("s", "second reviewer", readonly=True)  # b embeds its new insight, and shares it
    before = list(ours.calls)
    a.recall("s", "second reviewer", readonly=True)
    assert ours.calls == [*before, ("second reviewer",)]  # a fetched it: only the query
    reader = _host(backend, tmp_path / "r", embedder=FakeEmbedder(), readonly=True)
    reader.recall("s", "canary", readonly=True)
    assert (
        int(
            postgres_cluster.psql(
                f"SELECT count(*) FROM mnemon_vectors WHERE root = '{backend.root}'"
            )
        )
        == 6
    )  # a read-only host shares nothing (and needed nothing: all were there)
    for store in (a, b, reader):
        store.close()
