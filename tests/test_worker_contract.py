"""The worker contract as a host integrator meets it.

1. Every tool box describes its tools: ``definitions`` gives each granted tool's description,
   argument schema (generated from the class its arguments are validated as, camelCase keys)
   and result shape; what a staging tool returns is what its definition says.
2. A result the strict validation refuses names the keys the model writes
   (``$.selectedMemoryBodyIds``), for every field of every kind's result class.
3. A result sent as text holding one JSON object, bare or in one Markdown code fence, is read
   as that object; any other text is refused with the reason (the parser itself is
   property-tested in ``property_tests/test_worker_result_text.py``).
4. ``FallbackWorkers`` runs the host's workers for their kinds and the built-in ones (or the
   given fallback) for the rest, sync or async, and refuses a bad construction.
5. The README's per-kind table gives every kind a result that validates and names every tool
   the kind is granted.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest

import mnemon_sm
from mnemon_sm import (
    BuiltinWorkers,
    Config,
    FallbackWorkers,
    InvalidConfig,
    MemoryRoot,
    ToolBox,
    ToolDefinition,
    WorkerFailed,
    WorkerRequest,
)
from mnemon_sm.config import WORKER_KINDS
from mnemon_sm.convert import StructureFailed, camel_case, structure
from mnemon_sm.flows.lifecycle.review import (
    REVIEW_TOOLS,
    DocumentChangeArgs,
    DocumentSearchArgs,
    HotChangeArgs,
    ReviewTools,
)
from mnemon_sm.flows.long_term.tools import _ARGS, READ_TOOLS, WRITE_TOOLS, NoTools
from mnemon_sm.flows.workers.requests import build_request, json_schema
from mnemon_sm.flows.workers.results import NotOneObject, read_result_text
from mnemon_sm.flows.workers.runner import Delegate
from mnemon_sm.testing.longterm import ScriptedWorkers
from mnemon_sm.testing.memory import FakeClock
from mnemon_sm.worker_kinds import RESULTS
from tests.test_workers import Box as _Box
from tests.test_workers import seeded

ALL_TOOLS = (*READ_TOOLS, *WRITE_TOOLS)
REVIEW_ARGS = {
    "mnemon_runtime_memory": HotChangeArgs,
    "mnemon_document_search": DocumentSearchArgs,
    "mnemon_document_manage": DocumentChangeArgs,
}


@attrs.define
class Box(_Box):
    """A tool box stand-in granting nothing."""

    definitions: tuple[ToolDefinition, ...] = ()


# -- 1. tool definitions ----------------------------------------------------------------------


def _properties(schema: Mapping[str, Any]) -> Iterator[str]:
    """Every property name of a schema, nested ones included."""
    for key, sub in schema.get("properties", {}).items():
        yield key
        yield from _properties(sub)
    for option in schema.get("anyOf", ()):
        yield from _properties(option)
    if "items" in schema:
        yield from _properties(schema["items"])


def test_the_tool_box_protocol_offers_definitions() -> None:
    tools, _ = seeded(ALL_TOOLS)
    assert isinstance(tools, ToolBox)
    assert "definitions" in dir(ToolBox)
    assert mnemon_sm.ToolDefinition is ToolDefinition


@pytest.mark.parametrize("granted", [READ_TOOLS, ALL_TOOLS, ("mnemon_recall",), ()])
def test_a_scoped_box_defines_exactly_its_granted_tools(granted: tuple[str, ...]) -> None:
    tools, _ = seeded(granted)
    definitions = tools.definitions
    assert tuple(d.name for d in definitions) == tools.names == granted
    for d in definitions:
        assert isinstance(d, ToolDefinition)
        assert d.input_schema == json_schema(_ARGS[d.name], inputs=True)
        assert d.description.strip() and d.result.strip()
        assert d.description.endswith(f"Returns {d.result}")


def test_a_box_without_tools_defines_none() -> None:
    assert NoTools().definitions == ()


def test_every_argument_schema_is_camel_case_and_requires_only_fields_without_defaults() -> None:
    for name, cls in {**_ARGS, **REVIEW_ARGS}.items():
        schema = json_schema(cls, inputs=True)
        fields = attrs.fields(cls)
        assert list(schema["properties"]) == [camel_case(f.name) for f in fields], name
        assert all("_" not in key for key in _properties(schema)), name
        required = [camel_case(f.name) for f in fields if f.default is attrs.NOTHING]
        assert schema["required"] == required, name
        assert schema["additionalProperties"] is False


def test_an_optional_argument_admits_null() -> None:
    assert json_schema(_ARGS["mnemon_recall"], inputs=True)["properties"]["memoryBodyIds"] == {
        "type": ["array", "null"],
        "items": {"type": "string"},
    }


def test_a_definition_is_a_fresh_copy_the_host_may_change() -> None:
    tools, _ = seeded(ALL_TOOLS)
    first = tools.definitions[1]
    first.input_schema["properties"].clear()
    assert tools.definitions[1].input_schema == json_schema(_ARGS[first.name], inputs=True)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        first.name = "other"  # type: ignore[misc]


def _example(schema: Mapping[str, Any]) -> Any:
    """A value valid under ``schema`` (required properties only)."""
    if "anyOf" in schema:
        return _example(schema["anyOf"][0])
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema["type"]
    if kind == "object":
        props = schema["properties"]
        return {k: _example(props[k]) for k in schema["required"]}
    if kind == "array":
        return [_example(schema["items"])]
    return {"string": "x", "integer": 1, "number": 0.5, "boolean": True}[kind]


@pytest.mark.parametrize("name", sorted(_ARGS))
def test_arguments_written_to_the_schema_pass_the_box_validation(name: str) -> None:
    tools, _ = seeded(ALL_TOOLS)
    schema = tools.definitions[ALL_TOOLS.index(name)].input_schema
    structure(_example(schema), _ARGS[name])  # raises if the schema and the check disagree


# What each staging call of a seeded box (space "default", insights ins-1..3) returns.
STAGING_CALLS: dict[str, dict[str, Any]] = {
    "mnemon_remember": {"content": "a new fact", "memoryBodyId": "default"},
    "mnemon_link": {"sourceId": "ins-1", "targetId": "ins-3", "memoryBodyId": "default"},
    "mnemon_forget": {"id": "ins-3", "memoryBodyId": "default"},
    "mnemon_memory_body_create": {"name": "Travel", "description": "Trips and plans"},
    "mnemon_memory_body_update": {"memoryBodyId": "default", "description": "Work and more"},
    "mnemon_memory_body_merge": {"targetId": "default", "sourceIds": ["space-1"]},
}


@pytest.mark.parametrize("name", sorted(STAGING_CALLS))
def test_what_a_staging_tool_returns_is_what_its_definition_says(name: str) -> None:
    tools, _ = seeded(ALL_TOOLS)
    definition = {d.name: d for d in tools.definitions}[name]
    returned = tools.call(name, STAGING_CALLS[name])
    for key, value in returned.items():
        assert f'"{key}"' in definition.result, (key, definition.result)
        if key != "id" and key != "memoryBodyId":
            assert f'"{value}"' in definition.result
    # the provisional id's key, exactly: a space creation's is memoryBodyId, not id
    if "id" in returned:
        assert '"id": "pending-N"' in definition.result
    if "memoryBodyId" in returned:
        assert '"memoryBodyId": "pending-space-N"' in definition.result
        assert '"id"' not in definition.result.split("(")[0]


@pytest.mark.parametrize("name", ["mnemon_memory_bodies", "mnemon_recall", "mnemon_related"])
def test_what_a_read_tool_returns_is_what_its_definition_says(name: str) -> None:
    tools, _ = seeded(ALL_TOOLS)
    definition = {d.name: d for d in tools.definitions}[name]
    arguments = {
        "mnemon_memory_bodies": {},
        "mnemon_recall": {"query": "deploy"},
        "mnemon_related": {"memoryBodyId": "default", "id": "ins-1"},
    }[name]
    returned = tools.call(name, arguments)
    if isinstance(returned, list):
        rows = returned
    else:
        rows = [returned, *returned["results"], *returned["sources"]]
    assert rows
    named = set(re.findall(r"\w+", definition.result))
    for row in rows:
        assert set(row) <= named, set(row) - named


class _Hot:
    def preview(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("not called")


class _Documents:
    def search(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("not called")

    def preview(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("not called")


def test_the_review_box_defines_its_reads_and_its_own_tools() -> None:
    reads, _ = seeded(READ_TOOLS)
    box = ReviewTools(reads, _Hot(), _Documents())
    definitions = box.definitions
    assert tuple(d.name for d in definitions) == box.names == REVIEW_TOOLS
    by_name = {d.name: d for d in definitions}
    for d in reads.definitions:
        assert by_name[d.name] == d
    for name, cls in REVIEW_ARGS.items():
        assert by_name[name].input_schema == json_schema(cls, inputs=True)
        assert by_name[name].description.endswith(f"Returns {by_name[name].result}")
    hot = by_name["mnemon_runtime_memory"].input_schema
    assert "oldText" in hot["properties"] and hot["required"] == ["action", "target"]


def test_a_request_grants_the_tools_its_box_defines() -> None:
    tools, _ = seeded(READ_TOOLS)
    request = build_request("recall", {"query": "q"}, tools.names, RESULTS["recall"])
    assert request.tools == tuple(d.name for d in tools.definitions)


# -- 2. result errors name the keys the model writes ------------------------------------------


def _paths(schema: Mapping[str, Any], path: str = "$") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every (path, schema) of a value valid under ``_example(schema)``."""
    for key, sub in schema.get("properties", {}).items():
        yield f"{path}.{key}", sub
        if sub.get("type") == "array":
            yield from _paths(sub["items"], f"{path}.{key}[0]")
        else:
            yield from _paths(sub, f"{path}.{key}")


