"""Parsing the vis.js arrays of ``mnemon viz`` HTML with regular expressions (the HTML is
never executed): the graph fallback when ``mnemon.db`` cannot be read directly."""

from __future__ import annotations

import re

import attrs

from mnemon_sm.ports.long_term.values import (
    EDGE_TYPES,
    GraphEdge,
)

VIZ_WEIGHT = 0.5  # viz shows no weights
_EDGE_COLOURS = {
    "#aaaaaa": "temporal",
    "#3498db": "semantic",
    "#e74c3c": "causal",
    "#2ecc71": "entity",
}


# -- viz HTML -------------------------------------------------------------------------------

_NODES_DECL = re.compile(r"\bnodes\s*=\s*(?:new\s+vis\.DataSet\s*\(\s*)?\[")
_EDGES_DECL = re.compile(r"\bedges\s*=\s*(?:new\s+vis\.DataSet\s*\(\s*)?\[")
_FIELD = re.compile(
    r"""["']?([A-Za-z_]\w*)["']?\s*:\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'"""
    r"""|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)""",
    re.DOTALL,
)
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|.)", re.DOTALL)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "0": "\0"}
_CATEGORY = re.compile(r"\[([A-Za-z_]+)\]")


@attrs.frozen
class VizGraph:
    """What ``viz`` shows: nodes ``(id, category, content)`` and edges ``GraphEdge``."""

    nodes: tuple[tuple[str, str, str], ...]
    edges: tuple[GraphEdge, ...]


def _unescape(body: str) -> str:
    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        if code[0] in "ux" and len(code) > 1:
            return chr(int(code[1:], 16))
        return _SIMPLE_ESCAPES.get(code, code)

    text = _ESCAPE.sub(one, body)
    try:  # join surrogate pairs written as two \u escapes
        return text.encode("utf-16", "surrogatepass").decode("utf-16")
    except UnicodeDecodeError:
        return text


def _array_objects(html: str, start: int) -> list[str]:
    """The top-level ``{...}`` texts of the array whose ``[`` precedes ``start``."""
    depth, quote, escaped = 0, "", False
    objects: list[str] = []
    begin = -1
    for i in range(start, len(html)):
        ch = html[i]
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "{[":
            if depth == 0 and ch == "{":
                begin = i
            depth += 1
        elif ch in "}]":
            if depth == 0:
                return objects  # the array's closing bracket
            depth -= 1
            if depth == 0 and ch == "}":
                objects.append(html[begin : i + 1])
    raise ValueError("unterminated array")


def _fields(obj: str) -> dict[str, str | float]:
    out: dict[str, str | float] = {}
    for match in _FIELD.finditer(obj):
        key, raw = match.group(1), match.group(2)
        value: str | float = _unescape(raw[1:-1]) if raw[0] in "\"'" else float(raw)
        out.setdefault(key, value)
    return out


def parse_viz_html(html: str) -> VizGraph:
    """The node and edge arrays of Mnemon's vis.js page, found by regular expressions.

    Node category comes from ``[category]`` in the label and content from the title; an
    edge's type from its colour (or its label when that names a type; otherwise the edge is
    dropped). Raises ``ValueError`` when there is no node array.
    """
    found = _NODES_DECL.search(html)
    if found is None:
        raise ValueError("no node array in the viz output")
    nodes = []
    for obj in _array_objects(html, found.end()):
        fields = _fields(obj)
        node, label = str(fields.get("id", "")), str(fields.get("label", ""))
        if not node:
            continue
        category = _CATEGORY.search(label)
        content = fields.get("title", label.partition("] ")[2])
        nodes.append((node, category.group(1) if category else "general", str(content)))
    edges = []
    found = _EDGES_DECL.search(html)
    for obj in _array_objects(html, found.end()) if found is not None else []:
        fields = _fields(obj)
        label = str(fields.get("label", ""))
        kind = _EDGE_COLOURS.get(str(fields.get("color", "")).lower())
        if kind is None and label in EDGE_TYPES:
            kind = label
        weight = fields.get("weight", fields.get("value", VIZ_WEIGHT))
        if not isinstance(weight, float) or not 0.0 <= weight <= 1.0:
            weight = VIZ_WEIGHT
        if kind is not None and "from" in fields and "to" in fields:
            edges.append(
                GraphEdge(str(fields["from"]), str(fields["to"]), kind, weight, label or kind)
            )
    return VizGraph(tuple(nodes), tuple(edges))
