"""A throwaway PostgreSQL server for tests and benchmarks, made from the installed binaries.

``Cluster.start()`` runs ``initdb`` in a new temporary directory and ``pg_ctl start`` on a
Unix socket in that directory (no TCP port), so a clean checkout needs no running service.
When the binaries are missing and the process runs as root on Debian, it installs the
``postgresql`` package first (tests install what they need; nothing is installed by hand).
The server refuses to run as root: then the cluster belongs to the ``postgres`` user and
every command runs through ``runuser``.

The cluster can be stopped the hard way and started again (``restart(immediate=True)``: a
server crash, WAL replay included), for the fault tests; ``psql`` runs any SQL as the
superuser (``pg_terminate_backend`` of a client's session, say).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from mnemon_sm.testing.debian import ensure_installed

__all__ = ["Cluster", "server_binaries"]

_USER = "postgres"  # who owns the cluster when we run as root


def server_binaries(install: bool = True) -> Path:
    """The directory of ``initdb`` and ``pg_ctl``; installs Debian's ``postgresql`` package
    when they are missing and ``install`` is set and we are root. Raises RuntimeError."""
    found = _find_binaries()
    if found is None and install:
        ensure_installed(("postgresql",), lambda: _find_binaries() is not None)
        found = _find_binaries()
    if found is None:
        raise RuntimeError(
            "PostgreSQL server binaries (initdb, pg_ctl) not found; install the postgresql "
            "package (Debian: apt-get install postgresql)"
        )
    return found


def _find_binaries() -> Path | None:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    which = shutil.which("initdb")
    if which:
        candidates.append(str(Path(which).parent))
    for directory in candidates:
        if all((Path(directory) / tool).exists() for tool in ("initdb", "pg_ctl", "psql")):
            return Path(directory)
    return None


_WATCHDOG = """
import os, shutil, subprocess, sys
bindir, data, base = sys.argv[1:4]
sys.stdin.buffer.read()  # returns when the process that started the cluster is gone
command = [os.path.join(bindir, "pg_ctl"), "stop", "-D", data, "-m", "immediate"]
if os.geteuid() == 0:
    command = ["runuser", "-u", "postgres", "--", *command]
subprocess.run(command, capture_output=True)
shutil.rmtree(base, ignore_errors=True)
"""


class Cluster:
    """One running throwaway server (see the module)."""

    def __init__(self, bindir: Path, base: Path, *, fsync: bool) -> None:
        self.bindir, self.base = bindir, base
        self.data = base / "data"
        self.socket_dir = base
        self.port = 5432
        self.user = "mnemon"
        self.fsync = fsync
        self._watchdog: subprocess.Popen[bytes] | None = None

    @classmethod
    def start(cls, *, fsync: bool = False) -> Cluster:
        """Create and start a cluster. ``fsync=False`` (tests) skips the server's flushes: a
        server crash is still recovered from the WAL it wrote (the operating system keeps the
        pages), and WAL committed without a flush is written every 10 s (or when a page fills), so
        a crash usually loses it; benchmarks pass True so a commit costs what it costs in
        production."""
        bindir = server_binaries()
        base = Path(tempfile.mkdtemp(prefix="mnemon-pg-"))
        cluster = cls(bindir, base, fsync=fsync)
        try:
            cluster._initdb()
            cluster.run_server("start")
            cluster._watch()
        except BaseException:
            cluster.destroy()
            raise
        return cluster

    # -- addresses -------------------------------------------------------------------------

    def conninfo(self, dbname: str = "postgres") -> str:
        return f"host={self.socket_dir} port={self.port} user={self.user} dbname={dbname}"

    def url(self, root: str, dbname: str = "postgres") -> str:
        """A root's URL, as ``MemoryRoot.open`` takes it."""
        return (
            f"postgresql://{self.user}@/{dbname}?host={self.socket_dir}&port={self.port}"
            f"&root={root}"
        )

    def create_database(self, name: str) -> None:
        self.psql(f'CREATE DATABASE "{name}"')

    # -- control ---------------------------------------------------------------------------

    def run_server(self, action: str, *extra: str) -> None:
        log = self.base / "server.log"
        self._run(
            str(self.bindir / "pg_ctl"),
            action,
            "-D",
            str(self.data),
            "-l",
            str(log),
            "-w",
            "-t",
            "60",
            *extra,
        )

    def restart(self, *, immediate: bool = False) -> None:
        """Stop (``immediate``: without a checkpoint, as a crash would) and start again."""
        self.run_server("stop", "-m", "immediate" if immediate else "fast")
        self.run_server("start")

    def psql(self, sql: str, dbname: str = "postgres") -> str:
        result = self._run(
            str(self.bindir / "psql"),
            "-X",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            str(self.socket_dir),
            "-p",
            str(self.port),
            "-U",
            self.user,
            "-d",
            dbname,
            "-c",
            sql,
        )
        return result

    def destroy(self) -> None:
        with contextlib.suppress(Exception):
            if (self.data / "postmaster.pid").exists():
                self.run_server("stop", "-m", "immediate")
        shutil.rmtree(self.base, ignore_errors=True)
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None:
            watchdog.kill()
            watchdog.wait()
            if watchdog.stdin is not None:
                watchdog.stdin.close()

    def _watch(self) -> None:
        """Start a watchdog that stops the server and removes its directory when this process
        dies without calling :meth:`destroy` (a killed test run leaves no server behind): it
        waits for the end of a pipe only this process holds."""
        self._watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(self.bindir), str(self.data), str(self.base)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # not killed with our process group
        )

    # -- helpers ---------------------------------------------------------------------------

    def _initdb(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.base, _USER, _USER)
        os.chmod(self.base, 0o700)
        self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            self.user,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
            "--no-instructions",
        )
        settings = [
            "listen_addresses = ''",
            f"unix_socket_directories = '{self.socket_dir}'",
            f"port = {self.port}",
            f"fsync = {'on' if self.fsync else 'off'}",
            # Tests: what was committed without a flush mostly stays in the server's WAL buffers
            # (lost in a crash) until a flush or a full WAL page, not only for 200 ms.
            f"wal_writer_delay = {'200ms' if self.fsync else '10s'}",
            "synchronous_commit = on",
            "max_connections = 200",
            "shared_buffers = 64MB",
        ]
        with open(self.data / "postgresql.conf", "a", encoding="utf-8") as conf:
            conf.write("\n".join(settings) + "\n")

    def _run(self, *argv: str) -> str:
        command = list(argv)
        if os.geteuid() == 0:
            command = ["runuser", "-u", _USER, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, cwd=self.base)
        if done.returncode != 0:
            raise RuntimeError(
                f"{Path(argv[0]).name} {' '.join(argv[1:2])} failed ({done.returncode}): "
                f"{done.stderr.strip() or done.stdout.strip()}"
            )
        return done.stdout
