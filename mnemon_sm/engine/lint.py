"""Checks that keep a spec honest about its code (what a class body would give for free).

- every callback a spec names is a method of its context class, named for its role: guards
  ``is_``/``has_``/``can_``, validators ``check_``, actions anything else;
- every port call a state declares exists on the port protocols (``<port>.<method>``, where
  ``<port>`` is a field of the ``Ports`` bundle and its protocol is looked up in the explicit
  table ``mnemon_sm.ports.PORT_PROTOCOLS``, or is a method of one of its optional capabilities
  in ``PORT_CAPABILITIES``);
- every invariant ID is checked by at least one property test (its ID appears in a file of
  the property-test directory as a string literal, as in ``invariant("INV-HOT-1")``).

Structural checks (states described, targets known, reachability, ...) already ran when the
flow was loaded. :func:`lint_flow` returns problems as readable lines; none means clean.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from mnemon_sm.engine.registry import qualified_name
from mnemon_sm.engine.spec import LoadedFlow
from mnemon_sm.ports import PORT_CAPABILITIES, PORT_PROTOCOLS

__all__ = ["lint_flow", "port_methods", "string_literals"]

_GUARD_PREFIXES = ("is_", "has_", "can_")
_VALIDATOR_PREFIX = "check_"


def port_methods() -> set[str]:
    """Every ``<port>.<method>`` the port protocols and their optional capabilities define."""
    found = set()
    tables = [PORT_PROTOCOLS.items()] + [
        [(port, protocol) for protocol in protocols]
        for port, protocols in PORT_CAPABILITIES.items()
    ]
    for port, protocol in (entry for table in tables for entry in table):
        for method, _ in inspect.getmembers(protocol, inspect.isfunction):
            if not method.startswith("_"):
                found.add(f"{port}.{method}")
    return found


def lint_flow(flow: LoadedFlow, property_tests: Path | frozenset[str] | None = None) -> list[str]:
    """Problems with ``flow``; ``property_tests`` (the directory, or its
    :func:`string_literals` when several flows are linted) enables the invariant check."""
    spec, context = flow.spec, flow.context_class
    problems = []
    for name, roles in sorted(spec.callbacks().items()):
        member = getattr(context, name, None)
        if member is None or not callable(member):
            owner = f"{spec.context} ({qualified_name(context)})"
            problems.append(f"{spec.flow}: callback {name!r} is not a method of {owner}")
        if len(roles) > 1:
            problems.append(f"{spec.flow}: {name!r} is used as {' and '.join(sorted(roles))}")
        role = next(iter(roles))
        is_guard_name = name.startswith(_GUARD_PREFIXES)
        is_validator_name = name.startswith(_VALIDATOR_PREFIX)
        if role == "guard" and not is_guard_name:
            problems.append(f"{spec.flow}: guard {name!r} should start with is_, has_ or can_")
        if role == "validator" and not is_validator_name:
            problems.append(f"{spec.flow}: validator {name!r} should start with check_")
        if role == "action" and (is_guard_name or is_validator_name):
            problems.append(f"{spec.flow}: action {name!r} is named like a guard or validator")
    known = port_methods()
    for sid, doc in spec.states.items():
        for call in doc.ports:
            if call not in known:
                problems.append(f"{spec.flow}: state {sid} declares unknown port call {call}")
    if property_tests is not None:
        literals = (
            string_literals(property_tests) if isinstance(property_tests, Path) else property_tests
        )
        for inv in spec.invariants:
            if inv not in literals:
                problems.append(f"{spec.flow}: invariant {inv} is not checked by a property test")
    return problems


def string_literals(directory: Path) -> frozenset[str]:
    """String constants in the Python files under ``directory`` (comments do not count)."""
    found: set[str] = set()
    for path in sorted(directory.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        found.update(
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
        )
    return frozenset(found)
