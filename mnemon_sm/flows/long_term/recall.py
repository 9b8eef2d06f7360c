"""Contexts of ``specs/recall.yaml``, ``specs/direct_search.yaml`` and ``specs/agent_search.yaml``.

Each class supplies the callbacks its spec names. Requests are checked by validators, which
are pure (nothing runs on a bad request, and a check neither stores nor reads anything); the
request travels with its event to the entry action of the first state. Work happens in entry
actions that end by settling a result or refusing with a typed error, each an internal event
of the spec. Whether the spaces a recall names exist and are active is a state of its own
(``scoping``): reading the catalog may register the stores found on disk, a write.

A run's data travels with its events
------------------------------------
Everything one search or recall knows is one frozen value (:class:`SearchRun`,
:class:`RecallRun`) created by the first step and passed as the ``run`` keyword argument of
each internal event that leads to the next step (python-statemachine passes event arguments
to callbacks by name); a step that learns something raises its outcome with an evolved copy
(``attrs.evolve``). The contexts keep no per-run attribute: between two steps a run exists
only in the engine's queue of internal events, so when it ends, by an outcome or by an
exception (which drops the queue and fires ``abort``), nothing of it is left to reset or to
leak into the next request; a recall worker's tool box goes with its run.

The direct-search flow holds the tier's other deterministic reads too (an insight's
neighbours, a space's status): each is one step that reads the catalog and the store, its
arguments checked there in the service's order (an unknown space before a bad depth).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from mnemon_sm.engine.context import FlowContext
from mnemon_sm.engine.flow import Machine
from mnemon_sm.engine.registry import flow_context
from mnemon_sm.errors import InvalidInput, MnemonError, WorkerFailed
from mnemon_sm.flows.long_term.quality import apply_policy, low_cutoff
from mnemon_sm.flows.long_term.results import AnswerResult, RecallResult
from mnemon_sm.flows.long_term.service import (
    LongTermService,
    Retrieved,
    SearchQuery,
    SearchResult,
    search_limit,
    search_query,
    select_evidence,
)
from mnemon_sm.flows.long_term.tools import READ_TOOLS, ScopedTools
from mnemon_sm.flows.workers.requests import build_request
from mnemon_sm.flows.workers.runner import Delegate

__all__ = [
    "AgentAnswer",
    "AgentSearchFlow",
    "DirectSearchFlow",
    "RecallAnswer",
    "RecallFlow",
    "RecallRun",
    "SearchRun",
]

RECALL_DEFAULT = 12  # evidence items a recall returns unless its request says otherwise
ANSWER_EVIDENCE = 12  # evidence items an answer worker is shown


@attrs.frozen
class RecallAnswer:
    """Evidence for a query, without the routing trace."""

    query: str
    mode: str
    results: tuple[dict[str, Any], ...]
    summary: str

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "query": self.query,
            "mode": self.mode,
            "results": list(self.results),
        }
        if self.summary:
            out["hint"] = self.summary
        return out


@attrs.frozen
class AgentAnswer:
    search: SearchResult
    answer: str
    citations: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {**self.search.to_json(), "answer": self.answer, "citations": list(self.citations)}


@attrs.frozen(eq=False)
class SearchRun:
    """One search, carried by the events between its steps (see the module): the question
    as asked and every space's ranked candidates (``retrieve``), then the selected evidence
    an answer worker is shown (``rank`` of the agent search)."""

    question: str
    retrieved: Retrieved
    found: SearchResult | None = None


@attrs.frozen(eq=False)
class RecallRun:
    """One recall, carried by the events between its steps (see the module): the checked
    request (``resolve_spaces``), the worker's selection and the tool box of its run
    (``run_worker``), then the evidence those tools returned (``verify_evidence``)."""

    request: Mapping[str, Any]
    selection: RecallResult | None = None
    tools: ScopedTools | None = None
    evidence: tuple[dict[str, Any], ...] = ()


_FIELDS = frozenset({"query", "space_ids", "mode", "limit", "category", "source", "intent"})


def _request_fields(request: Mapping[str, Any]) -> None:
    """A search's or a recall's request names only the fields of a search, and a query."""
    unknown = set(request) - _FIELDS
    if unknown:
        raise InvalidInput(f"unknown request field(s): {', '.join(sorted(unknown))}")
    if not isinstance(request.get("query"), str) or not request["query"].strip():
        raise InvalidInput("query is required")


def _search_request(request: Mapping[str, Any]) -> SearchQuery:
    """A search request checked by the rules of every search (:func:`search_query`), pure:
    the validator and the ``retrieving`` step derive the same value from the same event
    arguments."""
    _request_fields(request)
    return search_query(
        request["query"],
        space_ids=request.get("space_ids"),
        mode=request.get("mode") or "relevance",
        limit=request.get("limit"),
        category=request.get("category"),
        source=request.get("source"),
        intent=request.get("intent"),
    )


def _recall_request(request: Mapping[str, Any]) -> dict[str, Any]:
    """A recall request, checked, with its limit (12 unless it says otherwise). Its mode and
    filters are the worker's data: its recall tool checks them (:func:`search_query`)."""
    _request_fields(request)
    checked = dict(request)
    wanted = checked.get("limit")
    checked["limit"] = RECALL_DEFAULT if wanted is None else search_limit(wanted)
    return checked


