"""Project Documents: records, the index format, managed Markdown files, validation. Pure.

Theory of operation
-------------------
``documents/index.json`` lists every document (``{"version": 1, "documents": [...]}``, record
keys in the reference's order); each document's text lives in one managed Markdown file under
``documents/active/`` or ``documents/archived/``, with a front matter of JSON-encoded scalars
(dsh-mnemon v0.2.15's format, byte for byte). The file name is the title's slug plus the first
8 characters of the id and never changes. ``contentHash`` is the SHA-256 of the normalized
body; ``sizeBytes`` the UTF-8 size of the whole rendered file, which is what the active
capacity counts.

Validation refuses what the reference silently truncates or drops: more than 50 source paths,
more than 20 session ids, a title over 160 characters. Source paths are resolved lexically
against the caller's workspace and must stay inside it and outside the managed directory.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import attrs

from mnemon_sm import inputs
from mnemon_sm.convert import register_camel_case, string_tuple
from mnemon_sm.errors import CorruptStore, InvalidInput
from mnemon_sm.ports.storage import parse_versioned
from mnemon_sm.text import collapse_whitespace, strip_whitespace, utf8_len

__all__ = [
    "ACTIVE_DIR",
    "ARCHIVED_DIR",
    "BODY_MAX_BYTES",
    "DOCUMENTS_DIR",
    "INDEX_PATH",
    "LOCK_NAME",
    "DocumentRecord",
    "body_of",
    "check_index",
    "content_hash",
    "encode_index",
    "file_name",
    "join_blocks",
    "normalize_body",
    "parse_index",
    "parse_records",
    "record_block",
    "render",
    "slug",
    "split_blocks",
]

DOCUMENTS_DIR = "documents"
ACTIVE_DIR = "documents/active"
ARCHIVED_DIR = "documents/archived"
INDEX_PATH = "documents/index.json"
LOCK_NAME = "documents/.index.lock"

BODY_MAX_BYTES = 2 * 1024 * 1024
TITLE_MAX = 160
DESCRIPTION_MAX = 600
SUMMARY_MAX = 1000
SOURCE_PATHS_MAX = 50
SESSION_IDS_MAX = 20
MEMORY_BODY_IDS_MAX = 20
SLUG_MAX = 48

Status = Literal["active", "archived"]


@attrs.frozen
class DocumentRecord:
    """One entry of ``documents/index.json``."""

    id: str
    title: str
    description: str
    status: Status
    filename: str
    relative_path: str
    source_paths: tuple[str, ...] = attrs.field(converter=string_tuple)
    session_ids: tuple[str, ...] = attrs.field(converter=string_tuple)
    created_at: str
    updated_at: str
    last_accessed_at: str
    revision: int
    content_hash: str
    size_bytes: int
    memory_body_ids: tuple[str, ...] = attrs.field(converter=string_tuple)
    archived_at: str | None = None
    archive_summary: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The record in the index's key order (archive fields only when archived)."""
        out: dict[str, Any] = {
            "id": self.id,
            "title": self.title,
            "description": self.description,
            "status": self.status,
            "filename": self.filename,
            "relativePath": self.relative_path,
            "sourcePaths": list(self.source_paths),
            "sessionIds": list(self.session_ids),
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "lastAccessedAt": self.last_accessed_at,
            "revision": self.revision,
            "contentHash": self.content_hash,
            "sizeBytes": self.size_bytes,
        }
        if self.archived_at is not None:
            out["archivedAt"] = self.archived_at
        if self.archive_summary is not None:
            out["archiveSummary"] = self.archive_summary
        out["memoryBodyIds"] = list(self.memory_body_ids)
        return out

    def path(self, status: Status | None = None) -> str:
        """Where the file of this record lives (or would, with ``status``)."""
        folder = ACTIVE_DIR if (status or self.status) == "active" else ARCHIVED_DIR
        return f"{folder}/{self.filename}"


@attrs.frozen
class _IndexDoc:
    version: int
    documents: list[DocumentRecord]


register_camel_case(DocumentRecord)

_FILE_NAME = re.compile(r"^[a-z0-9-]{1,48}-[0-9a-f]{8}\.md$")


def parse_index(data: bytes | None) -> tuple[DocumentRecord, ...]:
    """Parse the index strictly (a missing file is empty); raises ``CorruptStore``.

    Every call parses: a root keeps the last index it read or wrote, with its parse, in its
    :class:`~mnemon_sm.flows.documents.cache.IndexCache`, so an unchanged index is parsed once.
    """
    if data is None:
        return ()
    records = parse_records(data, path=INDEX_PATH)
    check_index(records)
    return records


