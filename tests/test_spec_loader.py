"""The spec loader: strict YAML, a strict wrapper, every structural check on."""

from __future__ import annotations

import textwrap
import types

import pytest

from mnemon_sm.engine import registry
from mnemon_sm.engine.registry import flow_context, registered
from mnemon_sm.engine.spec import (
    ENGINE_FLAGS,
    build_flow,
    build_machine_class,
    flow_names,
    load_flow,
    parse_spec,
)
from mnemon_sm.errors import SpecError

GOOD = """
flow: demo
summary: A two-state demo.
context: DemoContext
resting: [idle, busy, done]
states:
  idle: {description: Waiting., ports: []}
  busy: {description: Working., ports: [files.read]}
  done: {description: Finished.}
events:
  go: Start.
  stop: Stop.
invariants:
  INV-DEMO-1: Nothing happens.
statechart:
  states:
    idle:
      initial: true
      "on":
        go: [{target: busy, validators: check_ok}]
    busy:
      enter: do_work
      "on":
        stop: [{target: done, cond: is_ready}]
    done:
      final: true
"""


class DemoContext:
    state: str | None = None

    def check_ok(self) -> None:
        pass

    def do_work(self) -> None:
        pass

    def is_ready(self) -> bool:
        return True


def spec_text(**replacements: str) -> str:
    text = GOOD
    for old, new in replacements.items():
        assert old in text, old
        text = text.replace(old, new)
    return text


def test_a_good_spec_builds_a_strict_machine() -> None:
    spec = parse_spec(GOOD, name="demo")
    cls = build_machine_class(spec)
    for flag, value in ENGINE_FLAGS.items():
        assert getattr(cls, flag) is value
    machine = cls(model=DemoContext())
    machine.send("go")
    assert machine.current_state_value == "busy"
    assert [(t.source, t.index, t.event, t.target) for t in spec.transitions] == [
        ("idle", 0, "go", "busy"),
        ("busy", 0, "stop", "done"),
    ]
    assert spec.callbacks() == {
        "check_ok": {"validator"},
        "do_work": {"action"},
        "is_ready": {"guard"},
    }


def test_the_yaml_on_key_is_a_string_when_quoted_or_not() -> None:
    unquoted = GOOD.replace('"on":', "on:")
    spec = parse_spec(unquoted, name="demo")
    assert spec.state_defs["idle"]["on"] == parse_spec(GOOD, name="demo").state_defs["idle"]["on"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"flow: demo": "flow: other"}, "the file is demo.yaml"),
        ({"  go: Start.\n": ""}, "events described"),
        ({"  done: {description: Finished.}\n": ""}, "states described"),
        ({"summary: A two-state demo.": "summary: A two-state demo.\ncolour: red"}, "unknown"),
        ({"validators: check_ok": "validators: 'check_ok or 1'"}, "not a bare callback name"),
        ({"cond: is_ready": "cond: is_ready()"}, "not a bare callback name"),
        ({"target: done, cond": "target: nowhere, cond"}, "unknown target"),
        ({"target: done, cond": "goal: done, cond"}, "needs a target"),
        ({"enter: do_work": "enter: do_work\n      colour: red"}, "unknown state field"),
        ({"INV-DEMO-1": "INVARIANT-1"}, "INV-<FLOW>-<n>"),
        ({"ports: [files.read]": "ports: [read]"}, "<port>.<method>"),
        ({"description: Waiting.": "description: ''"}, "one non-empty line"),
        ({"  idle: {description": "  1: {description"}, "not a string"),
        ({"  stop: Stop.\n": "  stop: Stop.\n  stop: Again.\n"}, "duplicate key"),
        ({"statechart:\n  states:": "statechart:\n  engine: fast\n  states:"}, "exactly one key"),
        ({"flow: demo": "flow: [demo"}, "not valid YAML"),
        ({"context: DemoContext": "context: tests.demo:DemoContext"}, "not a registered name"),
        ({"context: DemoContext": "context: tests.demo.DemoContext"}, "not a registered name"),
        ({"resting: [idle, busy, done]": "resting: [idle, done]"}, "busy is not resting"),
        ({"resting: [idle, busy, done]": "resting: [idle, nowhere]"}, "resting must name"),
        ({"resting: [idle, busy, done]": "resting: []"}, "resting must name"),
        ({"resting: [idle, busy, done]\n": ""}, "resting"),
    ],
)
def test_bad_specs_are_refused_with_a_clear_error(change: dict[str, str], message: str) -> None:
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace("[", r"\[")):
        parse_spec(spec_text(**change), name="demo")


