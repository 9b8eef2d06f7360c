"""Values of capacity maintenance: worker results, checked candidates, the receipt block.

Worker results are structured strictly (camelCase keys, unknown keys refused) by the one
converter; the JSON schemas handed to the workers are generated from the same classes.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from mnemon_sm.convert import converter, register_camel_case
from mnemon_sm.flows.hot.model import HotEntry, Importance, Kind, Target, maintenance_kind

__all__ = [
    "ArchiveResult",
    "ArchivedEntry",
    "Candidate",
    "CompactedEntry",
    "CompactionResult",
    "MaintenanceBlock",
    "Snapshot",
]


@attrs.frozen
class CompactedEntry:
    """One entry a worker proposes; ``source_indexes`` are one-based snapshot numbers."""

    content: str
    importance: Importance
    source_indexes: list[int]


@attrs.frozen
class CompactionResult:
    """The USER.md compactor's result."""

    summary: str
    action: Literal["compacted", "failed"]
    compacted_entries: list[CompactedEntry]


@attrs.frozen
class ArchivedEntry:
    """Where one snapshot entry now lives in long-term memory: the id a remember of this run
    returned, or the id of an insight already in ``memory_body_id``."""

    source_index: int
    memory_body_id: str
    id: str


@attrs.frozen
class ArchiveResult:
    """The MEMORY.md archiver's result."""

    summary: str
    action: Literal["archived", "failed"]
    memory_body_ids: list[str]
    archived: list[ArchivedEntry]
    compacted_entries: list[CompactedEntry]


for _cls in (CompactedEntry, CompactionResult, ArchivedEntry, ArchiveResult):
    register_camel_case(_cls)


@attrs.frozen
class Candidate:
    """A compacted entry that passed the host's checks (content normalized)."""

    content: str
    importance: Importance
    sources: tuple[int, ...]  # one-based snapshot numbers


@attrs.frozen
class Snapshot:
    """What a maintenance run works from: the committed entries of one target at a revision,
    the pending add (normalized) and the byte budget of the compacted target."""

    target: Target
    revision: str
    entries: tuple[HotEntry, ...]
    pending_content: str
    pending_importance: Importance
    budget: int

    @property
    def size(self) -> int:
        return len(self.entries)

    @property
    def kind(self) -> Kind:
        """What maintenance does to this target."""
        return maintenance_kind(self.target)


@attrs.frozen
class MaintenanceBlock:
    """What a receipt says about the maintenance that made room for its add."""

    kind: Kind
    run_id: str
    summary: str
    memory_body_ids: tuple[str, ...]
    source_entries: int  # committed entries the worker was given
    kept_entries: int  # compacted entries kept by packing

    def to_json(self) -> dict[str, Any]:
        """The block as a receipt shows it (camelCase keys)."""
        data: dict[str, Any] = converter.unstructure(self)
        return data


register_camel_case(MaintenanceBlock)
