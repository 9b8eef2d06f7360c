"""The optional cue appended to the first step of a user turn (our wording). Pure.

Chosen from recallMode x writebackMode; the write clause only when writes are enabled; none
when both are off.

The cue is a standard message, ``{"role": "user", "content": "<text>"}``, valid as it is in
both the OpenAI Chat Completions and the Anthropic Messages APIs: a ``user`` message because
the reference appends one (the model reads it as the last thing before it answers), and
because the Anthropic Messages API has no ``system`` role inside ``messages`` (its system
prompt is a separate parameter), so a ``system`` message would be refused there. It carries
no other key (no id, no source marker): a host may pass it to any API as is.

When the host sends it back in the conversation, :func:`is_own_message` recognizes it by its
exact text: a user message whose whole text is one of the cue texts (:data:`CUE_TEXTS`, every
wording any switch setting produces, all starting with the ``[MEMORY]`` marker). It is then not
counted as user activity, and a turn started by it is never primed or cued again. A message
from the reference host's shape marked ``source.plugin == "mnemon_sm"`` is recognized too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["CUE_TEXTS", "PLUGIN", "cue_message", "cue_text", "is_own_message"]

PLUGIN = "mnemon_sm"
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


CUE_TEXTS = frozenset(
    t for t in (cue_text(r, w) for r in (False, True) for w in (False, True)) if t is not None
)


def cue_message(text: str) -> dict[str, Any]:
    """The cue as a standard user message (see the module)."""
    return {"role": "user", "content": text}


def _whole_text(content: object) -> str | None:
    """A content's text when it is all text: a string, or text parts/blocks only."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list | tuple) or not content:
        return None
    texts = []
    for block in content:
        if not isinstance(block, Mapping) or block.get("type") != "text":
            return None
        texts.append(block.get("text"))
    return texts[0] if len(texts) == 1 and isinstance(texts[0], str) else None


def is_own_message(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` is our cue sent back (or a reference-shaped message of ours)."""
    source = message.get("source")
    if isinstance(source, Mapping):
        return source.get("kind") == "plugin" and source.get("plugin") == PLUGIN
    return message.get("role") == "user" and _whole_text(message.get("content")) in CUE_TEXTS