def _wrong(schema: Mapping[str, Any]) -> Any:
    """A value of the wrong JSON type for ``schema``."""
    return 7 if schema.get("type") in ("string", "array", "object", "boolean") else "7"


def _replace(value: Any, path: str, new: Any) -> Any:
    steps = re.findall(r"\.(\w+)|\[(\d+)\]", path)
    target = value
    for key, index in steps[:-1]:
        target = target[key] if key else target[int(index)]
    key, index = steps[-1]
    target[key if key else int(index)] = new
    return value


WRONG_FIELDS = [
    (kind, path, sub)
    for kind, cls in RESULTS.items()
    for path, sub in _paths(json_schema(cls))
    if "properties" in sub or "type" in sub
]


def test_every_kind_has_a_result_class_and_a_known_name() -> None:
    assert tuple(RESULTS) == WORKER_KINDS
    # the enumeration below reaches a nested field of every kind that has one
    assert {p for _, p, _ in WRONG_FIELDS} >= {
        "$.selectedMemoryBodyIds",
        "$.results[0].memoryBodyId",
        "$.compactedEntries[0].sourceIndexes",
        "$.archived[0].sourceIndex",
        "$.references[0].memoryBodyId",
        "$.documentIds",
        "$.memoryBodyIds",
    }


def _delegate(workers: Any) -> Delegate:
    return Delegate(workers, FakeClock(), lambda kind: 60_000)


