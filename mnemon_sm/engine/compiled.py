"""Dispatch compiled from a spec: python-statemachine's semantics at the cost of a table lookup.

Theory of operation
-------------------
The spec stays the single source of truth and python-statemachine stays the reference: the
machine class is still built from it with every structural check (:mod:`.spec`), drawn from it
(:mod:`.render`), and can still run any flow (``MNEMON_SM_ENGINE=statemachine``, see
:mod:`.flow`). What this module adds is a second dispatcher for the same statechart, because
the reference's generality (callback registries, signature adapters, event data objects,
priority queues, configuration sets) costs far more per event than our flat charts need.

At load, :func:`compile_chart` turns a spec and its machine class into a :class:`CompiledChart`:
for each ``(state, event)`` the ordered transitions it may take, for each state its eventless
transitions and its enter and exit callbacks. Each transition keeps the reference's
``Transition`` object and each state its ``State`` object, so listeners and callbacks receive
the very objects python-statemachine would pass (the test suite's coverage recorder counts
transitions by that identity). Callbacks are kept as *slots*: a name with the priority and
role python-statemachine gives it, including the naming conventions it looks up on the model
and the listeners (``before_transition``, ``on_<event>``, ``after_transition``,
``on_enter_state``, ``on_exit_<state>``, ...).

At machine start, :class:`CompiledMachine` binds each slot to the attributes of the context
(the model) and of the listeners that carry its name, once, as python-statemachine does when it
is constructed, and precomputes which keyword arguments each callable declares: a call passes
exactly those (event keyword arguments, plus ``machine``, ``event``, ``model``, ``transition``,
``state``, ``source``, ``target``). What the reference supports and this engine does not is
refused with a ``SpecError`` at load or at start, never run differently: callbacks declaring
``**kwargs``, ``event_data`` or positional-only parameters, coroutines, ``prepare_event`` and
``on_invoke_*`` hooks, callback names the machine class itself defines, a guard found on more
than one object, event names python-statemachine expands (``error_*``, ``done_state_*``,
``done_invoke_*``), positional event arguments.

Semantics, those of python-statemachine 3.2 as :mod:`.spec` configures it (a ``StateChart``
with ``allow_event_without_transition=False``, ``catch_errors_as_events=False``,
``atomic_configuration_update=True``), for flat charts:

- the current state is read from ``model.state`` at every step and written back there, so a
  caller that sets it directly moves the machine, as with the reference;
- an event takes the first transition of its state, in document order, whose validators all
  return (their exception propagates, the state unchanged) and whose ``cond`` guards are true
  and ``unless`` guards false;
- a step runs ``before``, then the source's exit actions, ``on``, sets the state, runs the
  target's enter actions, then ``after``; a targetless transition runs no exit or entry;
- an ``Exception`` from ``before``, exit, ``on`` or entry puts the state back where the step
  began; one from ``after`` leaves it at the target; a ``BaseException`` that is not an
  ``Exception`` restores nothing (it leaves the state wherever the step was);
- every ``Exception`` escaping a step drops the queued events, except one from a validator or
  guard of an event sent from outside (the reference selects those outside its clean-up);
- ``machine.raise_(event)`` from a callback queues an internal event, processed after the
  current step within the same ``send``; eventless transitions are taken whenever enabled
  after each step, before the next internal event; an internal event no transition takes is
  dropped, while an external one raises ``TransitionNotAllowed`` with the state unchanged;
- entering a final state stops the machine: every later event raises
  ``TransitionNotAllowed``;
- an event sent while a step runs (``machine.send`` from a callback, or from another thread)
  waits on the external queue and is run by the loop already running, after the current
  macrostep.

The differential property test (``property_tests/test_dispatch_equivalence.py``) drives both
dispatchers with the same events against recording contexts and requires the same states,
callback calls and errors.
"""

from __future__ import annotations

import contextvars
import inspect
import keyword
import threading
import types
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import attrs
from statemachine import State, StateChart
from statemachine.event import Event
from statemachine.exceptions import InvalidStateValue, TransitionNotAllowed
from statemachine.orderedset import OrderedSet
from statemachine.transition import Transition

from mnemon_sm.errors import SpecError

