"""Running a worker: its own thread, a timeout, cancellation, and a tool box that dies with it.

Theory of operation
-------------------
A worker stands for an LLM: untrusted, sloppy, slow and cancellable. The host never runs one
on its own thread. :class:`WorkerRun` calls ``Workers.run(request, tools)`` on a new daemon
thread; when that returns a coroutine (``async def run``), the coroutine runs on the host's
event loop if the call came through the async facade (:data:`HOST_LOOP`) or the lifecycle was
ticked on a running loop, else on a loop of its own in the worker's thread. Each run owns a
:class:`RunScope`, which every tool box checks at every call:

- *open* while the worker runs: its tools answer;
- *ended* once the worker returned or raised: every later call, from any thread, raises
  ``ToolRefused``;
- *cancelled* when the host stops waiting (a timeout, a new turn, the host's own
  ``BaseException``): every later call raises ``WorkerCancelled``, an async worker's task is
  cancelled, and ``tools.cancellation.is_set`` turns true for adapters that poll it.

A worker's writes through its tool box are staged and applied by the host only after the run
ended and its result passed the host's checks, so a cancelled, failed or timed-out run writes
nothing. A thread cannot be killed: a worker that ignores cancellation keeps its thread until
it returns, but it can no longer reach any store.

:meth:`Delegate.run` is the synchronous path the flows use: start the run, wait for it through
the clock port (``Clock.wait``, so tests control time) for at most the kind's timeout
(``workerTimeoutMs``), and return the raw result, a text holding one JSON object already read
as that object (:func:`~mnemon_sm.flows.workers.results.lenient_result`: models often answer
with text or a Markdown code fence). The outcomes: the result;
``WorkerTimeout``; ``WorkerFailed`` when the worker raised an ``Exception`` (its text
whitespace-collapsed, capped and redacted, the original not chained), returned nothing or
called a tool it was not granted; any other ``BaseException`` (``KeyboardInterrupt``,
``SystemExit``, ``GeneratorExit``, ``asyncio.CancelledError``) re-raised unchanged in the
host's thread. :meth:`Delegate.start` starts a run without waiting (the lifecycle's background
review) and reports its end through ``on_done``, called on the worker's thread.

One exception to "a thread of its own": a ``Workers`` whose class sets ``trusted_inline =
True`` declares itself deterministic host code that cannot hang (the built-in workers do), and
:meth:`Delegate.run` runs it on the calling thread, with the same marking, scope and outcome
rules, sparing the thread hand-off. Background runs (:meth:`Delegate.start`) always get a
thread.

Code running as a worker is marked with a context variable naming the root (its
``Delegate``) the run belongs to; that root's public API refuses to run there
(:func:`host_only` raises ``Busy``), so a worker can neither bypass its tool box nor deadlock
the host that waits for it. Other roots (another "process" in the tests) are not affected. A
tool box clears the mark while it runs host code (:meth:`RunScope.host_call`). Threads a
worker starts itself are not marked.

The hand-off is ordered: the worker's thread starts working only once the host has entered
``Clock.wait`` (the done event's ``wait`` opens the gate), so the port calls of a run are seen
in the same order on every run, which the crash-enumeration tests rely on.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, ParamSpec, Protocol, TypeVar

from mnemon_sm.convert import StructureFailed, structure
from mnemon_sm.errors import Busy, ToolRefused, WorkerCancelled, WorkerFailed, WorkerTimeout
from mnemon_sm.flows.workers.results import lenient_result, refusal
from mnemon_sm.observe import IN_HOOK, Events
from mnemon_sm.ports import Clock
from mnemon_sm.ports.workers import Cancellation, ToolDefinition, WorkerRequest, Workers
from mnemon_sm.redact import redact

__all__ = [
    "HOST_LOOP",
    "Cancellation",
    "Delegate",
    "RunScope",
    "WorkerRun",
    "host_only",
    "running_loop",
]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

# The Delegate (one per root) whose worker the current code runs as, if any.
_IN_WORKER: ContextVar[object | None] = ContextVar("mnemon_sm_in_worker", default=None)
#: The event loop of an asyncio host whose call is being served on another thread (set by the
#: async facade); an async worker's coroutine then runs there.
HOST_LOOP: ContextVar[asyncio.AbstractEventLoop | None] = ContextVar(
    "mnemon_sm_host_loop", default=None
)


def host_only(fn: Callable[P, R]) -> Callable[P, R]:
    """Refuse the method ``fn`` with ``Busy`` when it is called from inside a worker run of
    the same root (its object's ``_delegate``)."""

    @functools.wraps(fn)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
        owner = _IN_WORKER.get()
        if owner is not None and owner is getattr(args[0], "_delegate", None):
            raise Busy(
                f"{fn.__qualname__} was called from inside a worker run of the same root; a "
                "worker reaches memory only through the tool box it was handed"
            )
        if IN_HOOK.get():
            raise Busy(
                f"{fn.__qualname__} was called from inside an event hook; the root may hold "
                "its locks there: hand the event to a queue or another thread"
            )
        return fn(*args, **kwargs)

    return guarded


class RunScope:
    """The life of one worker run: open, then ended or cancelled. Thread-safe."""

    def __init__(self) -> None:
        self.cancellation = Cancellation()
        self._lock = threading.Lock()
        self._ended = False

    @property
    def open(self) -> bool:
        return not self._ended and not self.cancellation.is_set

    def check(self) -> None:
        """Raise unless the run is still open."""
        if self.cancellation.is_set:
            raise WorkerCancelled(
                f"the run was cancelled ({self.cancellation.reason}); its tool box is closed"
            )
        if self._ended:
            raise ToolRefused("the worker's run has ended; its tool box is closed")

    @contextlib.contextmanager
    def host_call(self) -> Iterator[None]:
        """Run a tool's host code: refused once the run is over, unmarked while it runs."""
        self.check()
        token = _IN_WORKER.set(None)
        try:
            yield
        finally:
            _IN_WORKER.reset(token)

    def stage(self, write: Callable[[], T]) -> T:
        """Record a staged write atomically with the check that the run is still open, so
        nothing is staged after the host took the run's writes."""
        with self._lock:
            self.check()
            return write()

    def end(self) -> None:
        with self._lock:
            self._ended = True

    def cancel(self, reason: str) -> None:
        with self._lock:
            if not self.cancellation.is_set:
                self.cancellation._set(reason)


class ScopedBox(Protocol):
    """A tool box bound to a run (every box of the library is one)."""

    @property
    def names(self) -> tuple[str, ...]: ...

    @property
    def definitions(self) -> tuple[ToolDefinition, ...]: ...

    @property
    def scope(self) -> RunScope: ...

    @property
    def cancellation(self) -> Cancellation: ...

    def call(self, name: str, arguments: Any) -> Any: ...


class _DoneEvent(threading.Event):
    """Set when the worker finished; waiting on it lets the worker start (see the module)."""

    def __init__(self, gate: threading.Event) -> None:
        super().__init__()
        self._gate = gate

    def wait(self, timeout: float | None = None) -> bool:
        self._gate.set()
        return super().wait(timeout)


class WorkerRun:
    """One worker run on its own thread."""

    def __init__(
        self,
        owner: Delegate,
        request: WorkerRequest,
        tools: ScopedBox,
        *,
        loop: asyncio.AbstractEventLoop | None = None,
        on_done: Callable[[WorkerRun], None] | None = None,
    ) -> None:
        self.request, self.tools, self.scope = request, tools, tools.scope
        self._owner, self._loop, self._on_done = owner, loop, on_done
        self._gate = threading.Event()
        self.done: threading.Event = _DoneEvent(self._gate)
        self._result: object = None
        self._error: BaseException | None = None
        self._cancel_task: Callable[[], object] | None = None

    def start(self, *, gated: bool = True) -> None:
        """Start the thread; with ``gated`` it works only once someone waits on :attr:`done`."""
        if not gated:
            self._gate.set()
        thread = threading.Thread(
            target=self._main, name=f"mnemon-worker-{self.request.kind}", daemon=True
        )
        thread.start()

    def run_here(self) -> None:
        """Run the worker on the calling thread, marked as a worker all the same (for
        ``Workers`` that declare ``trusted_inline``: deterministic host code)."""
        self._gate.set()
        self._main()

    def cancel(self, reason: str) -> None:
        """Stop the run: its tool box closes, an async worker's task is cancelled."""
        self.scope.cancel(reason)
        self._gate.set()
        cancel_task = self._cancel_task
        if cancel_task is not None:
            cancel_task()

    @property
    def error(self) -> BaseException | None:
        """What the worker raised, once the run is over (None: it returned); a run that
        returned nothing or called tools it was not granted counts as failed."""
        if self._error is not None:
            return self._error
        if getattr(self.tools, "refused", ()) or self._result is None:
            return WorkerFailed(f"{self.request.kind} worker did not finish cleanly")
        return None

    def outcome(self) -> object:
        """The worker's raw result (a text holding one JSON object read as that object), or
        the failure it ended with (see the module)."""
        kind, error = self.request.kind, self._error
        if isinstance(error, Exception):
            text = redact(f"{type(error).__name__}: {error}")
            raise WorkerFailed(f"{kind} worker failed: {text}") from None
        if error is not None:
            raise error
        refused = getattr(self.tools, "refused", ())
        if refused:
            names = redact(", ".join(map(str, refused)))
            raise WorkerFailed(f"{kind} worker called tools it was not granted: {names}")
        if self._result is None:
            raise WorkerFailed(f"{kind} worker completed without recording its result")
        return lenient_result(self._result)

    # -- the worker's thread ------------------------------------------------------------

    def _main(self) -> None:
        self._gate.wait()
        token = _IN_WORKER.set(self._owner)
        try:
            if not self.scope.open:  # cancelled before it started
                raise WorkerCancelled(f"the run was cancelled ({self.scope.cancellation.reason})")
            raw = self._owner.workers.run(self.request, self.tools)
            if inspect.isawaitable(raw):
                raw = self._await(raw)
            self._result = raw
        except BaseException as exc:  # handed to the host, which decides
            self._error = exc
        finally:
            _IN_WORKER.reset(token)
            self.scope.end()
            self.done.set()
        if self._on_done is not None:
            self._on_done(self)

    def _await(self, awaitable: Any) -> object:
        loop = self._loop
        if loop is not None and loop.is_running():
            future = asyncio.run_coroutine_threadsafe(_as_coroutine(awaitable), loop)
            self._cancel_task = future.cancel
            if not self.scope.open:
                future.cancel()
            return future.result()

        async def main() -> object:
            task = asyncio.ensure_future(awaitable)
            own = asyncio.get_running_loop()
            self._cancel_task = lambda: own.call_soon_threadsafe(task.cancel)
            if not self.scope.open:
                task.cancel()
            return await task

        return asyncio.run(main())


async def _as_coroutine(awaitable: Any) -> object:
    return await awaitable


class Delegate:
    """How flows run workers: one per root, holding the root's ``Workers``, the clock and
    the timeouts. Facades keep it as ``_delegate`` (see :func:`host_only`)."""

    def __init__(
        self,
        workers: Workers,
        clock: Clock,
        timeout_ms: Callable[[str], int],
        events: Events | None = None,
    ):
        self.workers, self._clock, self._timeout_ms = workers, clock, timeout_ms
        #: The root's event hub (:mod:`mnemon_sm.observe`): the delegate reports every run to
        #: it, and the facades, which all hold the delegate, report their operations.
        self.events = events if events is not None else Events(clock.now_ms)

    def run(self, request: WorkerRequest, tools: ScopedBox) -> object:
        """Run a worker to completion within its timeout; returns its raw result.

        Raises:
            WorkerTimeout: it did not finish in time (it was cancelled).
            WorkerFailed: it raised an ``Exception``, returned nothing or called a tool it
                was not granted.
            BaseException: whatever other it raised, unchanged.
        """
        started = self._started(request)
        try:
            raw = self._run(request, tools)
        except BaseException as exc:
            self._finished(request, started, exc)
            raise
        return raw

    def _run(self, request: WorkerRequest, tools: ScopedBox) -> object:
        run = WorkerRun(self, request, tools, loop=HOST_LOOP.get())
        if getattr(self.workers, "trusted_inline", False) is True:
            run.run_here()  # host code that cannot hang: no thread to pay for
            return run.outcome()
        run.start()
        timeout = self._timeout_ms(request.kind)
        try:
            finished = self._clock.wait(run.done, timeout)
        except BaseException:
            run.cancel("the host stopped waiting")
            raise
        if not finished:
            run.cancel(f"timed out after {timeout} ms")
            raise WorkerTimeout(
                f"{request.kind} worker timed out after {timeout} ms; nothing it staged was "
                "written",
                kind=request.kind,
                timeout_ms=timeout,
            )
        return run.outcome()

    def result(self, request: WorkerRequest, tools: ScopedBox, cls: type[T]) -> T:
        """:meth:`run`, then the result validated strictly as ``cls`` (``WorkerFailed``
        naming the problems otherwise). Reports the run to :attr:`events` once, with the
        validation's verdict (``invalid`` for a result of the wrong shape)."""
        started = self._started(request)
        try:
            raw = self._run(request, tools)
        except BaseException as exc:
            self._finished(request, started, exc)
            raise
        try:
            value = structure(raw, cls)
        except StructureFailed as exc:
            why = refusal(raw)  # a text that holds no single JSON object: say why
            problems = redact("; ".join([*exc.problems, *([why] if why else [])]))
            failure = WorkerFailed(f"{request.kind} worker returned an invalid result: {problems}")
            self._finished(request, started, failure, outcome="invalid")
            raise failure from None
        self._finished(request, started, None)
        return value

    def _started(self, request: WorkerRequest) -> int | None:
        """Report a run's start; the clock's reading, when anyone listens (else None: an
        unobserved run reads no clock)."""
        if not self.events.active:
            return None
        self.events.emit("worker.started", {"workerKind": request.kind})
        return self._clock.now_ms()

    def _finished(
        self,
        request: WorkerRequest,
        started_ms: int | None,
        error: BaseException | None,
        *,
        outcome: str | None = None,
    ) -> None:
        """Report a run's end: ``ok`` unless ``error`` (``timeout``, ``cancelled`` for a
        ``BaseException`` such as the host's own interrupt, else ``failed``)."""
        data: dict[str, Any] = {"workerKind": request.kind}
        if started_ms is not None:
            data["durationMs"] = self._clock.now_ms() - started_ms
        elif error is None:
            return  # nobody listens at INFO and no hook is subscribed
        if error is None:
            self.events.emit("worker.finished", {**data, "outcome": "ok"})
            return
        if outcome is None:
            if isinstance(error, WorkerTimeout):
                outcome = "timeout"
            elif isinstance(error, Exception) and not isinstance(error, WorkerCancelled):
                outcome = "failed"
            else:
                outcome = "cancelled"
        self.events.failed("worker.finished", error, **data, outcome=outcome)

    def start(
        self,
        request: WorkerRequest,
        tools: ScopedBox,
        on_done: Callable[[WorkerRun], None],
        *,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> WorkerRun:
        """Start a run in the background; ``on_done(run)`` is called on its thread once the
        run is over (the worker returned or raised, or the run was cancelled first)."""
        started = self._started(request)

        def done(run: WorkerRun) -> None:
            if run.scope.cancellation.is_set:  # its result, if any, is thrown away
                reason = WorkerCancelled(
                    f"the run was cancelled ({run.scope.cancellation.reason})"
                )
                self._finished(request, started, reason, outcome="cancelled")
            else:
                self._finished(request, started, run.error)
            on_done(run)

        run = WorkerRun(self, request, tools, loop=loop or HOST_LOOP.get(), on_done=done)
        run.start(gated=False)
        return run


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running on the calling thread, if any."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
