"""The memory tools of a host's main agent: definitions and one dispatcher.

Theory of operation
-------------------
The per-turn context (:mod:`mnemon_sm.flows.hot.context_text`) tells the model to change hot
memory with ``mnemon_runtime_memory`` and to call ``mnemon_recall`` for durable history.
:class:`AgentTools` (``MemoryRoot.tools``) ships those tools and the useful rest, so a host
does not write its own:

* :meth:`AgentTools.definitions` lists each tool's name, a description written for a model,
  and a JSON schema of its arguments; :meth:`~AgentTools.to_openai`,
  :meth:`~AgentTools.to_anthropic` and :meth:`~AgentTools.to_mcp` give the same list in the
  shape each API expects (no SDK is needed).
* :meth:`AgentTools.call` runs a tool the model called and answers with a JSON-serialisable
  dict: the operation's receipt, or ``{"error": {"type": ..., "message": ...}}`` for any
  ``MnemonError`` (the shape the CLI prints), which the model can read and act on. Any other
  exception is a bug of the host or the library and propagates.

Each tool's arguments are an attrs class; its schema is generated from that class by the
generator worker result schemas use (:func:`~mnemon_sm.flows.workers.requests.json_schema`,
fields with defaults optional) and the dispatcher structures the arguments into the same class
through the one strict converter, so the two cannot drift: unknown keys, wrong types and
missing required keys are ``InvalidInput`` error results naming the key as the model wrote it.
Where a worker tool box has the same operation, the tool takes its argument class and names
(:class:`~mnemon_sm.flows.long_term.tools.RecallArgs`, ``RememberArgs``; camelCase keys such as
``memoryBodyIds``); the hot-memory tool keeps the reference's ``old_text``.

Every tool goes through the root's public facades, so nothing here bypasses a rule: an add that
overflows MEMORY.md or USER.md runs capacity maintenance as ``MemoryRoot.hot.add`` does, a
remember goes through the write worker, and a document change through its flow. On a read-only
root the mutating tools (:data:`MUTATING_TOOLS`) are not listed, and calling one answers with
a ``ReadOnly`` error before anything is touched.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from mnemon_sm.config import Config
from mnemon_sm.convert import StructureFailed, camel_case, register_camel_case, structure
from mnemon_sm.errors import InvalidInput, MnemonError, ReadOnly
from mnemon_sm.flows.documents.api import Documents
from mnemon_sm.flows.hot.api import HotMemory
from mnemon_sm.flows.hot.context_text import RECALL_TOOL, RUNTIME_TOOL
from mnemon_sm.flows.hot.model import TARGETS
from mnemon_sm.flows.lifecycle.review import HotChangeArgs
from mnemon_sm.flows.long_term.api import LongTermMemory
from mnemon_sm.flows.long_term.service import LIMIT_MAX
from mnemon_sm.flows.long_term.tools import NoArgs, RecallArgs, RememberArgs
from mnemon_sm.flows.workers.requests import json_schema
from mnemon_sm.ports.long_term.values import CATEGORIES, INTENTS, MODES, SOURCES
from mnemon_sm.ports.workers import ToolDefinition

__all__ = ["MUTATING_TOOLS", "TOOL_NAMES", "AgentTools", "ToolDefinition", "parse_arguments"]


# -- arguments -------------------------------------------------------------------------------


@attrs.frozen
class DocumentCreateArgs:
    title: str
    content: str
    description: str | None = None


@attrs.frozen
class DocumentUpdateArgs:
    id: str
    content: str | None = None
    title: str | None = None
    description: str | None = None


@attrs.frozen
class DocumentSearchArgs:
    query: str
    limit: int | None = None
    include_archived: bool = False


register_camel_case(DocumentSearchArgs)


# -- the tools -------------------------------------------------------------------------------


@attrs.frozen
class _Tool:
    name: str
    description: str
    args: type
    mutating: bool
    fields: Mapping[str, str]  # property descriptions, keyed by the python field name
    camel: bool = True  # keys are camelCase (False: the field names as they are)


def _one_of(values: tuple[str, ...]) -> str:
    return ", ".join(values[:-1]) + " or " + values[-1]


_SEARCH_FIELDS = {
    "query": "what to look for, in plain words",
    "memory_body_ids": "ids of the Memory Spaces to search (default: every active space)",
    "mode": f"{_one_of(MODES)} (default relevance)",
    "limit": f"how many items at most (1 to {LIMIT_MAX})",
    "category": f"only memories of this category: {_one_of(CATEGORIES)}",
    "source": f"only memories from this source: {_one_of(SOURCES)}",
    "intent": f"what the question asks: {_one_of(INTENTS)} (helps ranking)",
}

_TOOLS: tuple[_Tool, ...] = (
    _Tool(
        RUNTIME_TOOL,
        "Change hot memory, the USER.md and MEMORY.md files loaded into every turn. "
        "action add appends a new, independent fact (content); replace rewrites the one "
        "entry containing old_text with content; remove deletes the one entry containing "
        "old_text. old_text is a short exact substring of one entry, copied from the "
        "context. target user is for facts about the person, memory for facts about the "
        "work. Importance critical is for must, always and never rules, low for "
        "short-lived details, normal otherwise. When a file is full, the add first makes "
        "room (USER.md is consolidated, MEMORY.md archived to long-term memory). Only the "
        "receipt this tool returns proves a write.",
        HotChangeArgs,
        True,
        {
            "action": "add, replace or remove",
            "target": "user (USER.md, the person) or memory (MEMORY.md, the work)",
            "content": "the entry's text (add and replace)",
            "old_text": "a short substring matching exactly one entry (replace and remove)",
            "importance": "critical, normal (default) or low (add and replace)",
        },
        camel=False,
    ),
    _Tool(
        RECALL_TOOL,
        "Recall evidence from long-term memory (the Memory Spaces): durable history, "
        "archived details and earlier decisions. Use it when an exact earlier detail "
        "matters or hot memory only keeps a pointer; never guess a missing past rule. "
        "Returns the evidence items found, each with its memory space and id.",
        RecallArgs,
        False,
        _SEARCH_FIELDS,
    ),
    _Tool(
        "mnemon_search",
        "Search long-term memory directly and deterministically (no model involved): "
        "the stored memories ranked for the query. Faster than mnemon_recall, but it "
        "does not select or check the evidence.",
        RecallArgs,
        False,
        _SEARCH_FIELDS,
    ),
    _Tool(
        "mnemon_remember",
        "Store a durable fact in long-term memory (not loaded into every turn; found "
        "later by mnemon_recall). Use it for reusable knowledge worth keeping beyond hot "
        "memory; use mnemon_runtime_memory for what every turn should see. The receipt "
        "says what was stored and where.",
        RememberArgs,
        True,
        {
            "content": "the fact to store, self-contained",
            "memory_body_id": "the Memory Space to store it in (default: chosen for you)",
            "category": f"{_one_of(CATEGORIES)} (default general)",
            "importance": "1 (trivial) to 5 (essential); 3 by default",
            "tags": "short keywords",
            "entities": "names of people, projects or things it is about",
            "source": f"who it comes from: {_one_of(SOURCES)} (default agent)",
        },
    ),
    _Tool(
        "mnemon_document_create",
        "Create a project Document: a longer reference text (a spec, a how-to, a "
        "decision record) kept apart from hot memory and found with "
        "mnemon_document_search. When the active documents are full, the least recently "
        "used ones are archived to make room.",
        DocumentCreateArgs,
        True,
        {
            "title": "a short title",
            "content": "the document's Markdown text",
            "description": "one line saying what it is for",
        },
    ),
    _Tool(
        "mnemon_document_update",
        "Update an active project Document by id: its content, title or description; "
        "what is not given stays as it is.",
        DocumentUpdateArgs,
        True,
        {
            "id": "the document's id (from mnemon_document_search)",
            "content": "the new Markdown text",
            "title": "the new title",
            "description": "the new one-line description",
        },
    ),
    _Tool(
        "mnemon_document_search",
        "Search the project Documents by words; returns the best matches with their "
        "content. Search active Documents before deep recall.",
        DocumentSearchArgs,
        False,
        {
            "query": "words to look for",
            "limit": "how many documents at most",
            "include_archived": "also search archived documents (default false)",
        },
    ),
    _Tool(
        "mnemon_status",
        "Show the state of memory: hot-memory usage per file, the Memory Spaces, "
        "document counts, and whether memory can be written.",
        NoArgs,
        False,
        {},
    ),
)

TOOL_NAMES = tuple(t.name for t in _TOOLS)
MUTATING_TOOLS = tuple(t.name for t in _TOOLS if t.mutating)
_BY_NAME = {t.name: t for t in _TOOLS}


def _key(tool: _Tool, field: str) -> str:
    return camel_case(field) if tool.camel else field


def _definition(tool: _Tool) -> ToolDefinition:
    schema = copy.deepcopy(json_schema(tool.args, inputs=True, camel=tool.camel))
    for field, text in tool.fields.items():
        schema["properties"][_key(tool, field)]["description"] = text
    return ToolDefinition(tool.name, tool.description, schema)


_DEFINITIONS = {t.name: _definition(t) for t in _TOOLS}


def parse_arguments(name: str, arguments: object) -> Any:
    """The arguments of tool ``name`` as the dispatcher reads them (its argument class),
    before anything runs. Raises ``InvalidInput`` as :meth:`AgentTools.call` reports it."""
    tool = _BY_NAME.get(name)
    if tool is None:
        raise InvalidInput(f"unknown tool {name!r}; the memory tools are: {TOOL_NAMES}")
    return _arguments(tool, arguments)


def _arguments(tool: _Tool, arguments: object) -> Any:
    """``arguments`` (a JSON object, or its text) structured into the tool's class."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            raise InvalidInput(f"{tool.name}: arguments are not valid JSON") from None
    if not isinstance(arguments, Mapping):
        raise InvalidInput(f"{tool.name}: arguments must be a JSON object")
    try:
        return structure(dict(arguments), tool.args)
    except (StructureFailed, TypeError) as exc:
        # the converter names each key as the model writes it (see mnemon_sm.convert)
        problems = exc.problems if isinstance(exc, StructureFailed) else [str(exc)]
        raise InvalidInput(f"{tool.name}: {'; '.join(problems)}") from None


