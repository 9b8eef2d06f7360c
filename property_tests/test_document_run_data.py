"""A document request's data travels with its events: nothing of it stays on the flows.

Each request of ``test_document_faults`` (an archiving create, a manual archive, an update, a
plain create), and a search, is run once unfaulted to count its port calls. It is then
repeated once per call index and per fault: the call fails with a ``StorageError`` (the step
refuses, or the call was bookkeeping and the request succeeds) or the process "crashes" there
(``SimulatedCrash``, a ``BaseException``: the engine fires ``abort``). Whatever the end:

- INV-DOC-9: both document flows hold exactly the attributes, and the very values, they held
  right after opening (their state apart), they rest in ``idle``, and no worker's tool box is
  reachable from the root, the engine's queues included.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from test_document_faults import LIMIT, REQUESTS, ROOT
from test_document_faults import seeded as faults_seeded

from mnemon_sm import Config, MemoryRoot
from mnemon_sm.errors import MnemonError
from mnemon_sm.ports import Ports
from mnemon_sm.testing.faults import Fault, FaultInjector, SimulatedCrash, faulty_ports
from mnemon_sm.testing.maintenance import held_run_data

RUN_DROPPED = "INV-DOC-9"
CONFIG = Config(durability="off", documents_active_limit=LIMIT)  # no fsync: fewer calls

Request = Callable[[Any, list[str]], Any]
KINDS: dict[str, Request] = {**REQUESTS, "search": lambda d, ids: d.search("Runbook")}


def seeded() -> tuple[Ports, list[str]]:
    return faults_seeded(CONFIG)


def _held(root: MemoryRoot) -> list[dict[str, Any]]:
    """The document flows' attributes, their state left out."""
    contexts = (root.documents._flow, root.documents._search)
    return [{k: v for k, v in vars(c).items() if k != "state"} for c in contexts]


@pytest.mark.parametrize("kind", list(KINDS))
def test_no_fault_anywhere_leaves_run_data_on_the_flows(kind: str) -> None:
    ports, ids = seeded()
    injector = FaultInjector()
    root = MemoryRoot.open(ROOT, CONFIG, ports=faulty_ports(ports, injector))
    start = injector.count
    KINDS[kind](root.documents, ids)
    calls = injector.count - start
    assert calls > 3
    ends: Counter[str] = Counter()
    for k in range(calls):
        for fault in ("fail", "crash_before"):
            ports, ids = seeded()
            injector = FaultInjector()
            root = MemoryRoot.open(ROOT, CONFIG, ports=faulty_ports(ports, injector))
            opened = _held(root)
            at = injector.count + k
            injector.faults[at] = Fault(at, fault)  # type: ignore[arg-type]
            try:
                KINDS[kind](root.documents, ids)
            except (MnemonError, SimulatedCrash) as exc:
                ends[type(exc).__name__] += 1
                exc.with_traceback(None)  # the frames it went through are the caller's
            else:
                ends["answered"] += 1
            where = (RUN_DROPPED, kind, k, fault, injector.names[at])
            now = _held(root)
            for before, after in zip(opened, now, strict=True):
                assert after.keys() == before.keys(), where
                assert all(after[name] is before[name] for name in before), where
            flows = (root.documents._flow, root.documents._search)
            assert [f.state for f in flows] == ["idle", "idle"], where
            assert held_run_data(root) == [], where
    # Not vacuous: every call index crashed, and failed calls made steps refuse.
    assert ends["SimulatedCrash"] == calls and ends["StorageError"] >= 1, ends
