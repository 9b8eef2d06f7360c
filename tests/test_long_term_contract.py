"""The long-term port contract against every adapter: the embedded store, the in-memory fake,
Memory Spaces on PostgreSQL (one host, and two taking calls in turn), and the fault-injecting
wrapper around each with no fault planned."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from mnemon_sm.adapters.sqlite import EmbeddedStore
from mnemon_sm.ports.long_term.port import LongTermStore
from mnemon_sm.ports.long_term.values import ForgetReceipt
from mnemon_sm.testing.contract import check_long_term_contract
from mnemon_sm.testing.faults import FaultInjector, FaultyPort
from mnemon_sm.testing.longterm import MemoryLongTermStore
from mnemon_sm.testing.memory import FakeClock
from mnemon_sm.testing.pg_cluster import Cluster
from mnemon_sm.testing.pg_spaces import HostsInTurn

Maker = Callable[[Path], Any]
_roots = itertools.count()

ADAPTERS: dict[str, Maker] = {
    "embedded": lambda root: EmbeddedStore(root, FakeClock()),
    "memory": lambda root: MemoryLongTermStore(FakeClock()),
}


@pytest.mark.parametrize("name", sorted(ADAPTERS))
@pytest.mark.parametrize("faulty", [False, True], ids=["plain", "faulty-no-faults"])
def test_adapter_keeps_the_long_term_contract(tmp_path: Path, name: str, faulty: bool) -> None:
    store = ADAPTERS[name](tmp_path)
    if faulty:
        store = FaultyPort("long_term", store, FaultInjector())
    check_long_term_contract(cast(LongTermStore, store))


@pytest.mark.parametrize("hosts", [1, 2], ids=["one-host", "two-hosts-in-turn"])
@pytest.mark.parametrize("faulty", [False, True], ids=["plain", "faulty-no-faults"])
def test_postgres_spaces_keep_the_long_term_contract(
    postgres_cluster: Cluster, tmp_path: Path, hosts: int, faulty: bool
) -> None:
    """Memory Spaces on PostgreSQL; with two hosts taking calls in turn, every call runs on
    a replica that must catch up with the other host's last call."""
    store: Any = HostsInTurn(
        postgres_cluster.url(f"contract-{next(_roots)}"), FakeClock(), tmp_path, hosts=hosts
    )
    try:
        checked = FaultyPort("long_term", store, FaultInjector()) if faulty else store
        check_long_term_contract(cast(LongTermStore, checked))
    finally:
        store.close()


def test_the_contract_can_fail() -> None:
    class ForgetsNothing(MemoryLongTermStore):
        def forget(self, space: str, insight_id: str) -> ForgetReceipt:
            self._active(space, insight_id)
            return ForgetReceipt(insight_id)  # claims it, does nothing

    with pytest.raises(AssertionError, match="forget"):
        check_long_term_contract(ForgetsNothing(FakeClock()))