_HOT_FIELDS: dict[str, tuple[set[str], set[str]]] = {  # action -> (required, allowed)
    "add": ({"content"}, {"content", "importance"}),
    "replace": ({"content", "old_text"}, {"content", "old_text", "importance"}),
    "remove": ({"old_text"}, {"old_text"}),
}


class AgentTools:
    """The memory tools of one root (``MemoryRoot.tools``)."""

    def __init__(
        self,
        hot: HotMemory,
        long_term: Callable[[], LongTermMemory],
        documents: Documents,
        config: Config,
    ) -> None:
        """``long_term`` opens the root's long-term tier when a tool first needs it."""
        self._hot, self._long_term, self._documents = hot, long_term, documents
        self._config = config

    @property
    def names(self) -> tuple[str, ...]:
        """The tools offered: every tool, without the mutating ones on a read-only root."""
        writable = self._config.write_enabled
        return tuple(t.name for t in _TOOLS if writable or not t.mutating)

    def definitions(self) -> tuple[ToolDefinition, ...]:
        """The offered tools, neutral: name, description and input schema (copies: the
        caller may change them)."""
        return tuple(
            attrs.evolve(d, input_schema=copy.deepcopy(d.input_schema))
            for d in (_DEFINITIONS[n] for n in self.names)
        )

    def to_openai(self) -> list[dict[str, Any]]:
        """The tools for the OpenAI Chat Completions API (``tools=``)."""
        return [
            {
                "type": "function",
                "function": {
                    "name": d.name,
                    "description": d.description,
                    "parameters": copy.deepcopy(d.input_schema),
                },
            }
            for d in self.definitions()
        ]

    def to_anthropic(self) -> list[dict[str, Any]]:
        """The tools for the Anthropic Messages API (``tools=``)."""
        return [d.to_json() for d in self.definitions()]

    def to_mcp(self) -> list[dict[str, Any]]:
        """The tools as a Model Context Protocol server lists them (``tools/list``)."""
        return [
            {
                "name": d.name,
                "description": d.description,
                "inputSchema": copy.deepcopy(d.input_schema),
            }
            for d in self.definitions()
        ]

    def call(self, name: str, arguments: Mapping[str, Any] | str) -> dict[str, Any]:
        """Run the tool ``name`` with the model's ``arguments`` (a JSON object, or its text
        as the OpenAI API hands it over) and answer with a JSON-serialisable dict: the
        operation's receipt, or ``{"error": {"type", "message", ...}}`` for any
        ``MnemonError`` (an unknown tool, invalid arguments, a refused change, ...).

        Raises:
            anything that is not a ``MnemonError``: a bug, not an answer for the model.
        """
        try:
            return self._call(name, arguments)
        except MnemonError as exc:
            return {"error": exc.to_json()}

    def _call(self, name: object, arguments: object) -> dict[str, Any]:
        tool = _BY_NAME.get(name) if isinstance(name, str) else None
        if tool is None:
            raise InvalidInput(f"unknown tool {name!r}; the memory tools are: {self.names}")
        if tool.mutating and not self._config.write_enabled:
            raise ReadOnly()
        args = _arguments(tool, arguments)
        handler: Callable[[Any], dict[str, Any]] = getattr(
            self, "_" + tool.name.removeprefix("mnemon_")
        )
        return handler(args)

    # -- handlers --------------------------------------------------------------------------

    def _runtime_memory(self, a: HotChangeArgs) -> dict[str, Any]:
        required, allowed = _HOT_FIELDS[a.action]
        given = {f for f in ("content", "old_text", "importance") if getattr(a, f) is not None}
        if missing := sorted(required - given):
            raise InvalidInput(f"{RUNTIME_TOOL}: {a.action} needs {' and '.join(missing)}")
        if extra := sorted(given - allowed):
            raise InvalidInput(f"{RUNTIME_TOOL}: {a.action} takes no {' or '.join(extra)}")
        content, old_text = a.content or "", a.old_text or ""  # given when needed (above)
        if a.action == "add":
            receipt = self._hot.add(a.target, content, a.importance)
        elif a.action == "replace":
            receipt = self._hot.replace(a.target, old_text, content, a.importance)
        else:
            receipt = self._hot.remove(a.target, old_text)
        return receipt.to_json()

    def _search_options(self, a: RecallArgs) -> dict[str, Any]:
        return {
            "spaces": a.memory_body_ids,
            "mode": a.mode,
            "limit": a.limit,
            "category": a.category,
            "source": a.source,
            "intent": a.intent,
        }

    def _recall(self, a: RecallArgs) -> dict[str, Any]:
        return self._long_term().recall(a.query, **self._search_options(a)).to_json()

    def _search(self, a: RecallArgs) -> dict[str, Any]:
        return self._long_term().search(a.query, **self._search_options(a)).to_json()

    def _remember(self, a: RememberArgs) -> dict[str, Any]:
        receipt = self._long_term().remember(
            a.content,
            space=a.memory_body_id,
            source=a.source,
            category=a.category,
            importance=a.importance,
            tags=a.tags,
            entities=a.entities,
        )
        return receipt.to_json()

    def _document_create(self, a: DocumentCreateArgs) -> dict[str, Any]:
        return self._documents.create(a.title, a.content, description=a.description).to_json()

    def _document_update(self, a: DocumentUpdateArgs) -> dict[str, Any]:
        result = self._documents.update(
            a.id, content=a.content, title=a.title, description=a.description
        )
        return result.to_json()

    def _document_search(self, a: DocumentSearchArgs) -> dict[str, Any]:
        hits = self._documents.search(a.query, limit=a.limit, include_archived=a.include_archived)
        return {"query": a.query.strip(), "results": [h.to_json() for h in hits]}

    def _status(self, _: NoArgs) -> dict[str, Any]:
        snapshot = self._hot.snapshot()
        hot: dict[str, Any] = {"revision": snapshot.revision}
        for target in TARGETS:
            used, limit = snapshot.usage[target]
            hot[target] = {"entryCount": len(snapshot.of(target)), "used": used, "limit": limit}
        records = self._documents.records()
        active = sum(1 for r in records if r.status == "active")
        return {
            "writeEnabled": self._config.write_enabled,
            "tools": list(self.names),
            "hotMemory": hot,
            "spaces": [
                {"id": s.id, "name": s.name, "description": s.description, "active": s.active}
                for s in self._long_term().spaces()
            ],
            "documents": {"active": active, "archived": len(records) - active},
        }
