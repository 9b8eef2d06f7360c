"""Every kind of worker the library runs, with the class its result must validate as.

A flow names its result class when it builds a request; this table gathers them for hosts and
tests that work over all kinds (a ``Workers`` adapter must handle every one).
"""

from __future__ import annotations

from mnemon_sm.flows.documents.values import DocumentArchiveResult
from mnemon_sm.flows.hot.maintenance_values import ArchiveResult, CompactionResult
from mnemon_sm.flows.lifecycle.review import ReviewResult
from mnemon_sm.flows.long_term.results import AnswerResult, RecallResult, WriteResult

__all__ = ["RESULTS"]

RESULTS: dict[str, type] = {
    "recall": RecallResult,
    "write": WriteResult,
    "answer": AnswerResult,
    "compact": CompactionResult,
    "archive": ArchiveResult,
    "document_archive": DocumentArchiveResult,
    "review": ReviewResult,
}
