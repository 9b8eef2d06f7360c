"""Differential test: the compiled dispatcher behaves exactly as python-statemachine.

For every spec in ``specs/`` and for small synthetic specs (internal and eventless transitions,
``raise_``, validators, guard lists, a final state, self transitions), Hypothesis draws a
recording context: each callback name the spec uses (and a few naming-convention hooks)
becomes a method with a drawn signature whose successive calls follow a drawn script (return
a guard value, raise an internal event, send an event, raise an ``Exception`` or a
``BaseException``). The same script drives one machine on each dispatcher through the same
events, started at the initial state or placed in a drawn one; after every event the two must
agree on the error, the state, whether the machine stopped and every callback call (its name,
the state at that moment and the keyword arguments it received, engine objects compared by
what they denote). In half the runs, exceptions other than ``TransitionNotAllowed`` are
followed by the recovery ``engine.flow.send`` performs (drop the queues, fire ``abort``); in
the others the engines' own clean-up is all there is.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from statemachine import State, StateChart
from statemachine.event import Event
from statemachine.exceptions import TransitionNotAllowed
from statemachine.transition import Transition

import mnemon_sm  # noqa: F401  (registers every flow's context)
from mnemon_sm.engine import flow as engine_flow
from mnemon_sm.engine.compiled import CompiledChart, CompiledMachine, compile_chart
from mnemon_sm.engine.spec import FlowSpec, build_machine_class, flow_names, load_flow, parse_spec

SYNTHETIC_A = """
flow: synthetic_a
summary: Guarded choices, a self transition, internal transitions and raised events.
context: FakeContext
resting: [idle, busy, done]
states:
  idle: {description: Idle.}
  checking: {description: Checking.}
  busy: {description: Busy.}
  done: {description: Done.}
events:
  go: Go.
  poke: Poke.
  stop: Stop.
  ping: {description: Ping., raised_by: act_b}
  abort: {description: Abort., raised_by: engine}
invariants: {}
statechart:
  states:
    idle:
      initial: true
      enter: [enter_idle]
      exit: [exit_idle]
      "on":
        go:
          - {target: checking, cond: g1, unless: g2, validators: v1,
             before: b1, "on": o1, after: a1}
          - {target: busy, cond: g2, validators: [v2]}
          - {target: idle, before: b2}
        poke: [{target: null, "on": [o1, o2], after: a2}]
        stop: [{target: done}]
    checking:
      enter: [act_a, act_b]
      exit: [exit_checking]
      transitions:
        - {target: busy, cond: g3}
        - {target: idle, unless: g3, "on": o2}
      "on":
        ping: [{target: busy}]
        abort: [{target: idle, "on": discard}]
    busy:
      enter: [act_b]
      "on":
        ping: [{target: idle, cond: g1}, {target: null, "on": o1}]
        go: [{target: busy, validators: v1}]
        poke: [{target: idle}]
        stop: [{target: done, after: a1}]
    done:
      final: true
"""

SYNTHETIC_B = """
flow: synthetic_b
summary: Eventless chains, guard lists and a final state reached by an internal event.
context: FakeContext
resting: [start, waiting, finished]
states:
  start: {description: Start.}
  routing: {description: Routing.}
  waiting: {description: Waiting.}
  finished: {description: Finished.}
events:
  next: Next.
  finish: {description: Finish., raised_by: route}
  abort: {description: Abort., raised_by: engine}
invariants: {}
statechart:
  states:
    start:
      initial: true
      enter: [prime]
      transitions:
        - {target: routing, cond: [g1, g2]}
        - {target: waiting}
    routing:
      enter: [route]
      exit: [leave]
      transitions:
        - {target: waiting, unless: [g1, g3], after: a1}
        - {target: null, cond: g2, "on": tick}
      "on":
        finish: [{target: finished, before: b1}]
        abort: [{target: start, "on": discard}]
    waiting:
      "on":
        next: [{target: routing, validators: [v1, v2], cond: g3}, {target: start, unless: g3}]
        finish: [{target: finished}]
    finished:
      final: true
