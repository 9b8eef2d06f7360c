"""The flow contexts of a root, by flow name: for tests that drive or inspect every flow (the
illegal-event table, the abort table, port probes).

Each entry is a callable so that asking for one flow builds nothing else: the lifecycle's
context exists only once an agent is asked for (``agent`` names it).
"""

from __future__ import annotations

from collections.abc import Callable

from mnemon_sm.engine.context import FlowContext
from mnemon_sm.root import MemoryRoot

__all__ = ["flow_contexts"]


def flow_contexts(root: MemoryRoot, agent: str = "agent") -> dict[str, Callable[[], FlowContext]]:
    """``{flow name: a callable returning its context in root}``, for every flow."""
    lt = root.long_term
    return {
        "hot_memory_mutation": lambda: root._flow,
        "hot_memory_maintenance": lambda: root._maintenance,
        "document_mutation": lambda: root.documents._flow,
        "document_search": lambda: root.documents._search,
        "agent_lifecycle": lambda: root.lifecycle(agent)._flow,
        "recall": lambda: lt._recall,
        "direct_search": lambda: lt._direct,
        "agent_search": lambda: lt._agent,
        "long_term_write": lambda: lt._write,
        "merge_spaces": lambda: lt._merge,
        "memory_spaces": lambda: lt._spaces,
        "store_upkeep": lambda: lt._upkeep,
    }