ABORTING = spec_text(
    **{
        "resting: [idle, busy, done]": "resting: [idle, done]",
        "  stop: Stop.\n": (
            "  stop: Stop.\n  abort: {description: Interrupted., raised_by: engine}\n"
        ),
        "        stop: [{target: done, cond: is_ready}]\n": (
            "        stop: [{target: done, cond: is_ready}]\n"
            '        abort: [{target: idle, "on": discard}]\n'
        ),
    }
)


class AbortingContext(DemoContext):
    def __init__(self, error: BaseException | None) -> None:
        self.error, self.discarded = error, 0

    def do_work(self) -> None:
        if self.error is not None:
            raise self.error

    def discard(self) -> None:
        self.discarded += 1


def test_a_transient_state_must_abort_to_rest_with_an_engine_event() -> None:
    spec = parse_spec(ABORTING, name="demo")
    assert spec.resting == ("idle", "done")
    assert "abort" not in spec.external_events  # the engine raises it, no caller may
    assert "discard" in spec.callbacks()
    wrong = ABORTING.replace("raised_by: engine", "raised_by: discard")
    with pytest.raises(SpecError, match="abort must be raised_by engine"):
        parse_spec(wrong, name="demo")
    elsewhere = ABORTING.replace('abort: [{target: idle, "on"', 'abort: [{target: busy, "on"')
    with pytest.raises(SpecError, match="busy is not resting"):
        parse_spec(elsewhere, name="demo")


def test_a_state_that_can_abort_may_not_leave_by_an_unguarded_eventless_edge() -> None:
    """Regression: hot memory's repairing state left by such an edge, which the engine took
    before abort, so a KeyboardInterrupt in a repair step left the lock held."""
    eventless = "      transitions:\n        - {target: done%s}\n    done:\n"
    unguarded = ABORTING.replace("    done:\n", eventless % "", 1)
    with pytest.raises(SpecError, match="busy can abort, so it may not leave by an unguarded"):
        parse_spec(unguarded, name="demo")
    guarded = ABORTING.replace("    done:\n", eventless % ", cond: is_ready", 1)
    assert ("busy", "", "done") in [
        (t.source, t.event, t.target) for t in parse_spec(guarded, name="demo").transitions
    ]


