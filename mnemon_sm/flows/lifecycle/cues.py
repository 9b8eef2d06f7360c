"""The optional cue appended to the first step of a user turn (our wording). Pure.

Chosen from recallMode x writebackMode; the write clause only when writes are enabled; none
when both are off. The cue message is marked as ours, so a turn started by it is never primed
or cued again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["CUE_SOURCE", "cue_message", "cue_text", "is_own_message"]

CUE_SOURCE = {"kind": "plugin", "plugin": "mnemon_sm", "form": "instructions"}
_RECALL = (
    "For substantial project knowledge, search the active Documents first; recall long-term "
    "memory only when durable history or an exact earlier detail matters."
)
_WRITE = (
    "Save a new, explicit, reusable fact with the runtime-memory tool; otherwise write nothing."
)


def cue_text(recall: bool, write: bool) -> str | None:
    if not recall and not write:
        return None
    parts = ["[MEMORY]"]
    if recall:
        parts.append(_RECALL)
    if write:
        parts.append(_WRITE)
    if recall and not write:
        parts.append("Otherwise call no memory tool.")
    return " ".join(parts)


def cue_message(text: str, ident: str) -> dict[str, Any]:
    return {
        "id": ident,
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {**CUE_SOURCE, "summary": "Optional memory recall and remember reminder"},
    }


def is_own_message(message: Mapping[str, Any]) -> bool:
    source = message.get("source")
    return (
        isinstance(source, Mapping)
        and source.get("kind") == "plugin"
        and source.get("plugin") == CUE_SOURCE["plugin"]
    )
