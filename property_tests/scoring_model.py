"""An independent oracle of the activity score, written from reference-behaviour 11.1 (never
from ``mnemon_sm.flows.lifecycle.scoring``): four partial scores from four counts, their sum, and
eligibility at 5.
"""

from __future__ import annotations

THRESHOLD = 5


def reference_score(chars: int, turns: int, results: int, unique: int) -> dict[str, int | bool]:
    text = min(chars // 50, 3)
    turn = turns * 1
    tools = min(results // 5, 2)
    diversity = 0 if unique < 3 else min(unique - 3 + 1, 2)
    total = text + turn + tools + diversity
    return {
        "text_score": text,
        "turn_score": turn,
        "tool_score": tools,
        "diversity_score": diversity,
        "total": total,
        "eligible": total >= THRESHOLD,
    }


def as_reference(score: object) -> dict[str, int | bool]:
    """The library's score in the oracle's terms."""
    return {
        name: getattr(score, name)
        for name in (
            "text_score",
            "turn_score",
            "tool_score",
            "diversity_score",
            "total",
            "eligible",
        )
    }
