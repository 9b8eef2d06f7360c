"""Load ``specs/<flow>.yaml`` and build the flow's machine class from it.

Theory of operation
-------------------
A spec file is our wrapper around a statechart written in python-statemachine's own
declarative vocabulary::

    flow: <name>                 # equals the file name
    summary: <paragraph>
    context: <name>              # the registered class the callbacks named below live on
    resting: [<id>, ...]         # where the machine may be between two caller events
    states:  {<id>: {description: <line>, ports: [<port>.<method>, ...]}}
    events:  {<id>: <line> | {description: <line>, raised_by: <callback> | engine}}
    invariants: {INV-<FLOW>-<n>: <statement>}
    statechart:
      states: {<id>: {initial|final, enter, exit, "on": {<event>: [<transition>]},
                      transitions: [<eventless transition>]}}

A transition has ``target`` and optional ``cond``, ``unless``, ``validators``, ``before``, ``on``,
``after``; every callback is a bare method name of the context class (no expressions).
``context`` is the name that class registered under with
:func:`mnemon_sm.engine.registry.flow_context`, not a module path; the engine never imports
the flows, whose import fills the registry (see there). The loader is strict: a YAML 1.1 trap
key like ``on`` stays a string, duplicate keys and non-string keys are errors, and so is any
unknown field. The class is built with
``create_machine_class_from_definition`` with every structural check on and the strict engine
flags: an event with no enabled transition raises (``IllegalEvent`` at our boundary) and an
exception raised by a callback propagates.

Every state that is neither resting nor initial must declare an ``abort`` transition to a
resting state, and ``abort`` must be an event ``raised_by: engine``: :mod:`.flow` fires it
when an exception (``BaseException`` included) escapes a step there, so no flow is ever left
in the middle of a run. A state that can abort may not leave by an unguarded eventless
transition: the engine would take it before ``abort``, and the undo work of ``abort`` (a
lock to release) would never run. (An exception inside an initial state's entry actions fails the
machine's construction, so nothing remains to recover.)

Loading also compiles the chart for the default dispatcher (:mod:`.compiled`); a spec that
dispatcher cannot run exactly as python-statemachine would is a ``SpecError`` here.
"""

from __future__ import annotations

import copy
import functools
import re
from importlib import resources
from pathlib import Path
from typing import Any

import attrs
import yaml
from statemachine import StateChart
from statemachine.exceptions import InvalidDefinition
from statemachine.io import create_machine_class_from_definition

from mnemon_sm.convert import StructureFailed, converter, structure
from mnemon_sm.engine.compiled import CompiledChart, compile_chart
from mnemon_sm.engine.registry import CONTEXT_NAME, context_class
from mnemon_sm.errors import SpecError

__all__ = [
    "ABORT",
    "ENGINE",
    "ENGINE_FLAGS",
    "EventDoc",
    "FlowSpec",
    "LoadedFlow",
    "StateDoc",
    "TransitionDoc",
    "build_flow",
    "flow_names",
    "load_flow",
    "spec_dir",
]

# Strict engine flags and every structural check (style guide, decisions box).
ENGINE_FLAGS: dict[str, bool] = {
    "allow_event_without_transition": False,
    "catch_errors_as_events": False,
    "atomic_configuration_update": True,
    "validate_disconnected_states": True,
    "validate_trap_states": True,
    "validate_final_reachability": True,
}

ABORT = "abort"  # the event that brings an interrupted machine back to rest
ENGINE = "engine"  # ``raised_by`` of events the engine itself raises

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_INVARIANT = re.compile(r"^INV-[A-Z]+-[0-9]+$")
_PORT_CALL = re.compile(r"^[a-z_]+\.[a-z_]+$")
_STATE_KEYS = {"initial", "final", "enter", "exit", "on", "transitions"}
_CALLBACK_KEYS = ("cond", "unless", "validators", "before", "on", "after")
_TRANSITION_KEYS = {"target", *_CALLBACK_KEYS}


@attrs.frozen
class StateDoc:
    description: str
    ports: list[str] = attrs.Factory(list)


@attrs.frozen
class EventDoc:
    """An event's description; ``raised_by`` names the callback that raises an internal event
    (internal events cannot be sent from outside the flow)."""

    description: str
    raised_by: str | None = None


