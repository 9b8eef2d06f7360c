"""The built-in review worker (no LLM): at most one explicit, durable user statement.

It scans the recorded user messages, latest first, for "remember that ...", "I prefer ..."
and "always ..." / "never ..." and adds the first one it finds to hot memory ("remember that"
to MEMORY.md, preferences and rules to USER.md, rules as critical); otherwise it skips.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mnemon_sm.errors import MnemonError
from mnemon_sm.ports.workers import ToolBox

__all__ = ["review"]

_PATTERNS = (
    (re.compile(r"\bremember that\s+(?P<fact>[^.!?\n]+)", re.I), "memory", "normal", "{fact}"),
    (re.compile(r"\bI (?:really )?prefer\s+(?P<fact>[^.!?\n]+)", re.I), "user", "normal",
     "User prefers {fact}"),
    (re.compile(r"\b(?P<rule>always|never)\s+(?P<fact>[^.!?\n]+)", re.I), "user", "critical",
     "{Rule} {fact}"),
)  # fmt: skip


def statement(texts: list[str]) -> tuple[str, str, str] | None:
    """(target, importance, content) of the latest explicit durable statement, if any."""
    for text in reversed(texts):
        for pattern, target, importance, shape in _PATTERNS:
            found = pattern.search(text)
            if found:
                fact = found.group("fact").strip()
                rule = (found.groupdict().get("rule") or "").capitalize()
                content = shape.format(fact=fact, Rule=rule)
                return target, importance, content[:1].upper() + content[1:]
    return None


def review(data: Mapping[str, Any], tools: ToolBox) -> dict[str, Any]:
    texts = [t for turn in data["turns"] for t in turn["userTexts"]]
    found = statement(texts)
    if found is None:
        return {
            "summary": "No explicit durable statement.",
            "action": "skipped",
            "documentIds": [],
        }
    target, importance, content = found
    try:
        tools.call(
            "mnemon_runtime_memory",
            {"action": "add", "target": target, "content": content, "importance": importance},
        )
    except MnemonError as exc:  # a refusal of the host: report it, keep the activity
        return {"summary": f"Could not save: {exc}", "action": "failed", "documentIds": []}
    return {"summary": f"Saved to {target}: {content}", "action": "stored", "documentIds": []}
