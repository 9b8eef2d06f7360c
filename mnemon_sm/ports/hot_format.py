"""The hot-memory text format every party shares: the flows, the workers and other readers.

An entry is a piece of text with an importance; a target's text is its entries joined by
:data:`DELIMITER`, and its size (the capacity metric) is the UTF-8 length of that text. A
worker that compacts a target, built-in or LLM, must measure and rank the same way the host
checks it, so the rules live here, below both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

__all__ = ["DELIMITER", "DELIMITER_SIZE", "IMPORTANCES", "RANK", "Importance", "joined_size"]

Importance = Literal["critical", "normal", "low"]
IMPORTANCES: tuple[Importance, ...] = get_args(Importance)
RANK = {"low": 0, "normal": 1, "critical": 2}  # the order importance may never go down in

DELIMITER = "\n§\n"  # 4 UTF-8 bytes; "§" is reserved and never appears inside an entry
DELIMITER_SIZE = len(DELIMITER.encode("utf-8"))  # what the delimiter adds to a size, in bytes


def joined_size(contents: Sequence[str]) -> int:
    """UTF-8 bytes of ``contents`` joined by the delimiter (the capacity metric)."""
    if not contents:
        return 0
    return sum(len(c.encode("utf-8")) for c in contents) + DELIMITER_SIZE * (len(contents) - 1)
