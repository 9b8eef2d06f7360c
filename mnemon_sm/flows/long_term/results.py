"""What the long-term workers return: recall selections, write receipts and answers.

Each class is validated strictly (camelCase keys, nothing extra) by the worker runner; the JSON
schema the worker is given is generated from the same class.
"""

from __future__ import annotations

from typing import Literal, get_args, get_type_hints

import attrs

from mnemon_sm.convert import register_camel_case

__all__ = ["WRITE_ACTIONS", "AnswerResult", "RecallResult", "RecallSelection", "WriteResult"]


@attrs.frozen
class RecallSelection:
    id: str
    memory_body_id: str


@attrs.frozen
class RecallResult:
    summary: str
    selected_memory_body_ids: list[str]
    results: list[RecallSelection]


@attrs.frozen
class WriteResult:
    summary: str
    action: Literal[
        "stored", "linked", "forgotten", "created", "updated", "merged", "skipped", "failed"
    ]
    memory_body_ids: list[str]


@attrs.frozen
class AnswerResult:
    answer: str
    citations: list[str]


for _cls in (RecallSelection, RecallResult, WriteResult, AnswerResult):
    register_camel_case(_cls)

WRITE_ACTIONS: tuple[str, ...] = get_args(get_type_hints(WriteResult)["action"])