class _SearchingFlow(FlowContext):
    """Shared by the flows whose first steps are the deterministic search: ``retrieve`` asks
    every space for its ranked candidates, ``rank`` selects the evidence (pure)."""

    def __init__(self, service: LongTermService) -> None:
        self.service = service
        super().__init__()

    def check_request(self, request: Mapping[str, Any]) -> None:
        _search_request(request)

    def retrieve(self, machine: Machine, request: Mapping[str, Any]) -> None:
        """Entry of ``retrieving`` (entered only by the request's event, whose request it
        gets): creates the run."""
        query = _search_request(request)  # checked by the validator already: the same value
        try:
            with self.service.mutex:
                retrieved = self.service.retrieve(query)
        except MnemonError as exc:
            return self.refuse(machine, "search_failed", exc)
        machine.raise_("retrieved", run=SearchRun(request["query"], retrieved))


@flow_context("DirectSearchFlow")
class DirectSearchFlow(_SearchingFlow):
    """The deterministic reads: the search, an insight's neighbours, a space's status."""

    FLOW = "direct_search"

    def rank(self, machine: Machine, run: SearchRun) -> None:
        self.settle(machine, "search_done", select_evidence(run.retrieved))

    def find_related(self, machine: Machine, request: Mapping[str, Any]) -> None:
        """Entry of ``relating`` (entered only by ``related``, whose request it gets)."""
        try:
            with self.service.mutex:
                rows = self.service.related(
                    request["space"],
                    request["insight_id"],
                    depth=request["depth"],
                    edge_type=request["edge"],
                )
        except MnemonError as exc:
            return self.refuse(machine, "related_failed", exc)
        self.settle(machine, "related_found", rows)

    def read_status(self, machine: Machine, request: Mapping[str, Any]) -> None:
        """Entry of ``reporting`` (entered only by ``status``, whose request it gets)."""
        try:
            with self.service.mutex:
                status = self.service.status(request["space"])
        except MnemonError as exc:
            return self.refuse(machine, "status_failed", exc)
        self.settle(machine, "status_read", status)


