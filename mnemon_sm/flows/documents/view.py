"""The committed document index as one value: the records, where each id is, the active total.

A document operation needs three things of the index: the records in order, the record of one
id, and the rendered bytes of the active documents (the capacity check). Computing the last
two from the records is a walk over every record, which at 10,000 documents costs more than
the rest of an operation; an :class:`IndexView` carries them, computed once when an index is
parsed and carried forward when a commit changes some records (:meth:`IndexView.with_records`),
so finding a document and checking the capacity cost the same at any size. Pure; a view never
changes after it is built (a commit that adds no document shares its position map, which
nothing ever changes; one that adds documents copies it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import attrs

from mnemon_sm.errors import DocumentNotFound
from mnemon_sm.flows.documents.model import DocumentRecord

__all__ = ["IndexView"]

Records = tuple[DocumentRecord, ...]


@attrs.frozen(eq=False)
class IndexView:
    """``records`` in index order; ``positions`` maps each id to its position; ``active_bytes``
    is the sum of the active records' ``size_bytes``."""

    records: Records
    positions: Mapping[str, int]
    active_bytes: int

    @classmethod
    def of(cls, records: Iterable[DocumentRecord]) -> IndexView:
        """The view of ``records`` (ids unique, as a checked index's are)."""
        records = tuple(records)
        positions = {r.id: i for i, r in enumerate(records)}
        return cls(records, positions, sum(r.size_bytes for r in records if r.status == "active"))

    def find(self, doc_id: object) -> DocumentRecord:
        """The record of ``doc_id`` (surrounding whitespace ignored); ``DocumentNotFound``."""
        wanted = doc_id.strip() if isinstance(doc_id, str) else ""
        at = self.positions.get(wanted)
        if at is None:
            raise DocumentNotFound(f"document not found: {wanted or doc_id!r}")
        return self.records[at]

    def with_records(
        self,
        changed: Iterable[DocumentRecord],
        keep: Callable[[DocumentRecord, DocumentRecord], bool] | None = None,
    ) -> IndexView:
        """The view after a commit of ``changed``: each replaces the record of its id, or is
        added at the end when the id is new. ``keep(new, old)``, when given, decides whether
        ``new`` replaces ``old`` (the journal's merge rule); otherwise it always does."""
        records = list(self.records)
        positions: dict[str, int] | None = None
        active = self.active_bytes
        for new in changed:
            at = (positions or self.positions).get(new.id)
            if at is not None:
                old = records[at]
                if old is new or (keep is not None and not keep(new, old)):
                    continue
                records[at] = new
                active -= old.size_bytes if old.status == "active" else 0
            else:
                if positions is None:
                    positions = dict(self.positions)
                positions[new.id] = len(records)
                records.append(new)
            active += new.size_bytes if new.status == "active" else 0
        return IndexView(tuple(records), positions or self.positions, active)