def _event_doc(value: Any, _: Any) -> str | EventDoc:
    if isinstance(value, str):
        return value
    return converter.structure(value, EventDoc)


converter.register_structure_hook(str | EventDoc, _event_doc)


@attrs.frozen
class _SpecDoc:
    flow: str
    summary: str
    context: str
    resting: list[str]
    states: dict[str, StateDoc]
    events: dict[str, str | EventDoc]
    invariants: dict[str, str]
    statechart: dict[str, Any]


@attrs.frozen
class TransitionDoc:
    """One transition of a spec, in document order (``index`` within its source state)."""

    source: str
    index: int
    event: str  # "" for an eventless transition
    target: str | None  # None for an internal (targetless) transition
    cond: tuple[str, ...]
    unless: tuple[str, ...]
    validators: tuple[str, ...]
    actions: tuple[str, ...]  # before + on + after, in that order

    @property
    def key(self) -> tuple[str, int]:
        return (self.source, self.index)

    @property
    def guard(self) -> str:
        return " and ".join([*self.cond, *(f"!{u}" for u in self.unless)])


@attrs.frozen
class FlowSpec:
    """A validated spec file."""

    flow: str
    summary: str
    context: str
    resting: tuple[str, ...]
    states: dict[str, StateDoc]
    events: dict[str, EventDoc]
    invariants: dict[str, str]
    state_defs: dict[str, dict[str, Any]]
    transitions: tuple[TransitionDoc, ...]

    @functools.cached_property
    def external_events(self) -> frozenset[str]:
        """Events a caller may send (internal ones are raised by callbacks); computed once,
        every event a caller sends is checked against it."""
        return frozenset(e for e, d in self.events.items() if d.raised_by is None)

    @property
    def initial(self) -> str:
        return next(s for s, d in self.state_defs.items() if d.get("initial"))

    def callbacks(self) -> dict[str, set[str]]:
        """Every callback name with the roles it plays: guard, validator or action."""
        roles: dict[str, set[str]] = {}
        for doc in self.events.values():
            if doc.raised_by not in (None, ENGINE):
                roles.setdefault(doc.raised_by, set()).add("action")
        for sdef in self.state_defs.values():
            for name in [*sdef.get("enter", []), *sdef.get("exit", [])]:
                roles.setdefault(name, set()).add("action")
        for t in self.transitions:
            for name in (*t.cond, *t.unless):
                roles.setdefault(name, set()).add("guard")
            for name in t.validators:
                roles.setdefault(name, set()).add("validator")
            for name in t.actions:
                roles.setdefault(name, set()).add("action")
        return roles


def _compile(loaded: LoadedFlow) -> CompiledChart:
    return compile_chart(loaded.spec, loaded.machine_class)