"""


class Case:
    """A spec with its reference class and its compiled chart."""

    def __init__(self, spec: FlowSpec, cls: type[StateChart[Any]], chart: CompiledChart):
        self.spec, self.cls, self.chart = spec, cls, chart
        self.index = {
            id(t): (state.id, i) for state in cls.states for i, t in enumerate(state.transitions)
        }
        self.states = list(spec.state_defs)
        self.events = sorted(spec.events)
        hooks = ["before_transition", "on_transition", "after_transition"]
        hooks += ["on_enter_state", "on_exit_state"]
        hooks += [f"on_enter_{s}" for s in self.states] + [f"on_exit_{s}" for s in self.states]
        hooks += [f"{when}_{e}" for e in self.events for when in ("before", "on", "after")]
        self.hooks = sorted(set(hooks) - set(spec.callbacks()))


def _synthetic(text: str, name: str) -> Case:
    spec = parse_spec(text, name=name)
    cls = build_machine_class(spec)
    return Case(spec, cls, compile_chart(spec, cls))


def _real(name: str) -> Case:
    loaded = load_flow(name)
    return Case(loaded.spec, loaded.machine_class, loaded.chart)


CASES = {name: _real(name) for name in flow_names()}
CASES["synthetic_a"] = _synthetic(SYNTHETIC_A, "synthetic_a")
CASES["synthetic_b"] = _synthetic(SYNTHETIC_B, "synthetic_b")


class Boom(Exception):
    pass


class Halt(BaseException):
    pass


class Budget(BaseException):
    """A step ran too many callbacks (a loop of raised events): stop it the same way in both."""


BUDGET = 120
ENGINE_OBJECTS = {"machine", "event", "source", "target", "state", "transition", "model"}
SIGNATURES: list[tuple[str, ...]] = [
    (),
    ("machine",),
    ("request",),
    ("machine", "request"),
    ("event", "source", "target"),
    ("state", "transition"),
    ("model", "request"),
]


class Recorder:
    """The fake context: every callback goes through :meth:`_hit`."""

    def __init__(self, case: Case, script: dict[str, list[tuple[str, Any]]]) -> None:
        self.state: str | None = None
        self.case, self.script = case, script
        self.log: list[tuple[Any, ...]] = []
        self.counts: Counter[str] = Counter()
        self.calls = 0
        self.machine: Any = None

    def _hit(self, name: str, kwargs: dict[str, Any]) -> Any:
        self.calls += 1
        if self.calls > BUDGET:
            raise Budget()
        self.log.append((name, self.state, {k: self._norm(v) for k, v in kwargs.items()}))
        plan = self.script.get(name) or [("ret", True)]
        kind, arg = plan[self.counts[name] % len(plan)]
        self.counts[name] += 1
        machine = kwargs.get("machine", self.machine)
        if kind == "ret":
            return arg
        if kind == "boom":
            raise Boom(name)
        if kind == "halt":
            raise Halt(name)
        if machine is not None:
            (machine.raise_ if kind == "raise_" else machine.send)(arg)
        return None

    def _norm(self, value: Any) -> Any:
        if isinstance(value, StateChart | CompiledMachine):
            return "<machine>" if value is self.machine or self.machine is None else "<other>"
        if value is self:
            return "<model>"
        if isinstance(value, State):
            return ("state", value.id)
        if isinstance(value, Transition):
            found = self.case.index.get(id(value))
            return ("transition", found or ("initial", value.target and value.target.id))
        if isinstance(value, Event):
            return ("event", str(value))
        return value


class Listener:
    """A listener with convention hooks, as the coverage recorder is one."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def after_transition(self, transition: Any, source: Any, target: Any) -> None:
        self.recorder._hit(
            "L.after_transition", {"transition": transition, "source": source, "target": target}
        )

    def on_enter_state(self, state: Any, event: Any) -> None:
        self.recorder._hit("L.on_enter_state", {"state": state, "event": event})


@functools.cache
def _method(name: str, params: tuple[str, ...]) -> Callable[..., Any]:
    """A method ``name`` declaring ``params`` (engine objects required, the rest defaulted)."""
    declared = ", ".join(p if p in ENGINE_OBJECTS else f"{p}=None" for p in params)
    passed = ", ".join(f"{p!r}: {p}" for p in params)
    namespace: dict[str, Any] = {}
    exec(
        f"def {name}(self{', ' if declared else ''}{declared}):\n"
        f"    return self._hit({name!r}, {{{passed}}})\n",
        namespace,
    )
    method: Callable[..., Any] = namespace[name]
    return method


