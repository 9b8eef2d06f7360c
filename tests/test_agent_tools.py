"""The main agent's memory tools (``MemoryRoot.tools``): definitions, formats, the dispatcher.

Every tool is called on a root over the in-memory fakes, with its happy path and its refusals.
The schemas are checked as JSON Schema objects of the subset the generator writes, and against
the dispatcher: arguments drawn from each schema are accepted, and each kind of bad argument
(an unknown key, a wrong type, a missing required key) is an ``InvalidInput`` error result
naming the key as the model wrote it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemon_sm import Config, MemoryRoot
from mnemon_sm.agent_tools import MUTATING_TOOLS, TOOL_NAMES, AgentTools
from mnemon_sm.agent_tools.toolset import parse_arguments
from mnemon_sm.errors import InvalidInput
from mnemon_sm.flows.hot.context_text import RECALL_TOOL, RUNTIME_TOOL
from mnemon_sm.ports import Ports
from mnemon_sm.testing.maintenance import seed, world
from mnemon_sm.testing.memory import memory_ports

CONFIG = Config(durability="off")
READ_ONLY = Config(durability="off", write_enabled=False)


def open_root(config: Config = CONFIG) -> tuple[MemoryRoot, Ports]:
    ports, _ = memory_ports()
    return MemoryRoot.open("/unused", config, ports=ports), ports


@pytest.fixture
def root() -> MemoryRoot:
    return open_root()[0]


def ok(tools: AgentTools, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = tools.call(name, arguments)
    assert "error" not in result, result
    json.dumps(result)
    return result


def error(tools: AgentTools, name: str, arguments: object, kind: str) -> str:
    """The message of the error result ``kind`` the call answers with."""
    result = tools.call(name, arguments)  # type: ignore[arg-type]
    assert set(result) == {"error"}, result
    assert result["error"]["type"] == kind, result
    text = json.dumps(result)
    assert "Traceback" not in text and 'File "' not in text
    message: str = result["error"]["message"]
    return message


# -- JSON Schema: the subset the generator writes -----------------------------------------

TYPES = {"object", "array", "string", "integer", "number", "boolean", "null"}
KEYWORDS = {"type", "properties", "required", "additionalProperties", "items", "enum", "anyOf"}


def check_schema(schema: dict[str, Any], top: bool = False) -> None:
    """A JSON Schema of the generator's subset, well formed (raises AssertionError)."""
    assert set(schema) <= KEYWORDS | {"description"}, schema
    if "anyOf" in schema:
        for alternative in schema["anyOf"]:
            check_schema(alternative)
        return
    types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    assert types and set(types) <= TYPES, schema
    if "enum" in schema:
        assert all(valid(v, {"type": schema["type"]}) for v in schema["enum"]), schema
    if "object" in types:
        props = schema["properties"]
        assert isinstance(schema["required"], list) and set(schema["required"]) <= set(props)
        assert schema["additionalProperties"] is False
        for sub in props.values():
            if top:
                assert sub["description"].strip(), sub
            check_schema(sub)
    if "array" in types:
        check_schema(schema["items"])


def valid(value: Any, schema: dict[str, Any]) -> bool:
    """Whether ``value`` is an instance of ``schema`` (the generator's subset)."""
    if "anyOf" in schema:
        return any(valid(value, s) for s in schema["anyOf"])
    if "enum" in schema and value not in schema["enum"]:
        return False
    types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    checks = {
        "null": value is None,
        "boolean": type(value) is bool,
        "integer": type(value) is int,
        "number": type(value) in (int, float),
        "string": type(value) is str,
        "array": type(value) is list and all(valid(v, schema.get("items", {})) for v in value),
        "object": type(value) is dict
        and set(schema["required"]) <= set(value)
        and set(value) <= set(schema["properties"])
        and all(valid(v, schema["properties"][k]) for k, v in value.items()),
    }
    return any(checks[t] for t in types)