if TYPE_CHECKING:
    from mnemon_sm.engine.spec import FlowSpec

__all__ = ["ENGINE_KWARGS", "CompiledChart", "CompiledMachine", "compile_chart"]

# python-statemachine's callback priorities (statemachine.callbacks.CallbackPriority).
_GENERIC, _INLINE, _NAMING, _AFTER = 0, 10, 30, 40

# Keyword arguments the engine supplies; an event's own arguments of these names are dropped,
# as python-statemachine drops them.
ENGINE_KWARGS = frozenset(
    {"event_data", "machine", "event", "model", "transition", "state", "source", "target"}
)
# What python-statemachine would pass that this engine does not build.
_UNSUPPORTED_PARAMS = frozenset({"event_data", "previous_configuration", "new_configuration"})
_UNSUPPORTED_HOOKS = ("prepare_event", "on_invoke_state")
_EXPANDED_EVENT_PREFIXES = ("error_", "done_state_", "done_invoke_")
_INITIAL_EVENT = "__initial__"
_NO_KWARGS: Mapping[str, Any] = {}
_SEND_OPTIONS = frozenset({"delay", "send_id", "internal"})  # the reference's; not supported

Call = Callable[[dict[str, Any]], Any]

# The machine whose loop the current thread (or task) runs: ``raise_`` from its callbacks
# queues an internal event; from anywhere else, an external one.
_running: contextvars.ContextVar[CompiledMachine | None] = contextvars.ContextVar(
    "mnemon_sm_compiled_running", default=None
)


class _Slot(NamedTuple):
    """A callback name with the priority python-statemachine gives it; ``expected`` is the
    value a guard must have (``True`` for ``cond``, ``False`` for ``unless``), ``None`` for an
    action or validator; a convention name is called only where it is defined."""

    name: str
    priority: int
    expected: bool | None = None
    convention: bool = False


@attrs.frozen
class CompiledTransition:
    """One transition of the chart with its callbacks as slots, grouped as the reference
    groups them."""

    ref: Transition  # the reference's object: listeners count transitions by its identity
    source: str
    target: str | None  # None: targetless (internal), no exit or entry
    event: str | None  # None: eventless
    validators: tuple[_Slot, ...]
    guards: tuple[_Slot, ...]
    before: tuple[_Slot, ...]
    on: tuple[_Slot, ...]
    after: tuple[_Slot, ...]


@attrs.frozen
class CompiledChart:
    """The dispatch table of one spec, built once at load."""

    flow: str
    initial: str
    finals: frozenset[str]
    states: Mapping[str, State]  # the reference's State objects, by id
    events: Mapping[str, Event]  # the reference's Event objects, by id
    table: Mapping[tuple[str, str], tuple[CompiledTransition, ...]]
    eventless: Mapping[str, tuple[CompiledTransition, ...]]
    enter: Mapping[str, tuple[_Slot, ...]]
    exit: Mapping[str, tuple[_Slot, ...]]
    initial_event: Event  # what the initial entry passes as ``event``
    initial_transition: Transition  # ... as ``transition``
    initial_source: State  # ... and as ``source``


def _group(inline: Iterable[_Slot], conventions: Iterable[_Slot]) -> tuple[_Slot, ...]:
    """One callback group in the reference's order: by priority, then as declared (inline
    names first, then conventions); a repeated name counts once, at its first place."""
    seen: set[str] = set()
    slots: list[_Slot] = []
    for slot in [*inline, *conventions]:
        if slot.name not in seen:
            seen.add(slot.name)
            slots.append(slot)
    return tuple(sorted(slots, key=lambda s: s.priority))  # sorted() is stable


def _inline(names: Iterable[str], expected: bool | None = None) -> list[_Slot]:
    return [_Slot(n, _INLINE, expected) for n in names]


def _convention(name: str, priority: int) -> _Slot:
    return _Slot(name, priority, None, True)


