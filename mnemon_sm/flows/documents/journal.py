"""The index journal: document commits as appended lines instead of index rewrites. Pure.

Theory of operation
-------------------
``documents/index.json`` is the reference's format and the file its readers open; at 10,000
documents it is several megabytes, and rewriting it (then fsyncing it) on every create, update,
archive and search is what makes a commit's cost grow with the number of documents. A root
whose ``documents_index`` is ``journal`` commits a change instead by appending one line to
``documents/index.journal``, holding the records the commit changed::

    {"version":1,"documents":[<record>, ...]}

(the index's own record format, compact, one line, UTF-8). The committed index is then
``index.json`` with the journal's lines applied in order (:func:`apply`): a record whose id the
index holds replaces it, unless the index already holds a later state of that document (see
:func:`supersedes`); a record of an id the index does not hold is added at the end, as a
create adds it to ``index.json``. The journal is *compacted* (``index.json`` rewritten with
every record, then the journal removed) once it passes :data:`JOURNAL_MAX` bytes, when the
root closes, and when a root in the default ``file`` mode opens or commits (so ``file`` mode
never leaves one behind). Every root reads the journal, whatever its mode.

Why the merge rule and not a plain replay: compaction writes ``index.json`` first and removes
the journal second, so a crash between the two (or a reader that read the journal before a
compaction and the index after it) applies lines to an index that already holds them; and a
writer that does not know the journal (the reference implementation) may rewrite
``index.json`` meanwhile. Applying a line must then neither undo a later change nor drop an
acknowledged one: a document's ``revision`` grows with every update and archive, and within a
revision only ``lastAccessedAt`` changes (a search records it), which only grows; so a line's
record supersedes the index's when it is of a later revision, or of the same one and accessed
no earlier. A create the other writer never saw is added back.

A power loss may cut the last line short: the bytes after the last newline are not part of the
journal, and the next commit rewrites the file without them (see
:func:`~mnemon_sm.ports.storage.durable_append`). Any complete line that is not a valid set of
records is ``CorruptStore``, as an invalid ``index.json`` is.

The trade-off, documented for the option: a reader of ``index.json`` alone (the reference
implementation) sees the documents as of the last compaction until the journal is compacted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from mnemon_sm.flows.documents.model import DocumentRecord, check_index, parse_records
from mnemon_sm.flows.documents.view import IndexView
from mnemon_sm.ports.storage import split_lines

__all__ = [
    "JOURNAL_MAX",
    "JOURNAL_PATH",
    "apply",
    "encode_line",
    "parse_lines",
    "supersedes",
]

JOURNAL_PATH = "documents/index.journal"
#: Past this many bytes a commit compacts the journal into ``index.json`` (a few hundred
#: commits of ordinary documents: the index rewrite is paid once per so many commits).
JOURNAL_MAX = 256 * 1024


def encode_line(records: Sequence[DocumentRecord]) -> bytes:
    """One commit's changed ``records`` as one journal line."""
    data = {"version": 1, "documents": [r.to_json() for r in records]}
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return (text + "\n").encode("utf-8")


def parse_lines(complete: bytes) -> list[tuple[DocumentRecord, ...]]:
    """The records of each line of ``complete`` (whole lines only), checked as the index's
    records are (safe managed paths; an id at most once per line). Raises ``CorruptStore``."""
    out = []
    for line in split_lines(complete):
        records = parse_records(line, path=JOURNAL_PATH)
        check_index(records, path=JOURNAL_PATH)
        out.append(records)
    return out


def supersedes(new: DocumentRecord, old: DocumentRecord) -> bool:
    """Whether a journal line's ``new`` state of a document replaces the ``old`` one an index
    holds: a later revision, or the same revision accessed no earlier (see the module)."""
    if new.revision != old.revision:
        return new.revision > old.revision
    return new.last_accessed_at >= old.last_accessed_at


def apply(view: IndexView, complete: bytes) -> IndexView:
    """``view`` with the lines of ``complete`` applied in order (the module's merge rule)."""
    for records in parse_lines(complete):
        view = view.with_records(records, keep=supersedes)
    return view