def context_class(names: dict[str, tuple[str, ...]]) -> type[Recorder]:
    """A Recorder subclass with one method per name, declaring the given parameters."""
    return type("FakeContext", (Recorder,), {n: _method(n, p) for n, p in names.items()})


def _describe(exc: BaseException) -> tuple[str, str]:
    return (type(exc).__name__, str(exc))


def run(
    engine: str,
    case: Case,
    cls: type[Recorder],
    script: dict[str, list[tuple[str, Any]]],
    start: str | None,
    events: list[tuple[str, dict[str, Any]]],
    recover: bool,
) -> list[tuple[Any, ...]]:
    context = cls(case, script)
    context.state = start
    listener = Listener(context)
    steps: list[tuple[Any, ...]] = []
    try:
        if engine == "compiled":
            machine: Any = CompiledMachine(case.chart, context, [listener])
        else:
            machine = case.cls(model=context, listeners=[listener])
    except BaseException as exc:
        return [("start", _describe(exc), context.state, context.log)]
    context.machine = machine
    steps.append(("start", None, machine.current_state_value, context.log))
    for event, kwargs in events:
        context.log, context.calls = [], 0
        error, at_error = None, None
        try:
            machine.send(event, **kwargs)
        except TransitionNotAllowed as exc:
            error = _describe(exc)
        except BaseException as exc:
            error, at_error = _describe(exc), machine.current_state_value
            context.calls = 0
            try:
                if recover:  # what engine.flow.send does; else the engine's own clean-up
                    engine_flow._recover(machine, case.spec)
            except BaseException as again:
                error = (*error, _describe(again))
        steps.append(
            (
                event,
                error,
                at_error,
                machine.current_state_value,
                machine.is_terminated,
                context.log,
            )
        )
    return steps


def behaviour(events: list[str]) -> st.SearchStrategy[tuple[str, Any]]:
    """One call's conduct: mostly a guard value, sometimes an event or an exception."""
    value = st.tuples(st.just("ret"), st.booleans())
    return st.one_of(
        value,
        value,
        value,
        st.tuples(st.sampled_from(["raise_", "send"]), st.sampled_from(events)),
        st.tuples(st.sampled_from(["boom", "halt"]), st.none()),
    )


KWARGS = st.one_of(
    st.just({}),
    st.builds(lambda n: {"request": n}, st.integers(0, 3)),
    st.builds(lambda n: {"request": n, "target": "x", "state": 1}, st.integers(0, 3)),
)
LISTENER_HOOKS = ["L.after_transition", "L.on_enter_state"]


def plans(case: Case) -> st.SearchStrategy[tuple[Any, ...]]:
    """Convention hooks the context defines (with their scripts), signatures, scripts, where
    to start and what to send."""
    names = sorted(case.spec.callbacks())
    events = [*case.events, "bogus"]
    script = st.lists(behaviour(events), min_size=1, max_size=3)
    return st.tuples(
        st.dictionaries(st.sampled_from(case.hooks), script, max_size=4),
        st.fixed_dictionaries({n: st.sampled_from(SIGNATURES) for n in names}),
        st.fixed_dictionaries({n: script for n in [*names, *LISTENER_HOOKS]}),
        st.sampled_from([None, *case.states]),
        st.lists(st.tuples(st.sampled_from(events), KWARGS), max_size=10),
        st.booleans(),
    )


PLANS = {name: plans(case) for name, case in CASES.items()}


@pytest.mark.parametrize("name", sorted(CASES))
@given(data=st.data())
def test_both_dispatchers_behave_alike(name: str, data: st.DataObject) -> None:
    case = CASES[name]
    hooks, signatures, script, start, sends, recover = data.draw(PLANS[name])
    signatures |= {h: SIGNATURES[len(h) % len(SIGNATURES)] for h in hooks}
    script |= hooks
    cls = context_class(signatures)
    reference = run("statemachine", case, cls, script, start, sends, recover)
    compiled = run("compiled", case, cls, script, start, sends, recover)
    assert compiled == reference