def parse_records(data: bytes, *, path: str) -> tuple[DocumentRecord, ...]:
    """The records of ``{"version": 1, "documents": [...]}`` in ``data`` (the index, or a line
    of the index journal), structured strictly; raises ``CorruptStore`` naming ``path``."""
    label = f"invalid document index: {path}"
    return tuple(parse_versioned(data, _IndexDoc, path=path, label=label).documents)


def check_index(
    records: Sequence[DocumentRecord],
    checked: Sequence[DocumentRecord] = (),
    *,
    unique: bool = True,
    path: str = INDEX_PATH,
) -> None:
    """The checks of :func:`parse_index` beyond the format: safe managed paths, unique ids
    (``unique=False``: the paths only, for records replacing others of the same ids).
    Records that are ``checked`` (the very objects, already checked) are not checked again.
    Raises ``CorruptStore`` naming ``path``."""
    known = set(map(id, checked))
    for r in records:
        if id(r) in known:
            continue
        if not _FILE_NAME.match(r.filename) or r.relative_path != r.path():
            raise CorruptStore(
                f"document index contains an unsafe managed path: {r.relative_path!r}",
                path=path,
            )
    if unique and len({r.id for r in records}) != len(records):
        raise CorruptStore("document index lists an id twice", path=path)


def encode_index(records: Iterable[DocumentRecord]) -> bytes:
    """The index file: ``json.dumps(doc, indent=2, ensure_ascii=False)`` plus a newline, built
    from each record's block (a property test proves the two byte-identical). A root encodes
    through its :class:`~mnemon_sm.flows.documents.cache.IndexCache`, which keeps the blocks."""
    return join_blocks([record_block(r) for r in records])


def join_blocks(blocks: Sequence[bytes]) -> bytes:
    """The index file made of the records' blocks (:func:`record_block`), in order."""
    if not blocks:
        return b'{\n  "version": 1,\n  "documents": []\n}\n'
    return b"".join(
        (b'{\n  "version": 1,\n  "documents": [\n', b",\n".join(blocks), b"\n  ]\n}\n")
    )


_HEAD = b'{\n  "version": 1,\n  "documents": [\n'
_TAIL = b"\n  ]\n}\n"
_BETWEEN = b"\n    },\n    {\n"


def split_blocks(data: bytes) -> list[bytes] | None:
    """The records' blocks of an index file in the layout :func:`join_blocks` writes, or None
    when ``data`` is not in that layout (the blocks must join back into ``data`` exactly)."""
    if not (data.startswith(_HEAD) and data.endswith(_TAIL)) or len(data) < len(_HEAD + _TAIL):
        return None
    body = data[len(_HEAD) : -len(_TAIL)]
    parts = body.split(_BETWEEN)
    blocks = [
        (b"" if i == 0 else b"    {\n") + part + (b"" if i == len(parts) - 1 else b"\n    }")
        for i, part in enumerate(parts)
    ]
    return blocks if join_blocks(blocks) == data else None


def record_block(record: DocumentRecord) -> bytes:
    """One record as the index file holds it (indented, without the separating comma): what
    ``json.dumps(..., indent=2, ensure_ascii=False)`` makes of it at that depth, built from the
    record's known shape with the C string encoder (an indented ``json.dumps`` runs the pure
    Python encoder, the cost of the first write of a large index). A property test holds the
    two byte-identical."""
    fields = record.to_json()
    last = len(fields) - 1
    lines = ["    {"]
    for i, (key, value) in enumerate(fields.items()):
        comma = "," if i < last else ""
        if isinstance(value, list):
            if not value:
                lines.append(f'      "{key}": []{comma}')
                continue
            lines.append(f'      "{key}": [')
            lines.append(",\n".join(f"        {_json_string(v)}" for v in value))
            lines.append(f"      ]{comma}")
        elif isinstance(value, str):
            lines.append(f'      "{key}": {_json_string(value)}{comma}')
        else:
            lines.append(f'      "{key}": {json.dumps(value)}{comma}')
    lines.append("    }")
    return "\n".join(lines).encode("utf-8")


_json_string = json.JSONEncoder(ensure_ascii=False).encode


# -- text rules -------------------------------------------------------------------------------


def slug(title: str) -> str:
    """NFKD, lower case, runs outside ``[a-z0-9]`` become ``-``, one edge ``-`` stripped each
    side, cut to 48; ``document`` when nothing is left (a title can never add a path part)."""
    text = unicodedata.normalize("NFKD", title).lower()
    text = re.sub(r"[^a-z0-9]+", "-", text)
    text = text.removeprefix("-").removesuffix("-")[:SLUG_MAX]
    return text or "document"


