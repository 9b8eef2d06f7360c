"""The compiled dispatcher, rule by rule, run side by side with python-statemachine.

Each semantic test runs on both dispatchers (the ``make`` fixture): the compiled one must do
what the reference does, and the reference shows the test asserts the real rule. The rest
covers what only the compiled engine has: the choice of engine in ``engine.flow``, binding
callbacks by the keyword arguments they declare, and the ``SpecError`` for what it does not
support.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from statemachine import StateChart
from statemachine.exceptions import TransitionNotAllowed

from mnemon_sm.engine import flow as engine_flow
from mnemon_sm.engine.compiled import CompiledMachine, compile_chart
from mnemon_sm.engine.spec import LoadedFlow, build_machine_class, parse_spec
from mnemon_sm.errors import IllegalEvent, SpecError

UNIT = """
flow: unit
summary: A chart exercising each rule of dispatch.
context: UnitContext
resting: [idle, busy, done]
states:
  idle: {description: Idle.}
  working: {description: Working.}
  busy: {description: Busy.}
  done: {description: Done.}
events:
  go: Go.
  poke: Poke.
  stop: Stop.
  finished: {description: Finished., raised_by: work}
  abort: {description: Abort., raised_by: engine}
invariants: {}
statechart:
  states:
    idle:
      initial: true
      exit: [leave_idle]
      "on":
        go:
          - {target: working, cond: is_first, validators: check,
             before: before_go, "on": on_go, after: after_go}
          - {target: busy, unless: is_first}
        poke: [{target: null, "on": poked}]
        stop: [{target: done}]
    working:
      enter: [work, work_more]
      transitions:
        - {target: busy, cond: is_ready}
      "on":
        finished: [{target: idle}]
        abort: [{target: idle, "on": discard}]
    busy:
      enter: [enter_busy]
      "on":
        go: [{target: idle}]
        stop: [{target: done}]
    done:
      final: true
