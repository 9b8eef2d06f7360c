"""Values of the document flows: the archive worker's result and what callers get back."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from mnemon_sm.convert import register_camel_case
from mnemon_sm.flows.documents.model import DocumentRecord

__all__ = ["ColdReference", "DocumentArchiveResult", "DocumentResult", "SearchHit"]


@attrs.frozen
class ColdReference:
    """An insight holding a document's cold reference: the id a remember of the run returned
    (provisional) or an existing insight's id."""

    memory_body_id: str
    id: str


@attrs.frozen
class DocumentArchiveResult:
    summary: str
    action: Literal["archived", "failed"]
    memory_body_ids: list[str]
    references: list[ColdReference]


for _cls in (ColdReference, DocumentArchiveResult):
    register_camel_case(_cls)


@attrs.frozen
class DocumentResult:
    """The receipt of a create, update or archive."""

    action: str  # created | updated | archived
    document: DocumentRecord
    content: str | None
    archived: tuple[str, ...] = ()  # ids archived to make room (or by hand)
    run_id: str | None = None
    summary: str | None = None  # the last archive's summary
    memory_body_ids: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"success": True, "action": self.action}
        out["document"] = self.document.to_json()
        if self.content is not None:
            out["document"]["content"] = self.content
        if self.archived:
            out["maintenance"] = {
                "runId": self.run_id,
                "summary": self.summary,
                "memoryBodyIds": list(self.memory_body_ids),
                "archivedDocumentIds": list(self.archived),
            }
        return out


@attrs.frozen
class SearchHit:
    document: DocumentRecord
    content: str
    score: int
    excerpt: str

    def to_json(self) -> dict[str, Any]:
        return {
            **self.document.to_json(),
            "content": self.content,
            "score": self.score,
            "excerpt": self.excerpt,
        }
