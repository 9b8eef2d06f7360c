"""Properties of the lenient reading of a worker's text result
(:mod:`mnemon_sm.flows.workers.results`).

- Any result object (a valid result of every worker kind, generated from its schema, and any
  JSON object), rendered compact or indented, ASCII-escaped or not, in every accepted wrapping
  (bare, in a ```json fence, in a bare ``` fence, in a ```JSON fence; with JSON whitespace
  around), reads back equal.
- The same objects in every refused wrapping (enumerated: two objects, text before or after,
  a fence of another language, an unclosed fence, the object inside an array, the object
  JSON-encoded as a string) stay refused with ``NotOneObject``; so does any JSON scalar or
  array.
- A value that is not text is handed on unchanged; a refused text too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemon_sm.flows.workers.requests import json_schema
from mnemon_sm.flows.workers.results import NotOneObject, lenient_result, read_result_text
from mnemon_sm.worker_kinds import RESULTS

WHITESPACE = st.text(alphabet=" \t\r\n", max_size=4)
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def from_schema(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid under a result schema (as ``json_schema`` writes them)."""
    if "anyOf" in schema:
        return st.one_of([from_schema(s) for s in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind: str = schema["type"]
    if kind == "object":
        props = schema["properties"]
        return st.fixed_dictionaries({k: from_schema(props[k]) for k in props})
    if kind == "array":
        return st.lists(from_schema(schema["items"]), max_size=3)
    leaves: dict[str, st.SearchStrategy[Any]] = {
        "string": st.text(),
        "integer": st.integers(),
        "number": st.floats(allow_nan=False, allow_infinity=False),
        "boolean": st.booleans(),
        "null": st.none(),
    }
    return leaves[kind]


RESULT_OBJECTS = st.one_of(
    [from_schema(json_schema(cls)) for cls in RESULTS.values()]
    + [st.dictionaries(st.text(), JSON, max_size=5)]
)


@st.composite
def rendered(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    value = draw(RESULT_OBJECTS)
    indent = draw(st.sampled_from([None, 2]))
    text = json.dumps(value, indent=indent, ensure_ascii=draw(st.booleans()))
    return value, text


ACCEPTED: dict[str, Callable[[str, str, str], str]] = {
    "bare": lambda t, a, b: f"{a}{t}{b}",
    "json fence": lambda t, a, b: f"{a}```json\n{t}\n```{b}",
    "bare fence": lambda t, a, b: f"{a}```\n{t}\n```{b}",
    "JSON fence, CRLF": lambda t, a, b: f"{a}```JSON\r\n{t}\r\n```{b}",
}
REFUSED: dict[str, Callable[[str], str]] = {
    "two objects": lambda t: f"{t}{t}",
    "two objects on two lines": lambda t: f"{t}\n{t}",
    "text before": lambda t: f"Here is the result: {t}",
    "text after": lambda t: f"{t}\nDone.",
    "text before a fence": lambda t: f"Sure!\n```json\n{t}\n```",
    "text after a fence": lambda t: f"```json\n{t}\n```\nHope this helps.",
    "two fences": lambda t: f"```json\n{t}\n```\n```json\n{t}\n```",
    "another language": lambda t: f"```python\n{t}\n```",
    "unclosed fence": lambda t: f"```json\n{t}\n",
    "in an array": lambda t: f"[{t}]",
    "an array in a fence": lambda t: f"```json\n[{t}]\n```",
    "encoded as a string": lambda t: json.dumps(t),
}


@pytest.mark.parametrize("wrapping", sorted(ACCEPTED))
@given(case=rendered(), before=WHITESPACE, after=WHITESPACE)
def test_every_accepted_wrapping_reads_back_equal(
    wrapping: str, case: tuple[dict[str, Any], str], before: str, after: str
) -> None:
    value, text = case
    wrapped = ACCEPTED[wrapping](text, before, after)
    assert read_result_text(wrapped) == value
    assert lenient_result(wrapped) == value


@pytest.mark.parametrize("wrapping", sorted(REFUSED))
@given(case=rendered())
def test_every_refused_wrapping_stays_refused(
    wrapping: str, case: tuple[dict[str, Any], str]
) -> None:
    wrapped = REFUSED[wrapping](case[1])
    with pytest.raises(NotOneObject):
        read_result_text(wrapped)
    assert lenient_result(wrapped) is wrapped


@given(value=SCALARS | st.lists(JSON, max_size=4), before=WHITESPACE)
def test_a_json_scalar_or_array_is_refused(value: object, before: str) -> None:
    for text in (f"{before}{json.dumps(value)}", f"```json\n{json.dumps(value)}\n```"):
        with pytest.raises(NotOneObject):
            read_result_text(text)


@given(value=JSON)
def test_a_value_that_is_not_text_is_handed_on_unchanged(value: object) -> None:
    if not isinstance(value, str):
        assert lenient_result(value) is value
