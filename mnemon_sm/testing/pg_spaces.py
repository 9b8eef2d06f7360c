"""Several hosts on one root's Memory Spaces on PostgreSQL, taking calls in turn (tests).

:class:`HostsInTurn` is a ``LongTermStore`` made of ``n`` :class:`PgSpaces`, each with its own
backend (pool user) and replica directory, as hosts on different machines would have. Call
``k`` goes to host ``k mod n``, so with two hosts every read runs on a replica that must first
catch up with the write the other host just made, and every write on one that must catch up
before it allocates rowids and ids: the whole long-term contract and the stateful model then
check replication too.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mnemon_sm.adapters.postgres import PgBackend, PgSpaces
from mnemon_sm.ports import Clock
from mnemon_sm.ports.long_term.values import Capabilities

__all__ = ["HostsInTurn"]


class HostsInTurn:
    """``n`` hosts on the root at ``url``, replicas under ``cache``/host-<i>."""

    def __init__(
        self, url: str, clock: Clock, cache: Path, *, hosts: int = 2, **options: Any
    ) -> None:
        self.backends = [PgBackend(url) for _ in range(hosts)]
        self.hosts = [
            PgSpaces(backend, clock, cache=cache / f"host-{i}", **options)
            for i, backend in enumerate(self.backends)
        ]
        self._turn = itertools.count()

    @property
    def capabilities(self) -> Capabilities:
        return self.hosts[0].capabilities

    def next_host(self) -> PgSpaces:
        return self.hosts[next(self._turn) % len(self.hosts)]

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        method: Callable[..., Any] = getattr(self.next_host(), name)
        return method

    def close(self) -> None:
        for host in self.hosts:
            host.close()
        for backend in self.backends:
            backend.close()