def compile_chart(spec: FlowSpec, machine_class: type[StateChart[Any]]) -> CompiledChart:
    """Compile ``spec`` (whose machine class is ``machine_class``) into its dispatch table;
    raise ``SpecError`` for anything the compiled engine does not run as the reference does."""
    flow = spec.flow
    problems: list[str] = []
    states: dict[str, State] = {s.id: s for s in machine_class.states}
    events: dict[str, Event] = {}
    for name in spec.events:
        if name.startswith(_EXPANDED_EVENT_PREFIXES):
            problems.append(f"event {name!r}: python-statemachine expands its name")
        declared = getattr(machine_class, name, None)
        if isinstance(declared, Event):
            events[name] = declared
    table: dict[tuple[str, str], list[CompiledTransition]] = {}
    eventless: dict[str, list[CompiledTransition]] = {}
    names: set[str] = set()
    docs = {doc.key: doc for doc in spec.transitions}
    for sid, raw in spec.state_defs.items():
        # The order of spec.transitions (see spec._transitions): events, then eventless.
        listed = [(ev, t) for ev, ts in raw["on"].items() for t in ts]
        listed += [("", t) for t in raw["transitions"]]
        refs = list(states[sid].transitions) if sid in states else []
        for index, (event, tdef) in enumerate(listed):
            doc = docs[(sid, index)]
            ref = refs[index] if index < len(refs) else None
            ref_target = ref.target.id if ref is not None and ref.target is not None else None
            if ref is None or str(ref.event) != event or ref_target != doc.target:
                problems.append(f"transition {sid}[{index}] differs from the machine class's")
                continue
            compiled = _transition(ref, doc.source, doc.target, event, tdef)
            for group in ("validators", "guards", "before", "on", "after"):
                names.update(s.name for s in getattr(compiled, group))
            if doc.event:
                table.setdefault((doc.source, doc.event), []).append(compiled)
            else:
                eventless.setdefault(doc.source, []).append(compiled)
    enter: dict[str, tuple[_Slot, ...]] = {}
    exit_: dict[str, tuple[_Slot, ...]] = {}
    for sid, sdef in spec.state_defs.items():
        enter[sid] = _group(
            _inline(sdef.get("enter", [])),
            [_convention("on_enter_state", _GENERIC), _convention(f"on_enter_{sid}", _NAMING)],
        )
        exit_[sid] = _group(
            _inline(sdef.get("exit", [])),
            [_convention("on_exit_state", _GENERIC), _convention(f"on_exit_{sid}", _NAMING)],
        )
        names.update(s.name for s in (*enter[sid], *exit_[sid]))
    # The reference looks every name up on the machine too; none may live there.
    on_machine = (set(dir(machine_class)) | {"history_values"}) - machine_class._protected_attrs
    for name in sorted(names):
        if name in on_machine:
            problems.append(f"callback {name!r} is an attribute of the machine class")
        if keyword.iskeyword(name):
            problems.append(f"callback {name!r} is a Python keyword")
    if problems:
        raise SpecError(
            f"{flow}: the compiled engine cannot run this spec: " + "; ".join(problems)
        )
    initial_source = State()
    initial = spec.initial
    return CompiledChart(
        flow,
        initial,
        frozenset(s for s, d in spec.state_defs.items() if d.get("final")),
        states,
        events,
        {k: tuple(v) for k, v in table.items()},
        {k: tuple(v) for k, v in eventless.items()},
        enter,
        exit_,
        Event(_INITIAL_EVENT),
        Transition(initial_source, states[initial], event=_INITIAL_EVENT),
        initial_source,
    )


def _transition(
    ref: Transition, source: str, target: str | None, event: str, tdef: Mapping[str, Any]
) -> CompiledTransition:
    """One transition's slots, with the conventions python-statemachine adds to each."""
    named = [event] if event else []  # an eventless transition has no event conventions
    return CompiledTransition(
        ref,
        source,
        target,
        event or None,
        _group(_inline(tdef.get("validators", [])), []),
        _group(
            [*_inline(tdef.get("cond", []), True), *_inline(tdef.get("unless", []), False)], []
        ),
        _group(
            _inline(tdef.get("before", [])),
            [_convention("before_transition", _GENERIC)]
            + [_convention(f"before_{e}", _NAMING) for e in named],
        ),
        _group(
            _inline(tdef.get("on", [])),
            [_convention("on_transition", _GENERIC)]
            + [_convention(f"on_{e}", _NAMING) for e in named],
        ),
        _group(
            _inline(tdef.get("after", [])),
            [_convention(f"after_{e}", _NAMING) for e in named]
            + [_convention("after_transition", _AFTER)],
        ),
    )


