"""The PostgreSQL backend's Files and Locks ports against a real server.

The server is a throwaway cluster started by the tests themselves from the installed
binaries (:mod:`mnemon_sm.testing.pg_cluster`; Debian's package is installed when missing), so a
clean checkout needs no running service. No mock of the database anywhere: the hostile cases
are real ones (a session killed by the server, a server restarted under a held lock, a statement
timeout, a schema written by a newer release).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

from mnemon_sm.adapters.postgres import PgBackend, parse_url
from mnemon_sm.adapters.postgres.schema import SCHEMA_VERSION
from mnemon_sm.errors import InvalidInput, LockTimeout, StorageError
from mnemon_sm.testing.contract import check_files_contract, check_locks_contract
from mnemon_sm.testing.pg_cluster import Cluster

_names = itertools.count()


@pytest.fixture
def cluster(postgres_cluster: Cluster) -> Cluster:
    return postgres_cluster


def _root(cluster: Cluster) -> str:
    """A fresh root name: tests share the database, never a root."""
    return f"t{next(_names)}-{threading.get_ident() % 10_000}"


@pytest.fixture
def backend(cluster: Cluster) -> Iterator[PgBackend]:
    opened = PgBackend(cluster.url(_root(cluster)))
    try:
        yield opened
    finally:
        opened.close()


def test_files_contract(backend: PgBackend) -> None:
    check_files_contract(backend.files)


@pytest.mark.parametrize("name", ["runtime/.contract.lock", "runtime/.memories.lock"])
def test_locks_contract(cluster: Cluster, name: str) -> None:
    url = cluster.url(_root(cluster))
    first, second = PgBackend(url), PgBackend(url)
    try:
        check_locks_contract(first.locks, second.locks, name)
    finally:
        first.close()
        second.close()


def test_roots_of_one_database_are_apart(cluster: Cluster) -> None:
    one, two = PgBackend(cluster.url(_root(cluster))), PgBackend(cluster.url(_root(cluster)))
    try:
        for backend in (one, two):
            backend.files.ensure_dir("runtime")
        temp = one.files.write_temp("runtime/memories.json", b"one's")
        one.files.rename(temp, "runtime/memories.json")
        assert two.files.read("runtime/memories.json") is None
        assert two.files.list("runtime") == ()
        one.locks.acquire("runtime/.memories.lock", 1000)
        two.locks.acquire("runtime/.memories.lock", 100)  # another root's lock: not excluded
        two.locks.release("runtime/.memories.lock")
        one.locks.release("runtime/.memories.lock")
    finally:
        one.close()
        two.close()


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u@/db",
        "postgresql://u@/db?root=",
        "postgresql://u@/db?root=a&root=b",
        "postgresql://u@/db?root=../x",
        "postgresql://u@/db?root=-x",
        "postgresql://u@/db?root=" + "x" * 129,
        "mysql://u@/db?root=a",
    ],
)
def test_a_bad_root_url_is_refused(url: str) -> None:
    with pytest.raises(InvalidInput):
        parse_url(url)


def test_a_url_keeps_its_other_parameters() -> None:
    assert parse_url("postgresql://u@h:5/db?sslmode=require&root=team.a-1") == (
        "postgresql://u@h:5/db?sslmode=require",
        "team.a-1",
    )
    # a space stays percent-encoded (libpq does not read '+' as one)
    assert parse_url("postgresql://u@/db?options=-c%20a%3D1&root=r")[0].endswith(
        "?options=-c%20a%3D1"
    )


def test_a_server_that_cannot_be_reached_fails_the_open_at_once(cluster: Cluster) -> None:
    url = cluster.url("r").replace(f"port={cluster.port}", "port=1")
    with pytest.raises(StorageError, match="cannot open"):
        PgBackend(url)


def test_a_schema_newer_than_the_library_is_refused(cluster: Cluster) -> None:
    database = f"newer{next(_names)}"
    cluster.create_database(database)
    url = cluster.url("r", dbname=database)
    PgBackend(url).close()
    cluster.psql(f"UPDATE mnemon_schema SET version = {SCHEMA_VERSION + 1}", dbname=database)
    with pytest.raises(StorageError, match="newer"):
        PgBackend(url)
    cluster.psql(f"UPDATE mnemon_schema SET version = {SCHEMA_VERSION}", dbname=database)
    PgBackend(url).close()


def test_two_hosts_opening_a_new_database_at_once_migrate_it_once(cluster: Cluster) -> None:
    database = f"race{next(_names)}"
    cluster.create_database(database)
    url = cluster.url("r", dbname=database)
    errors: list[BaseException] = []
    opened: list[PgBackend] = []

    def open_one() -> None:
        try:
            opened.append(PgBackend(url))
        except BaseException as exc:  # a test thread reports what reached it
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    for backend in opened:
        backend.close()
    assert errors == [] and len(opened) == 4
    rows = cluster.psql("SELECT version FROM mnemon_schema", dbname=database).split()
    assert rows == [str(SCHEMA_VERSION)]


def test_a_killed_lock_session_fences_its_holder_and_the_next_call_reconnects(
    cluster: Cluster,
) -> None:
    """The server kills the session that holds the lock: the lock is free at once for
    another host, every later write of the old holder fails (it would otherwise land after
    the other host's), releasing it raises nothing, and the next lock works again."""
    url = cluster.url(_root(cluster))
    holder, other = PgBackend(url), PgBackend(url)
    try:
        holder.files.ensure_dir("runtime")
        holder.locks.acquire("runtime/.memories.lock", 1000)
        temp = holder.files.write_temp("runtime/memories.json", b"before")
        conn = holder._bound[threading.get_ident()][-1]
        cluster.psql(f"SELECT pg_terminate_backend({conn.info.backend_pid})")
        other.locks.acquire("runtime/.memories.lock", 5000)  # free once the session died
        with pytest.raises(StorageError):
            holder.files.rename(temp, "runtime/memories.json")
        with pytest.raises(StorageError):
            holder.files.write_temp("runtime/memories.json", b"late")
        assert other.files.read("runtime/memories.json") is None
        holder.locks.release("runtime/.memories.lock")
        other.locks.release("runtime/.memories.lock")
        holder.locks.acquire("runtime/.memories.lock", 1000)
        temp = holder.files.write_temp("runtime/memories.json", b"after")
        holder.files.rename(temp, "runtime/memories.json")
        holder.locks.release("runtime/.memories.lock")
        assert other.files.read("runtime/memories.json") == b"after"
    finally:
        holder.close()
        other.close()


def test_a_server_restart_fails_calls_in_flight_and_the_next_ones_reconnect(
    cluster: Cluster,
) -> None:
    backend = PgBackend(cluster.url(_root(cluster)))
    try:
        backend.files.ensure_dir("runtime")
        backend.files.append("runtime/log", b"one\n")
        backend.files.fsync("runtime/log")  # durable: survives the crash below
        backend.locks.acquire("runtime/.memories.lock", 1000)
        cluster.restart(immediate=True)
        with pytest.raises(StorageError):
            backend.files.append("runtime/log", b"lost\n")  # the lock's session died
        backend.locks.release("runtime/.memories.lock")  # nothing to release any more
        failures = 0
        for _ in range(3):  # a pooled connection may fail once; then the pool reconnects
            try:
                backend.files.append("runtime/log", b"two\n")
                break
            except StorageError:
                failures += 1
        assert failures <= 1, failures
        assert backend.files.read("runtime/log") == b"one\ntwo\n"
        backend.locks.acquire("runtime/.memories.lock", 1000)
        backend.locks.release("runtime/.memories.lock")
    finally:
        backend.close()


def test_a_statement_timeout_is_a_storage_error_and_changes_nothing(cluster: Cluster) -> None:
    root = _root(cluster)
    url = cluster.url(root).replace("?", "?options=-c%20statement_timeout%3D100&", 1)
    backend = PgBackend(cluster.url(root))
    slow = PgBackend(url)
    try:
        backend.files.ensure_dir("runtime")
        with (
            psycopg.connect(cluster.conninfo(), autocommit=True) as blocker,
            blocker.transaction(force_rollback=True),  # holds the row the append needs
        ):
            blocker.execute(
                "INSERT INTO mnemon_files VALUES (%s, 'runtime/log', 'runtime', 'log', "
                "false, 'x', 0)",
                [root],
            )
            with pytest.raises(StorageError, match="statement timeout"):
                slow.files.append("runtime/log", b"y")
        assert backend.files.read("runtime/log") is None
    finally:
        slow.close()
        backend.close()


def test_a_lock_not_granted_in_time_times_out_across_threads(backend: PgBackend) -> None:
    backend.locks.acquire("runtime/.memories.lock", 1000)
    outcome: list[BaseException | None] = []

    def other() -> None:
        try:
            backend.locks.acquire("runtime/.memories.lock", 50)
            outcome.append(None)
        except BaseException as exc:  # a test thread reports what reached it
            outcome.append(exc)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join(10)
    backend.locks.release("runtime/.memories.lock")
    assert len(outcome) == 1 and isinstance(outcome[0], LockTimeout)


def test_a_flushed_write_survives_a_crash_and_an_unflushed_one_is_whole_or_gone(
    cluster: Cluster,
) -> None:
    """Port calls commit without waiting for the WAL flush, like a file written without
    ``fsync``; ``fsync`` (of any path, or of a directory) waits for everything before it. A
    crash (immediate stop) keeps the flushed write; the unflushed one is there whole or not
    at all (the server's WAL writer may have written it meanwhile: a full WAL page wakes it)."""
    backend = PgBackend(cluster.url(_root(cluster)))
    try:
        backend.files.ensure_dir("runtime")
        temp = backend.files.write_temp("runtime/kept", b"flushed")
        backend.files.rename(temp, "runtime/kept")
        backend.files.fsync("runtime")
        temp = backend.files.write_temp("runtime/lost", b"not flushed")
        backend.files.rename(temp, "runtime/lost")
        assert backend.files.read("runtime/lost") == b"not flushed"  # visible at once
        cluster.restart(immediate=True)
        for attempt in range(2):  # the pool's old connection may fail once
            try:
                kept = backend.files.read("runtime/kept")
                break
            except StorageError:
                if attempt:
                    raise
        assert kept == b"flushed"
        assert backend.files.read("runtime/lost") in (None, b"not flushed")
    finally:
        backend.close()


def test_a_temporary_file_that_vanished_fails_its_rename(cluster: Cluster) -> None:
    """The fsync of a temporary file this root wrote makes no call; had another host removed
    the file meanwhile (as an opener clearing stale temporaries would), the rename says so."""
    url = cluster.url(_root(cluster))
    mine, other = PgBackend(url), PgBackend(url)
    try:
        mine.files.ensure_dir("runtime")
        temp = mine.files.write_temp("runtime/memories.json", b"x")
        other.files.remove(temp)
        mine.files.fsync(temp)
        with pytest.raises(StorageError):
            mine.files.rename(temp, "runtime/memories.json")
        assert mine.files.read("runtime/memories.json") is None
    finally:
        mine.close()
        other.close()


def test_a_killed_test_run_leaves_no_server_behind() -> None:
    """A process that started a throwaway server and died without stopping it (SIGKILL):
    the cluster's watchdog stops the server and removes its directory."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    code = (
        "import os\n"
        "from mnemon_sm.testing.pg_cluster import Cluster\n"
        "print(Cluster.start().base, flush=True)\n"
        "os.kill(os.getpid(), 9)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    base = Path(done.stdout.strip())
    assert base.name.startswith("mnemon-pg-"), done.stderr
    deadline = time.monotonic() + 30
    while base.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not base.exists(), "the server's directory is still there"
    running = subprocess.run(["pgrep", "-f", f"postgres -D {base}"], capture_output=True)
    assert running.returncode == 1, "the server is still running"


def test_the_roots_of_one_database_share_one_pool(cluster: Cluster) -> None:
    """A host serving twenty tenants keeps one pool, and a handful of connections, for all of
    them; the last root to close closes it; a closed root refuses calls with a typed error."""
    backends = [PgBackend(cluster.url(_root(cluster))) for _ in range(20)]
    try:
        for backend in backends:
            backend.files.ensure_dir("runtime")
            backend.locks.acquire("runtime/.memories.lock", 1000)
            backend.files.append("runtime/log", b"x")
            backend.locks.release("runtime/.memories.lock")
        assert len({id(b._pool) for b in backends}) == 1
        count = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'mnemon-sm'"
        assert int(cluster.psql(count)) <= 4
    finally:
        for backend in backends:
            backend.close()
    deadline = time.monotonic() + 10
    while int(cluster.psql(count)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert int(cluster.psql(count)) == 0
    with pytest.raises(StorageError, match="closed"):
        backends[0].files.read("runtime/log")
