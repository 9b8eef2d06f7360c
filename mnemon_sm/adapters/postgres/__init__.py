"""The PostgreSQL backend: a storage root kept in a database, shared by hosts on many machines.

Theory of operation
-------------------
A root is named in a URL, ``postgresql://user@host/db?root=NAME``: several roots (tenants) share
one database. :class:`~mnemon_sm.adapters.postgres.backend.PgBackend` serves the ``Files`` and
``Locks`` ports of one root from two tables, so every flow that keeps its state in files (hot
memory, Project Documents, the maintenance journal and history, lifecycle state) runs on it
unchanged, with the same contracts and the same tests:

- a file is a row ``(root, path) -> bytes`` with a version drawn from one sequence (the stamp
  of ``read_if_changed``); a directory is a row too. Every call is one statement, hence one
  transaction: a rename moves the bytes and replaces the target atomically, an append extends
  them atomically. Statements commit with ``synchronous_commit = off``; ``fsync`` (and
  ``ensure_dir``) is the durable point: one statement that waits for the WAL flush, which
  covers every change committed before it.
- a lock is a session-level advisory lock on a 64-bit key of ``(root, name)``, held on a
  connection taken from the pool for as long as the lock is. The thread that took it makes its
  file calls on that same connection: if the server kills the session (or restarts), the lock is
  gone and so is the connection, so no write of a former holder can land after another process
  took the lock (fencing). The failed call raises ``StorageError``; the next call reconnects.

Memory Spaces live in the database too (:mod:`~mnemon_sm.adapters.postgres.spaces`): Mnemon's
tables per space, read and ranked through a replica on each host.

:mod:`~mnemon_sm.adapters.postgres.schema` creates and upgrades the tables on open and refuses a
schema newer than this library's.
"""

from mnemon_sm.adapters.postgres.backend import PgBackend, PgFiles, PgLocks
from mnemon_sm.adapters.postgres.spaces import PgSpaces
from mnemon_sm.adapters.postgres.url import is_postgres_url, parse_url, redacted

__all__ = [
    "PgBackend",
    "PgFiles",
    "PgLocks",
    "PgSpaces",
    "is_postgres_url",
    "parse_url",
    "redacted",
]
