"""The host's checks of a maintenance worker's result. Pure: no I/O.

Every check raises ``MaintenanceRejected`` naming its rule; the first failure rejects the
whole result and nothing is written. Rules (RULE-MNT-n, cited by the spec and the tests):

1. ``schema``: the result has exactly the schema's keys and types (integers are integers).
2. ``declined``: the worker's action is ``failed`` (its summary is the detail).
3. ``content``: every compacted content normalizes like a hot entry (non-empty, no ``§``,
   at most 8192 bytes).
4. ``source-missing`` / ``source-range`` / ``source-duplicate``: every compacted entry names
   at least one source; each source index is in ``1..n`` and appears once across entries.
5. ``source-omitted``: a local compaction covers every snapshot index.
6. ``importance-lowered``: no entry ranks below the highest of its sources.
7. ``duplicate-content``: no two compacted entries are equal after normalization.
8. ``budget``: a local compaction fits the byte budget (an archive's candidates are packed).
9. ``archive-range`` / ``archive-duplicate`` / ``archive-omitted``: an archive maps every
   snapshot index exactly once.
10. ``archive-unknown`` / ``archive-mismatch``: a mapped id is a remember of this run that
    names the same space, or an existing insight the host then confirms active in the named,
    active space (before anything is applied).
11. ``archive-spaces``: the spaces the result claims are spaces its mapping names.
12. ``archive-stray-write``: every staged remember is used by the mapping, and every space
    the run creates receives a remember (an archive writes nothing it does not account for).
13. ``archive-content``: the insight an entry is mapped to holds the entry's exact text
    (whitespace collapsed, on word boundaries): a remember of this run is checked here, an
    existing insight when the host confirms it. An entry leaves MEMORY.md only preserved
    verbatim in long-term memory, whatever the worker claims.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TypeVar

from mnemon_sm.convert import StructureFailed, structure
from mnemon_sm.errors import InvalidInput, MaintenanceRejected
from mnemon_sm.flows.hot.maintenance_values import (
    ArchivedEntry,
    ArchiveResult,
    Candidate,
    CompactedEntry,
    CompactionResult,
)
from mnemon_sm.flows.hot.model import normalize
from mnemon_sm.flows.hot.packing import RANK, joined_size
from mnemon_sm.text import collapse_whitespace

__all__ = ["check_archive", "check_compaction", "holds_text", "parse_result"]

T = TypeVar("T")
PENDING_PREFIX = "pending-"
PENDING_SPACE_PREFIX = "pending-space-"


def parse_result(raw: object, cls: type[T]) -> T:
    """RULE-MNT-1."""
    try:
        return structure(raw, cls)
    except StructureFailed as exc:
        raise MaintenanceRejected("schema", "; ".join(exc.problems)) from None


def check_compaction(
    result: CompactionResult, sources: Sequence[tuple[str, str]], budget: int
) -> tuple[Candidate, ...]:
    """RULE-MNT-2..8 for a local compaction of ``sources`` (``(content, importance)``)."""
    _check_action(result.action, "compacted", result.summary)
    candidates = _candidates(result.compacted_entries, sources, cover_all=True)
    size = joined_size([c.content for c in candidates])
    if size > budget:
        raise MaintenanceRejected(
            "budget", f"the compacted entries take {size} bytes; the budget is {budget} bytes"
        )
    return candidates


def holds_text(container: str, entry: str) -> bool:
    """RULE-MNT-13: whether ``container`` holds ``entry`` verbatim (both whitespace-collapsed;
    the match starts and ends on word boundaries)."""
    text = collapse_whitespace(entry)
    if not text:
        return False
    pattern = rf"(?<!\w){re.escape(text)}(?!\w)"
    return re.search(pattern, collapse_whitespace(container)) is not None


def check_archive(
    result: ArchiveResult,
    sources: Sequence[tuple[str, str]],
    staged: Mapping[str, tuple[str | None, str]],
    created: Sequence[str] = (),
) -> tuple[tuple[Candidate, ...], tuple[ArchivedEntry, ...]]:
    """RULE-MNT-2..4, 6, 7 and 9..13 for an archive.

    ``staged`` maps each provisional insight id a remember of this run returned to the space
    it names (None: it named none) and the content it stages; ``created`` lists the
    provisional ids of the spaces the run creates. Returns the checked candidates and the
    mapping ordered by source index; mapped ids that are not provisional still have to be
    confirmed (active, in the named active space, holding the entry) by the caller.
    """
    _check_action(result.action, "archived", result.summary)
    n = len(sources)
    rows: dict[int, ArchivedEntry] = {}
    for row in result.archived:
        if not 1 <= row.source_index <= n:
            raise MaintenanceRejected(
                "archive-range", f"source index {row.source_index} is not in 1..{n}"
            )
        if row.source_index in rows:
            raise MaintenanceRejected(
                "archive-duplicate", f"source index {row.source_index} is mapped twice"
            )
        _check_row(row, staged, sources[row.source_index - 1][0])
        rows[row.source_index] = row
    missing = [i for i in range(1, n + 1) if i not in rows]
    if missing:
        raise MaintenanceRejected(
            "archive-omitted", f"source indexes {_ints(missing)} are not archived"
        )
    used = {row.id for row in rows.values()}
    stray = [p for p in staged if p not in used]
    empty = [c for c in created if c not in {space for space, _ in staged.values()}]
    if stray or empty:
        raise MaintenanceRejected(
            "archive-stray-write",
            f"staged writes the mapping does not use: remembers {stray}, spaces {empty}",
        )
    named = {row.memory_body_id for row in rows.values()}
    claimed = [s for s in result.memory_body_ids if s not in named]
    if claimed:
        raise MaintenanceRejected(
            "archive-spaces", f"the result names spaces its mapping does not use: {claimed}"
        )
    candidates = _candidates(result.compacted_entries, sources, cover_all=False)
    return candidates, tuple(rows[i] for i in range(1, n + 1))


def _check_row(
    row: ArchivedEntry, staged: Mapping[str, tuple[str | None, str]], entry: str
) -> None:
    if row.id.startswith(PENDING_SPACE_PREFIX) or (
        row.id.startswith(PENDING_PREFIX) and row.id not in staged
    ):
        raise MaintenanceRejected(
            "archive-unknown",
            f"source index {row.source_index} names {row.id!r}, which no remember of this "
            "run returned",
        )
    if row.id not in staged:
        return  # an existing insight: confirmed by the caller
    space, content = staged[row.id]
    if space != row.memory_body_id:
        where = "no space" if space is None else repr(space)
        raise MaintenanceRejected(
            "archive-mismatch",
            f"source index {row.source_index} names {row.id!r} in {row.memory_body_id!r}, "
            f"but that remember names {where}",
        )
    if not holds_text(content, entry):
        raise MaintenanceRejected(
            "archive-content",
            f"source index {row.source_index} is mapped to {row.id!r}, whose content does "
            "not hold the entry's text",
        )


def _check_action(action: str, wanted: str, summary: str) -> None:
    if action != wanted:
        reason = summary.strip() or "the worker gave no reason"
        raise MaintenanceRejected("declined", f"the worker returned {action!r}: {reason}")


def _candidates(
    entries: Sequence[CompactedEntry], sources: Sequence[tuple[str, str]], *, cover_all: bool
) -> tuple[Candidate, ...]:
    n = len(sources)
    seen: set[int] = set()
    contents: set[str] = set()
    out: list[Candidate] = []
    for k, entry in enumerate(entries, 1):
        try:
            content = normalize(entry.content, "compacted content")
        except InvalidInput as exc:
            raise MaintenanceRejected("content", f"entry {k}: {exc.message}") from None
        if not entry.source_indexes:
            raise MaintenanceRejected("source-missing", f"entry {k} names no source index")
        for index in entry.source_indexes:
            if not 1 <= index <= n:
                raise MaintenanceRejected(
                    "source-range", f"entry {k}: source index {index} is not in 1..{n}"
                )
            if index in seen:
                raise MaintenanceRejected(
                    "source-duplicate", f"entry {k}: source index {index} is used twice"
                )
            seen.add(index)
        required = max(RANK[sources[i - 1][1]] for i in entry.source_indexes)
        if RANK[entry.importance] < required:
            raise MaintenanceRejected(
                "importance-lowered",
                f"entry {k} is {entry.importance} but one of its sources ranks higher",
            )
        if content in contents:
            raise MaintenanceRejected("duplicate-content", f"entry {k} repeats an earlier entry")
        contents.add(content)
        out.append(Candidate(content, entry.importance, tuple(entry.source_indexes)))
    if cover_all and len(seen) != n:
        missing = [i for i in range(1, n + 1) if i not in seen]
        raise MaintenanceRejected(
            "source-omitted", f"source indexes {_ints(missing)} are not covered"
        )
    return tuple(out)


def _ints(values: Sequence[int]) -> str:
    shown = ", ".join(map(str, values[:10]))
    return shown + (f" and {len(values) - 10} more" if len(values) > 10 else "")
