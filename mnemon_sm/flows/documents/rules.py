"""Pure rules of document mutations: checked requests, capacity plans, LRU choice, search.

Nothing here does I/O. A request becomes a :class:`Draft` (the record and the bytes its file
will hold); :func:`plan` compares the active total after the change with the limit and lists
the eviction candidates, least recently used first (never the document being updated);
:func:`score` and :func:`excerpt` are the deterministic search.

Rules (RULE-DOC-n):
1. title 1..160 characters, description 0..600, body 1..2 MiB, at most 50 source paths and 20
   session ids after de-duplication (more is refused, never dropped);
2. an update names an existing active document; archived documents are immutable;
3. the active total (rendered bytes of active files) stays within the limit after a commit;
4. eviction order: ``lastAccessedAt`` ascending, then ``updatedAt``, then creation order.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from mnemon_sm.errors import (
    DocumentArchived,
    DocumentCapacityExceeded,
    InvalidInput,
)
from mnemon_sm.flows.documents.model import (
    DESCRIPTION_MAX,
    SESSION_IDS_MAX,
    TITLE_MAX,
    DocumentRecord,
    content_hash,
    file_name,
    id_list,
    normalize_body,
    render,
    source_paths,
    text_field,
)
from mnemon_sm.flows.documents.view import IndexView

__all__ = [
    "Draft",
    "Plan",
    "draft_create",
    "draft_update",
    "excerpt",
    "plan",
    "query_terms",
    "score",
]


@attrs.frozen
class Draft:
    """A mutation ready to commit: the new record and its file's bytes."""

    record: DocumentRecord
    body: str
    data: bytes
    previous: DocumentRecord | None  # the record an update replaces


@attrs.frozen
class Plan:
    projected: int
    limit: int
    candidates: tuple[DocumentRecord, ...]  # least recently used first; () when it fits

    @property
    def fits(self) -> bool:
        return self.projected <= self.limit


def _sized(record: DocumentRecord, body: str) -> tuple[DocumentRecord, bytes]:
    record = attrs.evolve(record, content_hash=content_hash(body), size_bytes=0)
    data = render(record, body)
    return attrs.evolve(record, size_bytes=len(data)), data


def draft_create(request: Mapping[str, Any], doc_id: str, now: str, workspace: str) -> Draft:
    title = text_field(request.get("title"), "title", TITLE_MAX, required=True)
    description = text_field(
        request.get("description"), "description", DESCRIPTION_MAX, required=False
    )
    body = normalize_body(request.get("content"))
    name = file_name(title, doc_id)
    record = DocumentRecord(
        id=doc_id,
        title=title,
        description=description,
        status="active",
        filename=name,
        relative_path=f"documents/active/{name}",
        source_paths=source_paths(request.get("source_paths"), workspace),
        session_ids=id_list(request.get("session_ids"), "sessionIds", SESSION_IDS_MAX),
        created_at=now,
        updated_at=now,
        last_accessed_at=now,
        revision=1,
        content_hash="",
        size_bytes=0,
        memory_body_ids=(),
    )
    record, data = _sized(record, body)
    return Draft(record, body, data, None)


def draft_update(
    old: DocumentRecord,
    request: Mapping[str, Any],
    current_body: str | None,
    now: str,
    workspace: str,
) -> Draft:
    """The update ``request`` of the document whose record is ``old``."""
    if old.status != "active":
        raise DocumentArchived(
            "archived documents are immutable; create a new active document instead"
        )
    given = request.get("content")
    if given is None and current_body is None:
        raise InvalidInput("the document's file is missing; give the content to restore it")
    body = normalize_body(given if given is not None else current_body)
    title = old.title
    if request.get("title") is not None:
        title = text_field(request["title"], "title", TITLE_MAX, required=True)
    description = old.description
    if request.get("description") is not None:
        description = text_field(
            request["description"], "description", DESCRIPTION_MAX, required=False
        )
    paths = old.source_paths
    if request.get("source_paths") is not None:
        paths = source_paths(request["source_paths"], workspace)
    sessions = id_list(
        [*old.session_ids, *(request.get("session_ids") or [])], "sessionIds", SESSION_IDS_MAX
    )
    record = attrs.evolve(
        old,
        title=title,
        description=description,
        source_paths=paths,
        session_ids=sessions,
        updated_at=now,
        last_accessed_at=now,
        revision=old.revision + 1,
    )
    record, data = _sized(record, body)
    return Draft(record, body, data, old)


def lru(
    records: Sequence[DocumentRecord], exclude: str | None = None
) -> tuple[DocumentRecord, ...]:
    """Active documents other than ``exclude``, least recently used first (stable)."""
    active = [r for r in records if r.status == "active" and r.id != exclude]
    return tuple(sorted(active, key=lambda r: (r.last_accessed_at, r.updated_at)))


def capacity_exceeded(plan: Plan, why: str) -> DocumentCapacityExceeded:
    """The error of a ``plan`` that does not fit and cannot make room (``why``)."""
    return DocumentCapacityExceeded(
        f"Would exceed active document capacity: {plan.projected} bytes (limit {plan.limit}), "
        f"and {why}.",
        projected=plan.projected,
        limit=plan.limit,
        candidates=tuple(c.id for c in plan.candidates),
    )


def plan(view: IndexView, draft: Draft, limit: int) -> Plan:
    """RULE-DOC-3 and 4 for ``draft`` against the committed index ``view`` (whose active
    total it carries). The eviction candidates are listed only when the draft does not fit
    (nothing reads them otherwise, and ordering every active document is the costly part of
    a plan)."""
    old = draft.previous.size_bytes if draft.previous is not None else 0
    projected = view.active_bytes - old + draft.record.size_bytes
    if projected <= limit:
        return Plan(projected, limit, ())
    return Plan(projected, limit, lru(view.records, exclude=draft.record.id))


# -- search -----------------------------------------------------------------------------------

# A query token; the search index splits folded bodies into words of the same class.
TOKEN = re.compile(r"[\w-]+")
_EXCERPT_DROP = re.compile(r"[#>*_`\[\]]")
EXCERPT_MAX = 220


def fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


def query_terms(query: str) -> tuple[str, list[str]]:
    """The folded query (the phrase) and its tokens, in order, repeats kept: what
    :func:`score` looks for ("" and no tokens: the empty query)."""
    q = fold(query.strip())
    return q, TOKEN.findall(q)


def score(query: str, record: DocumentRecord, body: str) -> int:
    """The reference's deterministic score (0: not a match; an empty query scores 1): the
    phrase scores 12 in the title, else 7 in the description, else 4 in the body; then each
    token 4, else 2, else 1 the same way (substring matches on the folded texts)."""
    q, tokens = query_terms(query)
    if not q:
        return 1
    title, description, text = fold(record.title), fold(record.description), fold(body)
    base = 12 if q in title else 7 if q in description else 4 if q in text else 0
    for token in tokens:
        base += 4 if token in title else 2 if token in description else 1 if token in text else 0
    return base


def excerpt(body: str) -> str:
    text = " ".join(_EXCERPT_DROP.sub("", body).split())
    return text if len(text) <= EXCERPT_MAX else text[: EXCERPT_MAX - 1] + "…"
