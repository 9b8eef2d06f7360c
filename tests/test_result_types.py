"""Every value a public method returns is exported from ``mnemon_sm`` and has ``to_json``.

A host should never meet a result it cannot import or serialise: the test walks the public
facades, resolves each public method's return annotation and checks every class in it. Only
plain data is allowed besides (text, numbers, None, and the JSON the methods documented as
returning JSON: a tool call's result, tool definitions in a model API's shape, an agent's
status, the messages handed back to the host).
"""

from __future__ import annotations

import inspect
import types
import typing
from typing import Any

import pytest

import mnemon_sm
from mnemon_sm import (
    AgentLifecycle,
    AgentTools,
    Context,
    Events,
    HotMemory,
    LongTermMemory,
    MemoryRoot,
)
from mnemon_sm.flows.documents.api import Documents

FACADES = (MemoryRoot, HotMemory, Context, LongTermMemory, Documents, AgentLifecycle, AgentTools)
PLAIN = (str, int, float, bool, type(None))
# Methods documented as returning JSON data (dicts or lists of dicts) as such.
JSON_BY_DESIGN = {
    ("AgentTools", "call"),
    ("AgentTools", "to_openai"),
    ("AgentTools", "to_anthropic"),
    ("AgentTools", "to_mcp"),
    ("AgentLifecycle", "status"),
    ("MemoryRoot", "agent_status"),  # the same status, read as persisted
    ("AgentLifecycle", "pre_step"),
    ("HotSnapshot", "to_json"),
}
# Methods returning the facade of a part of the root, or plumbing, not a result.
NOT_RESULTS = {
    ("MemoryRoot", "lifecycle"),
    ("MemoryRoot", "open"),
    ("MemoryRoot", "__enter__"),
    ("AgentLifecycle", "add_listener"),
    ("LongTermMemory", "mutex"),
    ("LongTermMemory", "run_staged"),
    ("Events", "subscribe"),
}


def classes_in(annotation: Any) -> list[Any]:
    """Every class named by a resolved annotation, through unions, tuples and lists."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, tuple, list, typing.Literal):
        if origin is typing.Literal:
            return []
        return [
            c for arg in typing.get_args(annotation) if arg is not ... for c in classes_in(arg)
        ]
    if origin is not None:
        return [origin]
    return [annotation]


def public_methods() -> list[tuple[str, str, Any]]:
    out = []
    for facade in (*FACADES, Events):
        assert facade in [getattr(mnemon_sm, n) for n in mnemon_sm.__all__], facade
        for name, member in inspect.getmembers(facade):
            if name.startswith("_") and name != "__enter__":
                continue
            fn = member.fget if isinstance(member, property) else member
            if not callable(fn) or (facade.__name__, name) in NOT_RESULTS:
                continue
            hints = typing.get_type_hints(fn)
            if "return" in hints:
                out.append((facade.__name__, name, hints["return"]))
    return out


METHODS = public_methods()


def test_the_walk_sees_the_facades_methods() -> None:
    names = {(owner, name) for owner, name, _ in METHODS}
    assert {("LongTermMemory", "recall"), ("HotMemory", "add"), ("Documents", "search")} <= names
    assert len(METHODS) > 40


@pytest.mark.parametrize(("owner", "name", "annotation"), METHODS, ids=lambda v: str(v)[:40])
def test_a_public_result_is_exported_and_serialisable(
    owner: str, name: str, annotation: Any
) -> None:
    for cls in classes_in(annotation):
        if cls in PLAIN:
            continue
        if cls in (dict, list) or cls is Any:
            assert (owner, name) in JSON_BY_DESIGN, f"{owner}.{name} returns bare {cls}"
            continue
        exported = any(getattr(mnemon_sm, n) is cls for n in mnemon_sm.__all__)
        assert exported, f"{owner}.{name} returns {cls.__name__}, which mnemon_sm does not export"
        if issubclass(cls, (*FACADES, Events)):
            continue  # a facade handed out (root.hot, root.tools, ...), not a value
        assert callable(getattr(cls, "to_json", None)), f"{cls.__name__} has no to_json"