# -- binding ---------------------------------------------------------------------------------

# The parameters of methods and of plain functions, per function (weakly: a function created
# for one context goes with it).
_of_methods: weakref.WeakKeyDictionary[Any, tuple[str, ...]] = weakref.WeakKeyDictionary()
_of_functions: weakref.WeakKeyDictionary[Any, tuple[str, ...]] = weakref.WeakKeyDictionary()


def _parameters(fn: Callable[..., Any], where: str) -> tuple[str, ...]:
    """The keyword arguments ``fn`` declares (cached per function)."""
    if isinstance(fn, types.MethodType):
        cache, key = _of_methods, fn.__func__
    elif isinstance(fn, types.FunctionType):
        cache, key = _of_functions, fn
    else:  # another callable object: no cache
        return _declared(fn, where)
    params = cache.get(key)
    if params is None:
        params = cache[key] = _declared(fn, where)
    return params


def _declared(fn: Callable[..., Any], where: str) -> tuple[str, ...]:
    if inspect.iscoroutinefunction(fn):
        raise SpecError(f"{where}: a coroutine is not supported by the compiled engine")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise SpecError(f"{where}: no signature to bind by: {exc}") from None
    names: list[str] = []
    for param in signature.parameters.values():
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            continue  # events carry no positional arguments: it stays empty
        if param.kind in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.POSITIONAL_ONLY):
            raise SpecError(
                f"{where}: parameter {param.name!r} ({param.kind.description}) is not supported"
                " by the compiled engine"
            )
        if param.name in _UNSUPPORTED_PARAMS:
            raise SpecError(f"{where}: parameter {param.name!r} is not supported")
        names.append(param.name)
    return tuple(names)


def _call(fn: Callable[..., Any], params: tuple[str, ...]) -> Call:
    """A call of ``fn`` with the keyword arguments it declares that the step supplies."""
    if not params:
        return lambda kw: fn()
    if len(params) == 1:
        (name,) = params
        return lambda kw: fn(**{name: kw[name]}) if name in kw else fn()
    return lambda kw: fn(**{p: kw[p] for p in params if p in kw})


def _read(obj: object, name: str) -> Call:
    """A call of a non-callable attribute: its current value (as the reference reads it)."""
    return lambda kw: getattr(obj, name)


class _Source(NamedTuple):
    obj: object
    attrs: frozenset[str]


def _bind(slots: tuple[_Slot, ...], sources: list[_Source], where: str) -> tuple[Call, ...]:
    """Resolve ``slots`` on the sources (model, then listeners), in the reference's order."""
    calls: list[Call] = []
    for slot in slots:
        found = [s for s in sources if slot.name in s.attrs]
        if not found and not slot.convention:
            raise SpecError(f"{where}: callback {slot.name!r} is not defined on the context")
        if slot.expected is not None and len(found) > 1:
            raise SpecError(f"{where}: guard {slot.name!r} is defined on more than one object")
        for source in found:
            value = getattr(source.obj, slot.name)
            if isinstance(value, Event):
                raise SpecError(f"{where}: callback {slot.name!r} is an event")
            if callable(value):
                calls.append(_call(value, _parameters(value, f"{where}: {slot.name}")))
            else:
                calls.append(_read(source.obj, slot.name))
    return tuple(calls)


def _bind_guards(
    slots: tuple[_Slot, ...], sources: list[_Source], where: str
) -> tuple[tuple[Call, bool], ...]:
    calls = _bind(slots, sources, where)
    return tuple((call, bool(slot.expected)) for call, slot in zip(calls, slots, strict=True))


class _Bound:
    """A transition bound to one machine's callables."""

    __slots__ = (
        "after",
        "before",
        "final",
        "fixed",
        "guards",
        "on",
        "ref",
        "source",
        "target",
        "target_state",
        "validators",
    )

    def __init__(self, t: CompiledTransition, chart: CompiledChart, sources: list[_Source]):
        where = f"{chart.flow}: {t.source}"
        self.ref = t.ref
        self.source = chart.states[t.source]
        self.target = t.target
        self.target_state = chart.states[t.target] if t.target is not None else None
        self.final = t.target in chart.finals
        self.validators = _bind(t.validators, sources, where)
        self.guards = _bind_guards(t.guards, sources, where)
        self.before = _bind(t.before, sources, where)
        self.on = _bind(t.on, sources, where)
        self.after = _bind(t.after, sources, where)
        self.fixed: dict[str, Any] = {}  # the step's arguments that never change (see below)