def _result(kind: str, raw: object) -> Any:
    request = build_request(kind, {}, (), RESULTS[kind])
    workers = ScriptedWorkers({kind: lambda r, t: raw})
    return _delegate(workers).result(request, Box(), RESULTS[kind])


@pytest.mark.parametrize(
    ("kind", "path", "sub"), WRONG_FIELDS, ids=[f"{k}:{p}" for k, p, _ in WRONG_FIELDS]
)
def test_a_wrong_typed_result_field_is_named_as_the_model_writes_it(
    kind: str, path: str, sub: Mapping[str, Any]
) -> None:
    cls = RESULTS[kind]
    valid = _example(json_schema(cls))
    structure(valid, cls)  # the example itself is valid
    raw = _replace(valid, path, _wrong(sub))
    with pytest.raises(StructureFailed) as caught:
        structure(raw, cls)
    assert [p.rsplit(" @ ", 1)[1] for p in caught.value.problems] == [path]
    with pytest.raises(WorkerFailed) as failed:
        _result(kind, raw)
    assert failed.value.message.endswith(f"@ {path}")


@pytest.mark.parametrize("kind", sorted(RESULTS))
def test_a_missing_result_field_is_named_as_the_model_writes_it(kind: str) -> None:
    schema = json_schema(RESULTS[kind])
    valid = _example(schema)
    last = schema["required"][-1]
    del valid[last]
    with pytest.raises(WorkerFailed) as failed:
        _result(kind, valid)
    assert failed.value.message.endswith(f"required field missing @ $.{last}")


# -- 3. a result sent as text -----------------------------------------------------------------


def _wrappings(text: str) -> list[str]:
    return [
        text,
        f"  \n{text}\n ",
        f"```json\n{text}\n```",
        f"```\n{text}\n```",
        f"\n\n```JSON\n{text}\n```\n",
    ]