@attrs.frozen
class LoadedFlow:
    """A spec with its machine class, its context class and its compiled dispatch table
    (:mod:`.compiled`), built once per process."""

    spec: FlowSpec
    machine_class: type[StateChart[Any]]
    context_class: type[Any]
    chart: CompiledChart = attrs.field(
        default=attrs.Factory(_compile, takes_self=True), eq=False, repr=False
    )


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 booleans (``on``/``off``/``yes``/``no`` stay strings) that
    rejects duplicate and non-string mapping keys."""


_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|false)$"), list("tf")
)


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    result: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str):
            raise SpecError(f"line {key_node.start_mark.line + 1}: key {key!r} is not a string")
        if key in result:
            raise SpecError(f"line {key_node.start_mark.line + 1}: duplicate key {key!r}")
        result[key] = loader.construct_object(value_node, deep=True)
    return result


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def spec_dir() -> Path:
    """Where the spec files are: inside the installed package, else the source checkout."""
    packaged = Path(str(resources.files("mnemon_sm"))) / "_specs"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "specs"


def flow_names() -> tuple[str, ...]:
    """Names of every flow with a spec file, sorted."""
    return tuple(sorted(p.stem for p in spec_dir().glob("*.yaml")))


def parse_spec(text: str, *, name: str) -> FlowSpec:
    """Parse and validate the text of one spec file (raises ``SpecError``)."""
    try:
        raw = yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as exc:
        raise SpecError(f"{name}: not valid YAML: {exc}") from None
    except SpecError as exc:
        raise SpecError(f"{name}: {exc.message}") from None
    try:
        doc = structure(raw, _SpecDoc)
    except StructureFailed as exc:
        raise SpecError(f"{name}: {'; '.join(exc.problems)}") from None
    problems: list[str] = []
    if doc.flow != name:
        problems.append(f"flow is {doc.flow!r} but the file is {name}.yaml")
    if not CONTEXT_NAME.match(doc.context):
        problems.append(
            f"context {doc.context!r} is not a registered name (an identifier such as "
            "HotMutationFlow, not a module path)"
        )
    state_defs = _check_statechart(doc.statechart, problems)
    transitions = _transitions(state_defs)
    _check_docs(doc, state_defs, transitions, problems)
    if problems:
        raise SpecError(f"{name}: " + "; ".join(problems))
    events = {e: d if isinstance(d, EventDoc) else EventDoc(d) for e, d in doc.events.items()}
    return FlowSpec(
        doc.flow,
        doc.summary,
        doc.context,
        tuple(doc.resting),
        doc.states,
        events,
        doc.invariants,
        state_defs,
        transitions,
    )


def _names(value: Any, where: str, problems: list[str]) -> list[str]:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        problems.append(f"{where}: expected a callback name or a list of names")
        return []
    for n in names:
        if not _NAME.match(n):
            problems.append(f"{where}: {n!r} is not a bare callback name")
    return list(names)


def _check_transition(t: Any, where: str, problems: list[str]) -> dict[str, Any]:
    if not isinstance(t, dict) or "target" not in t:
        problems.append(f"{where}: a transition needs a target")
        return {}
    for key in set(t) - _TRANSITION_KEYS:
        problems.append(f"{where}: unknown transition field {key!r}")
    out: dict[str, Any] = {"target": t["target"]}
    for key in _CALLBACK_KEYS:
        if key in t:
            out[key] = _names(t[key], f"{where}.{key}", problems)
    return out


def _check_statechart(chart: dict[str, Any], problems: list[str]) -> dict[str, dict[str, Any]]:
    if set(chart) != {"states"} or not isinstance(chart["states"], dict):
        problems.append("statechart must hold exactly one key, states")
        return {}
    defs: dict[str, dict[str, Any]] = {}
    for sid, sdef in chart["states"].items():
        where = f"statechart.states.{sid}"
        if not _NAME.match(sid) or not isinstance(sdef, dict):
            problems.append(f"{where}: bad state id or definition")
            continue
        for key in set(sdef) - _STATE_KEYS:
            problems.append(f"{where}: unknown state field {key!r}")
        out: dict[str, Any] = {k: sdef[k] for k in ("initial", "final") if sdef.get(k) is True}
        for key in ("enter", "exit"):
            if key in sdef:
                out[key] = _names(sdef[key], f"{where}.{key}", problems)
        events = sdef.get("on", {})
        if not isinstance(events, dict):
            problems.append(f"{where}.on: expected a mapping of events")
            events = {}
        out["on"] = {}
        for ev, ts in events.items():
            if not _NAME.match(ev) or not isinstance(ts, list):
                problems.append(f"{where}.on.{ev}: bad event id or transition list")
                continue
            out["on"][ev] = [
                _check_transition(t, f"{where}.on.{ev}[{i}]", problems) for i, t in enumerate(ts)
            ]
        eventless = sdef.get("transitions", [])
        out["transitions"] = [
            _check_transition(t, f"{where}.transitions[{i}]", problems)
            for i, t in enumerate(eventless if isinstance(eventless, list) else [])
        ]
        defs[sid] = out
    for sid, sdef in defs.items():
        targets = [t.get("target") for ts in sdef["on"].values() for t in ts]
        targets += [t.get("target") for t in sdef["transitions"]]
        for target in targets:
            if target is not None and target not in defs:
                problems.append(f"statechart.states.{sid}: unknown target {target!r}")
    return defs


def _transitions(defs: dict[str, dict[str, Any]]) -> tuple[TransitionDoc, ...]:
    docs = []
    for sid, sdef in defs.items():
        listed = [(ev, t) for ev, ts in sdef["on"].items() for t in ts]
        listed += [("", t) for t in sdef["transitions"]]
        for index, (event, t) in enumerate(listed):
            docs.append(
                TransitionDoc(
                    sid,
                    index,
                    event,
                    t.get("target"),
                    tuple(t.get("cond", ())),
                    tuple(t.get("unless", ())),
                    tuple(t.get("validators", ())),
                    tuple(t.get("before", []) + t.get("on", []) + t.get("after", [])),
                )
            )
    return tuple(docs)


def _check_docs(
    doc: _SpecDoc,
    defs: dict[str, dict[str, Any]],
    transitions: tuple[TransitionDoc, ...],
    problems: list[str],
) -> None:
    if set(doc.states) != set(defs):
        problems.append(
            f"states described {sorted(doc.states)} differ from the statechart's {sorted(defs)}"
        )
    used = {t.event for t in transitions if t.event}
    if set(doc.events) != used:
        problems.append(
            f"events described {sorted(doc.events)} differ from those used {sorted(used)}"
        )
    event_texts = [d if isinstance(d, str) else d.description for d in doc.events.values()]
    for text in [*(s.description for s in doc.states.values()), *event_texts]:
        if not text.strip() or "\n" in text.strip():
            problems.append(f"descriptions must be one non-empty line: {text!r}")
    for sid, sdoc in doc.states.items():
        for call in sdoc.ports:
            if not _PORT_CALL.match(call):
                problems.append(f"states.{sid}.ports: {call!r} is not <port>.<method>")
    for inv in doc.invariants:
        if not _INVARIANT.match(inv):
            problems.append(f"invariant id {inv!r} is not INV-<FLOW>-<n>")
    _check_resting(doc, defs, transitions, problems)


def _check_resting(
    doc: _SpecDoc,
    defs: dict[str, dict[str, Any]],
    transitions: tuple[TransitionDoc, ...],
    problems: list[str],
) -> None:
    """Resting states exist; every other non-initial state can abort to one of them."""
    unknown = [r for r in doc.resting if r not in defs]
    if unknown or not doc.resting:
        problems.append(f"resting must name states of the statechart, got {doc.resting}")
    for sid, sdef in defs.items():
        if sid in doc.resting or sdef.get("initial"):
            continue
        aborts = [t for t in transitions if t.source == sid and t.event == ABORT]
        if not aborts or any(t.target not in doc.resting for t in aborts):
            problems.append(f"state {sid} is not resting: it needs an {ABORT} transition to rest")
    for sid in defs:
        leaves = [t for t in transitions if t.source == sid]
        if any(t.event == ABORT for t in leaves) and any(
            not t.event and not t.cond and not t.unless for t in leaves
        ):
            # The engine takes an enabled eventless transition before any event, so after an
            # exception in this state's work the machine would leave without aborting.
            problems.append(
                f"state {sid} can abort, so it may not leave by an unguarded eventless "
                "transition (end its work with an outcome event instead)"
            )
    if any(t.event == ABORT for t in transitions):
        event = doc.events.get(ABORT)
        raised_by = event.raised_by if isinstance(event, EventDoc) else None
        if raised_by != ENGINE:
            problems.append(f"event {ABORT} must be raised_by {ENGINE}")


def build_machine_class(spec: FlowSpec) -> type[StateChart[Any]]:
    """Build the python-statemachine class of ``spec`` with the strict flags."""
    definition = copy.deepcopy(spec.state_defs)  # the factory consumes what it is given
    for sdef in definition.values():
        if not sdef["transitions"]:
            del sdef["transitions"]
    class_name = "".join(part.title() for part in spec.flow.split("_")) + "Machine"
    try:
        states: Any = definition  # our checked subset of the factory's schema
        return create_machine_class_from_definition(class_name, states=states, **ENGINE_FLAGS)
    except InvalidDefinition as exc:
        raise SpecError(f"{spec.flow}: {exc}") from None


@functools.cache
def load_flow(name: str) -> LoadedFlow:
    """Load, validate and build one flow (once per process).

    Its context class must be registered: it is for any caller that imported ``mnemon_sm``
    (which imports every flow package); otherwise this is a ``SpecError`` saying so.
    """
    path = spec_dir() / f"{name}.yaml"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"cannot read the spec of flow {name!r}: {exc}") from None
    return build_flow(parse_spec(text, name=name))


def build_flow(spec: FlowSpec) -> LoadedFlow:
    """Build the machine class of ``spec`` and find its registered context class."""
    return LoadedFlow(spec, build_machine_class(spec), context_class(spec.context, flow=spec.flow))
