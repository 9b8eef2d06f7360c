"""The scoped tool box a worker gets for one run: grants, a ledger, staged writes.

Theory of operation
-------------------
:class:`ScopedTools` exposes exactly the granted tools. A call to any other name raises
``ToolRefused`` and is remembered, so the run fails even if the worker ignores the error.
Arguments are validated strictly (unknown keys refused) before the deterministic service sees
them. Every read result is written to a ledger: the host later accepts only evidence that a
tool of this run really returned, and takes its content from the ledger, never from the
worker's output.

Writes are staged, not executed: a write tool checks its arguments exactly as the service will
(a remember keeps the insight its check returned, and applying it stores that very value: each
insight is checked once, here, not again by the service or the store) and answers with a
provisional id (``pending-1``; a space created in the run is
``pending-space-1``), which later staged writes of the same run may use. A staged space
creation keeps the ids of the spaces the run's listings returned (what its worker decided
on), so that applying it adopts an identical space another writer created in the meantime
instead of making a twin. After the worker's
result passed every host check, :meth:`ScopedTools.apply` executes the staged writes in order
through the service; if the result is refused, nothing was written.

Each box also describes its tools (:attr:`ScopedTools.definitions`): the argument schema is
generated from the very attrs class a call's arguments are validated as
(:func:`~mnemon_sm.flows.workers.requests.json_schema`), the description and the result shape
come from :data:`TOOL_TEXTS`.

Every box belongs to one run (:class:`~mnemon_sm.flows.workers.runner.RunScope`): once the run
ended or was cancelled, every call, from any thread, is refused and nothing more can be staged. A
call holds the long-term tier's mutex only while it runs, never for the whole run, so a slow
worker does not stall the root's other long-term operations.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from mnemon_sm.convert import StructureFailed, register_camel_case, structure
from mnemon_sm.errors import InvalidInput, MnemonError, ToolRefused
from mnemon_sm.flows.long_term.service import LongTermService, SearchHit
from mnemon_sm.flows.workers.requests import json_schema
from mnemon_sm.flows.workers.runner import RunScope
from mnemon_sm.ports.long_term.checks import Prepared
from mnemon_sm.ports.long_term.values import CATEGORIES, EDGE_TYPES, INTENTS, MODES
from mnemon_sm.ports.workers import Cancellation, ToolDefinition

__all__ = [
    "READ_TOOLS",
    "TOOL_TEXTS",
    "WRITE_TOOLS",
    "AppliedWrite",
    "NoTools",
    "ScopedTools",
    "tool_definition",
]


@attrs.frozen
class RecallArgs:
    query: str
    memory_body_ids: list[str] | None = None
    mode: str | None = None
    limit: int | None = None
    category: str | None = None
    source: str | None = None
    intent: str | None = None


@attrs.frozen
class RelatedArgs:
    memory_body_id: str
    id: str
    depth: int = 2
    edge: str | None = None


@attrs.frozen
class RememberArgs:
    content: str
    memory_body_id: str | None = None
    category: str = "general"
    importance: int = 3
    tags: list[str] = attrs.Factory(list)
    entities: list[str] = attrs.Factory(list)
    source: str = "agent"


@attrs.frozen
class LinkArgs:
    source_id: str
    target_id: str
    memory_body_id: str | None = None
    type: str = "semantic"
    weight: float = 0.5
    reason: str | None = None


@attrs.frozen
class ForgetArgs:
    id: str
    memory_body_id: str | None = None


@attrs.frozen
class BodyCreateArgs:
    name: str
    description: str
    active: bool = False


@attrs.frozen
class BodyUpdateArgs:
    memory_body_id: str
    name: str | None = None
    description: str | None = None
    active: bool | None = None


@attrs.frozen
class BodyMergeArgs:
    target_id: str
    source_ids: list[str]
    deactivate_sources: bool = True


@attrs.frozen
class NoArgs:
    pass


for _cls in (
    RecallArgs,
    RelatedArgs,
    RememberArgs,
    LinkArgs,
    ForgetArgs,
    BodyCreateArgs,
    BodyUpdateArgs,
    BodyMergeArgs,
):
    register_camel_case(_cls)

READ_TOOLS = ("mnemon_memory_bodies", "mnemon_recall", "mnemon_related")
WRITE_TOOLS = (
    "mnemon_remember",
    "mnemon_link",
    "mnemon_forget",
    "mnemon_memory_body_create",
    "mnemon_memory_body_update",
    "mnemon_memory_body_merge",
)
_ARGS: dict[str, type] = {
    "mnemon_memory_bodies": NoArgs,
    "mnemon_recall": RecallArgs,
    "mnemon_related": RelatedArgs,
    "mnemon_remember": RememberArgs,
    "mnemon_link": LinkArgs,
    "mnemon_forget": ForgetArgs,
    "mnemon_memory_body_create": BodyCreateArgs,
    "mnemon_memory_body_update": BodyUpdateArgs,
    "mnemon_memory_body_merge": BodyMergeArgs,
}
_STAGED = "Staged, not written: the host applies it only if the run's result agrees. "
# Each tool's description (for the model) and the shape of its JSON result.
TOOL_TEXTS: dict[str, tuple[str, str]] = {
    "mnemon_memory_bodies": (
        "List every Memory Space (memory body), active or not.",
        "an array of spaces: {id, name, description, active, createdAt, updatedAt, "
        "mergedInto?, placement?, capabilities}.",
    ),
    "mnemon_recall": (
        "Search long-term memory for insights matching the query, in the given spaces "
        f"(memoryBodyIds; default: every active space). mode: {', '.join(MODES)}; "
        f"intent: {', '.join(INTENTS)}.",
        "{query, mode, results: [{id, content, memoryBodyId, memoryBodyName, "
        "memoryProviderId, category, importance, tags, entities, relevanceTier, score?, "
        "normalizedScore?, intent?, matchedVia?, confidence?}], sources: [{memoryBodyId, "
        "memoryBodyName, providerId, status, itemCount, quality, hint?, reason?}], hint?}; "
        "only ids returned here may be cited.",
    ),
    "mnemon_related": (
        "Follow the graph edges of insight id in space memoryBodyId, up to depth hops (1 to "
        f"5); edge filters by type ({', '.join(EDGE_TYPES)}).",
        "an array of the insights reached: {id, content, category, importance, tags, "
        "entities, source, access_count, created_at, updated_at, depth, via_edge_type, "
        "memoryBodyId, memoryBodyName} (the store's own keys, some snake_case as Mnemon "
        "writes them).",
    ),
    "mnemon_remember": (
        f"{_STAGED}Store an insight in space memoryBodyId (a pending-space-N id from a "
        "create of this run works too). category: "
        f"{', '.join(CATEGORIES)}; importance 1 to 5.",
        '{"status": "staged", "tool": "mnemon_remember", "id": "pending-N"}.',
    ),
    "mnemon_link": (
        f"{_STAGED}Link insight sourceId to targetId in space memoryBodyId; type: "
        f"{', '.join(EDGE_TYPES)}; weight 0 to 1.",
        '{"status": "staged", "tool": "mnemon_link"}.',
    ),
    "mnemon_forget": (
        f"{_STAGED}Forget insight id in space memoryBodyId.",
        '{"status": "staged", "tool": "mnemon_forget"}.',
    ),
    "mnemon_memory_body_create": (
        f"{_STAGED}Create a Memory Space; later calls of this run may use its provisional id.",
        '{"status": "staged", "tool": "mnemon_memory_body_create", '
        '"memoryBodyId": "pending-space-N"} (the provisional id is memoryBodyId, not id).',
    ),
    "mnemon_memory_body_update": (
        f"{_STAGED}Change a space's name, description or active flag.",
        '{"status": "staged", "tool": "mnemon_memory_body_update"}.',
    ),
    "mnemon_memory_body_merge": (
        f"{_STAGED}Merge the spaces sourceIds into targetId (sources deactivated unless "
        "deactivateSources is false).",
        '{"status": "staged", "tool": "mnemon_memory_body_merge"}.',
    ),
}


def tool_definition(
    name: str, arguments: type, texts: Mapping[str, tuple[str, str]] = TOOL_TEXTS
) -> ToolDefinition:
    """The definition of tool ``name`` (its texts from ``texts``) whose arguments are the
    attrs class ``arguments``; its schema is a fresh copy."""
    description, result = texts[name]
    return ToolDefinition(
        name=name,
        description=f"{description} Returns {result}",
        input_schema=copy.deepcopy(json_schema(arguments, inputs=True)),
        result=result,
    )


# What each write tool's receipt counts as, for checking the worker's claimed action.
TOOL_ACTIONS = {
    "mnemon_remember": ("stored", "added"),
    "mnemon_link": ("linked",),
    "mnemon_forget": ("forgotten",),
    "mnemon_memory_body_create": ("created",),
    "mnemon_memory_body_update": ("updated",),
    "mnemon_memory_body_merge": ("merged",),
}


@attrs.frozen
class StagedWrite:
    tool: str
    args: Any
    pending_id: str | None  # provisional id handed to the worker, if any
    seen: frozenset[str] | None = None  # a space creation: the space ids the run had listed
    item: Prepared | None = None  # a remember: the insight its staging checked


@attrs.frozen
class AppliedWrite:
    """One applied write: its tool, receipt and space; ``created`` is False for a space
    creation that adopted another writer's identical space (it wrote nothing)."""

    tool: str
    receipt: dict[str, Any]
    space_id: str
    created: bool = True


