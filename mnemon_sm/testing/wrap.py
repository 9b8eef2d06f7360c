"""Wrappers around any port object: one mechanism, several uses.

:class:`PortProxy` passes every attribute of the port it wraps through, and routes each call
of a public method through :meth:`PortProxy.intercept`; a runtime-checkable protocol sees the
wrapped port's methods (an optional capability included). Its subclasses:

- :class:`RecordedPort` records each call into a :class:`~mnemon_sm.testing.calls.CallLog` as
  ``<port>.<method>``, so a real adapter (the embedded store, an embedder) is observed like
  the fakes of :func:`~mnemon_sm.testing.memory.memory_ports`;
- :class:`FailingFiles` makes chosen calls of a ``Files`` port fail with ``StorageError``
  (the disk is full or failing there), by method and path, once or while a predicate holds;
  the failing call has no effect;
- :class:`~mnemon_sm.testing.faults.FaultyPort` numbers calls for a fault injector.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mnemon_sm.errors import StorageError
from mnemon_sm.testing.calls import CallLog

__all__ = ["FailingFiles", "PortProxy", "RecordedPort"]


class PortProxy:
    """Wraps any port object; each public method call goes through :meth:`intercept`."""

    def __init__(self, port: str, inner: object) -> None:
        self.port, self.inner = port, inner

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.inner, name)
        if name.startswith("_") or not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            return self.intercept(name, value, args, kwargs)

        return call

    def intercept(
        self, name: str, method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """Run one call of the wrapped port's ``name`` (subclasses add their behaviour)."""
        return method(*args, **kwargs)


class RecordedPort(PortProxy):
    """Records every call into ``log`` (with the log's probe, as the fakes do)."""

    def __init__(self, port: str, inner: object, log: CallLog) -> None:
        super().__init__(port, inner)
        self.log = log

    def intercept(
        self, name: str, method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        self.log.record(self.port, name, *args)
        return method(*args, **kwargs)


Predicate = Callable[[str, str], bool]  # (method, path) -> fail?


class FailingFiles(PortProxy):
    """A ``Files`` port whose calls fail on demand. A call's path is its first argument, a
    rename's is its target. Nothing fails until :meth:`fail` or :meth:`fail_next` says so."""

    def __init__(self, inner: object) -> None:
        super().__init__("files", inner)
        self.fails: Predicate = lambda method, path: False
        self.failed: list[str] = []  # the paths of the calls that failed, in order

    def fail(self, method: str, when: Callable[[str], bool]) -> None:
        """Every call of ``method`` whose path satisfies ``when`` fails, until :meth:`heal`."""
        self.fails = lambda called, path: called == method and when(path)

    def fail_next(self, method: str, path: str, *, prefix: bool = False) -> list[str]:
        """The next call of ``method`` on ``path`` (or on a path starting with it) fails, and
        only that one; the list returned holds the path once it did."""
        done: list[str] = []

        def once(called: str, seen: str) -> bool:
            hit = called == method and (seen.startswith(path) if prefix else seen == path)
            if hit and not done:
                done.append(seen)
                return True
            return False

        self.fails = once
        return done

    def heal(self) -> None:
        self.fails = lambda method, path: False

    def intercept(
        self, name: str, method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if args:
            path = str(args[-1] if name == "rename" else args[0])
            if self.fails(name, path):
                self.failed.append(path)
                raise StorageError(f"injected failure: files.{name} on {path}")
        return method(*args, **kwargs)