@pytest.mark.parametrize("kind", sorted(RESULTS))
def test_a_result_sent_as_text_or_in_a_code_fence_is_read_as_its_object(kind: str) -> None:
    cls = RESULTS[kind]
    valid = _example(json_schema(cls))
    for wrapped in _wrappings(json.dumps(valid, indent=2)):
        assert _result(kind, wrapped) == structure(valid, cls)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"a": 1}{"a": 2}', "more than one JSON value"),
        ('{"a": 1}\n{"a": 2}', "more than one JSON value"),
        ('Here it is: {"a": 1}', "does not start with a JSON object"),
        ('Here it is:\n```json\n{"a": 1}\n```', "does not start with a JSON object"),
        ('```json\n{"a": 1}\n```\nDone.', "not one whole Markdown code fence"),
        ('```json\n{"a": 1}\n```\n```json\n{"a": 2}\n```', "more than one JSON value"),
        ('```python\n{"a": 1}\n```', "tagged 'python'"),
        ('```json\n{"a": 1}', "not one whole Markdown code fence"),
        ("[1, 2]", "does not start with a JSON object"),
        ('```json\n[{"a": 1}]\n```', "holds a JSON array"),
        ('```\n"text"\n```', "holds a JSON string"),
        ("{'a': 1}", "is not one JSON object"),
        ("", "does not start with a JSON object"),
    ],
)
def test_any_other_text_is_refused_with_the_reason(text: str, why: str) -> None:
    with pytest.raises(NotOneObject, match=re.escape(why)):
        read_result_text(text)
    with pytest.raises(WorkerFailed) as failed:
        _result("answer", text)
    message = failed.value.message
    assert "invalid result: expected an object, got str @ $" in message and why in message


def test_the_runner_hands_every_flow_the_object_a_text_result_holds() -> None:
    # Delegate.run is what the maintenance, document and review paths read
    request = build_request("compact", {}, (), RESULTS["compact"])
    raw = '```json\n{"summary": "s"}\n```'
    assert _delegate(ScriptedWorkers({"compact": lambda r, t: raw})).run(request, Box()) == {
        "summary": "s"
    }
    assert _delegate(ScriptedWorkers({"compact": lambda r, t: "no"})).run(request, Box()) == "no"


# -- 4. FallbackWorkers -----------------------------------------------------------------------


@attrs.define
class Recorder:
    """Workers answering every kind with a marker, recording the kinds they ran."""

    name: str
    ran: list[str] = attrs.Factory(list)

    def run(self, request: WorkerRequest, tools: ToolBox) -> object:
        self.ran.append(request.kind)
        return {"by": self.name}


@attrs.define
class WithKinds(Recorder):
    kinds: Any = ("answer",)


def _request(kind: str) -> WorkerRequest:
    return build_request(kind, {}, (), RESULTS[kind])


def test_fallback_workers_are_exported_and_the_built_in_ones_stay() -> None:
    assert mnemon_sm.FallbackWorkers is FallbackWorkers
    assert "FallbackWorkers" in mnemon_sm.__all__ and "BuiltinWorkers" in mnemon_sm.__all__


@pytest.mark.parametrize("mine", [(), ("recall",), ("answer", "review"), WORKER_KINDS])
def test_the_primary_runs_its_kinds_and_the_fallback_every_other(mine: tuple[str, ...]) -> None:
    primary, fallback = Recorder("primary"), Recorder("fallback")
    workers = FallbackWorkers(primary, fallback, kinds=mine)
    for kind in WORKER_KINDS:
        expected = "primary" if kind in mine else "fallback"
        assert workers.run(_request(kind), Box()) == {"by": expected}
    assert primary.ran == [k for k in WORKER_KINDS if k in mine]
    assert fallback.ran == [k for k in WORKER_KINDS if k not in mine]


def test_without_kinds_the_primarys_own_kinds_attribute_decides() -> None:
    primary, fallback = WithKinds("primary"), Recorder("fallback")
    workers = FallbackWorkers(primary, fallback)
    assert workers.primary_kinds == {"answer"}
    assert workers.workers_for("answer") is primary
    assert workers.workers_for("recall") is fallback
    # given kinds win over the attribute
    assert FallbackWorkers(primary, fallback, kinds=["recall"]).workers_for("answer") is fallback


def test_a_primary_without_kinds_runs_every_kind() -> None:
    workers = FallbackWorkers(Recorder("primary"))
    assert workers.primary_kinds == set(WORKER_KINDS)