def file_name(title: str, doc_id: str) -> str:
    return f"{slug(title)}-{doc_id[:8]}.md"


def normalize_body(content: object) -> str:
    body = strip_whitespace(inputs.text(content, "document content").replace("\x00", ""))
    if not body:
        raise InvalidInput("document content is required")
    size = utf8_len(body)
    if size > BODY_MAX_BYTES:
        raise InvalidInput(f"document content is too large ({size} bytes; max {BODY_MAX_BYTES})")
    return body


def text_field(value: object, field: str, limit: int, *, required: bool) -> str:
    if value is None:
        value = ""
    text = collapse_whitespace(inputs.text(value, field))
    if required and not text:
        raise InvalidInput(f"{field} is required")
    if len(text) > limit:
        raise InvalidInput(f"{field} is too long ({len(text)} characters; max {limit})")
    return text


def id_list(values: object, field: str, limit: int) -> tuple[str, ...]:
    """Trimmed, de-duplicated strings; more than ``limit`` is refused, not truncated."""
    if values is None:
        return ()
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise InvalidInput(f"{field} must be a list of strings")
    out: list[str] = []
    for v in values:
        if not isinstance(v, str):
            raise InvalidInput(f"{field} must be a list of strings")
        v = strip_whitespace(inputs.text(v, field))
        if v and v not in out:
            out.append(v)
    if len(out) > limit:
        raise InvalidInput(f"{field} lists {len(out)} items; max {limit}")
    return tuple(out)


def source_paths(values: object, workspace: str) -> tuple[str, ...]:
    """Workspace-relative POSIX paths; each must resolve inside ``workspace`` (lexically) and
    outside the managed ``documents/`` directory."""
    paths = id_list(values, "sourcePaths", SOURCE_PATHS_MAX)
    base = posixpath.normpath(workspace)
    out: list[str] = []
    for p in paths:
        full = posixpath.normpath(posixpath.join(base, p.replace("\\", "/")))
        rel = posixpath.relpath(full, base)
        if rel == ".." or rel.startswith("../") or "\x00" in p:
            raise InvalidInput(f"source path must stay inside the workspace: {p}")
        if rel == DOCUMENTS_DIR or rel.startswith(DOCUMENTS_DIR + "/"):
            raise InvalidInput("managed document paths cannot be used as source paths")
        if rel not in out:
            out.append(rel)
    return tuple(out)


def content_hash(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


# -- the managed file -------------------------------------------------------------------------


def _q(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _list(name: str, values: Sequence[str]) -> str:
    if not values:
        return f"{name}:\n  []\n"
    return f"{name}:\n" + "".join(f"  - {_q(v)}\n" for v in values)


def render(record: DocumentRecord, body: str) -> bytes:
    """The managed file: front matter, one blank line, the body and one newline."""
    head = (
        "---\n"
        f"id: {_q(record.id)}\n"
        f"title: {_q(record.title)}\n"
        f"description: {_q(record.description)}\n"
        f"status: {_q(record.status)}\n"
        f"created_at: {_q(record.created_at)}\n"
        f"updated_at: {_q(record.updated_at)}\n"
        f"content_hash: {_q(record.content_hash)}\n"
        + _list("source_paths", record.source_paths)
        + _list("session_ids", record.session_ids)
        + _list("memory_body_ids", record.memory_body_ids)
        + "---\n\n"
    )
    return (head + body + "\n").encode("utf-8")


def body_of(data: bytes) -> str:
    """The body of a managed file (everything after the front matter, trimmed)."""
    text = data.decode("utf-8", errors="replace")
    if text.startswith("---\n"):
        end = text.find("\n---\n", 4)
        if end >= 0:
            return strip_whitespace(text[end + 5 :])
    return strip_whitespace(text)


def front_matter(data: bytes) -> dict[str, Any]:
    """The fields of a managed file's front matter (scalars and lists); {} when it has none."""
    text = data.decode("utf-8", errors="replace")
    out: dict[str, Any] = {}
    if not text.startswith("---\n"):
        return out
    end = text.find("\n---\n", 4)
    current: list[Any] | None = None
    for line in text[4 : end if end >= 0 else 4].split("\n"):
        try:
            if line.startswith("  - ") and current is not None:
                current.append(json.loads(line[4:]))
            elif line == "  []":
                continue
            elif line.endswith(":"):
                current = out[line[:-1]] = []
            else:
                key, sep, value = line.partition(": ")
                if sep:
                    out[key], current = json.loads(value), None
        except ValueError:
            continue
    return out
