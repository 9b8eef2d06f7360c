"""Byte budgets and deterministic UTF-8 packing of compacted hot-memory entries. Pure.

:func:`budget` is the room a compaction may use so that the pending add fits afterwards with
slack: ``max(0, floor(limit * 0.7) - pending_bytes - 8)`` (USER.md: 2859 minus the pending
add's bytes; MEMORY.md: 7160 minus them).

:func:`pack` keeps candidates by priority: importance first (critical, normal, low), then
original position; a candidate that does not fit is skipped and later, smaller ones may still
be kept; nothing is ever truncated; the kept positions come back in original order.
"""

from __future__ import annotations

from collections.abc import Sequence

from mnemon_sm.ports.hot_format import DELIMITER_SIZE, RANK, joined_size

__all__ = ["RANK", "budget", "joined_size", "pack"]

_SHARE_NUM, _SHARE_DEN = 7, 10  # the compacted target may fill 70% of its limit ...
_SLACK = 8  # ... minus the pending add and a few bytes of slack (the reference's constants)


def budget(limit: int, pending_bytes: int) -> int:
    """Bytes the compacted target may use, leaving room for the pending add."""
    return max(0, limit * _SHARE_NUM // _SHARE_DEN - pending_bytes - _SLACK)


def pack(items: Sequence[tuple[str, str]], max_bytes: int) -> tuple[int, ...]:
    """Positions of the ``(content, importance)`` items kept within ``max_bytes``.

    Walks the items by (importance rank descending, position) and keeps each one whose
    addition keeps the joined size within ``max_bytes``; returns kept positions ascending.
    """
    order = sorted(range(len(items)), key=lambda i: (-RANK[items[i][1]], i))
    kept: list[int] = []
    used = 0
    for i in order:
        size = len(items[i][0].encode("utf-8"))
        grown = used + size + (DELIMITER_SIZE if kept else 0)
        if grown <= max_bytes:
            kept.append(i)
            used = grown
    return tuple(sorted(kept))