def instances(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values of ``schema`` (optional object keys present or not)."""
    if "anyOf" in schema:
        return st.one_of([instances(s) for s in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    options = []
    for t in types:
        if t == "object":
            required = {k: instances(schema["properties"][k]) for k in schema["required"]}
            optional = {
                k: instances(v) for k, v in schema["properties"].items() if k not in required
            }
            options.append(st.fixed_dictionaries(required, optional=optional))
        elif t == "array":
            options.append(st.lists(instances(schema["items"]), max_size=3))
        else:
            options.append(
                {
                    "null": st.none(),
                    "boolean": st.booleans(),
                    "integer": st.integers(-(2**40), 2**40),
                    "number": st.floats(allow_nan=False, allow_infinity=False),
                    "string": st.text(max_size=20),
                }[t]
            )
    return st.one_of(options)


WRONG = {  # a value of another type, per JSON type
    "string": 7,
    "integer": "7",
    "number": "7",
    "boolean": "true",
    "array": "a",
    "object": [],
}


def schemas() -> dict[str, dict[str, Any]]:
    return {d.name: d.input_schema for d in open_root()[0].tools.definitions()}


def bad_arguments() -> list[tuple[str, str, dict[str, Any], str]]:
    """(tool, kind, arguments, the key the error must name), every kind for every tool."""
    cases = []
    for name, schema in schemas().items():
        props, required = schema["properties"], schema["required"]
        base = {k: minimal(props[k]) for k in required}
        cases.append((name, "unknown key", {**base, "bogusKey": 1}, "bogusKey"))
        for key, sub in props.items():
            types = sub["type"] if isinstance(sub["type"], list) else [sub["type"]]
            wrong = WRONG[next(t for t in types if t != "null")]
            cases.append((name, f"wrong type of {key}", {**base, key: wrong}, key))
        for key in required:
            rest = {k: v for k, v in base.items() if k != key}
            cases.append((name, f"missing {key}", rest, key))
    return cases


def minimal(schema: dict[str, Any]) -> Any:
    if "enum" in schema:
        return schema["enum"][0]
    t = schema["type"] if isinstance(schema["type"], str) else schema["type"][0]
    return {"string": "x", "integer": 1, "number": 1.0, "boolean": False, "array": []}[t]


SCHEMAS = schemas()

# -- definitions and formats ---------------------------------------------------------------


def test_the_tools_the_context_names_are_defined(root: MemoryRoot) -> None:
    text = root.context.runtime_memory() + root.context.routing_guidance()
    for name in (RUNTIME_TOOL, RECALL_TOOL):
        assert name in text and name in root.tools.names
    assert root.tools.names == TOOL_NAMES
    assert set(MUTATING_TOOLS) == {
        "mnemon_runtime_memory",
        "mnemon_remember",
        "mnemon_document_create",
        "mnemon_document_update",
    }
    assert root.tools is root.tools  # built once


def test_every_schema_is_a_json_schema_object_with_described_properties(
    root: MemoryRoot,
) -> None:
    for d in root.tools.definitions():
        assert d.description.strip() and d.input_schema["type"] == "object"
        check_schema(d.input_schema, top=True)
        json.dumps(d.to_json())
    hot = schemas()[RUNTIME_TOOL]
    assert set(hot["properties"]) == {"action", "target", "content", "old_text", "importance"}
    assert hot["required"] == ["action", "target"]
    assert "memoryBodyIds" in schemas()[RECALL_TOOL]["properties"]


@pytest.mark.parametrize("name", TOOL_NAMES)
@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_arguments_drawn_from_a_schema_are_accepted(name: str, data: st.DataObject) -> None:
    schema = SCHEMAS[name]
    arguments = data.draw(instances(schema))
    assert valid(arguments, schema)
    parse_arguments(name, arguments)  # raises InvalidInput when the two disagree
    parse_arguments(name, json.dumps(arguments))  # the text the OpenAI API hands over


@pytest.mark.parametrize(
    ("name", "kind", "arguments", "key"),
    [pytest.param(*c, id=f"{c[0]}-{c[1]}") for c in bad_arguments()],
)
def test_each_bad_argument_is_an_invalid_input_naming_the_key(
    name: str, kind: str, arguments: dict[str, Any], key: str
) -> None:
    assert not valid(arguments, SCHEMAS[name])  # the schema refuses it too
    root, ports = open_root()
    before = world(ports)
    message = error(root.tools, name, arguments, "InvalidInput")
    assert name in message and key in message, message
    assert world(ports) == before


@pytest.mark.parametrize("arguments", [[], "[1]", "{not json", "[" * 100_000, 7, None])
def test_arguments_that_are_no_json_object_are_refused(root: MemoryRoot, arguments: Any) -> None:
    message = error(root.tools, "mnemon_status", arguments, "InvalidInput")
    assert "mnemon_status" in message


def test_an_unknown_tool_is_an_error_result(root: MemoryRoot) -> None:
    assert "mnemon_nope" in error(root.tools, "mnemon_nope", {}, "InvalidInput")
    error(root.tools, None, {}, "InvalidInput")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        parse_arguments("mnemon_nope", {})


def test_each_format_has_its_api_shape(root: MemoryRoot) -> None:
    neutral = [d.to_json() for d in root.tools.definitions()]
    assert all(set(d) == {"name", "description", "input_schema"} for d in neutral)
    assert root.tools.to_anthropic() == neutral
    assert root.tools.to_openai() == [
        {
            "type": "function",
            "function": {
                "name": d["name"],
                "description": d["description"],
                "parameters": d["input_schema"],
            },
        }
        for d in neutral
    ]
    assert root.tools.to_mcp() == [
        {"name": d["name"], "description": d["description"], "inputSchema": d["input_schema"]}
        for d in neutral
    ]
    for listing in (root.tools.to_openai(), root.tools.to_anthropic(), root.tools.to_mcp()):
        json.dumps(listing)


def test_a_host_changing_a_listing_changes_no_later_one(root: MemoryRoot) -> None:
    pristine = json.dumps(root.tools.to_anthropic())
    root.tools.definitions()[0].input_schema["properties"].clear()
    kept = root.tools.definitions()[0]
    kept.to_json()["input_schema"]["additionalProperties"] = True
    assert kept.input_schema["additionalProperties"] is False
    root.tools.to_openai()[0]["function"]["parameters"]["properties"].clear()
    root.tools.to_mcp()[0]["inputSchema"]["required"].append("x")
    root.tools.to_anthropic()[0]["input_schema"]["type"] = "array"
    assert json.dumps(root.tools.to_anthropic()) == pristine
    assert json.dumps(open_root()[0].tools.to_anthropic()) == pristine


# -- the dispatcher, tool by tool -----------------------------------------------------------


def test_runtime_memory_adds_replaces_and_removes(root: MemoryRoot) -> None:
    tools = root.tools
    added = ok(
        tools,
        RUNTIME_TOOL,
        {"action": "add", "target": "user", "content": "Prefers tea", "importance": "critical"},
    )
    assert added["added"] == "Prefers tea" and added["target"] == "user"
    assert [(e.content, e.importance) for e in root.hot.snapshot().of("user")] == [
        ("Prefers tea", "critical")
    ]
    replaced = ok(
        tools,
        RUNTIME_TOOL,
        {"action": "replace", "target": "user", "old_text": "tea", "content": "Prefers coffee"},
    )
    assert replaced["replaced"] == {"from": "Prefers tea", "to": "Prefers coffee"}
    removed = ok(tools, RUNTIME_TOOL, {"action": "remove", "target": "user", "old_text": "coffee"})
    assert removed["removed"] == "Prefers coffee" and root.hot.snapshot().of("user") == ()
    # nulls for what an action does not take (what strict function calling sends)
    ok(
        tools,
        RUNTIME_TOOL,
        {"action": "add", "target": "memory", "content": "CI runs on main", "old_text": None},
    )


@pytest.mark.parametrize(
    ("arguments", "kind", "says"),
    [
        ({"action": "add", "target": "user"}, "InvalidInput", "add needs content"),
        ({"action": "replace", "target": "user", "content": "x"}, "InvalidInput", "old_text"),
        ({"action": "remove", "target": "user"}, "InvalidInput", "remove needs old_text"),
        (
            {"action": "remove", "target": "user", "old_text": "a", "content": "b"},
            "InvalidInput",
            "remove takes no content",
        ),
        (
            {"action": "add", "target": "user", "content": "b", "old_text": "a"},
            "InvalidInput",
            "add takes no old_text",
        ),
        ({"action": "drop", "target": "user"}, "InvalidInput", "$.action"),
        ({"action": "add", "target": "usr", "content": "x"}, "InvalidInput", "$.target"),
        ({"action": "add", "target": "user", "content": "  "}, "InvalidInput", ""),
        ({"action": "remove", "target": "user", "old_text": "absent"}, "NoMatch", "absent"),
        ({"action": "remove", "target": "user", "old_text": "Likes"}, "AmbiguousMatch", ""),
        (
            {"action": "replace", "target": "user", "old_text": "tea", "content": "x" * 5000},
            "CapacityExceeded",
            "",
        ),
    ],
)
def test_runtime_memory_refusals_change_nothing(
    arguments: dict[str, Any], kind: str, says: str
) -> None:
    root, ports = open_root()
    root.hot.add("user", "Likes tea")
    root.hot.add("user", "Likes jazz")
    before = world(ports)
    assert says in error(root.tools, RUNTIME_TOOL, arguments, kind)
    assert world(ports) == before


def test_a_memory_overflow_through_the_tool_runs_maintenance() -> None:
    root, ports = open_root()
    facts = [
        ("memory", (f"Fact {i:03d} about the build: " + "detail " * 28).strip(), "low")
        for i in range(49)
    ]
    seed(ports, facts)  # type: ignore[arg-type]
    root = MemoryRoot.open("/unused", CONFIG, ports=ports)
    receipt = ok(
        root.tools,
        RUNTIME_TOOL,
        {"action": "add", "target": "memory", "content": "Deploys need two approvals."},
    )
    assert receipt["maintenance"]["kind"] == "long-term-archive"
    assert "Deploys need two approvals." in [e.content for e in root.hot.snapshot().of("memory")]


def test_remember_then_recall_and_search_find_it(root: MemoryRoot) -> None:
    stored = ok(
        root.tools,
        "mnemon_remember",
        {"content": "Releases ship on Tuesdays", "category": "decision", "tags": ["release"]},
    )
    assert stored["action"] == "stored" and stored["memoryBodyIds"] == ["default"]
    recalled = ok(root.tools, RECALL_TOOL, {"query": "releases Tuesdays"})
    assert [r["content"] for r in recalled["results"]] == ["Releases ship on Tuesdays"]
    found = ok(
        root.tools,
        "mnemon_search",
        {"query": "releases", "memoryBodyIds": ["default"], "limit": 5},
    )
    assert [r["content"] for r in found["results"]] == ["Releases ship on Tuesdays"]


@pytest.mark.parametrize("name", [RECALL_TOOL, "mnemon_search"])
@pytest.mark.parametrize(
    ("arguments", "kind", "says"),
    [
        ({"query": "   "}, "InvalidInput", "query is required"),
        ({"query": "x", "limit": 0}, "InvalidInput", "limit must be"),
        ({"query": "x", "memoryBodyIds": ["nowhere"]}, "UnknownSpace", "nowhere"),
        # the search checks its mode; recall hands it to its worker, whose tool refuses it
        ({"query": "x", "mode": "psychic"}, "*", "mode must be one of"),
    ],
)
def test_recall_and_search_refusals(
    root: MemoryRoot, name: str, arguments: dict[str, Any], kind: str, says: str
) -> None:
    ok(root.tools, "mnemon_remember", {"content": "Something to find"})
    if kind == "*":
        kind = "WorkerFailed" if name == RECALL_TOOL else "InvalidInput"
    assert says in error(root.tools, name, arguments, kind)


@pytest.mark.parametrize(
    ("arguments", "kind", "says"),
    [
        ({"content": "   "}, "InvalidInput", "content is required"),
        # checked by the write worker's tool: the worker fails, saying why
        ({"content": "x", "importance": 9}, "WorkerFailed", "importance must be"),
        ({"content": "x", "category": "gossip"}, "WorkerFailed", "category must be"),
        ({"content": "x", "memoryBodyId": "nowhere"}, "WorkerFailed", "UnknownSpace"),
    ],
)
def test_remember_refusals_store_nothing(arguments: dict[str, Any], kind: str, says: str) -> None:
    root, ports = open_root()
    ok(root.tools, "mnemon_remember", {"content": "A first fact"})
    before = world(ports)
    assert says in error(root.tools, "mnemon_remember", arguments, kind)
    assert world(ports) == before


def test_documents_create_update_and_search(root: MemoryRoot) -> None:
    created = ok(
        root.tools,
        "mnemon_document_create",
        {"title": "Deploy runbook", "content": "# Deploy\nRun make ship.", "description": None},
    )
    doc_id = created["document"]["id"]
    assert created["action"] == "created"
    updated = ok(
        root.tools,
        "mnemon_document_update",
        {"id": doc_id, "content": "# Deploy\nRun make release.", "description": "How to ship"},
    )
    assert updated["action"] == "updated" and updated["document"]["revision"] == 2
    found = ok(root.tools, "mnemon_document_search", {"query": "release", "limit": 3})
    assert found["query"] == "release"
    assert [(h["id"], h["content"]) for h in found["results"]] == [
        (doc_id, "# Deploy\nRun make release.")
    ]
    archived = ok(
        root.tools, "mnemon_document_search", {"query": "release", "includeArchived": True}
    )
    assert [h["id"] for h in archived["results"]] == [doc_id]


@pytest.mark.parametrize(
    ("name", "arguments", "kind"),
    [
        ("mnemon_document_create", {"title": "  ", "content": "x"}, "InvalidInput"),
        ("mnemon_document_update", {"id": "no-such-doc", "content": "x"}, "DocumentNotFound"),
        ("mnemon_document_search", {"query": "x", "limit": 0}, "InvalidInput"),
    ],
)
def test_document_refusals_write_nothing(name: str, arguments: dict[str, Any], kind: str) -> None:
    root, ports = open_root()
    before = world(ports)
    error(root.tools, name, arguments, kind)
    assert world(ports) == before


def test_status_shows_usage_spaces_and_documents(root: MemoryRoot) -> None:
    assert ok(root.tools, "mnemon_status", {})["spaces"] == []  # none before the first write
    root.long_term.remember("Releases ship on Tuesdays")
    root.hot.add("user", "Likes tea")
    root.documents.create("Notes", "Some notes")
    status = ok(root.tools, "mnemon_status", {})
    assert status["writeEnabled"] is True and status["tools"] == list(TOOL_NAMES)
    assert status["hotMemory"]["user"] == {"entryCount": 1, "used": 9, "limit": CONFIG.user_limit}
    assert status["hotMemory"]["memory"] == {
        "entryCount": 0,
        "used": 0,
        "limit": CONFIG.memory_limit,
    }
    assert status["hotMemory"]["revision"] == root.hot.snapshot().revision
    assert [s["id"] for s in status["spaces"]] == ["default"]
    assert status["documents"] == {"active": 1, "archived": 0}


def test_an_error_that_is_no_mnemon_error_propagates(
    root: MemoryRoot, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(root.hot, "add", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        root.tools.call(RUNTIME_TOOL, {"action": "add", "target": "user", "content": "x"})


# -- read-only roots ------------------------------------------------------------------------

VALID = {
    RUNTIME_TOOL: {"action": "add", "target": "user", "content": "Likes tea"},
    "mnemon_remember": {"content": "Releases ship on Tuesdays"},
    "mnemon_document_create": {"title": "Notes", "content": "Some notes"},
    "mnemon_document_update": {"id": "doc", "content": "More notes"},
}


def test_a_read_only_root_lists_no_mutating_tool_and_refuses_each() -> None:
    writable, ports = open_root()
    writable.hot.add("memory", "CI runs on main")
    doc = writable.documents.create("Notes", "Some notes").document.id
    writable.long_term.remember("Releases ship on Tuesdays")
    root = MemoryRoot.open("/unused", READ_ONLY, ports=ports)
    tools = root.tools
    offered = [n for n in TOOL_NAMES if n not in MUTATING_TOOLS]
    assert tools.names == tuple(offered)
    assert [d.name for d in tools.definitions()] == offered
    assert [d["function"]["name"] for d in tools.to_openai()] == offered
    assert [d["name"] for d in tools.to_anthropic()] == offered
    assert [d["name"] for d in tools.to_mcp()] == offered
    before = world(ports)
    for name in MUTATING_TOOLS:
        arguments = {**VALID[name], **({"id": doc} if name == "mnemon_document_update" else {})}
        error(tools, name, arguments, "ReadOnly")
        error(tools, name, {"bogusKey": 1}, "ReadOnly")  # refused before anything is read
    assert world(ports) == before
    assert ok(tools, "mnemon_status", {})["writeEnabled"] is False
    assert ok(tools, "mnemon_search", {"query": "releases"})["results"]
    assert ok(tools, "mnemon_document_search", {"query": "notes"})["results"]


def test_a_value_outside_its_choices_is_named_with_the_choices(root: MemoryRoot) -> None:
    """The converter says which values a field takes (not cattrs' ``typing.Literal`` text)."""
    message = error(
        root.tools, RUNTIME_TOOL, {"action": "append", "target": "user"}, "InvalidInput"
    )
    assert "is not one of 'add', 'replace', 'remove' @ $.action" in message
    assert "typing.Literal" not in message