class CompiledMachine:
    """A running flow on the compiled dispatcher (see the module for its semantics).

    The context is the model: its ``state`` attribute holds the current state's id.
    """

    def __init__(
        self,
        chart: CompiledChart,
        model: object,
        listeners: Iterable[object] = (),
        **kwargs: Any,
    ) -> None:
        if "state_field" in kwargs or "start_value" in kwargs:
            raise SpecError(f"{chart.flow}: state_field and start_value are not supported")
        self.model: Any = model
        self._chart = chart
        self._lock = threading.Lock()
        self._internal: deque[tuple[str, Mapping[str, Any]]] = deque()
        self._external: deque[tuple[str, Mapping[str, Any]]] = deque()
        self._running = True
        sources = [_Source(model, frozenset(dir(model)) - {"state"})]
        sources += [_Source(listener, frozenset(dir(listener))) for listener in listeners]
        for source in sources:
            for hook in [*_UNSUPPORTED_HOOKS, *(f"on_invoke_{s}" for s in chart.states)]:
                if hook in source.attrs:
                    raise SpecError(f"{chart.flow}: {hook} is not supported")
        self._table = {
            key: tuple(_Bound(t, chart, sources) for t in ts) for key, ts in chart.table.items()
        }
        self._eventless = {
            key: tuple(_Bound(t, chart, sources) for t in ts)
            for key, ts in chart.eventless.items()
        }
        for bounds in (*self._table.values(), *self._eventless.values()):
            for b in bounds:  # what every step of ``b`` passes besides the event's arguments
                b.fixed = {
                    "machine": self,
                    "model": model,
                    "transition": b.ref,
                    "state": b.source,
                    "source": b.source,
                    "target": b.target_state,
                }
        self._enter = {s: _bind(v, sources, f"{chart.flow}: {s}") for s, v in chart.enter.items()}
        self._exit = {s: _bind(v, sources, f"{chart.flow}: {s}") for s, v in chart.exit.items()}
        if getattr(model, "state", None) is None:  # else it resumes where the model is
            self._activate(_without_engine_kwargs(kwargs))

    # -- the public surface flows use ------------------------------------------------------

    @property
    def current_state_value(self) -> Any:
        return getattr(self.model, "state", None)

    @property
    def is_terminated(self) -> bool:
        return not self._running

    def send(self, event: str, *args: Any, **kwargs: Any) -> None:
        """Send ``event`` from outside a step (queued behind the running step otherwise)."""
        self._put(event, args, kwargs, internal=False)

    def raise_(self, event: str, *args: Any, **kwargs: Any) -> None:
        """Raise an internal event: from a callback of this machine it runs after the current
        step within the same ``send``; from outside, it is sent."""
        self._put(event, args, kwargs, internal=True)

    def clear(self) -> None:
        """Drop every queued event (what python-statemachine's ``_engine.clear()`` does)."""
        self._internal.clear()
        self._external.clear()

    def __repr__(self) -> str:
        return f"CompiledMachine({self._chart.flow!r}, state={self.current_state_value!r})"

    # -- the loop --------------------------------------------------------------------------

    def _put(
        self, event: str, args: tuple[Any, ...], kwargs: dict[str, Any], internal: bool
    ) -> None:
        if args or not _SEND_OPTIONS.isdisjoint(kwargs):
            raise TypeError(
                "the compiled engine takes events with keyword arguments only (no positional"
                " arguments, delay, send_id or internal)"
            )
        if not self._running:
            raise TransitionNotAllowed(self._event(event), self._configuration())
        item = (event, _without_engine_kwargs(kwargs))
        if internal and _running.get() is self:
            self._internal.append(item)
            return
        self._external.append(item)
        self._loop()

    def _activate(self, kwargs: Mapping[str, Any]) -> None:
        """Enter the initial state (no before/on/after: the reference's initial
        pseudo-transition has none), then run what its entry raised."""
        chart = self._chart
        target = chart.states[chart.initial]
        kw = dict(kwargs)
        kw.update(
            machine=self,
            event=chart.initial_event,
            model=self.model,
            transition=chart.initial_transition,
            state=target,
            source=chart.initial_source,
            target=target,
        )
        self._lock.acquire(blocking=False)
        token = _running.set(self)
        try:
            self.model.state = chart.initial
            for call in self._enter[chart.initial]:
                call(kw)
            if chart.initial in chart.finals:
                self._running = False
        finally:
            _running.reset(token)
            self._lock.release()
        self._loop()

    def _loop(self) -> None:
        if not self._lock.acquire(blocking=False):
            return  # a step is running (here or in another thread): its loop takes the event
        token = _running.set(self)
        try:
            took = True
            while took and self._running:
                try:
                    took = self._macrostep()
                except Exception:
                    self.clear()
                    raise
                if not self._running:
                    break
                if self._external:
                    event, kwargs = self._external.popleft()
                    self._take_external(event, kwargs)
                    took = True
            if not self._running:
                self._external.clear()
        finally:
            _running.reset(token)
            self._lock.release()

    def _macrostep(self) -> bool:
        """Eventless transitions and internal events until neither enables a transition."""
        took = False
        internal = self._internal
        while True:
            state = self.model.state
            chosen = self._select(self._eventless.get(state), None, _NO_KWARGS)
            if chosen is None:
                if not internal:
                    return took
                event, kwargs = internal.popleft()
                chosen = self._select(self._table.get((state, event)), event, kwargs)
                if chosen is None:
                    continue  # an internal event no transition takes is dropped
            took = True
            self._microstep(*chosen)

    def _take_external(self, event: str, kwargs: Mapping[str, Any]) -> None:
        state = self.model.state
        chosen = self._select(self._table.get((state, event)), event, kwargs)
        if chosen is None:
            raise TransitionNotAllowed(self._event(event), self._configuration())
        try:
            self._microstep(*chosen)
        except Exception:
            self.clear()
            raise

    def _select(
        self, candidates: tuple[_Bound, ...] | None, event: str | None, kwargs: Mapping[str, Any]
    ) -> tuple[_Bound, dict[str, Any]] | None:
        """The first transition whose validators pass and whose guards hold, with the keyword
        arguments of its step."""
        if not candidates:
            return None
        bound_event = None if event is None else self._event(event)
        for t in candidates:
            kw = {**kwargs, **t.fixed}
            kw["event"] = bound_event
            for validate in t.validators:
                validate(kw)
            for guard, expected in t.guards:
                if bool(guard(kw)) is not expected:
                    break
            else:
                return t, kw
        return None

    def _microstep(self, t: _Bound, kw: dict[str, Any]) -> None:
        model = self.model
        previous = model.state
        after_kw = kw
        try:
            for call in t.before:
                call(kw)
            if t.target is not None:
                for call in self._exit[t.source.id]:
                    call(kw)
            for call in t.on:
                call(kw)
            if t.target is None:
                model.state = previous
            else:
                model.state = t.target
                after_kw = dict(kw)
                after_kw["state"] = t.target_state
                for call in self._enter[t.target]:
                    call(after_kw)
                if t.final:
                    self._running = False
        except Exception:
            model.state = previous
            raise
        for call in t.after:
            call(after_kw)

    def _event(self, event: str) -> Event:
        known = self._chart.events.get(event)
        return known if known is not None else Event(id=event, name=event)

    def _configuration(self) -> OrderedSet[State]:
        value = getattr(self.model, "state", None)
        if value is None:
            return OrderedSet()
        try:
            return OrderedSet([self._chart.states[value]])
        except KeyError:
            raise InvalidStateValue(value) from None  # type: ignore[no-untyped-call]


def _without_engine_kwargs(kwargs: Mapping[str, Any]) -> Mapping[str, Any]:
    if ENGINE_KWARGS.isdisjoint(kwargs):
        return kwargs
    return {k: v for k, v in kwargs.items() if k not in ENGINE_KWARGS}
