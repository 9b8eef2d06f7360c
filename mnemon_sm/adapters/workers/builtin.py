"""Built-in deterministic workers: the embedded default, no LLM and no network.

They implement the ``Workers`` port like any model would: they read the structured request
data, use only the tools of their tool box, and return a result that goes through exactly the
same host checks as an LLM's.

- recall: lists the spaces, picks the active ones whose name and description share words with
  the query (all active ones when none does), recalls there and returns the hits in order;
- write: for a remember, writes to the named space or else the active one whose name and
  description share the most words with the content (a merged space's target stands in for
  it; a general space is created in a root with no active space), skips content already
  stored there verbatim; link, forget and the space operations map to
  their one tool;
- answer: extractive: the evidence sharing the most words with the question, cited;
- compact and archive: see :mod:`mnemon_sm.adapters.workers.maintenance`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mnemon_sm.adapters.workers import maintenance as maintenance_workers
from mnemon_sm.adapters.workers import review as review_worker
from mnemon_sm.adapters.workers.routing import choose_space, create_space, overlap, stored_id
from mnemon_sm.ports.workers import ToolBox, WorkerRequest
from mnemon_sm.text import words

__all__ = ["BuiltinWorkers"]

GENERAL_SPACE = (
    "General memory",
    "Durable facts, decisions and preferences with no narrower home.",
)
ANSWER_EVIDENCE = 3  # how many best-matching evidence items the extractive answer quotes
_PAST = {
    "link": "linked",
    "forget": "forgotten",
    "create": "created",
    "update": "updated",
    "merge": "merged",
}


class BuiltinWorkers:
    """Deterministic implementations of every worker kind (no model, no network)."""

    #: Deterministic host code that never blocks: ``Delegate.run`` runs it on the calling
    #: thread instead of a thread of its own (see :mod:`mnemon_sm.flows.workers.runner`).
    trusted_inline = True

    def run(self, request: WorkerRequest, tools: ToolBox) -> object:
        handler = getattr(self, f"_{request.kind}", None)
        if handler is None:
            raise ValueError(f"no built-in worker for {request.kind!r}")
        result: object = handler(request.data, tools)
        return result

    def _recall(self, data: Mapping[str, Any], tools: ToolBox) -> dict[str, Any]:
        spaces = [s for s in tools.call("mnemon_memory_bodies", {}) if s["active"]]
        wanted = data.get("memoryBodyIds") or [
            s["id"] for s in spaces if overlap(data["query"], s) > 0
        ]
        keys = ("query", "mode", "limit", "category", "source", "intent")
        arguments = {k: data[k] for k in keys if data.get(k) is not None}
        found = tools.call("mnemon_recall", {**arguments, "memoryBodyIds": wanted or None})
        # what a careful reader keeps: the high-relevance hits when there are any
        hits = [h for h in found["results"] if h.get("relevanceTier") == "high"]
        hits = hits or found["results"]
        searched = wanted or [s["id"] for s in spaces]
        return {
            "summary": f"{len(hits)} result(s) from {len(searched)} space(s).",
            "selectedMemoryBodyIds": searched,
            "results": [{"id": h["id"], "memoryBodyId": h["memoryBodyId"]} for h in hits],
        }

    def _write(self, data: Mapping[str, Any], tools: ToolBox) -> dict[str, Any]:
        operation = data["operation"]
        if operation == "remember":
            return self._remember(data, tools)
        tool = {
            "link": "mnemon_link",
            "forget": "mnemon_forget",
            "create": "mnemon_memory_body_create",
            "update": "mnemon_memory_body_update",
            "merge": "mnemon_memory_body_merge",
        }[operation]
        arguments = {k: v for k, v in data.items() if k != "operation" and v is not None}
        receipt = tools.call(tool, arguments)
        space = receipt.get("memoryBodyId") or data.get("memoryBodyId") or data.get("targetId")
        action = _PAST[operation]
        return {
            "summary": f"{action.capitalize()} as requested.",
            "action": action,
            "memoryBodyIds": [space] if space else [],
        }

    def _remember(self, data: Mapping[str, Any], tools: ToolBox) -> dict[str, Any]:
        content: str = data["content"]
        spaces: list[dict[str, Any]] = tools.call("mnemon_memory_bodies", {})
        space_id: str = data.get("memoryBodyId") or self._choose_space(content, spaces, tools)
        if space_id == "default" and not spaces:
            space_id = self._create_general(tools)  # the first space of a root is "default"
        if not space_id.startswith("pending-space-") and stored_id(
            content, space_id, spaces, tools
        ):
            return {
                "summary": "Already stored verbatim; nothing written.",
                "action": "skipped",
                "memoryBodyIds": [],
            }
        keys = ("category", "importance", "tags", "entities", "source")
        arguments = {k: data[k] for k in keys if data.get(k) is not None}
        tools.call("mnemon_remember", {**arguments, "content": content, "memoryBodyId": space_id})
        return {"summary": "Stored the memory.", "action": "stored", "memoryBodyIds": [space_id]}

    def _choose_space(
        self, content: str, spaces: Sequence[Mapping[str, Any]], tools: ToolBox
    ) -> str:
        """The routed active space (:func:`.routing.choose_space`); a new general one if none
        is active."""
        return choose_space(content, spaces) or self._create_general(tools)

    @staticmethod
    def _create_general(tools: ToolBox) -> str:
        return create_space(tools, *GENERAL_SPACE)

    def _compact(self, data: Mapping[str, Any], tools: ToolBox) -> dict[str, Any]:
        return maintenance_workers.compact(data, tools)

    def _archive(self, data: Mapping[str, Any], tools: ToolBox) -> dict[str, Any]:
        return maintenance_workers.archive(data, tools)

    def _document_archive(self, data: Mapping[str, Any], tools: ToolBox) -> dict[str, Any]:
        return maintenance_workers.document_archive(data, tools)

    def _review(self, data: Mapping[str, Any], tools: ToolBox) -> dict[str, Any]:
        return review_worker.review(data, tools)

    def _answer(self, data: Mapping[str, Any], _: ToolBox) -> dict[str, Any]:
        question = words(data["question"])
        evidence: Sequence[Mapping[str, Any]] = data["evidence"]
        shared = {e["label"]: len(question & words(e["content"])) for e in evidence}
        best = max(shared.values(), default=0)
        # the evidence that shares the most words with the question (evidence comes best first)
        ranked = [e for e in evidence if best and shared[e["label"]] == best][:ANSWER_EVIDENCE]
        if not ranked:
            return {
                "answer": "The stored evidence does not answer this question.",
                "citations": [],
            }
        return {
            "answer": " ".join(e["content"] for e in ranked),
            "citations": [e["label"] for e in ranked],
        }