@pytest.mark.parametrize(
    "error", [KeyboardInterrupt(), SystemExit(2), GeneratorExit(), RuntimeError("boom")]
)
def test_an_exception_escaping_a_step_fires_abort_and_propagates_unchanged(
    error: BaseException, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mnemon_sm.engine import flow as engine_flow
    from mnemon_sm.engine.spec import LoadedFlow

    spec = parse_spec(ABORTING, name="demo")
    loaded = LoadedFlow(spec, build_machine_class(spec), AbortingContext)
    monkeypatch.setattr(engine_flow, "load_flow", lambda name: loaded)
    context = AbortingContext(error)
    machine = loaded.machine_class(model=context)
    with pytest.raises(type(error)) as caught:
        engine_flow.send(machine, "demo", "go")
    assert caught.value is error  # the very exception, not a wrapper
    # The engine itself rolls the configuration back for an Exception; a BaseException
    # (what used to jam a flow) is brought back by the abort transition.
    aborted = 0 if isinstance(error, Exception) else 1
    assert machine.current_state_value == "idle" and context.discarded == aborted
    context.error = None
    engine_flow.send(machine, "demo", "go")  # usable: the next event works
    assert machine.current_state_value == "busy" and context.discarded == aborted


def test_an_illegal_event_does_not_fire_abort(monkeypatch: pytest.MonkeyPatch) -> None:
    from mnemon_sm.engine import flow as engine_flow
    from mnemon_sm.engine.spec import LoadedFlow
    from mnemon_sm.errors import IllegalEvent

    spec = parse_spec(ABORTING, name="demo")
    loaded = LoadedFlow(spec, build_machine_class(spec), AbortingContext)
    monkeypatch.setattr(engine_flow, "load_flow", lambda name: loaded)
    context = AbortingContext(None)
    machine = loaded.machine_class(model=context)
    engine_flow.send(machine, "demo", "go")
    with pytest.raises(IllegalEvent):
        engine_flow.send(machine, "demo", "go")
    assert machine.current_state_value == "busy" and context.discarded == 0


def test_structural_checks_are_on() -> None:
    unreachable = spec_text(
        **{
            "resting: [idle, busy, done]": "resting: [idle, busy, done, lost]",
            "  done: {description: Finished.}\n": (
                "  done: {description: Finished.}\n  lost: {description: Unreachable.}\n"
            ),
            "    done:\n      final: true\n": textwrap.indent(
                'done:\n  final: true\nlost:\n  "on":\n    stop: [{target: done}]\n', "    "
            ),
        }
    )
    with pytest.raises(SpecError, match="unreachable"):
        build_machine_class(parse_spec(unreachable, name="demo"))
    trap = spec_text(**{"        stop: [{target: done, cond: is_ready}]\n": "        {}\n"})
    with pytest.raises(SpecError):
        build_machine_class(parse_spec(trap.replace('"on":\n        {}', '"on": {}'), name="demo"))


def test_every_shipped_flow_loads() -> None:
    assert flow_names()
    for name in flow_names():
        flow = load_flow(name)
        assert flow.spec.flow == name
        assert flow.machine_class.__name__.endswith("Machine")


def test_spec_transitions_follow_the_machine_class_order() -> None:
    for name in flow_names():
        flow = load_flow(name)
        cls_transitions = [
            (state.id, i, str(t.event or ""), t.target.id if t.target else None)
            for state in flow.machine_class.states
            for i, t in enumerate(state.transitions)
        ]
        spec_transitions = [(t.source, t.index, t.event, t.target) for t in flow.spec.transitions]
        assert sorted(cls_transitions, key=str) == sorted(spec_transitions, key=str)


# -- flow contexts by registered name -----------------------------------------------------


@pytest.fixture
def scratch_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty context registry for one test (the library's registrations come back after)."""
    monkeypatch.setattr(registry, "_contexts", {})


def moved(cls: type, module: str) -> type:
    """A copy of ``cls`` defined in another module, as if its code had moved there."""
    home = types.ModuleType(module)
    copy = type(cls.__name__, (cls,), {"__module__": module})
    setattr(home, cls.__name__, copy)
    return copy


def test_every_shipped_context_is_registered_under_the_name_its_spec_uses() -> None:
    import mnemon_sm  # noqa: F401 - importing the package registers every flow context

    used = {}
    for name in flow_names():
        flow = load_flow(name)
        assert registered()[flow.spec.context] is flow.context_class
        assert flow.context_class.__module__.startswith("mnemon_sm.flows.")
        used[flow.spec.context] = name
    assert set(registered()) == set(used)  # one spec per context, no context without a spec


@pytest.mark.usefixtures("scratch_registry")
def test_an_unregistered_context_is_a_clear_spec_error() -> None:
    spec = parse_spec(GOOD, name="demo")
    with pytest.raises(SpecError) as caught:
        build_flow(spec)
    message = str(caught.value)
    assert "demo: flow context 'DemoContext' is not registered" in message
    assert "@flow_context('DemoContext')" in message
    assert "mnemon_sm.flows" in message and "`import mnemon_sm`" in message
    flow_context("DemoContext")(DemoContext)
    assert build_flow(spec).context_class is DemoContext


@pytest.mark.usefixtures("scratch_registry")
def test_one_name_belongs_to_one_class() -> None:
    flow_context("DemoContext")(DemoContext)
    flow_context("DemoContext")(DemoContext)  # the same class again: nothing happens
    other = moved(DemoContext, "tests.elsewhere")
    with pytest.raises(SpecError) as caught:
        flow_context("DemoContext")(other)
    assert str(caught.value) == (
        "flow context 'DemoContext' is registered twice: by "
        "tests.test_spec_loader.DemoContext and by tests.elsewhere.DemoContext"
    )
    assert registered()["DemoContext"] is DemoContext  # the first one keeps the name
    # The same module executed again (a reload) defines a new class object of the same
    # qualified name: it takes the name over.
    reloaded = moved(DemoContext, DemoContext.__module__)
    flow_context("DemoContext")(reloaded)
    assert registered()["DemoContext"] is reloaded
    with pytest.raises(SpecError, match="not an identifier"):
        flow_context("tests.demo:DemoContext")


@pytest.mark.usefixtures("scratch_registry")
def test_moving_a_context_class_needs_no_spec_change() -> None:
    flow_context("DemoContext")(DemoContext)
    before = build_flow(parse_spec(GOOD, name="demo"))
    assert before.context_class is DemoContext
    # The class moves to another module (which registers it under the same name); the
    # module that held it no longer does. The spec text is the same, byte for byte.
    registry._contexts.clear()
    relocated = flow_context("DemoContext")(moved(DemoContext, "tests.relocated.flows"))
    after = build_flow(parse_spec(GOOD, name="demo"))
    assert after.context_class is relocated
    machine = after.machine_class(model=relocated())
    machine.send("go")
    assert machine.current_state_value == "busy"