def test_the_default_fallback_is_the_built_in_workers() -> None:
    workers = FallbackWorkers(Recorder("primary"), kinds=("answer",))
    assert isinstance(workers.fallback, BuiltinWorkers)
    assert isinstance(workers.workers_for("write"), BuiltinWorkers)


def test_an_async_primary_is_awaited_by_the_runner() -> None:
    class Async:
        kinds = ("answer",)

        async def run(self, request: WorkerRequest, tools: ToolBox) -> object:
            await asyncio.sleep(0)
            return {"answer": "From the model.", "citations": []}

    workers = FallbackWorkers(Async(), Recorder("fallback"))
    result: object = _delegate(workers).result(_request("answer"), Box(), RESULTS["answer"])
    assert result == RESULTS["answer"]("From the model.", [])


def test_a_root_runs_the_host_model_for_its_kinds_and_the_built_in_workers_for_the_rest(
    tmp_path: Path,
) -> None:
    class Answers:
        kinds = ("answer",)

        def __init__(self) -> None:
            self.ran: list[str] = []

        def run(self, request: WorkerRequest, tools: ToolBox) -> object:
            self.ran.append(request.kind)
            label = request.data["evidence"][0]["label"]
            result = {"answer": "Blue-green deploys.", "citations": [label]}
            return f"```json\n{json.dumps(result)}\n```"  # as a chat model answers

    answers = Answers()
    root = MemoryRoot.open(tmp_path, Config(durability="off"), workers=FallbackWorkers(answers))
    root.long_term.remember("Deploys use blue-green switching.")  # the built-in write worker
    asked = root.long_term.ask("How do deploys work?")
    assert asked.answer == "Blue-green deploys." and len(asked.citations) == 1
    assert answers.ran == ["answer"]


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: FallbackWorkers(Recorder("p"), kinds=("recall", "sumarize")), "'sumarize'"),
        (lambda: FallbackWorkers(Recorder("p"), kinds="recall"), "collection of worker kind"),
        (lambda: FallbackWorkers(Recorder("p"), kinds=3), "collection of worker kind"),  # type: ignore[arg-type]
        (lambda: FallbackWorkers(WithKinds("p", kinds=["nope"])), "kinds attribute: 'nope'"),
        (lambda: FallbackWorkers(WithKinds("p", kinds="answer")), "collection of worker kind"),
        (lambda: FallbackWorkers(object()), "primary workers have no run"),  # type: ignore[arg-type]
        (lambda: FallbackWorkers(Recorder("p"), object()), "fallback workers have no run"),  # type: ignore[arg-type]
    ],
)
def test_a_bad_construction_raises_invalid_config(build: Any, match: str) -> None:
    with pytest.raises(InvalidConfig, match=re.escape(match)):
        build()


# -- 5. the README's contract -----------------------------------------------------------------

README = Path(__file__).resolve().parent.parent / "README.md"
ROW = re.compile(r"^\| `(\w+)` \| (.*) \| (.*) \| `(\{.*\})` \|$", re.M)


def _readme_rows() -> dict[str, tuple[str, str, str]]:
    return {m[1]: (m[2], m[3], m[4]) for m in ROW.finditer(README.read_text("utf-8"))}


def test_the_readme_gives_each_kind_a_valid_example_result() -> None:
    rows = _readme_rows()
    assert tuple(rows) == WORKER_KINDS
    for kind, (_, _, example) in rows.items():
        structure(json.loads(example), RESULTS[kind])  # raises when the example drifted


def test_the_readme_names_each_kinds_tools() -> None:
    from mnemon_sm.flows.hot.maintenance import ARCHIVE_GRANTS
    from mnemon_sm.flows.long_term.write import GRANTS

    granted = {
        "recall": READ_TOOLS,
        "write": tuple(dict.fromkeys(t for grants in GRANTS.values() for t in grants)),
        "answer": (),
        "compact": (),
        "archive": ARCHIVE_GRANTS,
        "document_archive": ARCHIVE_GRANTS,
        "review": REVIEW_TOOLS,
    }
    rows = _readme_rows()
    for kind, tools in granted.items():
        named = set(re.findall(r"`(mnemon_\w+)`", rows[kind][1]))
        if kind == "document_archive":
            named = set(re.findall(r"`(mnemon_\w+)`", rows["archive"][1]))
        missing = set(tools) - named - (set(READ_TOOLS) if "the reads" in rows[kind][1] else set())
        assert not missing, (kind, missing)