class NoTools:
    """The tool box of a worker granted no tool at all: every call is refused (and
    remembered, so the run fails even if the worker swallows the error)."""

    def __init__(self) -> None:
        self.refused: list[str] = []
        self.scope = RunScope()

    @property
    def names(self) -> tuple[str, ...]:
        return ()

    @property
    def definitions(self) -> tuple[ToolDefinition, ...]:
        return ()

    @property
    def cancellation(self) -> Cancellation:
        return self.scope.cancellation

    def call(self, name: str, arguments: Mapping[str, Any]) -> Any:
        self.scope.check()
        self.refused.append(str(name))
        raise ToolRefused(f"tool {name!r} is not granted to this worker (it has no tools)")


Remembered = Callable[[RememberArgs, str | None], dict[str, Any] | None]


class ScopedTools:
    """One run's tools over a ``LongTermService``."""

    def __init__(
        self,
        service: LongTermService,
        granted: tuple[str, ...],
        *,
        readonly: bool = False,
        scope: RunScope | None = None,
    ) -> None:
        unknown = set(granted) - set(_ARGS)
        if unknown:
            raise ValueError(f"unknown tools: {sorted(unknown)}")
        self.scope = scope or RunScope()
        self._service, self._granted = service, tuple(granted)
        self._readonly = readonly  # reads count no access (a write worker's checks)
        self.refused: list[str] = []
        self.evidence: dict[tuple[str, str], dict[str, Any]] = {}  # (space, id) -> hit json
        self.staged: list[StagedWrite] = []
        self._listed: set[str] = set()  # ids of the spaces this run's listings returned
        self._search_hits: dict[tuple[str, str], SearchHit] = {}

    @property
    def names(self) -> tuple[str, ...]:
        return self._granted

    @property
    def definitions(self) -> tuple[ToolDefinition, ...]:
        return tuple(tool_definition(name, _ARGS[name]) for name in self._granted)

    @property
    def service(self) -> LongTermService:
        return self._service

    @property
    def cancellation(self) -> Cancellation:
        return self.scope.cancellation

    def call(self, name: str, arguments: Mapping[str, Any]) -> Any:
        self.scope.check()
        if name not in self._granted:
            self.refused.append(str(name))
            raise ToolRefused(f"tool {name!r} is not granted to this worker")
        if not isinstance(arguments, Mapping):
            raise InvalidInput(f"{name}: arguments must be a JSON object")
        try:
            args: Any = structure(dict(arguments), _ARGS[name])
        except (StructureFailed, TypeError) as exc:
            problems = exc.problems if isinstance(exc, StructureFailed) else [str(exc)]
            raise InvalidInput(f"{name}: {'; '.join(problems)}") from None
        handler: Callable[[Any], Any] = getattr(self, "_" + name.removeprefix("mnemon_"))
        with self.scope.host_call(), self._service.mutex:
            return handler(args)

    def hit(self, space_id: str, insight_id: str) -> SearchHit | None:
        """A search hit this run's recall returned (None when it returned none like it)."""
        return self._search_hits.get((space_id, insight_id))

    # -- reads -----------------------------------------------------------------------------

    def _memory_bodies(self, _: NoArgs) -> list[dict[str, Any]]:
        caps = attrs.asdict(self._service.capabilities())
        spaces = self._service.spaces()
        self._listed.update(s.id for s in spaces)
        return [{**s.to_json(), "capabilities": caps} for s in spaces]

    def _recall(self, a: RecallArgs) -> dict[str, Any]:
        result = self._service.search(
            a.query,
            space_ids=a.memory_body_ids,
            mode=a.mode or "relevance",
            limit=a.limit,
            category=a.category,
            source=a.source,
            intent=a.intent,
            readonly=self._readonly,
        )
        for hit in result.hits:
            key = (hit.space_id, hit.insight.id)
            self._search_hits[key] = hit
            self.evidence[key] = hit.to_json()
        return result.to_json()

    def _related(self, a: RelatedArgs) -> list[dict[str, Any]]:
        items = self._service.related(a.memory_body_id, a.id, depth=a.depth, edge_type=a.edge)
        rows = [item.to_json() for item in items]
        for row in rows:
            self.evidence[(row["memoryBodyId"], row["id"])] = row
        return rows

    # -- staged writes ---------------------------------------------------------------------

    def _stage(
        self,
        tool: str,
        args: Any,
        prefix: str | None,
        seen: frozenset[str] | None = None,
        item: Prepared | None = None,
    ) -> dict[str, Any]:
        def write() -> str | None:
            pending = None if prefix is None else f"{prefix}-{len(self.staged) + 1}"
            self.staged.append(StagedWrite(tool, args, pending, seen, item))
            return pending

        pending = self.scope.stage(write)
        out: dict[str, Any] = {"status": "staged", "tool": tool}
        if pending is not None:
            out["id" if prefix == "pending" else "memoryBodyId"] = pending
        return out

    def _remember(self, a: RememberArgs) -> dict[str, Any]:
        """Stage a remember with the insight its check returned: applying it stores that
        value, checked here once (the service and the store take it as it is)."""
        item = self._service.check_remember(
            a.content,
            space_id=a.memory_body_id,
            pending=self._pending(a.memory_body_id),
            category=a.category,
            importance=a.importance,
            tags=a.tags,
            entities=a.entities,
            source=a.source,
        )
        return self._stage("mnemon_remember", a, "pending", item=item)

    def _link(self, a: LinkArgs) -> dict[str, Any]:
        pending = self._pending(a.memory_body_id)
        self._service.check_link(a.memory_body_id, a.type, a.weight, pending=pending)
        return self._stage("mnemon_link", a, None)

    def _forget(self, a: ForgetArgs) -> dict[str, Any]:
        pending = self._pending(a.memory_body_id)
        self._service.check_write_target(a.memory_body_id, pending=pending)
        return self._stage("mnemon_forget", a, None)

    def _memory_body_create(self, a: BodyCreateArgs) -> dict[str, Any]:
        """Stage a creation with the spaces the run has listed, the ones its worker decided
        on: when it is applied, a twin of it that is none of them (another writer created it
        meanwhile) is used instead of a second one (:meth:`Catalog.create`)."""
        self._service.check_space_text(a.name, a.description)
        seen = frozenset(self._listed)
        return self._stage("mnemon_memory_body_create", a, "pending-space", seen)

    def _memory_body_update(self, a: BodyUpdateArgs) -> dict[str, Any]:
        pending = self._pending(a.memory_body_id)
        self._service.check_write_target(a.memory_body_id, pending=pending)
        return self._stage("mnemon_memory_body_update", a, None)

    def _memory_body_merge(self, a: BodyMergeArgs) -> dict[str, Any]:
        self._service.check_write_target(a.target_id, pending=self._pending(a.target_id))
        return self._stage("mnemon_memory_body_merge", a, None)

    def _pending(self, space: str | None) -> bool:
        """Whether ``space`` is a space created earlier in this run (checked when applied)."""
        if space is None or not space.startswith("pending-space-"):
            return False
        if space not in {w.pending_id for w in self.staged}:
            raise InvalidInput(f"unknown pending memory body: {space}")
        return True

    # -- applying --------------------------------------------------------------------------

    def apply(
        self,
        reuse: Remembered | None = None,
        record: Callable[[RememberArgs, dict[str, Any]], None] | None = None,
    ) -> list[AppliedWrite]:
        """Execute the staged writes in order; provisional ids become real ones.

        ``reuse(args, space)`` may answer a staged remember with the receipt of an insight
        that already holds its content (nothing is then written); ``record(args, receipt)``
        is told of every remember really written, right after it succeeded.

        Raises:
            MnemonError: a write failed; the writes before it stay applied (they are listed
                on the exception as ``applied``, with a remember that was stored before its
                space's activation failed).
        """
        ids: dict[str, str] = {}
        applied: list[AppliedWrite] = []

        def real(value: str | None) -> str | None:
            return ids.get(value, value) if value is not None else None

        service = self._service
        try:
            for w in self.staged:
                a, created = w.args, True
                if w.tool == "mnemon_remember":
                    space_id = real(a.memory_body_id)
                    found = reuse(a, space_id) if reuse is not None else None
                    if found is not None:
                        receipt = found
                    else:
                        assert w.item is not None  # staged by _remember, with its check
                        receipt = service.remember_checked(w.item, space_id=space_id)
                        if record is not None:
                            record(a, receipt)
                elif w.tool == "mnemon_link":
                    receipt = service.link(
                        real(a.memory_body_id),
                        real(a.source_id) or "",
                        real(a.target_id) or "",
                        edge_type=a.type,
                        weight=a.weight,
                        reason=a.reason,
                    )
                elif w.tool == "mnemon_forget":
                    receipt = service.forget(real(a.memory_body_id), real(a.id) or "")
                elif w.tool == "mnemon_memory_body_create":
                    space, created = service.create_or_adopt_space(
                        a.name, a.description, active=a.active, seen=w.seen
                    )
                    receipt = {**space.to_json(), "memoryBodyId": space.id}
                elif w.tool == "mnemon_memory_body_update":
                    space = service.update_space(
                        real(a.memory_body_id) or "",
                        name=a.name,
                        description=a.description,
                        active=a.active,
                    )
                    receipt = {**space.to_json(), "memoryBodyId": space.id}
                else:
                    receipt = service.merge_spaces(
                        real(a.target_id) or "",
                        [real(s) or "" for s in a.source_ids],
                        deactivate_sources=a.deactivate_sources,
                    ).to_json()
                if w.pending_id is not None:
                    key = "memoryBodyId" if w.pending_id.startswith("pending-space") else "id"
                    ids[w.pending_id] = receipt[key]
                applied.append(
                    AppliedWrite(
                        w.tool,
                        receipt,
                        receipt["memoryBodyId"],
                        created=created,
                    )
                )
        except MnemonError as exc:
            written = getattr(exc, "written", None)  # stored before the write failed
            if written is not None:
                applied.append(AppliedWrite(w.tool, written, written["memoryBodyId"]))
            exc.applied = applied  # type: ignore[attr-defined]
            raise
        return applied
