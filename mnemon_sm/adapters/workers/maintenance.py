"""Built-in deterministic maintenance workers (no LLM). Their results pass the same host
checks as a model's.

- compact (USER.md): merges only entries that are equal after case and whitespace folding, or
  contained in another entry; each group keeps its longest member's text and the highest
  importance of the group. When the merged profile still exceeds the byte budget it returns
  ``failed`` with the reason (it never drops or rewrites anything).
- archive (MEMORY.md): remembers every entry verbatim into the space the write routing
  chooses (creating a "Working memory archive" space in a root without active spaces),
  pointing at an existing insight instead when the space already holds the entry verbatim;
  then proposes the critical and normal entries, unchanged, as the compacted MEMORY.md (the
  host packs them by importance, so critical ones are kept first and normal ones while they
  fit).
- document_archive: a summary from the document's description and first paragraph, and one
  cold reference (title, scope, archived path, SHA-256) remembered into the routed space.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mnemon_sm.adapters.workers.routing import choose_space, create_space, stored_id
from mnemon_sm.ports.hot_format import RANK, joined_size
from mnemon_sm.ports.long_term.values import CONTENT_MAX_BYTES
from mnemon_sm.ports.workers import ToolBox
from mnemon_sm.text import collapse_whitespace

__all__ = ["ARCHIVE_SPACE", "archive", "compact", "document_archive"]

ARCHIVE_SPACE = (
    "Working memory archive",
    "Project facts archived from MEMORY.md when it ran out of room.",
)
# Hot importance -> long-term importance (1..5).
LONG_TERM_IMPORTANCE = {"critical": 5, "normal": 3, "low": 2}
ARCHIVE_TAG = "hot-memory-archive"


def _fold(text: str) -> str:
    return collapse_whitespace(text).casefold()


def compact(data: Mapping[str, Any], _: ToolBox) -> dict[str, Any]:
    entries: Sequence[Mapping[str, Any]] = data["snapshot"]
    folded = [_fold(e["content"]) for e in entries]
    # Rank: longest first, then earliest. Each entry joins the best-ranked entry containing
    # it (itself included); containment is transitive, so that entry heads its own group.
    rank = sorted(range(len(entries)), key=lambda i: (-len(folded[i]), i))
    groups: dict[int, list[int]] = {}
    for i in range(len(entries)):
        head = next(j for j in rank if folded[i] in folded[j])
        groups.setdefault(head, []).append(i)
    compacted = [
        {
            "content": entries[head]["content"],
            "importance": max((entries[i]["importance"] for i in members), key=RANK.__getitem__),
            "sourceIndexes": [i + 1 for i in members],
        }
        for head, members in sorted(groups.items())
    ]
    size = joined_size([c["content"] for c in compacted])
    budget: int = data["budgetBytes"]
    merged = len(entries) - len(compacted)
    if size > budget:
        return {
            "summary": (
                f"Merging {merged} duplicate or contained entr{'y' if merged == 1 else 'ies'} "
                f"leaves {size} bytes, over the {budget}-byte budget; nothing else can be "
                "merged without losing information."
            ),
            "action": "failed",
            "compactedEntries": [],
        }
    return {
        "summary": f"Merged {merged} duplicate or contained entries; kept {len(compacted)}.",
        "action": "compacted",
        "compactedEntries": compacted,
    }


def archive(data: Mapping[str, Any], tools: ToolBox) -> dict[str, Any]:
    entries: Sequence[Mapping[str, Any]] = data["snapshot"]
    too_large = [
        e["index"] for e in entries if len(e["content"].encode("utf-8")) > CONTENT_MAX_BYTES
    ]
    if too_large:
        return _failed(f"entries {too_large} exceed the long-term limit of {CONTENT_MAX_BYTES}")
    spaces: list[dict[str, Any]] = tools.call("mnemon_memory_bodies", {})
    routable = any(s["active"] for s in spaces)  # routing writes to active spaces only
    fallback = None if routable else create_space(tools, *ARCHIVE_SPACE)
    archived = []
    for e in entries:
        content: str = e["content"]
        space = choose_space(content, spaces) or fallback
        assert space is not None
        found = None if space == fallback else stored_id(content, space, spaces, tools)
        if found is None:
            receipt = tools.call(
                "mnemon_remember",
                {
                    "content": content,
                    "memoryBodyId": space,
                    "importance": LONG_TERM_IMPORTANCE[e["importance"]],
                    "tags": [ARCHIVE_TAG],
                    "source": "agent",
                },
            )
            found = str(receipt["id"])
        archived.append({"sourceIndex": e["index"], "memoryBodyId": space, "id": found})
    kept = [
        {"content": e["content"], "importance": e["importance"], "sourceIndexes": [e["index"]]}
        for e in entries
        if e["importance"] != "low"
    ]
    written = list(dict.fromkeys(a["memoryBodyId"] for a in archived))
    return {
        "summary": (
            f"Archived {len(entries)} entries into {len(written)} space(s); proposed "
            f"{len(kept)} critical and normal entries to keep."
        ),
        "action": "archived",
        "memoryBodyIds": written,
        "archived": archived,
        "compactedEntries": kept,
    }


def _failed(reason: str) -> dict[str, Any]:
    return {
        "summary": f"Cannot archive safely: {reason}.",
        "action": "failed",
        "memoryBodyIds": [],
        "archived": [],
        "compactedEntries": [],
    }


DOCUMENT_SPACE = (
    "Archived documents",
    "Cold references to project documents moved out of the active set.",
)
DOCUMENT_TAG = "document-archive"


def document_archive(data: Mapping[str, Any], tools: ToolBox) -> dict[str, Any]:
    """Summary from the description and the first paragraph; one reference remembered into
    the space the write routing picks (a new "Archived documents" space in a root without
    active spaces)."""
    summary = _document_summary(str(data["description"]), str(data["content"]))
    spaces: list[dict[str, Any]] = tools.call("mnemon_memory_bodies", {})
    title = str(data["title"])
    space = choose_space(f"{title} {summary}", spaces) or create_space(tools, *DOCUMENT_SPACE)
    reference = (
        f'Archived document "{title}" (scope: {summary[:400]})\n'
        f"cold path: {data['plannedPath']}\n"
        f"sha256: {data['contentSha256']}"
    )
    receipt = tools.call(
        "mnemon_remember",
        {
            "content": reference,
            "memoryBodyId": space,
            "category": "context",
            "tags": [DOCUMENT_TAG],
            "source": "agent",
        },
    )
    return {
        "summary": summary,
        "action": "archived",
        "memoryBodyIds": [space],
        "references": [{"memoryBodyId": space, "id": receipt["id"]}],
    }


def _document_summary(description: str, content: str) -> str:
    blocks = [b.strip() for b in content.split("\n\n") if b.strip()]
    prose = [b for b in blocks if not all(line.startswith("#") for line in b.splitlines())]
    first = (prose or blocks or [""])[0].lstrip("#").strip()
    text = collapse_whitespace(f"{description} {first}")
    return text if len(text) <= 1000 else text[:999] + "…"
