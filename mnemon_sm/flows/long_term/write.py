"""Contexts of ``specs/long_term_write.yaml`` and ``specs/merge_spaces.yaml``.

A write runs the write worker with the tools of its operation only; its writes are staged by
the tool box. The receipt must agree with what was staged (its action is the action of a
staged write, its spaces are spaces those writes touch) before anything is applied; a
``failed`` or ``skipped`` receipt is returned with nothing applied. Applying turns provisional
ids into real ones and reports the spaces really written.

Validators are pure: they check the request and store nothing; the request travels with its
event to the entry action of the first state (``run_worker``, ``run_merge``).

A run's data travels with its events
------------------------------------
Everything one write knows is one frozen :class:`WriteRun`: ``run_worker`` creates it (the
request's data, the worker's receipt and the tool box holding the staged writes) and passes
it as the ``run`` keyword argument of ``worker_answered``; each later step receives it the
same way (python-statemachine passes event arguments to callbacks by name). The contexts
keep no per-run attribute: between two steps a run exists only in the engine's queue of
internal events, so when it ends, by an outcome or by an exception (which drops the queue
and fires ``abort``), its staged writes go with it and nothing is left to reset. A merge is
one step and carries nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from mnemon_sm import inputs
from mnemon_sm.engine.context import FlowContext
from mnemon_sm.engine.flow import Machine
from mnemon_sm.engine.registry import flow_context
from mnemon_sm.errors import InvalidInput, MnemonError, ReadOnly, WorkerFailed
from mnemon_sm.flows.long_term.results import WriteResult
from mnemon_sm.flows.long_term.service import LongTermService
from mnemon_sm.flows.long_term.tools import TOOL_ACTIONS, AppliedWrite, ScopedTools
from mnemon_sm.flows.workers.requests import build_request
from mnemon_sm.flows.workers.runner import Delegate

__all__ = ["GRANTS", "MergeFlow", "WriteFlow", "WriteReceipt", "WriteRun", "WritingContext"]

_READ = ("mnemon_memory_bodies", "mnemon_recall", "mnemon_related")
GRANTS: dict[str, tuple[str, ...]] = {
    "remember": (*_READ, "mnemon_remember", "mnemon_memory_body_create"),
    "link": (*_READ, "mnemon_link"),
    "forget": (*_READ, "mnemon_forget"),
    "create": ("mnemon_memory_bodies", "mnemon_memory_body_create"),
    "update": ("mnemon_memory_bodies", "mnemon_memory_body_update"),
    "merge": ("mnemon_memory_bodies", "mnemon_memory_body_merge"),
}
# The request fields each operation accepts (the worker sees them as untrusted data).
FIELDS: dict[str, tuple[str, ...]] = {
    "remember": (
        "content",
        "memoryBodyId",
        "category",
        "importance",
        "tags",
        "entities",
        "source",
    ),
    "link": ("sourceId", "targetId", "memoryBodyId", "type", "weight", "reason"),
    "forget": ("id", "memoryBodyId"),
    "create": ("name", "description", "active"),
    "update": ("memoryBodyId", "name", "description", "active"),
    "merge": ("targetId", "sourceIds", "deactivateSources"),
}


@attrs.frozen
class WriteReceipt:
    """The structured receipt of a delegated write."""

    summary: str
    action: str
    memory_body_ids: tuple[str, ...]
    writes: tuple[AppliedWrite, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "delegated": True,
            "summary": self.summary,
            "action": self.action,
            "memoryBodyIds": list(self.memory_body_ids),
            "writes": [{"tool": w.tool, **w.receipt} for w in self.writes],
        }


@attrs.frozen(eq=False)
class WriteRun:
    """One write, carried by the events between its steps (see the module)."""

    data: Mapping[str, Any]  # the request, without its empty fields
    receipt: WriteResult  # the worker's receipt, strictly validated
    tools: ScopedTools  # the worker's tool box: its staged writes


class WritingContext(FlowContext):
    """The base of the long-term flows that write (writes, merge, space management): the
    service, and the validator that refuses them on a read-only root."""

    def __init__(self, service: LongTermService) -> None:
        self.service = service
        super().__init__()

    def check_writable(self) -> None:
        """A read-only root writes nothing (pure: the configuration only)."""
        with self.service.mutex:
            self.service.check_write_target(None, pending=True)


@flow_context("WriteFlow")
class WriteFlow(WritingContext):
    FLOW = "long_term_write"

    def __init__(self, service: LongTermService, delegate: Delegate) -> None:
        self.delegate = delegate
        super().__init__(service)

    def check_request(self, request: Mapping[str, Any]) -> None:
        operation = request.get("operation")
        if operation not in FIELDS:
            raise InvalidInput(f"operation must be one of {', '.join(FIELDS)}")
        unknown = set(request) - {"operation", *FIELDS[operation]}
        if unknown:
            raise InvalidInput(f"unknown field(s) for {operation}: {', '.join(sorted(unknown))}")
        for key, value in request.items():
            inputs.texts_within(value, key)
        if operation == "remember" and not str(request.get("content") or "").strip():
            raise InvalidInput("content is required")

    def run_worker(self, machine: Machine, request: Mapping[str, Any]) -> None:
        """Entry of ``delegating`` (entered only by ``write``, whose checked request it
        gets): creates the run."""
        data = {k: v for k, v in request.items() if v is not None}
        grants = GRANTS[data["operation"]]
        tools = ScopedTools(self.service, grants, readonly=True)
        try:
            receipt = self.delegate.result(
                build_request("write", data, grants, WriteResult), tools, WriteResult
            )
        except WorkerFailed as exc:
            return self.refuse(machine, "worker_failed", exc)
        machine.raise_("worker_answered", run=WriteRun(data, receipt, tools))

    def verify_receipt(self, machine: Machine, run: WriteRun) -> None:
        receipt, staged = run.receipt, run.tools.staged
        if receipt.action in ("failed", "skipped"):
            if receipt.action == "skipped" and staged:
                return self._reject(machine, "it says skipped but staged writes")
            result = WriteReceipt(receipt.summary, receipt.action, ())
            return self.settle(machine, "nothing_to_apply", result)
        actions = {a for w in staged for a in TOOL_ACTIONS[w.tool]}
        if receipt.action not in actions:
            return self._reject(machine, f"its action {receipt.action!r} matches no staged write")
        with self.service.mutex:
            touched = self._touched(run.tools)
        stray = [s for s in receipt.memory_body_ids if s not in touched]
        if stray:
            return self._reject(machine, f"it names spaces no staged write touches: {stray}")
        machine.raise_("receipt_accepted", run=run)

    def apply_writes(self, machine: Machine, run: WriteRun) -> None:
        try:
            with self.service.mutex:
                applied = run.tools.apply()
        except MnemonError as exc:
            return self.refuse(machine, "apply_failed", exc)
        spaces = tuple(dict.fromkeys(w.space_id for w in applied))
        result = WriteReceipt(run.receipt.summary, run.receipt.action, spaces, tuple(applied))
        self.settle(machine, "writes_applied", result)

    def _touched(self, tools: ScopedTools) -> set[str]:
        """Spaces the staged writes name (provisional ids included)."""
        touched: set[str] = set()
        any_space = False  # a write with no space named may land in any active space
        for w in tools.staged:
            a = w.args
            for key in ("memory_body_id", "target_id"):
                value = getattr(a, key, None)
                if value is not None:
                    touched.add(value)
            if w.pending_id is not None and w.pending_id.startswith("pending-space"):
                touched.add(w.pending_id)
            any_space = any_space or getattr(a, "memory_body_id", "") is None
        if any_space:
            touched.update(s.id for s in self.service.spaces() if s.active)
        return touched

    def _reject(self, machine: Machine, why: str) -> None:
        error = WorkerFailed(
            f"write worker returned a receipt that does not match its writes: {why}"
        )
        self.refuse(machine, "receipt_rejected", error)


@flow_context("MergeFlow")
class MergeFlow(WritingContext):
    FLOW = "merge_spaces"

    def check_request(self, request: Mapping[str, Any]) -> None:
        target, sources = request.get("target"), request.get("sources")
        if not isinstance(target, str) or not isinstance(sources, list | tuple) or not sources:
            raise InvalidInput("a merge needs a target id and at least one source id")

    def run_merge(self, machine: Machine, request: Mapping[str, Any]) -> None:
        """Entry of ``merging`` (entered only by ``merge``, whose checked request it gets)."""
        try:
            report = self.service.merge_spaces(
                request["target"],
                list(request["sources"]),
                deactivate_sources=request.get("deactivate_sources", True),
            )
        except (MnemonError, ReadOnly) as exc:
            return self.refuse(machine, "merge_failed", exc)
        self.settle(machine, "spaces_merged", report)