@flow_context("AgentSearchFlow")
class AgentSearchFlow(_SearchingFlow):
    FLOW = "agent_search"

    def __init__(self, service: LongTermService, delegate: Delegate) -> None:
        self.delegate = delegate
        super().__init__(service)

    def rank(self, machine: Machine, run: SearchRun) -> None:
        found = select_evidence(run.retrieved)
        if not found.hits:
            return self.settle(machine, "no_evidence", AgentAnswer(found, "", ()))
        machine.raise_("evidence_found", run=attrs.evolve(run, found=found))

    def run_worker(self, machine: Machine, run: SearchRun) -> None:
        found = run.found
        assert found is not None
        shown = found.hits[:ANSWER_EVIDENCE]
        evidence = [
            {
                "label": h.citation,
                "name": h.space_name,
                "category": h.insight.category,
                "content": h.insight.content,
            }
            for h in shown
        ]
        request = build_request(
            "answer",
            {"question": run.question, "evidence": evidence},
            (),
            AnswerResult,
        )
        tools = ScopedTools(self.service, ())
        try:
            result = self.delegate.result(request, tools, AnswerResult)
        except WorkerFailed as exc:
            return self.refuse(machine, "worker_failed", exc)
        labels = {h.citation for h in shown}
        citations = tuple(dict.fromkeys(c for c in result.citations if c in labels))
        self.settle(machine, "answered", AgentAnswer(found, result.answer, citations))


@flow_context("RecallFlow")
class RecallFlow(FlowContext):
    FLOW = "recall"

    def __init__(self, service: LongTermService, delegate: Delegate) -> None:
        self.service, self.delegate = service, delegate
        super().__init__()

    def check_request(self, request: Mapping[str, Any]) -> None:
        _recall_request(request)

    def resolve_spaces(self, machine: Machine, request: Mapping[str, Any]) -> None:
        """Entry of ``scoping`` (entered only by ``recall``, whose request it gets): each
        space the request names must exist and be active. Reading the catalog registers the
        stores found on disk, a catalog write: that is why this is a state, not a check.
        Creates the run."""
        checked = _recall_request(request)
        if checked.get("space_ids"):
            try:
                with self.service.mutex:
                    self.service.readable_spaces(checked["space_ids"])
            except MnemonError as exc:
                return self.refuse(machine, "spaces_refused", exc)
        machine.raise_("spaces_resolved", run=RecallRun(checked))

    def run_worker(self, machine: Machine, run: RecallRun) -> None:
        r = run.request
        data = {
            "query": r["query"],
            "mode": r.get("mode") or "relevance",
            "limit": r["limit"],
            "memoryBodyIds": r.get("space_ids"),
            "category": r.get("category"),
            "source": r.get("source"),
            "intent": r.get("intent"),
        }
        tools = ScopedTools(self.service, READ_TOOLS)
        try:
            selection = self.delegate.result(
                build_request("recall", data, READ_TOOLS, RecallResult), tools, RecallResult
            )
        except WorkerFailed as exc:
            return self.refuse(machine, "worker_failed", exc)
        machine.raise_("worker_answered", run=attrs.evolve(run, selection=selection, tools=tools))

    def verify_evidence(self, machine: Machine, run: RecallRun) -> None:
        assert run.tools is not None and run.selection is not None
        items: dict[tuple[str, str], dict[str, Any]] = {}
        for chosen in run.selection.results:
            key = (chosen.memory_body_id, chosen.id)
            found = run.tools.evidence.get(key)
            if found is None:
                error = WorkerFailed(
                    "recall worker returned evidence that no tool of its run returned: "
                    f"{chosen.memory_body_id}/{chosen.id}"
                )
                return self.refuse(machine, "evidence_rejected", error)
            items.setdefault(key, found)
        evidence = tuple(items.values())
        machine.raise_("evidence_accepted", run=attrs.evolve(run, evidence=evidence))

    def rank(self, machine: Machine, run: RecallRun) -> None:
        assert run.selection is not None
        evidence, request = list(run.evidence), run.request
        limit = request["limit"]
        low = low_cutoff(request.get("mode") or "relevance")
        scores = [e.get("score") for e in evidence]
        chosen_items, _ = apply_policy(evidence, scores, limit, low=low)
        results = tuple({**item, "relevanceTier": tier} for item, tier in chosen_items)
        answer = RecallAnswer(
            request["query"],
            request.get("mode") or "relevance",
            results,
            run.selection.summary.strip(),
        )
        self.settle(machine, "evidence_ranked", answer)