"""

SPEC = parse_spec(UNIT, name="unit")
CLASS = build_machine_class(SPEC)
CHART = compile_chart(SPEC, CLASS)


class Halt(BaseException):
    pass


class UnitContext:
    """Records every callback with the state at that moment; ``fail`` and ``raises`` say
    which callbacks raise an exception or an internal event."""

    def __init__(self) -> None:
        self.state: str | None = None
        self.log: list[tuple[Any, ...]] = []
        self.first, self.ready = True, False
        self.fail: dict[str, BaseException] = {}
        self.raises: dict[str, str] = {}

    def _do(self, name: str, machine: Any = None, result: Any = None) -> Any:
        self.log.append((name, self.state))
        if name in self.fail:
            raise self.fail[name]
        if name in self.raises:
            machine.raise_(self.raises[name])
            self.log.append((f"{name} returns", self.state))
        return result

    def check(self, request: object = None) -> None:
        self._do("check")

    def is_first(self) -> bool:
        return bool(self._do("is_first", result=self.first))

    def is_ready(self) -> bool:
        return bool(self._do("is_ready", result=self.ready))

    def before_go(self, machine: Any) -> None:
        self._do("before_go", machine)

    def on_go(self, request: object = "none") -> None:
        self.log.append(("on_go", request))

    def after_go(self, state: Any, source: Any, target: Any) -> None:
        self.log.append(("after_go", self.state, state.id, source.id, target.id))

    def leave_idle(self, machine: Any) -> None:
        self._do("leave_idle", machine)

    def work(self, machine: Any) -> None:
        self._do("work", machine)

    def work_more(self, machine: Any) -> None:
        self._do("work_more", machine)

    def enter_busy(self, machine: Any) -> None:
        self._do("enter_busy", machine)

    def poked(self, machine: Any) -> None:
        self._do("poked", machine)

    def discard(self) -> None:
        self._do("discard")


Make = Callable[..., Any]


@pytest.fixture(params=["statemachine", "compiled"])
def make(request: pytest.FixtureRequest) -> Make:
    def build(context: object, listeners: list[object] | None = None) -> Any:
        if request.param == "compiled":
            return CompiledMachine(CHART, context, listeners or [])
        return CLASS(model=context, listeners=listeners or [])

    return build


def started(make: Make, **fields: Any) -> tuple[UnitContext, Any]:
    context = UnitContext()
    vars(context).update(fields)
    machine = make(context)
    context.log.clear()
    return context, machine


def test_the_first_enabled_transition_in_document_order_is_taken(make: Make) -> None:
    context, machine = started(make)
    machine.send("go")
    assert context.state == "working"
    context, machine = started(make, first=False)
    machine.send("go")
    assert context.state == "busy"
    assert context.log[:3] == [("check", "idle"), ("is_first", "idle"), ("is_first", "idle")]


def test_a_step_runs_before_exit_on_entry_after_in_that_order(make: Make) -> None:
    context, machine = started(make)
    machine.send("go", request=7)
    assert context.log == [
        ("check", "idle"),
        ("is_first", "idle"),
        ("before_go", "idle"),
        ("leave_idle", "idle"),
        ("on_go", 7),
        ("work", "working"),
        ("work_more", "working"),
        ("after_go", "working", "working", "idle", "working"),
        ("is_ready", "working"),  # the eventless transition, checked after the step
    ]
    assert context.state == "working"


def test_validators_run_before_guards_and_their_error_leaves_the_state(make: Make) -> None:
    context, machine = started(make)
    context.fail["check"] = ValueError("bad request")
    with pytest.raises(ValueError, match="bad request"):
        machine.send("go")
    assert context.state == "idle" and context.log == [("check", "idle")]


def test_an_internal_transition_runs_on_without_exit_or_entry(make: Make) -> None:
    context, machine = started(make)
    machine.send("poke")
    assert context.log == [("poked", "idle")] and context.state == "idle"


def test_a_raised_event_runs_after_the_current_step_in_the_same_send(make: Make) -> None:
    context, machine = started(make)
    context.raises["work"] = "finished"
    machine.send("go")
    # The rest of the step (the next entry action, the after action) runs first, then the
    # eventless transitions of working are checked, then finished takes it back to idle.
    assert [entry[0] for entry in context.log][5:] == [
        "work",
        "work returns",
        "work_more",
        "after_go",
        "is_ready",
    ]
    assert context.state == "idle"


def test_eventless_transitions_are_taken_when_enabled_after_a_step(make: Make) -> None:
    context, machine = started(make, ready=True)
    machine.send("go")
    assert context.state == "busy"
    assert ("enter_busy", "busy") in context.log


def test_an_event_without_an_enabled_transition_is_refused_in_place(make: Make) -> None:
    context, machine = started(make)
    machine.send("go")
    with pytest.raises(TransitionNotAllowed):
        machine.send("poke")
    assert context.state == "working"
    with pytest.raises(TransitionNotAllowed, match="Can't bogus when in Working"):
        machine.send("bogus")


def test_a_raised_event_nothing_takes_is_dropped(make: Make) -> None:
    context, machine = started(make)
    context.raises["poked"] = "stop"  # idle takes stop: it runs
    machine.send("poke")
    assert context.state == "done"
    context, machine = started(make)
    context.raises["poked"] = "finished"  # idle has no finished: dropped, no error
    machine.send("poke")
    assert context.state == "idle"


def test_a_final_state_refuses_everything(make: Make) -> None:
    context, machine = started(make)
    machine.send("stop")
    assert context.state == "done" and machine.is_terminated
    for event in ("go", "stop", "abort"):
        with pytest.raises(TransitionNotAllowed):
            machine.send(event)
    assert context.state == "done"


@pytest.mark.parametrize(
    ("failing", "error", "state"),
    [
        ("before_go", RuntimeError("x"), "idle"),
        ("leave_idle", RuntimeError("x"), "idle"),
        ("work", RuntimeError("x"), "idle"),  # an entry action: back to the source
        ("work", Halt(), "working"),  # a BaseException restores nothing
        ("leave_idle", Halt(), "idle"),  # ... and the state had not moved yet
    ],
)
def test_where_an_exception_leaves_the_state(
    make: Make, failing: str, error: BaseException, state: str
) -> None:
    context, machine = started(make)
    context.fail[failing] = error
    with pytest.raises(type(error)):
        machine.send("go")
    assert context.state == state == machine.current_state_value


def test_an_exception_after_the_state_changed_leaves_the_target(make: Make) -> None:
    def broken(state: Any, source: Any, target: Any) -> None:
        raise RuntimeError("after")

    context = UnitContext()
    context.after_go = broken  # type: ignore[method-assign]
    machine = make(context)
    with pytest.raises(RuntimeError, match="after"):
        machine.send("go")
    assert context.state == "working"


def test_the_state_lives_on_the_context(make: Make) -> None:
    context, machine = started(make)
    assert context.state == machine.current_state_value == "idle"
    context.state = "busy"  # the machine follows the model, as the reference does
    machine.send("go")
    assert context.state == "idle"
    resumed = UnitContext()
    resumed.state = "busy"  # a machine started on a model with a state does not enter it
    make(resumed)
    assert resumed.log == [] and resumed.state == "busy"


def test_listeners_see_each_transition_by_the_reference_object(make: Make) -> None:
    seen: list[Any] = []

    class Listener:
        def after_transition(self, transition: Any) -> None:
            seen.append(transition)

    context = UnitContext()
    machine = make(context, [Listener()])
    machine.send("go")
    go = next(iter(CLASS.states_map["idle"].transitions))
    assert seen == [go]  # the initial entry is no transition; the eventless one not taken


def test_a_listener_hook_runs_after_the_transition_actions(make: Make) -> None:
    order: list[str] = []

    class Listener:
        def after_transition(self) -> None:
            order.append("listener")

    context = UnitContext()
    context.after_go = lambda: order.append("after_go")  # type: ignore[method-assign,assignment,return-value]
    machine = make(context, [Listener()])
    machine.send("go")
    assert order == ["after_go", "listener"]


def test_callbacks_receive_only_what_they_declare_and_reserved_names_are_dropped(
    make: Make,
) -> None:
    context, machine = started(make)
    machine.send("go", request="r", target="ignored", state="ignored")
    assert ("on_go", "r") in context.log
    assert ("after_go", "working", "working", "idle", "working") in context.log
    context, machine = started(make)
    machine.send("go")
    assert ("on_go", "none") in context.log  # the default when the event carries none


@pytest.mark.parametrize("error", [RuntimeError("boom"), Halt()])
def test_engine_flow_recovers_either_machine_with_abort(
    make: Make, error: BaseException, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded = LoadedFlow(SPEC, CLASS, UnitContext)
    monkeypatch.setattr(engine_flow, "load_flow", lambda name: loaded)
    context, machine = started(make)
    context.raises["work"] = "finished"  # queued, then the next action fails
    context.fail["work_more"] = error
    with pytest.raises(type(error)):
        engine_flow.send(machine, "unit", "go")
    assert context.state == "idle"
    assert (("discard", "working") in context.log) is isinstance(error, Halt)
    context.fail.clear()
    context.raises.clear()
    context.log.clear()
    engine_flow.send(machine, "unit", "go")  # nothing of the failed step is left queued
    assert context.state == "working"
    with pytest.raises(IllegalEvent):
        engine_flow.send(machine, "unit", "poke")


def test_start_picks_the_engine_the_switch_names(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = LoadedFlow(SPEC, CLASS, UnitContext)
    monkeypatch.setattr(engine_flow, "load_flow", lambda name: loaded)
    monkeypatch.setattr(engine_flow, "_observers", [])  # the suite's recorder knows real flows
    assert engine_flow.engine() in engine_flow.ENGINES
    previous = engine_flow.use_engine("compiled")
    try:
        assert isinstance(engine_flow.start("unit", UnitContext()), CompiledMachine)
        assert engine_flow.use_engine("statemachine") == "compiled"
        assert isinstance(engine_flow.start("unit", UnitContext()), StateChart)
        with pytest.raises(SpecError, match="MNEMON_SM_ENGINE"):
            engine_flow.use_engine("fast")
    finally:
        engine_flow.use_engine(previous)


def test_the_default_engine_is_compiled_unless_the_variable_says_otherwise() -> None:
    import os
    import subprocess
    import sys

    code = "from mnemon_sm.engine import flow; print(flow.engine())"
    env = {k: v for k, v in os.environ.items() if k != engine_flow.ENGINE_VARIABLE}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "compiled", out.stderr
    env[engine_flow.ENGINE_VARIABLE] = "statemachine"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "statemachine", out.stderr


@pytest.mark.parametrize(
    ("method", "why"),
    [
        (lambda self, **kwargs: None, "VAR_KEYWORD"),
        (lambda self, event_data: None, "event_data"),
        (lambda self, machine, /: None, "POSITIONAL_ONLY"),
    ],
)
def test_a_signature_the_compiled_engine_cannot_bind_is_a_spec_error(
    method: Callable[..., Any], why: str
) -> None:
    broken = type("Broken", (UnitContext,), {"poked": method})
    with pytest.raises(SpecError, match="poked"):
        CompiledMachine(CHART, broken())


def test_what_the_compiled_engine_does_not_support_fails_at_load() -> None:
    on_machine = UNIT.replace('"on": poked', '"on": raise_')
    spec = parse_spec(on_machine, name="unit")
    with pytest.raises(SpecError, match="'raise_' is an attribute of the machine class"):
        compile_chart(spec, build_machine_class(spec))
    expanded = UNIT.replace("poke", "error_poke")
    spec = parse_spec(expanded, name="unit")
    with pytest.raises(SpecError, match="expands its name"):
        compile_chart(spec, build_machine_class(spec))
    hooked = type("Hooked", (UnitContext,), {"prepare_event": lambda self: {}})
    with pytest.raises(SpecError, match="prepare_event"):
        CompiledMachine(CHART, hooked())
    with pytest.raises(SpecError, match=r"callback '[a-z_]+' is not defined on the context"):
        CompiledMachine(CHART, type("Missing", (), {"state": None})())


@pytest.mark.parametrize("name", ["source", "target", "state", "model", "transition"])
def test_engine_flow_refuses_an_event_argument_the_engine_would_drop(
    make: Make, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: a lifecycle event carried ``source=``, which never reached its callback
    (the engine passes the state left under that name); now such a send fails loudly and
    nothing runs."""
    loaded = LoadedFlow(SPEC, CLASS, UnitContext)
    monkeypatch.setattr(engine_flow, "load_flow", lambda flow: loaded)
    context, machine = started(make)
    context.log.clear()
    with pytest.raises(SpecError, match=f"reserves: {name}"):
        engine_flow.send(machine, "unit", "go", **{name: "x"})
    assert context.state == "idle" and context.log == []
